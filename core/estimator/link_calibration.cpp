#include "core/estimator/link_calibration.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "core/util/error.h"
#include "core/util/units.h"

namespace shardscope::core::estimator {

namespace {

// The mean, not the median: a step pays every instance, its stalls included (the in-run contention
// is fitted on sums for the same reason).
double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
}

// A size of the run's own collectives is taken as measured from this many instances on.
constexpr int kMinInRunInstances = 3;
// Apart by how the ranks waited (WaitKind): the classes split a size's instances, and one slow
// instance among three would set a class's time (a ZeRO-3 run with prefetch waits on about ten of
// its 108 large all-gathers at once).
constexpr int kMinInRunInstancesByWait = 6;
// The in-run contention where no rank computes beside a collective is not taken below the probe's
// line: the probe times the link alone, which is that situation.
constexpr double kMinContention = 1.0;
// The share of a size's instances waited on at once from which they are the run's own situation
// and its loaded probe does not replace them (15 % with prefetch, 43-70 % without: see below).
constexpr double kOwnOnDemandShare = 0.25;

bool allReduceLike(const CollectiveSample& s) {
  return s.kind == CollKind::AllReduce || (s.kind == CollKind::ReduceScatter && s.emulatedReduceScatter);
}

double wireOf(const CollectiveSample& s) {
  const bool ar = allReduceLike(s);
  return static_cast<double>(s.messageBytes) * ringFactor(ar ? CollKind::AllReduce : s.kind, s.groupSize);
}

// The link's time for one instance.
double predict(const LinkModel& l, const CollectiveSample& s) { return l.instanceS(allReduceLike(s), wireOf(s)); }

// The probe's points: the mean time per (class, wire bytes).
void probePoints(const std::vector<CollectiveSample>& probe, LinkModel& l) {
  std::map<std::pair<bool, double>, std::vector<double>> by;
  for (const auto& s : probe)
    if (s.durationS > 0) by[{allReduceLike(s), wireOf(s)}].push_back(s.durationS);
  l.allReducePoints.clear();
  l.otherPoints.clear();
  for (auto& [key, v] : by) (key.first ? l.allReducePoints : l.otherPoints).push_back({key.second, mean(v)});
}

// Both kinds at two or more sizes each.
bool bothKindsSpread(const std::vector<CollectiveSample>& s) {
  std::int64_t ar0 = -1, ag0 = -1;
  bool ar2 = false, ag2 = false;
  for (const auto& x : s) {
    std::int64_t& first = allReduceLike(x) ? ar0 : ag0;
    bool& two = allReduceLike(x) ? ar2 : ag2;
    if (first < 0)
      first = x.messageBytes;
    else if (x.messageBytes != first)
      two = true;
  }
  return ar2 && ag2;
}

}  // namespace

int LinkCalibration::loadedProbeSizes() const {
  int n = 0;
  for (const auto* v : {&link.allReduceInRunByWait[1], &link.otherInRunByWait[1]})
    n += static_cast<int>(std::count_if(v->begin(), v->end(), [](const LinkModel::InRunSize& s) { return s.fromLoadedProbe; }));
  return n;
}

