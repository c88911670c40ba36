// The Kineto reader's direct scanner (EventReader::fastEvent) against its full tokenizer: every
// event the scanner reads must come out exactly as the tokenizer reads it (the tokenizer takes over
// whenever the scanner gives up), args included, stored with the whitespace outside strings removed.
#include <QtTest>

#include <optional>
#include <string>
#include <vector>

#include "core/import/kineto_parser.h"
#include "core/import/kineto_records.h"
#include "core/import/trace_reader.h"

using namespace shardscope::core;

namespace {

std::string opt64(std::int64_t v) { return v == kineto::kNone ? "-" : std::to_string(v); }
template <typename T>
std::string opt(const std::optional<T>& v) {
  return v ? std::to_string(*v) : "-";
}

// Everything a batch holds, as text (ids are the parser's own: equal batches come from equal input).
std::string describe(const kineto::Batch& b) {
  std::string s;
  for (const auto& e : b.events) {
    s += "E " + std::to_string(e.track) + " " + std::to_string(e.name) + " " + std::to_string(e.cat) + " " +
         std::to_string(e.dtype) + " " + std::to_string(e.pg) + " " + std::to_string(e.groupSize) + " " +
         std::to_string(static_cast<int>(e.category)) + " " + std::to_string(static_cast<int>(e.op)) + " " +
         std::to_string(e.flags) + " " + std::to_string(e.start) + " " + std::to_string(e.end) + " " + opt64(e.correlation) +
         " " + opt64(e.externalId) + " " + opt64(e.bytes) + " " + opt64(e.stepNum) +
         " args=" + b.args.substr(e.argsOff, e.argsLen) + "\n";
  }
  for (const auto& m : b.memory)
    s += "M " + std::to_string(m.tsNs) + " " + std::to_string(m.deviceType) + " " + std::to_string(m.deviceId) + " " +
         std::to_string(m.addr) + " " + std::to_string(m.bytes) + " " + std::to_string(m.totalAllocated) + " " +
         std::to_string(m.totalReserved) + " " + std::to_string(m.outOfMemory) + "\n";
  for (auto t : b.memoryTracks) s += "MT " + std::to_string(t) + "\n";
  for (const auto& f : b.flows)
    s += "F " + std::to_string(f.track) + " " + std::to_string(f.cat) + " " + std::to_string(f.name) + " " +
         std::to_string(f.id) + " " + std::to_string(f.ts) + " " + f.phase + " " + std::to_string(f.bindEnclosing) + "\n";
  for (const auto& c : b.counters)
    s += "C " + std::to_string(c.track) + " " + std::to_string(c.ts) + " " + std::to_string(c.value) + "\n";
  for (const auto& st : b.steps)
    s += "S " + std::to_string(st.step) + " " + std::to_string(st.start) + " " + std::to_string(st.end) + "\n";
  for (const auto& str : b.newStrings) s += "STR " + str + "\n";
  for (const auto& t : b.newTracks)
    s += "T " + t.key + " " + std::to_string(static_cast<int>(t.kind)) + " " + t.name + " " + opt(t.pid) + " " + opt(t.tid) +
         " " + opt(t.stream) + " " + opt(t.device) + " " + t.pidText + " " + t.tidText + " " + t.derivedFrom + "\n";
  for (const auto& g : b.newGroups)
    s += "G " + g.name + " " + g.description + " " + g.ranksJson + " " + std::to_string(g.size) + "\n";
  s += "P " + b.header.processes.dump() + "\n";
  for (const auto& [pid, tid, name] : b.header.threadNames) s += "TN " + pid + " " + tid + " " + name + "\n";
  s += "stats " + std::to_string(b.stats.events) + " " + std::to_string(b.stats.skipped) + " " + std::to_string(b.stats.kernels) +
       " " + std::to_string(b.stats.launchFlows) + " " + std::to_string(b.header.tsFloat) + "\n";
  for (const auto& w : b.warnings) s += "W " + w + "\n";
  return s;
}

// The same event with a first member whose key has an escape: the direct scanner gives up on it at
// once and the full tokenizer reads all of it (the member itself is an unknown key: ignored).
std::string viaTokenizer(const std::string& ev) {
  const auto brace = ev.find('{');
  return ev.substr(0, brace + 1) + R"("\u0078": 0, )" + ev.substr(brace + 1);
}

// Events a trace of ours or of PyTorch holds, and the shapes of args the scanner must keep exactly.
std::vector<std::string> corpus() {
  std::string deep = "1";
  for (int i = 0; i < 31; ++i) deep = "[" + deep + "]";
  return {
      R"j({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 59557, "tid": 59557, "ts": 1369172166858.263, "dur": 202817.713, "args": {"External id": 1, "Record function id": 0, "Ev Idx": 0}})j",
      R"j({"ph": "X", "cat": "cpu_op", "name": "aten::to", "pid": 59557, "tid": 59557, "ts": 1369172167088.937, "dur": 32.811, "args": {"External id": 3, "Record function id": 0, "Input Dims": [[2048], [], [], [], [], [], [], []], "Input type": ["long int", "", "", "", "", "Scalar", "Scalar", ""], "Ev Idx": 2}})j",
      R"j({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 59557, "tid": 59557, "ts": 1369172167099.671, "args": {"Total Reserved": 4294967296, "Total Allocated": 3221241856, "Bytes": 16384, "Addr": 139818365353984, "Device Id": 0, "Device Type": 1, "Ev Idx": 5}})j",
      R"j({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 59557, "tid": 59557, "ts": 1369172167099.9, "args": {"Total Reserved": 0, "Total Allocated": 10, "Bytes": -16384, "Addr": 1, "Device Id": -1, "Device Type": 0}})j",
      R"j({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 59557, "tid": 59557, "ts": 1369172167100, "args": {"Total Reserved": 5, "Total Allocated": 4, "Bytes": 3, "Addr": 2, "Device Id": 1, "Device Type": 1}})j",
      R"j({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 7, "ts": 1369172167111.511, "dur": 1.944, "args": {"External id": 6, "device": 0, "context": 1, "stream": 7, "correlation": 16, "bytes": 16384, "memory bandwidth (GB/s)": 8.427984}})j",
      R"j({"ph": "s", "id": 16, "pid": 59557, "tid": 59557, "ts": 1369172167106.763, "cat": "ac2g", "name": "ac2g"})j",
      R"j({"ph": "f", "id": 16, "pid": 0, "tid": 7, "ts": 1369172167111.511, "cat": "ac2g", "name": "ac2g", "bp": "e"})j",
      R"j({"ph": "s", "id": "0x1f", "pid": 1, "tid": 2, "ts": 5, "cat": "fwdbwd", "name": "fwdbwd"})j",
      R"j({"ph": "f", "id": "0x1f", "pid": 1, "tid": 2, "ts": 6, "cat": "fwdbwd", "name": "fwdbwd", "bp": "e"})j",
      R"j({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 59557, "tid": 59557, "ts": 1369172167185.087, "dur": 25.756, "args": {"External id": 8, "Record function id": 0, "Collective name": "_allgather_base", "In msg nelems": 1048896, "Out msg nelems": 67129344, "Group size": 64, "dtype": "BFloat16", "In split size": "[]", "Out split size": "[]", "Process Group Name": "1", "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1, 2, 3]", "Ev Idx": 8}})j",
      R"j({"ph": "X", "cat": "user_annotation", "name": "nccl:all_reduce", "pid": 1, "tid": 1, "ts": 10, "dur": 5, "args": {"External id": 9, "Input Dims": [[8, 1024, 8816], [2]], "Input type": ["float", "int"]}})j",
      R"j({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "pid": 0, "tid": 21, "ts": 1369172167200.002, "dur": 490.783, "args": {"External id": 8, "queued": 0, "device": 0, "context": 1, "stream": 21, "correlation": 19, "registers per thread": 96, "shared memory": 103808, "blocks per SM": 0.1212121, "warps per SM": 1.939394, "grid": [16, 1, 1], "block": [640, 1, 1], "est. achieved occupancy %": 0}})j",
      R"j({"ph": "X", "cat": "gpu_user_annotation", "name": "nccl:_all_gather_base", "pid": 0, "tid": 21, "ts": 1369172167200.001, "dur": 490.785, "args": {"External id": 9}})j",
      R"j({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 59557, "tid": 59557, "ts": 1369172167283.905, "dur": 4.755, "args": {"External id": 16, "cbid": 211, "correlation": 23}})j",
      R"j({"ph": "C", "name": "util", "pid": 1, "ts": 120, "args": {"value": 3, "other": -2.5}})j",
      R"j({"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "worker thread"}})j",
      R"j({"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python3 main.py"}})j",
      R"j({"ph": "X", "cat": "kernel", "name": "k", "pid": "0", "tid": "stream 7 ", "ts": 1.5, "dur": 0})j",
      R"j({"ph": "X", "cat": "python_function", "name": "<built-in method>", "pid": 1, "tid": 3, "ts": 0, "dur": 1, "args": {"Python parent id": null, "Python id": 1, "Python thread": 0}})j",
      R"j({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "marker", "pid": 1, "tid": 1, "ts": 7, "args": {"flag": true, "off": false, "none": null}})j",
      // args the scanner must store without their whitespace, and nothing else changed.
      R"j({"ph": "X", "cat": "cpu_op", "name": "ws", "pid": 1, "tid": 1, "ts": 2, "dur": 1, "args": { "a" : [ 1 , 2.50 , -0.5 , 0 ] ,	"b":"x  y: [z], {w}" ,
