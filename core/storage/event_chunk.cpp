#include "core/storage/event_chunk.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/util/error.h"

namespace shardscope::core {
namespace {

// Column bits of the header's mask: a column absent from the mask is all-null in the chunk.
enum : std::uint32_t {
  kColCat = 1u << 0,
  kColStep = 1u << 1,
  kColCorrelation = 1u << 2,
  kColExternalId = 1u << 3,
  kColCollOp = 1u << 4,
  kColPg = 1u << 5,
  kColBytes = 1u << 6,
  kColDtype = 1u << 7,
  kColGroupSize = 1u << 8,
};

template <typename T>
void put(std::string& out, const std::vector<T>& v) {
  if (v.empty()) return;  // data() of an empty vector may be null (memcpy must not see it)
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));  // no zero-fill first
}

template <typename T>
bool allEqual(const std::vector<T>& v, T x) {
  return std::all_of(v.begin(), v.end(), [&](T y) { return y == x; });
}

template <typename T>
void permuteInPlace(std::vector<T>& v, const std::vector<std::uint32_t>& perm) {
  std::vector<T> out(v.size());
  for (std::size_t i = 0; i < perm.size(); ++i) out[i] = v[perm[i]];
  v.swap(out);
}

struct Reader {
  std::string_view blob;
  std::size_t pos = 0;
  template <typename T>
  void get(std::vector<T>& v, std::size_t n) {
    if (blob.size() - pos < n * sizeof(T)) throw Error("damaged event chunk (truncated column)");
    v.resize(n);
    if (n == 0) return;  // an empty vector's data() may be null: memcpy must not see it (UBSan)
    std::memcpy(v.data(), blob.data() + pos, n * sizeof(T));
    pos += n * sizeof(T);
  }
  std::uint32_t u32() {
    if (blob.size() - pos < 4) throw Error("damaged event chunk (truncated header)");
    std::uint32_t v;
    std::memcpy(&v, blob.data() + pos, 4);
    pos += 4;
    return v;
  }
};

}  // namespace

void EventChunk::clear() {
  for (auto* v : {&start, &end, &step, &correlation, &externalId, &bytes}) v->clear();
  for (auto* v : {&name, &cat, &dtype, &pg}) v->clear();
  for (auto* v : {&category, &flags, &collOp}) v->clear();
  groupSize.clear();
}

void EventChunk::reserve(std::size_t n) {
  for (auto* v : {&start, &end, &step, &correlation, &externalId, &bytes}) v->reserve(n);
  for (auto* v : {&name, &cat, &dtype, &pg}) v->reserve(n);
  for (auto* v : {&category, &flags, &collOp}) v->reserve(n);
  groupSize.reserve(n);
}

void EventChunk::push(const EventRecord& e) {
  start.push_back(e.startNs);
  end.push_back(e.endNs);
  name.push_back(static_cast<std::uint32_t>(e.nameId));
  cat.push_back(static_cast<std::uint32_t>(e.catId));
  category.push_back(static_cast<std::uint8_t>(e.category));
  flags.push_back(static_cast<std::uint8_t>(e.flags));
  step.push_back(e.step.value_or(kNull));
  correlation.push_back(e.correlation.value_or(kNull));
  externalId.push_back(e.externalId.value_or(kNull));
  collOp.push_back(static_cast<std::uint8_t>(e.collOp));
  pg.push_back(static_cast<std::uint32_t>(e.processGroupId.value_or(0)));
  bytes.push_back(e.bytes.value_or(kNull));
  dtype.push_back(static_cast<std::uint32_t>(e.dtypeId.value_or(0)));
  groupSize.push_back(e.groupSize.value_or(0));
}

EventRecord EventChunk::record(std::size_t i, TrackId trackId) const {
  EventRecord e;
  e.trackId = trackId;
  e.startNs = start[i];
  e.endNs = end[i];
  e.nameId = name[i];
  e.catId = cat[i];
  e.category = static_cast<Category>(category[i]);
  e.flags = flags[i];
  if (step[i] != kNull) e.step = step[i];
  if (correlation[i] != kNull) e.correlation = correlation[i];
  if (externalId[i] != kNull) e.externalId = externalId[i];
  e.collOp = static_cast<CollectiveOp>(collOp[i]);
  if (pg[i]) e.processGroupId = pg[i];
  if (bytes[i] != kNull) e.bytes = bytes[i];
  if (dtype[i]) e.dtypeId = dtype[i];
  if (groupSize[i]) e.groupSize = groupSize[i];
  return e;
}