LinkCalibration calibrateLink(const std::vector<CollectiveSample>& probe, const std::vector<CollectiveSample>& steps,
                              const std::string& name, double defaultCommInterference,
                              const std::vector<CollectiveSample>& loaded) {
  LinkCalibration c;
  c.commInterferenceAllReduce = c.commInterferenceOther = defaultCommInterference;
  if (steps.size() >= 2) {
    try {
      c.run = fitLink(steps, "fitted:" + name);
    } catch (const Error&) {
      // Durations that do not grow with size: no run fit; the probe may still serve.
    }
  }
  const std::vector<CollectiveSample>& measured = probe.size() >= 2 ? probe : steps;
  for (const auto& s : measured) {
    c.minBytes = c.minBytes == 0 ? s.messageBytes : std::min(c.minBytes, s.messageBytes);
    c.maxBytes = std::max(c.maxBytes, s.messageBytes);
    c.groupSize = std::max(c.groupSize, s.groupSize);
  }
  if (probe.size() >= 2) {
    c.probe = fitLink(probe, "probe:" + name);
    c.source = "probe";
    c.link = c.probe->link;
    probePoints(probe, c.link);
    // Contention: how much slower the run's own collectives ran than the probe's line says.
    // Each kind's in-run time against the probe's for the same instances: d = p·c0·(1 + m·g), g
    // the fraction of the instance its rank spent computing. c0 is the kind's own slowdown in the
    // run; m how much more it slows down beside compute (a ZeRO-3 all-gather inside the forward
    // against a ZeRO-1 all-gather after the step). Least squares on the durations themselves (no
    // intercept), so the fit reproduces the sum a step pays, heavy tail included; where g does not
    // spread enough to tell m (spread < 0.15 or fewer than 6 instances), m is the device class's
    // measured default and c0 the ratio of sums at it.
    struct KindData {
      double spp = 0, spg = 0, sgg = 0, sdp = 0, sdg = 0;  // sums of p², p²g, p²g², d·p, d·p·g
      double sw = 0, sg = 0, sg2 = 0;                      // for g's spread (weighted by p)
      std::int64_t n = 0;
    } kd[2];  // [all-reduce-like, other]
    for (const auto& s : steps) {
      const double p = predict(c.link, s);
      if (!(p > 0) || !(s.durationS > 0)) continue;
      KindData& k = kd[allReduceLike(s) ? 0 : 1];
      const double g = std::clamp(s.computeOverlap, 0.0, 1.0), d = s.durationS;
      k.spp += p * p;
      k.spg += p * p * g;
      k.sgg += p * p * g * g;
      k.sdp += d * p;
      k.sdg += d * p * g;
      k.sw += p;
      k.sg += p * g;
      k.sg2 += p * g * g;
      ++k.n;
    }
    c.contentionSamples = kd[0].n + kd[1].n;
    double c0[2] = {1, 1}, m[2] = {defaultCommInterference, defaultCommInterference};
    for (int i = 0; i < 2; ++i) {
      const KindData& k = kd[i];
      if (k.n == 0) continue;
      const double mean = k.sg / k.sw, spread = std::sqrt(std::max(0.0, k.sg2 / k.sw - mean * mean));
      const double det = k.spp * k.sgg - k.spg * k.spg;
      bool fitted = false;
      if (k.n >= 6 && spread >= 0.15 && det > 0) {
        const double a = (k.sdp * k.sgg - k.sdg * k.spg) / det, bb = (k.spp * k.sdg - k.spg * k.sdp) / det;
        if (a > 0 && bb >= 0) {
          c0[i] = a;
          m[i] = bb / a;
          fitted = true;
          if (a < kMinContention) {
            // The intercept is where no rank computes beside the collective: the probe's own
            // situation. A run whose instances mostly overlap compute puts it there by
            // extrapolation, below the probe (0.74 in a DDP run whose 5 MiB buckets all ran
            // beside the backward, and its 13 MiB bucket alone then came out 26 % short), so
            // it is held at the probe and m fitted alone: d = p·(1 + m·g).
            c0[i] = kMinContention;
            m[i] = k.sgg > 0 ? std::max(0.0, (k.sdg - kMinContention * k.spg) / (kMinContention * k.sgg)) : 0.0;
          }
        }
      }
      if (!fitted) {
        // c0 at the default m: d = c0·p·(1 + m·g) in least squares.
        const double q = k.spp + 2 * m[i] * k.spg + m[i] * m[i] * k.sgg;
        c0[i] = q > 0 ? (k.sdp + m[i] * k.sdg) / q : 1.0;
        // Not below the probe's line either (kMinContention). A ZeRO-1 or ZeRO-2 run's all-gathers
        // after the step, nothing computed beside them, ran at 0.61 of the probe's time on val24
        // (one large size each step), and that ratio then sped up every all-gather of a target:
        // FSDP predicted from ZeRO-1 came out 3-6 % short.
        c0[i] = std::max(c0[i], kMinContention);
      }
      (i == 0 ? c.commInterferenceFittedAllReduce : c.commInterferenceFittedOther) = fitted;
    }
    {
      // [all-reduce-like, other] x [all, ahead, on demand]
      double lat[2][3] = {}, dur[2][3] = {};
      for (const auto& s : steps) {
        if (!(s.durationS > 0)) continue;
        const int i = allReduceLike(s) ? 0 : 1;
        for (int w : {0, s.waited == WaitKind::Ahead ? 1 : s.waited == WaitKind::OnDemand ? 2 : -1}) {
          if (w < 0) continue;
          lat[i][w] += s.lastLatenessS;
          dur[i][w] += s.durationS;
        }
      }
      c.lastLatenessAllReduce = dur[0][0] > 0 ? std::max(0.0, lat[0][0] / dur[0][0]) : 0.0;
      c.lastLatenessOther = dur[1][0] > 0 ? std::max(0.0, lat[1][0] / dur[1][0]) : 0.0;
      for (int i = 0; i < 2; ++i)
        for (int w = 0; w < 2; ++w)
          c.lastLatenessByWait[i][w] = dur[i][w + 1] > 0 ? std::max(0.0, lat[i][w + 1] / dur[i][w + 1]) : -1.0;
    }
    c.contentionAllReduce = c0[0];
    c.contentionOther = c0[1];
    c.commInterferenceAllReduce = m[0];
    c.commInterferenceOther = m[1];
    // How far the calibrated link misses what the run's collectives took (overlap included): the
    // relative error of their total. Per instance the errors are large (a 40 µs all-gather that took
    // 400 µs) but they average out over a step's collectives, and what is left of them is in the
    // step's spread; the mean per-instance |relative error| made a ZeRO-3 replay's interval ±100 %.
    double predictedSum = 0, measuredSum = 0;
    for (const auto& s : steps) {
      const double p = predict(c.link, s);
      if (!(p > 0) || !(s.durationS > 0)) continue;
      const int i = allReduceLike(s) ? 0 : 1;
      predictedSum += p * c0[i] * (1 + m[i] * s.computeOverlap);
      measuredSum += s.durationS;
    }
    c.relError = measuredSum > 0 ? std::fabs(predictedSum - measuredSum) / measuredSum : c.probe->meanAbsRelError;
    LinkModel& l = c.link;
    l.name = "probe:" + name;
    // A slower link in time: latency × factor, bandwidth / factor.
    const double arAlpha = l.arAlphaUs(), arBw = l.arBw();
    l.alphaUs *= c.contentionOther;
    l.busBwGBps /= c.contentionOther;
    l.allReduceAlphaUs = arAlpha * c.contentionAllReduce;
    l.allReduceBusBwGBps = arBw / c.contentionAllReduce;
    for (auto& p : l.allReducePoints) p.second *= c.contentionAllReduce;
    for (auto& p : l.otherPoints) p.second *= c.contentionOther;
    {
      // The run's own sizes: the mean time of their instances, without the slowdown beside
      // compute (d / (1 + m·g)), where a size has kMinInRunInstances or more.
      struct Size {
        double time = 0, weight = 0;   // Σ d, Σ (1 + m·g)
        double late = 0, matched = 0;  // Σ lateness, Σ d of the instances matched across ranks
        int n = 0;
      };
      // (all-reduce-like, how its ranks waited: Unknown = all of them, wire bytes)
      std::map<std::tuple<bool, WaitKind, double>, Size> by;
      for (const auto& s : steps) {
        if (!(s.durationS > 0)) continue;
        const bool ar = allReduceLike(s);
        for (WaitKind w : {WaitKind::Unknown, s.waited}) {
          Size& z = by[{ar, w, wireOf(s)}];
          z.time += s.durationS;
          z.weight += 1 + m[ar ? 0 : 1] * std::clamp(s.computeOverlap, 0.0, 1.0);
          if (s.matched) {
            z.late += s.lastLatenessS;
            z.matched += s.durationS;
          }
          ++z.n;
          if (s.waited == WaitKind::Unknown) break;
        }
      }
      for (const auto& [key, z] : by) {
        const auto [ar, w, wire] = key;
        LinkModel::InRunSize size{wire, z.time / z.weight, z.matched > 0 ? std::max(0.0, z.late / z.matched) : -1.0};
        size.instances = z.n;
        if (w == WaitKind::Unknown) {
          if (z.n >= kMinInRunInstances) (ar ? l.allReduceInRun : l.otherInRun).push_back(size);
        } else if (z.n >= kMinInRunInstancesByWait) {
          const int k = w == WaitKind::OnDemand ? 1 : 0;
          (ar ? l.allReduceInRunByWait[k] : l.otherInRunByWait[k]).push_back(size);
        }
      }
      // The loaded probe: at its sizes, a collective waited on at once takes the probe's time and
      // lateness, unless a quarter or more of the run's own instances of that size were waited
      // on at once (then that is the run's situation, measured in place). A ZeRO-3 run with
      // prefetch waits at once on about 2 of its 12 352 KB all-gathers a step, at the step's
      // edges: they took 949 µs with lateness 0.06 where a run without prefetch, waiting at once
      // on 43-70 % of them with compute right after each, had 1471-1814 µs and up to 0.93 (val15,
      // runs 10 and 22; z13a), and a prediction turning prefetch off came out 2-4 % short on
      // every grid.
      std::map<std::pair<bool, double>, Size> probed;
      for (const auto& s : loaded) {
        if (!(s.durationS > 0) || !s.matched) continue;
        Size& z = probed[{allReduceLike(s), wireOf(s)}];
        z.time += s.durationS;
        z.weight += 1;
        z.late += s.lastLatenessS;
        z.matched += s.durationS;
        ++z.n;
      }
      for (const auto& [key, z] : probed) {
        // Named copies: a lambda cannot capture a structured binding before C++20.
        const bool ar = key.first;
        const double wire = key.second;
        if (z.n < kMinInRunInstancesByWait) continue;
        const auto count = [&](WaitKind w) {
          const auto it = by.find({ar, w, wire});
          return it == by.end() ? 0 : it->second.n;
        };
        const int own = count(WaitKind::OnDemand);
        if (own >= kMinInRunInstancesByWait && own >= kOwnOnDemandShare * (own + count(WaitKind::Ahead))) continue;
        auto& v = ar ? l.allReduceInRunByWait[1] : l.otherInRunByWait[1];
        v.erase(std::remove_if(v.begin(), v.end(), [&](const LinkModel::InRunSize& x) { return x.wireBytes == wire; }), v.end());
        LinkModel::InRunSize size{wire, z.time / z.weight, std::max(0.0, z.late / z.matched)};
        size.fromLoadedProbe = true;
        size.instances = z.n;
        v.insert(
            std::lower_bound(v.begin(), v.end(), wire, [](const LinkModel::InRunSize& x, double b) { return x.wireBytes < b; }),
            size);
      }
    }
    c.wellConditioned = true;
    c.note = "link probe of " + name + ": " + std::to_string(c.probe->samples) + " collectives, " + formatBytes(c.minBytes) +
             ".." + formatBytes(c.maxBytes) + " at " + std::to_string(c.groupSize) + " ranks, R^2 " +
             formatFixed(c.probe->r2, 3) + "; in-run contention x" + formatFixed(c.contentionAllReduce, 2) + " (all-reduce), x" +
             formatFixed(c.contentionOther, 2) + " (all-gather/reduce-scatter), x(1 + " +
             formatFixed(c.commInterferenceAllReduce, 2) + " / " + formatFixed(c.commInterferenceOther, 2) +
             " of the time computing beside it) from " + std::to_string(c.contentionSamples) + " collectives of its steps";
    const std::size_t inRun = l.allReduceInRun.size() + l.otherInRun.size();
    if (inRun > 0) c.note += "; " + std::to_string(inRun) + " of its sizes as the run measured them";
    const std::size_t onDemand = l.allReduceInRunByWait[1].size() + l.otherInRunByWait[1].size();
    const std::size_t ahead = l.allReduceInRunByWait[0].size() + l.otherInRunByWait[0].size();
    if (onDemand + ahead > 0)
      c.note += " (" + std::to_string(onDemand) + " waited on at once, " + std::to_string(ahead) + " issued ahead, apart)";
    if (const int probed = c.loadedProbeSizes(); probed > 0)
      c.note += "; " + std::to_string(probed) + " size" + (probed > 1 ? "s" : "") +
                " waited on at once as its loaded probe measured them";
    if (c.lastLatenessAllReduce > 0 || c.lastLatenessOther > 0)
      c.note += "; the last rank to start ends " + formatFixed(c.lastLatenessAllReduce * 100, 0) + "% / " +
                formatFixed(c.lastLatenessOther * 100, 0) + "% of the time later";
    c.link.measuredGroupSize = c.groupSize;
    return c;
  }
  if (!c.run)
    throw Error(name +
                ": no link probe and fewer than two collectives whose duration grows with their size: no link can be fitted");
  c.source = "run-fit";
  c.link = c.run->link;
  c.link.measuredGroupSize = c.groupSize;
  c.relError = c.run->meanAbsRelError;
  c.wellConditioned = bothKindsSpread(steps) && c.run->r2 >= 0.8;
  c.note = "fitted from " + name + "'s own collectives (no link probe): " + std::to_string(c.run->samples) + " collectives, " +
           formatBytes(c.minBytes) + ".." + formatBytes(c.maxBytes) + ", R^2 " + formatFixed(c.run->r2, 3) +
           (c.wellConditioned ? ""
                              : "; poorly conditioned (one collective kind or size, or R^2 < 0.8): a prediction for another "
                                "strategy may be far off");
  return c;
}