"c" :{ "d" : { "e" : [ ] , "f" : { } } } , "g": -12345678901234 , "h": "" }})j",
      // Integers of every length around the scanner's 8- and 16-byte steps, fractions, signs.
      R"j({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1234567, "tid": 12345678, "ts": 99999999.5, "args": {"Total Reserved": 123456789, "Total Allocated": 1234567890123456, "Bytes": -12345678901234567, "Addr": 123456789012345678, "Device Id": 9, "Device Type": 1, "x": 1234567890123456789, "y": 0.0001, "z": -0}})j",
      R"j({"ph": "X", "cat": "cpu_op", "name": "numbers", "pid": 123456789012, "tid": 1234567890123, "ts": 1.123456789012345678, "dur": 12345678.1234, "args": {"External id": 12345678901234, "correlation": 123456789012345, "Group size": 10000000, "In msg nelems": 99999999, "Out msg nelems": 100000000, "stream": 1000000000000000, "device": -7}})j",
      R"j({"ph":"X","cat":"cpu_op","name":"compact","pid":1,"tid":1,"ts":3,"dur":1,"args":{"a":[1,2],"b":{"c":"d e"},"n":1.25}})j",
      R"j({"ph": "X", "cat": "cpu_op", "name": "empty args", "pid": 1, "tid": 1, "ts": 4, "dur": 1, "args": {}})j",
      R"j({"ph": "X", "cat": "cpu_op", "name": "empty args 2", "pid": 1, "tid": 1, "ts": 4, "dur": 1, "args": { }})j",
      R"j({"args": {"External id": 77, "k": [1, {"a": "b"}]}, "ph": "X", "cat": "cpu_op", "name": "args first", "pid": 1, "tid": 1, "ts": 5, "dur": 2})j",
      R"j({"ph": "X", "cat": "cpu_op", "name": "deep", "pid": 1, "tid": 1, "ts": 6, "dur": 1, "args": {"d": )j" + deep +
          R"j(}})j",
      R"j({"ph": "X", "cat": "cpu_op", "name": "other top-level", "pid": 1, "tid": 1, "ts": 6, "dur": 1, "extra": {"a": [1, 2]}, "more": "x"})j",
      R"j({"ph": "X", "cat": "cpu_op", "name": "long args", "pid": 1, "tid": 1, "ts": 8, "dur": 1, "args": {"Input Dims": [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127, 128, 129, 130, 131, 132, 133, 134, 135, 136, 137, 138, 139, 140]]}})j",
  };
}

}  // namespace

