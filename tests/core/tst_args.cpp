// core/util/args: the one parser of shardscope-cli, shardscope-worker and the benchmarks — values,
// flags in their three spellings, repeated options, positionals and `--`, extra options (the
// run-config knobs), typed getters and their errors, the help from the table.
#include <QtTest>

#include "core/util/args.h"

using namespace shardscope::core;

namespace {

const std::vector<ArgSpec> kSpecs = {
    {"db", true, "database file", "FILE"},
    {"json", false, "JSON on stdout"},
    {"tag", true, "a tag (repeatable)"},
    {"events", true, "events"},
    {"o", true, "output"},
    {"help", false, "show this help"},
};

QString errorOf(const std::vector<std::string>& argv, const ArgParseOptions& po = {}) {
  try {
    parseArgs(argv, kSpecs, po);
  } catch (const ArgError& e) {
    return QString::fromUtf8(e.what());
  }
  return {};
}

}  // namespace

class TestArgs : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void valuesFlagsPositionals() {
    const ParsedArgs a =
        parseArgs({"a.json", "--db", "x.db", "--json", "-o", "out", "--tag=one", "--tag", "two", "--", "--db"}, kSpecs);
    QCOMPARE(a.get("db"), std::string("x.db"));
    QVERIFY(a.has("json"));
    QCOMPARE(a.get("o"), std::string("out"));
    QCOMPARE(a.all("tag"), (std::vector<std::string>{"one", "two"}));
    QCOMPARE(a.get("tag"), std::string("two"));                            // the last one wins for get()
    QCOMPARE(a.positional, (std::vector<std::string>{"a.json", "--db"}));  // after --, all positional
    QVERIFY(!a.has("events"));
    QCOMPARE(a.get("events", "7"), std::string("7"));
  }

  void flagSpellings() {
    QVERIFY(parseArgs({"--json"}, kSpecs).has("json"));
    QVERIFY(!parseArgs({"--json=false"}, kSpecs).has("json"));
    QVERIFY(!parseArgs({"--json", "off"}, kSpecs).has("json"));
    QVERIFY(parseArgs({"--json", "yes"}, kSpecs).has("json"));
    const ParsedArgs a = parseArgs({"--json", "file.json"}, kSpecs);  // not a truth value: a positional
    QVERIFY(a.has("json"));
    QCOMPARE(a.positional, std::vector<std::string>{"file.json"});
    QVERIFY(parseArgs({"-h"}, kSpecs).has("help"));
  }

  void errorsNameTheOption() {
    QCOMPARE(errorOf({"--bogus"}), QString("unknown option '--bogus'"));
    QCOMPARE(errorOf({"--db"}), QString("option '--db' needs a value"));
    QCOMPARE(errorOf({"--json=maybe"}), QString("option '--json' is a flag: 'maybe' is not true/false/1/0/on/off/yes/no"));
    ArgParseOptions strict;
    strict.allowPositional = false;
    QCOMPARE(errorOf({"stray"}, strict), QString("unexpected argument 'stray'"));
  }

  void typedGetters() {
    const ParsedArgs a = parseArgs({"--events", "5k", "--db", "12", "--o", "1.5", "--tag", "1M,2k"}, kSpecs);
    QCOMPARE(a.getCount("events", 0), std::uint64_t(5000));
    QCOMPARE(a.getCounts("tag", {}), (std::vector<std::uint64_t>{1000000, 2000}));
    QCOMPARE(a.getInt("db", 0), std::int64_t(12));
    QCOMPARE(a.getDouble("o", 0), 1.5);
    QCOMPARE(a.getInt("json", 42), std::int64_t(42));  // absent: the default
    auto error = [](auto&& f) -> QString {
      try {
        f();
      } catch (const ArgError& e) {
        return QString::fromUtf8(e.what());
      }
      return {};
    };
    const ParsedArgs bad = parseArgs({"--events", "ten", "--db", "1x", "-o", "fast", "--tag", "0"}, kSpecs);
    QCOMPARE(error([&] { bad.getInt("db", 0); }), QString("--db: expected an integer, got '1x'"));
    QCOMPARE(error([&] { bad.getDouble("o", 0); }), QString("-o: expected a number, got 'fast'"));
    QCOMPARE(error([&] { bad.getCount("events", 0); }), QString("--events: expected a count (1000, 5k, 2M), got 'ten'"));
    QCOMPARE(error([&] { bad.getCount("tag", 0, 1, 1024); }),
             QString("--tag: expected a count (1000, 5k, 2M) from 1 to 1024, got '0'"));
    QCOMPARE(error([&] {
               parseArgs({"--db", "-3"}, kSpecs).getInt("db", 0, 1);
             }),
             QString("--db: expected an integer >= 1, got '-3'"));
  }

  void extraOptions() {
    ArgParseOptions po;
    po.extra = [](std::string_view name) -> std::optional<bool> {
      if (name == "world-size") return false;   // takes a value
      if (name == "overlap-comm") return true;  // a flag
      return std::nullopt;
    };
    const ParsedArgs a = parseArgs({"--world-size", "4", "--overlap-comm", "--db", "x"}, kSpecs, po);
    QCOMPARE(a.get("world-size"), std::string("4"));
    QVERIFY(a.has("overlap-comm"));
    QCOMPARE(errorOf({"--world-sise", "4"}, po), QString("unknown option '--world-sise'"));
  }

  void helpFromTheTable() {
    const std::string help = argsHelp(kSpecs);
    QVERIFY(help.find("  --db FILE             database file\n") != std::string::npos);
    QVERIFY(help.find("  --json                JSON on stdout\n") != std::string::npos);
    QVERIFY(help.find("  -o VALUE              output\n") != std::string::npos);
  }
};

QTEST_MAIN(TestArgs)
#include "tst_args.moc"
