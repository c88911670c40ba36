// The safe pickle reader (core/util/pickle.h): plain data read right, everything hostile refused
// with core::Error naming the file and byte offset, never a crash, never code.
#include <QtTest>

#include <string>

#include "core/util/error.h"
#include "core/util/pickle.h"
#include "tests/tools/snapshot_pickle.h"

using namespace shardscope::core;

namespace {

std::string errorOf(const std::string& bytes, const PickleLimits& limits = {}) {
  try {
    parsePickle(bytes, "x.pickle", limits);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string p2(const std::string& body) { return std::string("\x80\x02", 2) + body; }

}  // namespace

class TestPickleReader : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void readsPlainData() {
    // {'a': [1, -2, 300, -70000, 2**40, -(2**40), 1.5, True, None, 'é', b'xy', (7, 8)]}
    using namespace std::string_literals;
    std::string b =
        p2("}(\x8c\x01"
           "a](K\x01J\xfe\xff\xff\xffM,\x01J\x90\xee\xfe\xff\x8a\x06\x00\x00\x00\x00\x00\x01\x8a\x06\x00\x00\x00\x00\x00\xff"s);
    b += "G\x3f\xf8\x00\x00\x00\x00\x00\x00"s;
    b += "\x88N\x8c\x02\xc3\xa9"
         "C\x02xyK\x07K\x08\x86"
         "eu.";
    const PickleDocument doc = parsePickle(b, "x");
    const PickleValue* a = doc.root().get("a");
    QVERIFY(a && a->isList());
    QCOMPARE(a->items().size(), std::size_t(12));
    QCOMPARE(a->items()[0]->asInt(), std::int64_t(1));
    QCOMPARE(a->items()[1]->asInt(), std::int64_t(-2));
    QCOMPARE(a->items()[2]->asInt(), std::int64_t(300));
    QCOMPARE(a->items()[3]->asInt(), std::int64_t(-70000));
    QCOMPARE(a->items()[4]->asInt(), std::int64_t(1) << 40);
    QCOMPARE(a->items()[5]->asInt(), -(std::int64_t(1) << 40));
    QCOMPARE(a->items()[6]->asFloat(), 1.5);
    QVERIFY(a->items()[7]->asBool());
    QVERIFY(a->items()[8]->isNone());
    QCOMPARE(QString::fromStdString(a->items()[9]->asString()), QString::fromUtf8("é"));
    QCOMPARE(a->items()[10]->kind(), PickleValue::Kind::Bytes);
    QCOMPARE(a->items()[11]->kind(), PickleValue::Kind::Tuple);
    QCOMPARE(a->items()[11]->items()[1]->asInt(), std::int64_t(8));
  }

  void memoSharesOneNode() {
    // [d, d] with d = {} memoised once and fetched again: one node.
    const std::string b = std::string("\x80\x04]\x94(}\x94h\x01") + "e.";
    const PickleDocument doc = parsePickle(b, "x");
    QCOMPARE(doc.root().items().size(), std::size_t(2));
    QCOMPARE(doc.root().items()[0], doc.root().items()[1]);
  }

  void readsGeneratedSnapshot() {
    shardscope::test::GenSnapshot s;
    s.stacks = {{{"f", "/u/train.py", 3}, {"g", "/u/train.py", 9}}};
    s.traces = {{{"alloc", 4096, 512, 10, 0}, {"free_completed", 4096, 512, 11, 0}}};
    const PickleDocument doc = parsePickle(shardscope::test::snapshotPickle(s), "gen");
    const PickleValue* traces = doc.root().get("device_traces");
    QVERIFY(traces && traces->items().size() == 1);
    const PickleValue* e1 = traces->items()[0]->items()[1];
    QCOMPARE(QString::fromStdString(e1->get("action")->asString()), QString("free_completed"));
    // The second event's frames are memo references to the first's.
    QCOMPARE(e1->get("frames")->items()[0], traces->items()[0]->items()[0]->get("frames")->items()[0]);
  }

  void refusesCode() {
    const std::string global = p2("cos\nsystem\n(S'x'\ntR.");
    const std::string e = errorOf(global);
    QVERIFY2(e.find("x.pickle: byte 2:") == 0, e.c_str());
    QVERIFY2(e.find("GLOBAL 'os.system'") != std::string::npos, e.c_str());
    const std::string stackGlobal = std::string("\x80\x04\x8c\x02os\x8c\x06system\x93.", 16);
    QVERIFY2(errorOf(stackGlobal).find("STACK_GLOBAL 'os.system' refused") != std::string::npos, errorOf(stackGlobal).c_str());
    QVERIFY(errorOf(p2("NNR.")).find("byte 4: opcode REDUCE refused") != std::string::npos);
    QVERIFY(errorOf(p2("}Nb.")).find("opcode BUILD refused") != std::string::npos);
    QVERIFY(errorOf(p2("N\x81.")).find("opcode NEWOBJ refused") != std::string::npos);
    QVERIFY(errorOf(p2("Q.")).find("BINPERSID") != std::string::npos);
    QVERIFY(errorOf(p2("I1\n.")).find("protocol 0/1") != std::string::npos);
    QVERIFY(errorOf(p2("\xff.")).find("unknown pickle opcode 0xff") != std::string::npos);
    QVERIFY(errorOf(std::string("\x80\x09N.", 4)).find("pickle protocol 9") != std::string::npos);
  }

  void refusesTruncated() {
    shardscope::test::GenSnapshot s;
    s.stacks = {{{"f", "/u/train.py", 3}}};
    s.segments = {{0, 1 << 20, 4096, {{4096, 4000, "active_allocated", 0}}}};
    s.traces = {{{"alloc", 1 << 20, 4096, 5, 0}}};
    const std::string full = shardscope::test::snapshotPickle(s);
    for (std::size_t n = 0; n < full.size(); ++n) {
      const std::string e = errorOf(full.substr(0, n));
      QVERIFY2(!e.empty(), std::to_string(n).c_str());
      QVERIFY2(e.rfind("x.pickle: byte ", 0) == 0, e.c_str());
    }
    QVERIFY(errorOf(full).empty());
  }

  void boundsDepthStackAndMemory() {
    std::string deep = "\x80\x02";
    for (int i = 0; i < 200; ++i) deep += "]";
    for (int i = 0; i < 199; ++i) deep += "a";
    deep += ".";
    QVERIFY2(errorOf(deep).find("nested deeper than 64") != std::string::npos, errorOf(deep).c_str());
    std::string marks = "\x80\x02";
    for (int i = 0; i < 100; ++i) marks += "(";
    QVERIFY(errorOf(marks).find("MARKs nested deeper") != std::string::npos);
    PickleLimits small;
    small.maxStack = 10;
    QVERIFY(errorOf(p2(std::string(20, 'N') + "."), small).find("values on the stack") != std::string::npos);
    small = {};
    small.maxBytes = 1000;
    std::string many = "\x80\x02](";
    for (int i = 0; i < 200; ++i) many += "N";
    many += "e.";
    QVERIFY(errorOf(many, small).find("memory than the reader's bound") != std::string::npos);
  }

  void refusesHugeLengths() {
    QVERIFY(errorOf(std::string("\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\x3f"
                                "abc.",
                                15))
                .find("runs past the end") != std::string::npos);
    QVERIFY(errorOf(std::string("\x80\x04X\xff\xff\xff\x7f"
                                "ab.",
                                10))
                .find("runs past the end") != std::string::npos);
    QVERIFY(errorOf(std::string("\x80\x04\x8b\x00\x00\x01\x00.", 8)).find("does not fit 64 bits") != std::string::npos);
  }

  void refusesMemoAbuse() {
    QVERIFY(errorOf(p2("h\x05.")).find("memo index 5 was never stored") != std::string::npos);
    QVERIFY(errorOf(p2("Nr\xff\xff\xff\xff.")).find("beyond the reader's bound") != std::string::npos);
    QVERIFY(errorOf(p2("\x94.")).find("MEMOIZE on an empty stack") != std::string::npos);
    // A list appended into itself through the memo: read, no leak (the arena owns it), no hang.
    const std::string cyclic = std::string("\x80\x04]\x94h\x00", 6) + "a.";
    const PickleDocument doc = parsePickle(cyclic, "x");
    QCOMPARE(doc.root().items().front(), &doc.root());
  }

  void refusesBadStack() {
    QVERIFY(errorOf(p2("NN.")).find("STOP with 2 values") != std::string::npos);
    QVERIFY(errorOf(p2("Na.")).find("APPEND on an empty stack") != std::string::npos);
    QVERIFY(errorOf(p2("K\x05Na.")).find("APPEND to a int") != std::string::npos);
    QVERIFY(errorOf(p2("}(N.")).find("STOP with") != std::string::npos);
    QVERIFY(errorOf(p2("}(Nu.")).find("odd number") != std::string::npos);
    QVERIFY(errorOf(p2("e.")).find("without a MARK") != std::string::npos);
    QVERIFY(!looksLikePickle("{\"traceEvents\": []}"));
    QVERIFY(looksLikePickle(std::string("\x80\x04\x95\x10\x00", 5)));
  }
};

QTEST_GUILESS_MAIN(TestPickleReader)
#include "tst_pickle_reader.moc"