class TestKinetoScanner : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // Each event, read by the direct scanner and by the full tokenizer, gives the same batch.
  void scannerAndTokenizerAgree() {
    const ImportOptions options;
    const std::vector<std::string> files = {"corpus.json"};
    const auto events = corpus();
    for (std::size_t i = 0; i < events.size(); ++i) {
      // The scanner reads the event (addEventPrefix reads only what it can), and gives up on its twin.
      kineto::KinetoParser probe(options, 0, files);
      probe.beginBatch(0, 0, std::nullopt);
      const std::string followed = events[i] + ", {\"ph\": \"X\"}]";
      QCOMPARE(probe.addEventPrefix(followed, 0, 0), events[i].size());
      const std::string twin = viaTokenizer(events[i]);
      QCOMPARE(probe.addEventPrefix(twin, 0, 1), std::size_t(0));
    }
    // The whole corpus in one segment (string, track and memory-track ids carry over between events).
    std::vector<std::string> twins;
    for (const auto& e : events) twins.push_back(viaTokenizer(e));
    kineto::KinetoParser fast(options, 0, files), full(options, 0, files);
    const auto a = fast.parseSegment(kineto::makeSegment(events));
    const auto b = full.parseSegment(kineto::makeSegment(twins));
    const std::string da = describe(*a), db = describe(*b);
    QCOMPARE(da, db);
    QVERIFY(da.find("E ") != std::string::npos && da.find("M ") != std::string::npos && da.find("F ") != std::string::npos);
    // ... and the same through the per-file pipeline's way in (addEventPrefix, text that goes on).
    kineto::KinetoParser prefix(options, 0, files);
    prefix.beginBatch(0, 0, std::nullopt);
    std::string all;
    for (const auto& e : events) all += e + ",\n";
    std::size_t at = 0;
    for (std::size_t i = 0; i < events.size(); ++i) {
      const std::size_t n = prefix.addEventPrefix(std::string_view(all).substr(at), at, i);
      QCOMPARE(n, events[i].size());
      at += n + 2;
    }
    QCOMPARE(describe(*prefix.takeBatch(at)), da);
  }

  // The args are stored as compact JSON: whitespace outside strings removed, everything else as
  // written (numbers, nesting, strings with their spaces and brackets).
  void argsAreStoredCompact() {
    const ImportOptions options;
    const std::vector<std::string> files = {"args.json"};
    const auto events = corpus();
    kineto::KinetoParser parser(options, 0, files);
    const auto b = parser.parseSegment(kineto::makeSegment(events));
    auto argsOf = [&](const std::string& name) -> std::string {
      for (std::uint32_t s = 0; s < b->newStrings.size(); ++s) {
        if (b->newStrings[s] != name) continue;
        for (const auto& e : b->events)
          if (e.name == s + 1) return b->args.substr(e.argsOff, e.argsLen);
      }
      return "<no event " + name + ">";
    };
    QCOMPARE(argsOf("ws"),
             std::string(R"({"a":[1,2.50,-0.5,0],"b":"x  y: [z], {w}","c":{"d":{"e":[],"f":{}}},"g":-12345678901234,"h":""})"));
    QCOMPARE(argsOf("compact"), std::string(R"({"a":[1,2],"b":{"c":"d e"},"n":1.25})"));
    QCOMPARE(
        argsOf("aten::to"),
        std::string(
            R"({"External id":3,"Record function id":0,"Input Dims":[[2048],[],[],[],[],[],[],[]],"Input type":["long int","","","","","Scalar","Scalar",""],"Ev Idx":2})"));
    QCOMPARE(argsOf("args first"), std::string(R"({"External id":77,"k":[1,{"a":"b"}]})"));
    QCOMPARE(argsOf("empty args"), std::string());
    QCOMPARE(argsOf("empty args 2"), std::string("{}"));  // as ever: only the exact text "{}" means none
    QCOMPARE(argsOf("marker"), std::string(R"({"flag":true,"off":false,"none":null})"));
  }
};

QTEST_GUILESS_MAIN(TestKinetoScanner)
#include "tst_kineto_scanner.moc"