std::vector<std::uint32_t> EventChunk::sortByTime() {
  std::vector<std::uint32_t> perm(size());
  std::iota(perm.begin(), perm.end(), 0u);
  const bool sorted = std::is_sorted(perm.begin(), perm.end(), [&](std::uint32_t a, std::uint32_t b) {
    return start[a] != start[b] ? start[a] < start[b] : end[a] > end[b];
  });
  if (sorted) return perm;
  std::stable_sort(perm.begin(), perm.end(), [&](std::uint32_t a, std::uint32_t b) {
    return start[a] != start[b] ? start[a] < start[b] : end[a] > end[b];
  });
  permuteInPlace(start, perm);
  permuteInPlace(end, perm);
  permuteInPlace(name, perm);
  permuteInPlace(cat, perm);
  permuteInPlace(category, perm);
  permuteInPlace(flags, perm);
  permuteInPlace(step, perm);
  permuteInPlace(correlation, perm);
  permuteInPlace(externalId, perm);
  permuteInPlace(collOp, perm);
  permuteInPlace(pg, perm);
  permuteInPlace(bytes, perm);
  permuteInPlace(dtype, perm);
  permuteInPlace(groupSize, perm);
  return perm;
}

std::string EventChunk::encode() const {
  std::string out;
  encodeInto(out);
  return out;
}

void EventChunk::encodeInto(std::string& out) const {
  const std::size_t n = size();
  std::uint32_t mask = 0;
  if (!allEqual<std::uint32_t>(cat, 0)) mask |= kColCat;
  if (!allEqual(step, kNull)) mask |= kColStep;
  if (!allEqual(correlation, kNull)) mask |= kColCorrelation;
  if (!allEqual(externalId, kNull)) mask |= kColExternalId;
  if (!allEqual<std::uint8_t>(collOp, 0)) mask |= kColCollOp;
  if (!allEqual<std::uint32_t>(pg, 0)) mask |= kColPg;
  if (!allEqual(bytes, kNull)) mask |= kColBytes;
  if (!allEqual<std::uint32_t>(dtype, 0)) mask |= kColDtype;
  if (!allEqual<std::int32_t>(groupSize, 0)) mask |= kColGroupSize;
  out.clear();
  out.reserve(12 + n * 40);
  const std::uint32_t header[3] = {kFormat, static_cast<std::uint32_t>(n), mask};
  out.append(reinterpret_cast<const char*>(header), sizeof header);
  put(out, start);
  put(out, end);
  put(out, name);
  put(out, category);
  put(out, flags);
  if (mask & kColCat) put(out, cat);
  if (mask & kColStep) put(out, step);
  if (mask & kColCorrelation) put(out, correlation);
  if (mask & kColExternalId) put(out, externalId);
  if (mask & kColCollOp) put(out, collOp);
  if (mask & kColPg) put(out, pg);
  if (mask & kColBytes) put(out, bytes);
  if (mask & kColDtype) put(out, dtype);
  if (mask & kColGroupSize) put(out, groupSize);
}

EventChunk EventChunk::decode(std::string_view blob) {
  Reader r{blob};
  const std::uint32_t format = r.u32();
  if (format != kFormat) throw Error("unknown event chunk format " + std::to_string(format));
  const std::size_t n = r.u32();
  if (n > static_cast<std::size_t>(kMaxEvents)) throw Error("damaged event chunk (count " + std::to_string(n) + ")");
  const std::uint32_t mask = r.u32();
  EventChunk c;
  r.get(c.start, n);
  r.get(c.end, n);
  r.get(c.name, n);
  r.get(c.category, n);
  r.get(c.flags, n);
  auto opt = [&](auto& v, std::uint32_t bit, auto fill) {
    if (mask & bit)
      r.get(v, n);
    else
      v.assign(n, fill);
  };
  opt(c.cat, kColCat, std::uint32_t{0});
  opt(c.step, kColStep, kNull);
  opt(c.correlation, kColCorrelation, kNull);
  opt(c.externalId, kColExternalId, kNull);
  opt(c.collOp, kColCollOp, std::uint8_t{0});
  opt(c.pg, kColPg, std::uint32_t{0});
  opt(c.bytes, kColBytes, kNull);
  opt(c.dtype, kColDtype, std::uint32_t{0});
  opt(c.groupSize, kColGroupSize, std::int32_t{0});
  if (r.pos != blob.size()) throw Error("damaged event chunk (trailing bytes)");
  return c;
}

}  // namespace shardscope::core
