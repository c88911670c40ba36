#pragma once
// Units and number formatting: the one convention of every surface (CLI text, the app, reports;
// docs/METRICS.md "Units"). Decided once, here:
// - memory and message sizes in binary units (B, KiB, MiB, GiB, TiB), labelled;
// - bandwidth in GB/s (1e9 B/s, as nccl-tests prints it);
// - times in ms with three decimals in tables (ns resolution is kept in JSON), adaptive units
//   (ns, µs, ms, s) on axes and in prose;
// - percentages with a space before "%" ("12.3 %"); shares in [0, 1] are multiplied by 100 first;
// - no locale: '.' is the decimal point; counts and large numbers group thousands with ','.
// JSON numbers are not formatted here (core/util/json.h writes the shortest exact form).
#include <cstdint>
#include <string>

namespace shardscope::core {

// "3.142" (printf %.*f, no grouping).
std::string formatFixed(double v, int decimals);
// "1,234,567.89" (thousands grouped with ',').
std::string formatGrouped(double v, int decimals);
// "1,234,567".
std::string formatCount(std::int64_t n);
// "512 B", "1.50 KiB", "38.84 GiB" (`decimals` above bytes).
std::string formatBytes(double bytes, int decimals = 2);
// "12.345 ms" from nanoseconds (a table cell of a time).
std::string formatMsFromNs(std::int64_t ns, int decimals = 3);
// Adaptive, from milliseconds: "12.5 s" (>= 10 s), "123.4 ms", "12.34 ms", "0.123 ms", "4.20 µs".
std::string formatMs(double ms);
// Adaptive, from nanoseconds: "850 ns", "4.20 µs", "12.345 ms", "1.234 s" (a timeline label).
std::string formatDurationNs(double ns);
// "850 ms" below one second, else "12.34 s".
std::string formatSeconds(double s);
// "12.3 %" from a percentage (not a share).
std::string formatPercent(double pct, int decimals = 1);
// A count of tensor elements as knobs take them (reduce_bucket_size, prefetch_bucket_size):
// "500.0M elements", "125k elements", "512 elements".
std::string formatElements(std::int64_t n);
// "1.23 G<unit>", "4.56 M<unit>", "7.8 k<unit>", "12 <unit>": decimal prefixes for rates and
// counts (events/s, tokens/s, FLOPs).
std::string formatSi(double v, const char* unit);

}  // namespace shardscope::core
