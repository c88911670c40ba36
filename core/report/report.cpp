#include "core/report/report.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <set>

#include "core/analysis/memory_peaks.h"
#include "core/analysis/run_figures.h"
#include "core/config/run_config.h"
#include "core/model/memory_category.h"
#include "core/util/error.h"
#include "core/util/json.h"
#include "core/util/units.h"

#ifndef SHARDSCOPE_VERSION
#define SHARDSCOPE_VERSION "unknown"
#endif

namespace shardscope::core {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;
// Two runs within this relative distance on the ranking figure are called a tie (run-to-run noise of
// step times is typically a few percent).
// Exposed communication above this share of the step is worth a sentence and a suggestion.
constexpr double kExposedWorthMentioning = 10.0;

std::string nowIso() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string curlyQuoted(const std::string& name) { return "\u201C" + name + "\u201D"; }

// The app's spelling of a run ("name #3": core::runLabel), in headers, charts and legends.
std::string runLabel(const ReportRun& r) { return core::runLabel(r.name, r.id); }

std::string runRef(const ReportRun& r) {
  std::string s = "run " + std::to_string(r.id.value()) + " " + curlyQuoted(r.name);
  if (!r.strategy.empty()) s += " (" + r.strategy + ")";
  return s;
}

std::optional<JsonValue> tryParse(const std::string& text, const std::string& label) {
  try {
    JsonValue v = parseJson(text, label);
    return v;
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::string scalarText(const JsonValue& v) {
  switch (v.type()) {
    case JsonValue::Type::String:
      return v.asString();
    case JsonValue::Type::Number:
      return v.asString();
    case JsonValue::Type::Bool:
      return v.asBool() ? "true" : "false";
    case JsonValue::Type::Null:
      return "null";
    default:
      return v.dump();
  }
}

void prettyTo(const JsonValue& v, std::string& out, int indent) {
  const std::string pad(static_cast<std::size_t>(indent) * 2, ' ');
  if (v.isObject()) {
    if (v.members().empty()) {
      out += "{}";
      return;
    }
    out += "{\n";
    for (std::size_t i = 0; i < v.members().size(); ++i) {
      const auto& [k, m] = v.members()[i];
      out += pad + "  " + JsonValue::string(k).dump() + ": ";
      prettyTo(m, out, indent + 1);
      out += i + 1 < v.members().size() ? ",\n" : "\n";
    }
    out += pad + "}";
  } else if (v.isArray()) {
    if (v.items().empty()) {
      out += "[]";
      return;
    }
    out += "[\n";
    for (std::size_t i = 0; i < v.items().size(); ++i) {
      out += pad + "  ";
      prettyTo(v.items()[i], out, indent + 1);
      out += i + 1 < v.items().size() ? ",\n" : "\n";
    }
    out += pad + "]";
  } else {
    v.dumpTo(out);
  }
}

// "0-3, 5, 7" from sorted rank numbers.
std::string rankList(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(ranks[i]);
    if (j > i) out += (j == i + 1 ? ", " : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

void fillEnvironment(TraceStore& store, const RunSummary& s, ReportRun& rr) {
  auto& env = rr.environment;
  env.push_back({"world size", std::to_string(s.run.worldSize)});
  env.push_back({"ranks in the database", std::to_string(s.ranks.size())});
  std::map<std::string, std::vector<int>> byDevice, byHost;
  for (const auto& rk : s.ranks) {
    byDevice[rk.device.empty() ? "unknown" : rk.device].push_back(rk.rank);
    if (!rk.host.empty()) byHost[rk.host].push_back(rk.rank);
  }
  // One line for the devices, as for the hosts (a row per device made eight rows of "ranks N").
  std::string devices;
  for (const auto& [dev, ranks] : byDevice)
    devices += (devices.empty() ? "" : "; ") + dev + (ranks.size() == 1 ? " (rank " : " (ranks ") + rankList(ranks) + ")";
  if (!devices.empty()) env.push_back({"devices", devices});
  if (!byHost.empty()) {
    std::string hosts;
    for (const auto& [h, ranks] : byHost) hosts += (hosts.empty() ? "" : "; ") + h + " (ranks " + rankList(ranks) + ")";
    env.push_back({"hosts", hosts});
  }
  // GPU models from deviceProperties (what the trace says was visible).
  if (auto devs = tryParse(s.run.devicesJson, "devices"); devs && devs->isArray()) {
    std::map<std::string, int> names;
    for (const auto& d : devs->items()) {
      if (!d.isObject()) continue;
      const JsonValue* n = d.find("name");
      std::string text = n && n->isString() ? n->asString() : "unnamed device";
      if (const JsonValue* mem = d.find("totalGlobalMem"); mem && mem->isNumber()) text += ", " + reportBytes(mem->asDouble());
      if (const JsonValue* cc = d.find("computeMajor"); cc && cc->isNumber()) {
        const JsonValue* minor = d.find("computeMinor");
        text += ", compute capability " + cc->asString() + "." + (minor && minor->isNumber() ? minor->asString() : "0");
      }
      ++names[text];
    }
    for (const auto& [n, count] : names)
      env.push_back({"GPU", n + (count > 1 ? " (" + std::to_string(count) + " visible)" : "")});
  }
  // Versions and backends from the rank metadata (first rank that has each), then the run's.
  std::map<std::string, std::string> seen;
  std::vector<std::string> order;
  auto note = [&](const std::string& key, const std::string& value) {
    if (value.empty() || seen.count(key)) return;
    seen[key] = value;
    order.push_back(key);
  };
  for (const auto& rk : s.ranks) {
    auto meta = tryParse(rk.metadataJson, "rank metadata");
    if (!meta || !meta->isObject()) continue;
    for (const auto& [k, v] : meta->members()) {
      const bool scalar = !v.isObject() && !v.isArray();
      if (!scalar) continue;
      if (k == "torch" || k == "backend" || k == "engine" || k.find("version") != std::string::npos ||
          k.find("Version") != std::string::npos)
        note(k == "torch" ? "torch version" : k, scalarText(v));
    }
    if (const JsonValue* di = meta->find("distributedInfo"); di && di->isObject())
      for (const auto& [k, v] : di->members())
        if ((k == "backend" || k.find("version") != std::string::npos) && !v.isObject() && !v.isArray())
          note("distributed " + k, scalarText(v));
  }
  if (auto meta = tryParse(s.run.metadataJson, "run metadata"); meta && meta->isObject()) {
    for (const char* k : {"launcher", "nnodes", "importer"})
      if (const JsonValue* v = meta->find(k); v && !v->isObject() && !v->isArray()) note(k, scalarText(*v));
  }
  for (const auto& k : order) env.push_back({k, seen[k]});
  const auto pgs = store.processGroups(s.run.id);
  if (!pgs.empty()) {
    std::string text;
    std::size_t shown = 0;
    for (const auto& g : pgs) {
      if (shown == 8) {
        text += ", ... (" + std::to_string(pgs.size()) + " in all)";
        break;
      }
      text += (text.empty() ? "" : ", ") + g.name + (g.description.empty() ? "" : " " + g.description) + " [" +
              (g.backend.empty() ? "?" : g.backend) + ", " + std::to_string(g.size) + " ranks]";
      ++shown;
    }
    env.push_back({"process groups", text});
  }
}

void fillConfig(const RunSummary& s, ReportRun& rr) {
  const Run& run = s.run;
  auto cfgJson = tryParse(run.configJson, "run config");
  if (cfgJson && cfgJson->isObject() && !cfgJson->members().empty()) {
    try {
      std::vector<std::string> warnings;
      const RunConfig cfg = parseRunConfigJson(*cfgJson, "run " + std::to_string(run.id.value()) + " config", &warnings);
      const JsonValue cur = toJson(cfg), def = toJson(RunConfig{});
      for (const auto& k : runConfigKeys()) {
        const JsonValue* v = cur.find(k.key);
        const JsonValue* d = def.find(k.key);
        if (!v) continue;
        ReportKnob knob;
        knob.group = k.group;
        knob.key = k.key;
        knob.value = v->isNull() ? "auto" : scalarText(*v);
        knob.isDefault = d && d->dump() == v->dump();
        rr.knobs.push_back(std::move(knob));
      }
      rr.deepSpeedJson = prettyJson(toDeepSpeedJson(cfg));
      rr.hasRunConfig = true;
      if (rr.strategy.empty()) rr.strategy = std::string(toString(cfg.strategy));
      for (const auto& w : warnings) rr.knownConfig.push_back({"note", w});
      return;
    } catch (const Error& e) {
      rr.knownConfig.push_back({"stored configuration", std::string("not readable: ") + e.what()});
    }
  }
  rr.knownConfig.push_back({"source", std::string(runKind(run))});
  rr.knownConfig.push_back({"strategy", run.strategy.empty() ? "not recorded in the trace" : run.strategy});
  rr.knownConfig.push_back({"world size", std::to_string(run.worldSize)});
  if (auto meta = tryParse(run.metadataJson, "run metadata"); meta && meta->isObject()) {
    if (const JsonValue* files = meta->find("imported_files"); files && files->isArray()) {
      rr.knownConfig.push_back({"trace files", std::to_string(files->items().size())});
      std::size_t n = 0;
      for (const auto& f : files->items()) {
        if (++n > 8) break;
        rr.knownConfig.push_back({"file", std::filesystem::path(f.asString()).filename().string()});
      }
    }
    if (const JsonValue* ds = meta->find("deepspeed_config"); ds && ds->isObject()) rr.deepSpeedJson = prettyJson(*ds);
  }
}

// A simulated run that is a prediction from a measured one (core/estimator/prediction.h): what it
// was calibrated on, its interval and what it extrapolates, so a report never shows a prediction
// as a measurement.
void fillPrediction(ReportRun& rr, const Run& run) {
  auto meta = tryParse(run.metadataJson, "run metadata");
  if (!meta || !meta->isObject()) return;
  const JsonValue* p = meta->find("prediction");
  if (!p || !p->isObject()) return;
  const auto num = [&](const JsonValue* v) { return v && v->isNumber() ? v->asDouble() : 0.0; };
  const JsonValue* iv = p->find("interval_s");
  const JsonValue* change = p->find("change");
  std::string line = "from run " + std::to_string(static_cast<std::int64_t>(num(p->find("calibration_run")))) + " (" +
                     (change ? change->asString() : std::string("?")) + ")";
  if (iv && iv->isArray() && iv->items().size() == 2)
    line += ", step " + formatFixed(iv->items()[0].asDouble() * 1e3, 1) + " .. " +
            formatFixed(iv->items()[1].asDouble() * 1e3, 1) + " ms";
  rr.knownConfig.push_back({"prediction", line});
  if (const JsonValue* e = p->find("extrapolation"); e && e->isArray())
    for (const auto& x : e->items()) rr.knownConfig.push_back({"extrapolation", x.asString()});
}

// Mean step breakdown over ranks and counted steps: the run figures' own means (run_figures.h).
void fillSteps(ReportRun& rr) {
  const RunFigures& f = rr.figures;
  rr.stepsAnalysed = f.steps.first >= 0 ? f.steps.count : 0;
  const StepMeans& m = f.means;
  if (m.rows > 0 && m.stepNs > 0) {
    rr.stepMs = m.stepNs / 1e6;
    rr.computeMs = m.computeNs / 1e6;
    rr.exposedCommMs = m.exposedNs / 1e6;
    rr.otherBusyMs = m.otherNs / 1e6;
    rr.idleMs = m.idleNs / 1e6;
    rr.commMs = m.commNs / 1e6;
  }
}

std::optional<std::int64_t> deviceCapacity(const Run& run, int deviceId) {
  auto devs = tryParse(run.devicesJson, "devices");
  if (!devs || !devs->isArray()) return std::nullopt;
  std::optional<std::int64_t> first;
  for (const auto& d : devs->items()) {
    if (!d.isObject()) continue;
    const JsonValue* mem = d.find("totalGlobalMem");
    if (!mem || !mem->isNumber()) continue;
    const auto bytes = static_cast<std::int64_t>(mem->asDouble());
    const JsonValue* id = d.find("id");
    if (id && id->asInt() && *id->asInt() == deviceId) return bytes;
    if (!first) first = bytes;
  }
  return first;
}

// Peaks and the memory chart of one run: a line per (rank, device) of the device class that matters
// (GPU memory when the run has any, else CPU), allocated bytes downsampled max-per-bucket.
void fillMemory(TraceStore& store, const RunSummary& s, ReportRun& rr, const ReportOptions& opt, const CancelToken* cancel,
                std::vector<Chart>& charts) {
  const auto& peaks = rr.analysis.memoryPeaks;
  if (peaks.empty()) return;
  bool anyDevice = false;
  for (const auto& p : peaks) anyDevice = anyDevice || p.deviceType != 0;
  const MemoryPeak* top = nullptr;
  for (const auto& p : peaks) {
    if ((p.deviceType != 0) != anyDevice) continue;
    if (!top || p.peakAllocatedBytes > top->peakAllocatedBytes) top = &p;
    rr.peakReservedBytes = std::max(rr.peakReservedBytes.value_or(0), p.peakReservedBytes);
  }
  if (!top) return;
  rr.peakAllocatedBytes = top->peakAllocatedBytes;
  rr.peakRank = top->rank;
  if (anyDevice) rr.deviceMemoryBytes = deviceCapacity(s.run, top->deviceId);
  if (!opt.memoryCharts) return;

  const double unit = static_cast<double>(top->peakAllocatedBytes) >= kGiB ? kGiB : kMiB;
  Chart c;
  c.kind = Chart::Kind::Line;
  c.id = "memory-run-" + std::to_string(rr.id.value());
  c.title = "Memory allocated per rank: " + runLabel(rr);
  // Each rank on its own clock, from its first event: ranks of an imported job often come from hosts
  // whose clocks differ by far more than a step.
  c.xLabel = "time since the rank's first event (s)";
  c.yLabel = unit == kGiB ? "GiB" : "MiB";
  std::size_t peakSeries = 0;
  std::size_t raw = 0;
  std::optional<TimeNs> peakOrigin;
  for (const auto& rk : s.ranks) {
    if (cancel) cancel->throwIfCancelled();
    std::optional<TimeNs> rankStart, rankEnd;
    for (const auto& t : s.tracks) {
      if (t.track.rankId != rk.id || !t.minStartNs || !t.maxEndNs) continue;
      rankStart = std::min(rankStart.value_or(*t.minStartNs), *t.minStartNs);
      rankEnd = std::max(rankEnd.value_or(*t.maxEndNs), *t.maxEndNs);
    }
    std::map<std::pair<int, int>, std::vector<CounterSample>> byDevice;
    store.forEachMemoryEvent(
        rk.id,
        [&](const MemoryEvent& m) {
          if ((m.deviceType != 0) != anyDevice) return;
          byDevice[{m.deviceType, m.deviceId}].push_back({m.tsNs, static_cast<double>(m.totalAllocated)});
        },
        /*totalsOnly=*/true);
    for (auto& [dev, samples] : byDevice) {
      if (samples.empty()) continue;
      raw += samples.size();
      const TimeNs origin = std::min(rankStart.value_or(samples.front().tsNs), samples.front().tsNs);
      const TimeNs end = std::max(rankEnd.value_or(samples.back().tsNs), samples.back().tsNs);
      ChartSeries series;
      series.name = "rank " + std::to_string(rk.rank);
      if (byDevice.size() > 1) series.name += dev.first == 0 ? " cpu" : " cuda:" + std::to_string(dev.second);
      // [origin, end + 1) holds every sample, so the largest one (the peak) is always kept.
      for (const auto& p : downsampleMax(samples, origin, end + 1, std::max(1, opt.memoryPoints))) {
        series.x.push_back(static_cast<double>(p.tsNs - origin) / 1e9);
        series.y.push_back(p.value / unit);
      }
      if (rk.rank == top->rank && dev.first == top->deviceType && dev.second == top->deviceId) {
        peakSeries = c.series.size();
        peakOrigin = origin;
      }
      c.series.push_back(std::move(series));
    }
  }
  if (c.series.empty()) return;
  ChartMarker m;
  m.series = peakSeries;
  m.x = static_cast<double>(top->allocatedAtNs - peakOrigin.value_or(top->allocatedAtNs)) / 1e9;
  m.y = static_cast<double>(top->peakAllocatedBytes) / unit;
  m.label = "peak " + reportBytes(static_cast<double>(top->peakAllocatedBytes)) + " (rank " + std::to_string(top->rank) + ")";
  c.marker = m;
  c.note = std::to_string(raw) + " allocation records shown as at most " + std::to_string(opt.memoryPoints) +
           " points per line (each the largest value of its time bucket, so no peak is lost).";
  charts.push_back(std::move(c));
}

// Sentences start with a capital ("run 2 ..." -> "Run 2 ...").
void capitalize(std::vector<std::string>& sentences) {
  for (auto& t : sentences)
    if (!t.empty() && t[0] >= 'a' && t[0] <= 'z') t[0] = static_cast<char>(t[0] - 'a' + 'A');
}

std::string pct(double v, int decimals = 1) { return reportNumber(v, decimals) + " %"; }

void recommend(Report& rep) {
  ReportRecommendation& out = rep.recommendation;
  const auto& runs = rep.runs;
  std::vector<std::size_t> completed, failed;
  for (std::size_t i = 0; i < runs.size(); ++i) (runs[i].failed ? failed : completed).push_back(i);
  // The ranking figure: tokens/s when every completed run with a step time has it, else step time.
  bool useTps = false;
  {
    std::size_t withStep = 0, withTps = 0;
    for (auto i : completed) {
      withStep += (runs[i].stepMs || runs[i].tokensPerSecond) ? 1 : 0;
      withTps += runs[i].tokensPerSecond ? 1 : 0;
    }
    useTps = withTps > 0 && withTps == withStep;
  }
  out.rankedBy = useTps ? "tokens/s" : "step time";
  auto value = [&](std::size_t i) -> std::optional<double> { return useTps ? runs[i].tokensPerSecond : runs[i].stepMs; };
  auto valueText = [&](std::size_t i) {
    return useTps ? reportNumber(*runs[i].tokensPerSecond, 0) + " tokens/s" : reportNumber(*runs[i].stepMs, 2) + " ms per step";
  };
  std::vector<std::size_t> ranked, unranked;
  for (auto i : completed) (value(i) ? ranked : unranked).push_back(i);
  std::stable_sort(ranked.begin(), ranked.end(),
                   [&](std::size_t a, std::size_t b) { return useTps ? *value(a) > *value(b) : *value(a) < *value(b); });

  // Reasons: the figures of every run, then the rules.
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    std::string line = runRef(r) + ": ";
    if (r.failed) {
      line += r.status + (r.failureReason.empty() ? "" : " (" + r.failureReason + ")") + ", not ranked";
    } else {
      std::vector<std::string> parts;
      if (r.tokensPerSecond) parts.push_back(reportNumber(*r.tokensPerSecond, 0) + " tokens/s");
      if (r.stepMs) parts.push_back("step " + reportNumber(*r.stepMs, 2) + " ms");
      if (r.stepMs && r.exposedCommMs)
        parts.push_back("exposed communication " + pct(100.0 * *r.exposedCommMs / *r.stepMs) + " of the step");
      if (r.peakAllocatedBytes) parts.push_back("peak allocated " + reportBytes(static_cast<double>(*r.peakAllocatedBytes)));
      if (r.analysis.stragglers.straggler) parts.push_back("straggler rank " + std::to_string(*r.analysis.stragglers.straggler));
      if (parts.empty()) parts.push_back("no step or throughput figures");
      for (std::size_t k = 0; k < parts.size(); ++k) line += (k ? "; " : "") + parts[k];
    }
    out.reasons.push_back(line);
  }
  out.reasons.push_back(useTps ? "Ranked by throughput (tokens/s): every completed run reports it."
                               : "Ranked by mean step time (lower is better): not every completed run reports tokens/s; step "
                                 "times compare fairly only when the runs process the same tokens per step.");
  out.reasons.push_back(
      "Failed or cancelled runs are never recommended; a margin within the runs' step spread (p90-p10 "
      "over p50) or under " +
      reportNumber(kTieMarginPct, 0) + " % is no measurable difference, and memory decides.");
  for (const auto& line : rep.comparison.verdict.reasons) out.reasons.push_back(line);

  auto& s = out.sentences;
  if (ranked.empty()) {
    if (runs.size() == 1)
      s.push_back("Run " + curlyQuoted(runs[0].name) +
                  (runs[0].failed ? " " + runs[0].status : " has no step or throughput figures") +
                  ", so there is nothing to rank.");
    else
      s.push_back("No run can be recommended: " + std::to_string(failed.size()) + " of " + std::to_string(runs.size()) +
                  " runs failed or were cancelled and " + std::to_string(unranked.size()) +
                  " have no step or throughput figures.");
    capitalize(s);
    return;
  }
  std::size_t best = ranked[0];
  const auto& b = runs[best];
  bool noWinner = false;  // a comparison whose runs show no measurable difference
  if (runs.size() == 1) {
    std::string t = "Run " + curlyQuoted(b.name) + (b.strategy.empty() ? "" : " (" + b.strategy + ")") + " takes " +
                    reportNumber(*b.stepMs, 2) + " ms per step on average";
    if (b.stepsAnalysed > 0) t += " over " + std::to_string(b.stepsAnalysed) + " steps";
    t += b.tokensPerSecond ? " and processes " + reportNumber(*b.tokensPerSecond, 0) + " tokens/s." : ".";
    if (!b.stepMs) t = "Run " + curlyQuoted(b.name) + " processes " + reportNumber(*b.tokensPerSecond, 0) + " tokens/s.";
    s.push_back(t);
  } else if (ranked.size() == 1) {
    s.push_back(runRef(b) + " is the only completed run with " + out.rankedBy + " figures (" + valueText(best) +
                "), so it is the one to use.");
  } else {
    // Who wins is the comparison's verdict (judgeRuns): the one rule of every surface.
    const ComparisonVerdict& verdict = rep.comparison.verdict;
    const std::size_t next = ranked[1];
    const double vb = *value(best), vn = *value(next);
    const double margin = std::abs(vb - vn) / std::max(std::abs(vn), 1e-300);
    const auto& n = runs[next];
    if (verdict.by == ComparisonVerdict::By::Speed && verdict.winner == best) {
      s.push_back(runRef(b) + " is recommended: " +
                  (useTps ? "it has the highest throughput, " + valueText(best) + ", " + pct(margin * 100.0) + " more than"
                          : "it has the shortest mean step, " + reportNumber(vb, 2) + " ms, " + pct(100.0 * (vn - vb) / vn) +
                                " less than") +
                  " the next best, " + runRef(n) + " at " + valueText(next) + ", beyond the runs' step spread (" +
                  pct(verdict.noisePct.value_or(0.0)) + ").");
    } else {
      const double noise = verdict.noisePct.value_or(0.0);
      std::string t = runRef(b) + " and " + runRef(n) + " show no measurable difference in speed (" + valueText(best) + " vs " +
                      valueText(next) + ", " + pct(margin * 100.0) + " apart, within " +
                      (noise >= kTieMarginPct ? "the runs' step spread of " + pct(noise) + ", p90-p10 over p50"
                                              : "the " + reportNumber(kTieMarginPct, 0) + " % tie margin") +
                      ")";
      if (verdict.by == ComparisonVerdict::By::Memory && verdict.winner) {
        const std::size_t lean = *verdict.winner, heavy = lean == best ? next : best;
        std::swap(ranked[0], ranked[lean == best ? 0 : 1]);
        best = lean;
        t += "; " + curlyQuoted(runs[lean].name) + " is recommended because it needs less memory (" +
             reportBytes(static_cast<double>(*runs[lean].peakAllocatedBytes)) + " vs " +
             reportBytes(static_cast<double>(*runs[heavy].peakAllocatedBytes)) + " peak allocated).";
      } else {
        t += (b.peakAllocatedBytes && n.peakAllocatedBytes ? ", nor in memory" : std::string()) +
             std::string("; neither is recommended over the other (repeat the runs to tell them apart).");
        noWinner = true;
      }
      s.push_back(t);
    }
    if (ranked.size() > 2) {
      const std::size_t last = ranked.back();
      s.push_back("The slowest completed run, " + runRef(runs[last]) + ", is at " + valueText(last) + ".");
    }
  }
  if (!noWinner) out.recommended = best;
  const auto& r = runs[best];
  // Memory: peak differences and headroom.
  if (r.peakAllocatedBytes) {
    std::optional<std::size_t> leanest;
    for (auto i : ranked)
      if (runs[i].peakAllocatedBytes && (!leanest || *runs[i].peakAllocatedBytes < *runs[*leanest].peakAllocatedBytes))
        leanest = i;
    const double peak = static_cast<double>(*r.peakAllocatedBytes);
    std::string t;
    if (leanest && *leanest != best && *runs[*leanest].peakAllocatedBytes < *r.peakAllocatedBytes) {
      const double lean = static_cast<double>(*runs[*leanest].peakAllocatedBytes);
      t = (noWinner ? runRef(r) : std::string("It")) + " needs " + reportBytes(peak) + " at its memory peak (rank " +
          std::to_string(r.peakRank.value_or(0)) + "), " + reportBytes(peak - lean) + " (" +
          pct(100.0 * (peak - lean) / std::max(lean, 1.0)) + ") more than " + runRef(runs[*leanest]) + " at " +
          reportBytes(lean) + "; choose that one when memory is the constraint.";
    } else if (ranked.size() > 1 && leanest) {
      t = "No other ranked run peaks lower in memory: " + reportBytes(peak) + " allocated (rank " +
          std::to_string(r.peakRank.value_or(0)) + ").";
    } else {
      t = "Its memory peak is " + reportBytes(peak) + " allocated (rank " + std::to_string(r.peakRank.value_or(0)) + ").";
    }
    if (r.deviceMemoryBytes && r.peakReservedBytes) {
      const double cap = static_cast<double>(*r.deviceMemoryBytes);
      const double reserved = static_cast<double>(*r.peakReservedBytes);
      t += " On its " + reportBytes(cap) + " device the reserved peak of " + reportBytes(reserved) + " leaves " +
           reportBytes(std::max(0.0, cap - reserved)) + " (" + pct(100.0 * std::max(0.0, cap - reserved) / cap) +
           ") of headroom.";
    }
    s.push_back(t);
  }
  // Exposed communication.
  if (r.stepMs && r.exposedCommMs && *r.stepMs > 0) {
    const double share = 100.0 * *r.exposedCommMs / *r.stepMs;
    if (share >= kExposedWorthMentioning) {
      std::string t = "Communication not hidden by computation still takes " + pct(share) + " of its step (" +
                      reportNumber(*r.exposedCommMs, 2) + " ms)";
      if (!r.analysis.bottlenecks.empty()) {
        const Bottleneck& bn = r.analysis.bottlenecks.front();
        t += "; the costliest exposed collective is " + std::string(toString(bn.op)) +
             (bn.target.empty() ? (bn.bytes ? " of " + reportBytes(static_cast<double>(*bn.bytes)) : std::string())
                                : " " + bn.target) +
             " with " + reportDuration(static_cast<double>(bn.totalExposedNs)) + " exposed over " + std::to_string(bn.instances) +
             (bn.instances == 1 ? " instance" : " instances") + " on " + std::to_string(bn.ranks) +
             (bn.ranks == 1 ? " rank" : " ranks");
        if (!bn.suggestions.empty()) t += ": " + bn.suggestions.front();
      }
      s.push_back(t + ".");
    } else {
      s.push_back("Only " + pct(share) + " of its step is exposed communication, so communication is mostly hidden.");
    }
    // A run that hides communication clearly better is worth naming.
    std::optional<std::size_t> lowest;
    double lowestShare = share;
    for (auto i : ranked) {
      const auto& o = runs[i];
      if (i == best || !o.stepMs || !o.exposedCommMs || *o.stepMs <= 0) continue;
      const double os = 100.0 * *o.exposedCommMs / *o.stepMs;
      if (os + 5.0 <= lowestShare) lowest = i, lowestShare = os;
    }
    if (lowest)
      s.push_back(runRef(runs[*lowest]) + " exposes less communication (" + pct(lowestShare) +
                  " of its step) but is slower overall.");
  }
  // Stragglers.
  const StragglerReport& st = r.analysis.stragglers;
  if (st.straggler) {
    for (const auto& a : st.ranks) {
      if (a.rank != *st.straggler || a.causedWaitNs <= 0) continue;
      s.push_back("Rank " + std::to_string(a.rank) + " is a straggler: it arrived last at " + std::to_string(a.lastCount) +
                  " of " + std::to_string(a.instances) + " matched collectives (chance with " + std::to_string(st.ranks.size()) +
                  " ranks: " + pct(100.0 / static_cast<double>(st.ranks.size())) + ") and the other ranks waited " +
                  reportDuration(static_cast<double>(a.causedWaitNs)) +
                  " for it in total; fixing it (data loading, host-side "
                  "work before the collectives) helps more than tuning communication.");
    }
  } else if (st.matched > 0) {
    s.push_back("No rank stands out as a straggler (" + std::to_string(st.matched) +
                " matched collectives, largest arrival spread " + reportDuration(static_cast<double>(st.maxSkewNs)) + ").");
  }
  if (!failed.empty()) {
    std::string t = failed.size() == 1 ? "Run " : "Runs ";
    for (std::size_t k = 0; k < failed.size(); ++k)
      t += (k ? ", " : "") + curlyQuoted(runs[failed[k]].name) + " (" + runs[failed[k]].status + ")";
    s.push_back(t + (failed.size() == 1 ? " was" : " were") + " not ranked.");
  }
  for (auto i : unranked) s.push_back(runRef(runs[i]) + " has no " + out.rankedBy + " figures and was not ranked.");
  capitalize(s);
}

void buildCharts(Report& rep) {
  std::vector<Chart> charts;
  std::vector<std::string> labels;
  for (const auto& r : rep.runs) labels.push_back(runLabel(r));
  bool anyStep = false, anyTps = false;
  for (const auto& r : rep.runs) {
    anyStep = anyStep || r.stepMs.has_value();
    anyTps = anyTps || r.tokensPerSecond.has_value();
  }
  if (anyStep) {
    Chart c;
    c.kind = Chart::Kind::StackedBars;
    c.id = "step-breakdown";
    c.title = "Where a step goes (mean of counted steps)";  // the Compare page's title
    c.yLabel = "ms per step";
    c.categories = labels;
    using palette::StepPart;
    for (StepPart part : {StepPart::Compute, StepPart::ExposedCommunication, StepPart::OtherDeviceWork, StepPart::Idle}) {
      ChartSeries s;
      s.name = palette::stepPartName(part);
      s.color = palette::stepPart(part);
      for (const auto& r : rep.runs) {
        const auto& v = part == StepPart::Compute                ? r.computeMs
                        : part == StepPart::ExposedCommunication ? r.exposedCommMs
                        : part == StepPart::OtherDeviceWork      ? r.otherBusyMs
                                                                 : r.idleMs;
        s.y.push_back(v);
      }
      c.series.push_back(std::move(s));
    }
    c.note = "The four parts add up to the mean step time; communication overlapped with computation is inside compute.";
    charts.push_back(std::move(c));
  }
  if (anyTps) {
    Chart c;
    c.kind = Chart::Kind::GroupedBars;
    c.id = "tokens-per-second";
    c.title = "Throughput";
    c.yLabel = "tokens/s";
    c.categories = labels;
    ChartSeries s;
    s.name = "tokens/s";
    for (const auto& r : rep.runs) s.y.push_back(r.tokensPerSecond);
    c.series.push_back(std::move(s));
    // The best run's bar stands out, as on the Compare page (the comparison's own best).
    c.perRunBars = true;
    if (rep.runs.size() > 1)
      for (const auto& row : rep.comparison.rows)
        if (row.key == metric_keys::kTokensPerSecond) c.best = row.best;
    charts.push_back(std::move(c));
  }
  {
    Chart c;
    c.kind = Chart::Kind::Line;
    c.id = "overlap-per-step";
    c.title = "Communication overlapped with computation, per step";
    c.xLabel = "step";
    c.yLabel = "% of communication";
    bool any = false;
    for (const auto& r : rep.runs) {
      std::map<std::int64_t, std::pair<double, double>> perStep;  // step -> (overlapped, comm) over ranks
      bool anyPositive = false;
      for (const auto& b : r.analysis.steps) anyPositive = anyPositive || b.step >= 0;
      for (const auto& b : r.analysis.steps) {
        if (anyPositive && b.step < 0) continue;
        auto& [ov, cm] = perStep[b.step];
        ov += static_cast<double>(b.overlappedCommNs);
        cm += static_cast<double>(b.commNs);
      }
      ChartSeries s;
      s.name = runLabel(r);
      for (const auto& [step, oc] : perStep) {
        s.x.push_back(static_cast<double>(step));
        if (oc.second > 0) {
          s.y.push_back(100.0 * oc.first / oc.second);
          any = true;
        } else {
          s.y.push_back(std::nullopt);
        }
      }
      c.series.push_back(std::move(s));
    }
    c.note = "Overlap = time communication ran while computation ran / communication time, summed over ranks.";
    if (any) charts.push_back(std::move(c));
  }
  for (auto& c : rep.charts) charts.push_back(std::move(c));  // memory charts, gathered per run
  rep.charts = std::move(charts);
}

}  // namespace

std::string reportNumber(double v, int decimals) {
  std::string s = formatFixed(v, decimals);
  if (s == "-0" || s.find_first_not_of("-0.") == std::string::npos) {
    if (!s.empty() && s[0] == '-') s.erase(0, 1);
  }
  return s;
}

std::string reportBytes(double bytes) {
  const double a = std::abs(bytes);
  if (a >= kGiB) return reportNumber(bytes / kGiB, 2) + " GiB";
  if (a >= kMiB) return reportNumber(bytes / kMiB, 1) + " MiB";
  if (a >= 1024.0) return reportNumber(bytes / 1024.0, 1) + " KiB";
  return reportNumber(bytes, 0) + " B";
}

std::string reportDuration(double ns) {
  const double a = std::abs(ns);
  if (a >= 1e9) return reportNumber(ns / 1e9, 3) + " s";
  if (a >= 1e6) return reportNumber(ns / 1e6, 3) + " ms";
  if (a >= 1e3) return reportNumber(ns / 1e3, 1) + " \u00B5s";
  return reportNumber(ns, 0) + " ns";
}

std::string reportDelta(double pctValue) { return (pctValue >= 0 ? "+" : "") + reportNumber(pctValue, 1) + " %"; }

std::string reportRowValue(const ComparisonRow& row, double v) {
  const std::string& k = row.key;
  if (k.find("_gib") != std::string::npos) return reportBytes(v * kGiB);
  if (k == metric_keys::kTokensPerSecond) return reportNumber(v, 0);
  if (k.size() > 3 && k.compare(k.size() - 3, 3, "_ms") == 0) return reportNumber(v, 3);
  return reportNumber(v, 2);
}

std::string prettyJson(const JsonValue& v) {
  std::string out;
  prettyTo(v, out, 0);
  return out;
}

Report buildReport(TraceStore& store, const std::vector<RunId>& ids, const ReportOptions& opt, const CancelToken* cancel,
                   const ProgressFn& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  if (ids.empty()) throw Error("report: no runs given");
  Report rep;
  for (RunId id : ids)
    if (!store.run(id)) throw Error(store.path() + ": no run with id " + std::to_string(id.value()));
  for (std::size_t i = 0; i < ids.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (ids[i] == ids[j]) throw Error("report: run " + std::to_string(ids[i].value()) + " is listed twice");
  if (opt.baseline) {
    auto it = std::find(ids.begin(), ids.end(), *opt.baseline);
    if (it == ids.end())
      throw Error("report: the baseline run " + std::to_string(opt.baseline->value()) + " is not one of the runs");
    rep.baseline = static_cast<std::size_t>(it - ids.begin());
  }
  rep.generatedAt = opt.generatedAt.empty() ? nowIso() : opt.generatedAt;
  rep.toolVersion = SHARDSCOPE_VERSION;
  rep.database = std::filesystem::path(store.path()).filename().string();
  const std::uint64_t total = ids.size() + 1;
  std::uint64_t done = 0;
  auto tick = [&](const std::string& stage) {
    if (cancel) cancel->throwIfCancelled();
    if (progress) progress(Progress{stage, done, total, "steps"});
  };
  std::vector<Chart> memoryCharts;
  for (RunId id : ids) {
    tick("analyse run " + std::to_string(id.value()));
    const RunSummary s = store.summary(id);
    ReportRun rr;
    rr.id = id;
    rr.name = s.run.name;
    rr.source = std::string(runKind(s.run));
    rr.status = std::string(toString(s.run.status));
    rr.failed = s.run.status == RunStatus::Failed || s.run.status == RunStatus::Cancelled;
    rr.failureReason = s.run.failureReason;
    rr.strategy = s.run.strategy;
    rr.createdAt = s.run.createdAt;
    rr.tags = s.run.tags;
    rr.worldSize = s.run.worldSize;
    rr.ranksStored = static_cast<int>(s.ranks.size());
    fillEnvironment(store, s, rr);
    fillConfig(s, rr);
    fillPrediction(rr, s.run);
    RunAnalysisOptions ao;
    ao.bottleneckLimit = opt.bottleneckLimit;
    const std::shared_ptr<const RunAnalysis> given = opt.analysisSource ? opt.analysisSource(id) : nullptr;
    rr.analysis = given ? *given : analyzeRun(store, id, ao, cancel);
    if (rr.analysis.bottlenecks.size() > opt.bottleneckLimit) rr.analysis.bottlenecks.resize(opt.bottleneckLimit);
    rr.figures = runFigures(store, id, rr.analysis.steps, rr.analysis.memoryPeaks);
    fillSteps(rr);
    rr.tokensPerSecond = rr.figures.tokensPerSecond;
    // How the figures were measured, beside the environment (docs/METRICS.md, "Run figures").
    if (const std::string how = describeStepTime(rr.figures); !how.empty())
      rr.environment.push_back({"step time measured as", how});
    if (!rr.figures.tokensHow.empty()) rr.environment.push_back({"tokens per step from", rr.figures.tokensHow});
    fillMemory(store, s, rr, opt, cancel, memoryCharts);
    rep.runs.push_back(std::move(rr));
    ++done;
  }
  tick("compare runs");
  // The comparison's figures from the analyses just made (one pass over each run, not two).
  rep.comparison = compareRuns(store, ids, rep.baseline, cancel, [&rep](RunId id) -> std::shared_ptr<const RunAnalysis> {
    for (const auto& r : rep.runs)
      if (r.id == id) return std::shared_ptr<const RunAnalysis>(std::shared_ptr<const RunAnalysis>(), &r.analysis);
    return nullptr;
  });
  ++done;
  rep.charts = std::move(memoryCharts);
  buildCharts(rep);
  recommend(rep);
  if (opt.title.empty()) {
    rep.title = ids.size() == 1 ? "Shardscope report: " + rep.runs[0].name
                                : "Shardscope report: comparison of " + std::to_string(ids.size()) + " runs";
  } else {
    rep.title = opt.title;
  }
  if (progress) progress(Progress{"report", total, total, "steps"});
  rep.buildSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

std::string reportRunLabel(const ReportRun& run) { return runLabel(run); }

namespace {
ReportCell text(std::string t) { return ReportCell{std::move(t), ReportCell::Style::Text, false, {}, 0}; }
ReportCell numberCell(std::string t) { return ReportCell{std::move(t), ReportCell::Style::Number, false, {}, 0}; }
ReportCell code(std::string t) { return ReportCell{std::move(t), ReportCell::Style::Code, false, {}, 0}; }
}  // namespace

// Memory rows carry "GiB" in core's label (the CLI prints GiB numbers); the report prints each value
// with its own unit (MiB, GiB), so the label drops it.
std::string tableLabel(const ComparisonRow& r) {
  std::string l = r.label;
  if (r.key.find("_gib") == std::string::npos) return l;
  for (const std::string& from : {std::string("(GiB, "), std::string(" (GiB)"), std::string("GiB, ")}) {
    const auto at = l.find(from);
    if (at != std::string::npos) l.replace(at, from.size(), from == "(GiB, " ? "(" : "");
  }
  return l;
}

ReportTable comparisonTable(const Report& rep) {
  ReportTable t;
  const Comparison& c = rep.comparison;
  t.caption = rep.runs.size() > 1 ? "Deltas are relative to the baseline, " + runLabel(rep.runs[c.baseline]) +
                                        " (shares in percentage points, pp); the best value of each row is in bold."
                                  : "Figures of the run (no comparison: one run).";
  t.header.push_back("figure");  // the Compare page's headers: "Figure", "name #3 (baseline)"
  for (std::size_t i = 0; i < c.runs.size(); ++i)
    t.header.push_back(runLabel(rep.runs[i]) + (rep.runs.size() > 1 && i == c.baseline ? " (baseline)" : ""));
  for (const auto& r : c.rows) {
    bool any = false;
    for (const auto& v : r.values) any = any || v.has_value();
    if (!any) continue;
    std::vector<ReportCell> row;
    row.push_back(text(tableLabel(r) + (rep.runs.size() > 1 ? (r.lowerIsBetter ? " \u2193" : " \u2191") : "")));
    for (std::size_t i = 0; i < c.runs.size(); ++i) {
      ReportCell cell = numberCell(r.values[i] ? reportRowValue(r, *r.values[i]) : "\u2013");
      cell.strong = r.best && *r.best == i;
      // As the Compare page: a share changes in percentage points, other figures in percent of the
      // baseline; a change within the runs' step spread is not coloured.
      const bool hasPp = i < r.deltaPp.size() && r.deltaPp[i].has_value();
      const bool hasPct = i < r.deltaPct.size() && r.deltaPct[i].has_value();
      if (i != c.baseline && (hasPp || hasPct)) {
        const double d = hasPp ? r.deltaPp[i].value_or(0.0) : r.deltaPct[i].value_or(0.0);
        cell.note = hasPp ? (d >= 0 ? "+" : "") + reportNumber(d, 1) + " pp" : reportDelta(d);
        const bool noise = i < r.withinNoise.size() && r.withinNoise[i];
        cell.noteTone = std::abs(d) < 0.05 || noise ? 0 : ((d < 0) == r.lowerIsBetter ? 1 : -1);
      }
      row.push_back(std::move(cell));
    }
    t.rows.push_back(std::move(row));
  }
  t.emptyText = "No figures: the runs have no steps, memory records or metrics.";
  return t;
}

ReportTable strategyReportTable(const Report& rep) {
  ReportTable t;
  const StrategyTable& st = rep.comparison.strategies;
  t.caption = std::string(rep.runs.size() > 1 ? "One row per run" : "The run") +
              ": peak memory per GPU is the largest peak allocated over ranks, in GiB (host memory where the run has no GPU "
              "memory, as the memory column says); shares are of the step time.";
  const auto notes = strategyTableNotes(st);
  if (!notes.empty()) {
    t.caption += " n/a where a figure cannot be known: ";
    for (std::size_t i = 0; i < notes.size(); ++i) t.caption += (i ? "; " : "") + notes[i];
    t.caption += ".";
  }
  t.header.push_back("run");
  for (StrategyColumn c : st.columns) t.header.push_back(strategyColumnHeader(st, c));
  for (const auto& r : st.rows) {
    std::vector<ReportCell> row;
    row.push_back(text(core::runLabel(r.name, r.run)));
    for (StrategyColumn c : st.columns) {
      const std::string v = strategyCellText(c, r.at(c));
      row.push_back(strategyColumn(c).text || !r.at(c).known() ? text(v) : numberCell(v));
    }
    t.rows.push_back(std::move(row));
  }
  t.emptyText = "No runs.";
  return t;
}

ReportTable environmentTable(const Report& rep) {
  ReportTable t;
  t.header.push_back("item");
  for (const auto& r : rep.runs) t.header.push_back(runLabel(r));
  // Rows in first-seen order over the runs; a run without the item shows a dash.
  std::vector<std::string> keys;
  std::vector<std::map<std::string, std::string>> values(rep.runs.size());
  for (std::size_t i = 0; i < rep.runs.size(); ++i) {
    const ReportRun& run = rep.runs[i];
    std::vector<ReportKeyValue> items = {{"source", run.source},
                                         {"status", run.status + (run.failureReason.empty() ? "" : ": " + run.failureReason)},
                                         {"strategy", run.strategy},
                                         {"created", run.createdAt},
                                         {"tags", run.tags}};
    items.insert(items.end(), run.environment.begin(), run.environment.end());
    for (const auto& kv : items) {
      if (kv.value.empty()) continue;
      if (std::find(keys.begin(), keys.end(), kv.key) == keys.end()) keys.push_back(kv.key);
      auto& slot = values[i][kv.key];
      slot += (slot.empty() ? "" : "; ") + kv.value;  // e.g. two GPU models
    }
  }
  for (const auto& k : keys) {
    std::vector<ReportCell> row{text(k)};
    for (std::size_t i = 0; i < rep.runs.size(); ++i) {
      auto it = values[i].find(k);
      row.push_back(text(it == values[i].end() ? "\u2013" : it->second));
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

ReportTable knobTable(const ReportRun& run) {
  ReportTable t;
  t.header = {"group", "knob", "value"};
  t.caption = "Every knob of the run; values that differ from the default are in bold.";
  for (const auto& k : run.knobs) {
    ReportCell v = code(k.value);
    v.strong = !k.isDefault;
    t.rows.push_back({text(k.group), code(k.key), std::move(v)});
  }
  return t;
}

ReportTable knobComparisonTable(const Report& rep) {
  ReportTable t;
  std::vector<const ReportRun*> runs;
  for (const auto& r : rep.runs)
    if (r.hasRunConfig) runs.push_back(&r);
  t.header = {"group", "knob"};
  for (const ReportRun* r : runs) t.header.push_back(runLabel(*r));
  t.caption =
      "Every knob of the runs, side by side; values that differ from the default are in bold, and knobs whose values "
      "differ between the runs say so.";
  // Knobs in the order of the first run (every run of the runtime has the same keys), then any other.
  std::vector<std::pair<std::string, std::string>> keys;  // (group, key)
  for (const ReportRun* r : runs)
    for (const auto& k : r->knobs)
      if (std::find_if(keys.begin(), keys.end(), [&](const auto& g) { return g.second == k.key; }) == keys.end())
        keys.emplace_back(k.group, k.key);
  for (const auto& groupKey : keys) {
    const std::string& key = groupKey.second;  // a lambda below uses it (no structured binding)
    std::vector<ReportCell> row{text(groupKey.first), code(key)};
    std::set<std::string> distinct;
    for (const ReportRun* r : runs) {
      auto it = std::find_if(r->knobs.begin(), r->knobs.end(), [&](const ReportKnob& k) { return k.key == key; });
      if (it == r->knobs.end()) {
        row.push_back(text("\u2013"));
        distinct.insert("\u2013");
        continue;
      }
      ReportCell v = code(it->value);
      v.strong = !it->isDefault;
      distinct.insert(it->value);
      row.push_back(std::move(v));
    }
    if (distinct.size() > 1) row[1].note = "differs between the runs";
    t.rows.push_back(std::move(row));
  }
  return t;
}

bool reportComparesKnobs(const Report& rep) {
  return std::count_if(rep.runs.begin(), rep.runs.end(), [](const ReportRun& r) { return r.hasRunConfig; }) >= 2;
}

ReportTable knownConfigTable(const ReportRun& run) {
  ReportTable t;
  t.header = {"item", "value"};
  if (!run.hasRunConfig) t.caption = "An imported trace carries no training configuration; this is what it tells.";
  for (const auto& kv : run.knownConfig) t.rows.push_back({text(kv.key), text(kv.value)});
  return t;
}

ReportTable bottleneckTable(const ReportRun& run) {
  ReportTable t;
  t.header = {"collective", "target",     "group", "instances", "ranks",  "steps", "exposed, total",
              "mean",       "main cause", "size",  "worst",     "kernel", "why",   "suggestion"};
  t.caption =
      "Costliest exposed collectives (time with no computation on the rank), grouped by what you can change: the "
      "parameter, bucket, unit or module the run names, else the size and process group; exposed time summed over "
      "steps and ranks.";
  t.emptyText = "No exposed collective.";
  // The worst instance, the kernel, why and the suggestion go under each row in HTML and PDF.
  t.detailColumns = 4;
  for (const auto& b : run.analysis.bottlenecks) {
    std::string why, what;
    for (std::size_t k = 0; k < b.reasons.size(); ++k) why += (k ? "\n" : "") + b.reasons[k];
    for (std::size_t k = 0; k < b.suggestions.size(); ++k) what += (k ? "\n" : "") + b.suggestions[k];
    t.rows.push_back({text(std::string(toString(b.op))), text(b.target.empty() ? "(unnamed)" : b.target), text(b.processGroup),
                      numberCell(std::to_string(b.instances)), numberCell(std::to_string(b.ranks)),
                      numberCell(std::to_string(b.stepsSeen)), numberCell(reportDuration(static_cast<double>(b.totalExposedNs))),
                      numberCell(reportDuration(static_cast<double>(b.meanExposedNs))), text(toString(b.cause)),
                      numberCell(b.bytes ? reportBytes(static_cast<double>(*b.bytes)) : "?"),
                      numberCell(reportDuration(static_cast<double>(b.exposedNs)) + " (rank " + std::to_string(b.rank) +
                                 (b.step ? ", step " + std::to_string(*b.step) : std::string()) + ")"),
                      code(b.kernel), text(why.empty() ? "exposed" : why), text(what)});
  }
  return t;
}

std::string stragglerSummary(const ReportRun& run) {
  const StragglerReport& st = run.analysis.stragglers;
  if (st.matched == 0) return "No collective could be matched across ranks (one rank, or no collectives).";
  std::string s = std::to_string(st.matched) + " collectives matched across ranks; largest arrival spread " +
                  reportDuration(static_cast<double>(st.maxSkewNs)) + ". ";
  s += st.evidence.empty() ? std::string("No straggler.") : st.evidence + ".";
  if (!s.empty() && s[s.size() - 1] == '.' && s.size() > 1 && s[s.size() - 2] == '.') s.pop_back();
  return s;
}

ReportTable stragglerTable(const ReportRun& run) {
  ReportTable t;
  t.header = {"rank", "clock offset", "arrived last", "late in total", "others waited for it"};
  const StragglerReport& st = run.analysis.stragglers;
  for (const auto& a : st.ranks) {
    ReportCell rank = numberCell(std::to_string(a.rank) + (st.straggler && *st.straggler == a.rank ? " (straggler)" : ""));
    rank.strong = st.straggler && *st.straggler == a.rank;
    t.rows.push_back({std::move(rank), numberCell(reportDuration(static_cast<double>(a.clockOffsetNs))),
                      numberCell(std::to_string(a.lastCount) + " of " + std::to_string(a.instances)),
                      numberCell(reportDuration(static_cast<double>(a.lateNs))),
                      numberCell(reportDuration(static_cast<double>(a.causedWaitNs)))});
  }
  t.emptyText = "No matched collectives.";
  return t;
}

ReportTable arrivalGroupTable(const ReportRun& run) {
  ReportTable t;
  t.caption =
      "Arrival skew per collective group (process group and operation): how far apart the ranks arrive, how long they "
      "waited for the last one, and who is last most often.";
  t.header = {"collective", "group", "matched", "ranks", "mean skew", "max skew", "waited", "last most often"};
  for (const auto& g : run.analysis.stragglers.groups)
    t.rows.push_back(
        {text(std::string(toString(g.op))), text(g.processGroup), numberCell(std::to_string(g.matched)),
         numberCell(std::to_string(g.ranks)), numberCell(reportDuration(static_cast<double>(g.meanSkewNs))),
         numberCell(reportDuration(static_cast<double>(g.maxSkewNs))), numberCell(reportDuration(static_cast<double>(g.waitNs))),
         text(g.mostOftenLast >= 0 ? "rank " + std::to_string(g.mostOftenLast) + " (" + std::to_string(g.mostOftenLastCount) +
                                         " of " + std::to_string(g.matched) + ")"
                                   : std::string("\u2013"))});
  t.emptyText = "No matched collectives.";
  return t;
}

ReportTable memoryPeakTable(const ReportRun& run) {
  ReportTable t;
  t.header = {"rank", "device", "peak allocated", "peak reserved", "step", "at the peak (cause)", "live at the peak"};
  t.emptyText = "No memory records (profile_memory was off, or the runtime did not capture memory).";
  for (const auto& p : run.analysis.memoryPeaks) {
    std::string cause = p.operation;
    if (!p.annotation.empty()) cause += (cause.empty() ? "" : " in ") + p.annotation;
    std::string live;
    for (const auto& [cat, bytes] : p.breakdown) {
      if (bytes == 0) continue;                   // a category the run never used (gathered parameters under DDP)
      const auto c = memoryCategoryFromKey(cat);  // the app's words, not the metric keys
      live += (live.empty() ? "" : ", ") + (c ? std::string(memoryCategoryLabel(*c)) : cat) + " " +
              reportBytes(static_cast<double>(bytes));
    }
    t.rows.push_back({numberCell(std::to_string(p.rank)), text(deviceName(p.deviceType, p.deviceId)),
                      numberCell(reportBytes(static_cast<double>(p.peakAllocatedBytes))),
                      numberCell(reportBytes(static_cast<double>(p.peakReservedBytes))),
                      numberCell(p.step ? std::to_string(*p.step) : "\u2013"), code(cause.empty() ? "unknown" : cause),
                      text(live)});
  }
  return t;
}

ReportTable collectivesTable(const ReportRun& run) {
  ReportTable t;
  t.header = {"operation", "group", "ranks", "count", "bytes", "total", "mean", "exposed", "algBw GB/s", "busBw GB/s"};
  t.emptyText = "No collectives.";
  for (const auto& c : run.analysis.collectives)
    t.rows.push_back({text(std::string(toString(c.op))), text(c.processGroup.empty() ? "?" : c.processGroup),
                      numberCell(c.groupSize ? std::to_string(c.groupSize) : "?"), numberCell(std::to_string(c.count)),
                      numberCell(c.countWithBytes ? reportBytes(static_cast<double>(c.bytes)) : "?"),
                      numberCell(reportDuration(static_cast<double>(c.totalNs))),
                      numberCell(reportDuration(static_cast<double>(c.meanNs))),
                      numberCell(reportDuration(static_cast<double>(c.exposedNs))),
                      numberCell(c.algBwGBps ? reportNumber(*c.algBwGBps, 2) : "\u2013"),
                      numberCell(c.busBwGBps ? reportNumber(*c.busBwGBps, 2) : "\u2013")});
  return t;
}

}  // namespace shardscope::core