LinkCalibration calibrateLink(TraceStore& store, RunId runId, const std::set<std::int64_t>* leftOutSteps) {
  const auto run = store.run(runId);
  if (!run) throw Error(store.path() + ": no run with id " + std::to_string(runId.value()));
  const std::string name = "run" + std::to_string(runId.value());
  try {
    const RunCollectiveSamples samples = runCollectiveSamples(store, runId, leftOutSteps);
    const bool cuda = ranOnCuda(store.ranks(runId));
    LinkCalibration c =
        calibrateLink(samples.probe, samples.steps, name, cuda ? kGpuCommInterference : kCpuGlooCommInterference, samples.loaded);
    // Carried to groups of another size: Gloo's ring latency by its steps (comm_model.h).
    c.link.ringLatency = !cuda;
    return c;
  } catch (const Error& e) {
    throw Error(store.path() + ": " + e.what());
  }
}

JsonValue toJson(const LinkCalibration& c) {
  JsonValue o = JsonValue::object();
  o.set("source", JsonValue::string(c.source));
  o.set("name", JsonValue::string(c.link.name));
  o.set("alpha_us", JsonValue::number(c.link.alphaUs));
  o.set("bus_bw_gbps", JsonValue::number(c.link.busBwGBps));
  o.set("all_reduce_alpha_us", JsonValue::number(c.link.arAlphaUs()));
  o.set("all_reduce_bus_bw_gbps", JsonValue::number(c.link.arBw()));
  o.set("contention_all_reduce", JsonValue::number(c.contentionAllReduce));
  o.set("contention_other", JsonValue::number(c.contentionOther));
  o.set("contention_samples", JsonValue::number(c.contentionSamples));
  o.set("comm_interference_all_reduce", JsonValue::number(c.commInterferenceAllReduce));
  o.set("comm_interference_other", JsonValue::number(c.commInterferenceOther));
  o.set("comm_interference_fitted_all_reduce", JsonValue::boolean(c.commInterferenceFittedAllReduce));
  o.set("comm_interference_fitted_other", JsonValue::boolean(c.commInterferenceFittedOther));
  o.set("in_run_sizes", JsonValue::number(static_cast<std::int64_t>(c.link.allReduceInRun.size() + c.link.otherInRun.size())));
  o.set("last_lateness_all_reduce", JsonValue::number(c.lastLatenessAllReduce));
  o.set("last_lateness_other", JsonValue::number(c.lastLatenessOther));
  o.set("in_run_sizes_on_demand",
        JsonValue::number(static_cast<std::int64_t>(c.link.allReduceInRunByWait[1].size() + c.link.otherInRunByWait[1].size())));
  o.set("in_run_sizes_ahead",
        JsonValue::number(static_cast<std::int64_t>(c.link.allReduceInRunByWait[0].size() + c.link.otherInRunByWait[0].size())));
  o.set("loaded_probe_sizes", JsonValue::number(static_cast<std::int64_t>(c.loadedProbeSizes())));
  const auto orNull = [](double v) { return v >= 0 ? JsonValue::number(v) : JsonValue(); };
  {
    JsonValue sizes = JsonValue::array();
    const auto add = [&](const std::vector<LinkModel::InRunSize>& v, const char* kind, const char* waited) {
      for (const auto& s : v) {
        JsonValue e = JsonValue::object();
        e.set("kind", JsonValue::string(kind));
        e.set("waited", JsonValue::string(waited));
        e.set("wire_bytes", JsonValue::number(s.wireBytes));
        e.set("time_s", JsonValue::number(s.timeS));
        e.set("last_lateness", orNull(s.lastLateness));
        e.set("source", JsonValue::string(s.fromLoadedProbe ? "loaded_probe" : "steps"));
        e.set("instances", JsonValue::number(static_cast<std::int64_t>(s.instances)));
        sizes.push(std::move(e));
      }
    };
    add(c.link.allReduceInRun, "all_reduce", "any");
    add(c.link.otherInRun, "other", "any");
    for (int k = 0; k < 2; ++k) {
      add(c.link.allReduceInRunByWait[k], "all_reduce", k ? "on_demand" : "ahead");
      add(c.link.otherInRunByWait[k], "other", k ? "on_demand" : "ahead");
    }
    o.set("in_run", std::move(sizes));
  }
  o.set("last_lateness_on_demand_all_reduce", orNull(c.lastLatenessByWait[0][1]));
  o.set("last_lateness_on_demand_other", orNull(c.lastLatenessByWait[1][1]));
  o.set("last_lateness_ahead_all_reduce", orNull(c.lastLatenessByWait[0][0]));
  o.set("last_lateness_ahead_other", orNull(c.lastLatenessByWait[1][0]));
  o.set("min_bytes", JsonValue::number(c.minBytes));
  o.set("max_bytes", JsonValue::number(c.maxBytes));
  o.set("group_size", JsonValue::number(std::int64_t{c.groupSize}));
  o.set("latency_by_ring_steps", JsonValue::boolean(c.link.ringLatency));
  o.set("well_conditioned", JsonValue::boolean(c.wellConditioned));
  o.set("rel_error", JsonValue::number(c.relError));
  o.set("probe_r2", c.probe ? JsonValue::number(c.probe->r2) : JsonValue());
  o.set("probe_samples", c.probe ? JsonValue::number(c.probe->samples) : JsonValue());
  o.set("run_r2", c.run ? JsonValue::number(c.run->r2) : JsonValue());
  o.set("run_samples", c.run ? JsonValue::number(c.run->samples) : JsonValue());
  o.set("note", JsonValue::string(c.note));
  return o;
}

}  // namespace shardscope::core::estimator
