// Writes the seed corpus of fuzz_event_chunk (tests/fuzz/chunk_corpus): real encodings of a few chunks
// and damaged copies of them. Run: build/tests/fuzz/make_chunk_corpus tests/fuzz/chunk_corpus
#include <fstream>
#include <string>
#include "core/storage/event_chunk.h"
using namespace shardscope::core;
static void put(const std::string& p, const std::string& b) { std::ofstream(p, std::ios::binary) << b; }
int main(int, char** argv) {
  std::string dir = argv[1];
  EventChunk c;
  put(dir + "/empty.bin", c.encode());
  for (int i = 0; i < 5; ++i) {
    EventRecord e;
    e.startNs = 1000 * i;
    e.endNs = 1000 * i + 500 + i;
    e.nameId = 3 + i;
    e.catId = 2;
    e.category = i % 2 ? Category::Communication : Category::Computation;
    e.flags = i;
    if (i % 2) {
      e.collOp = CollectiveOp::AllGather;
      e.bytes = 4096 << i;
      e.processGroupId = 1;
      e.groupSize = 8;
      e.dtypeId = 9;
    }
    if (i > 1) e.step = i;
    if (i == 3) {
      e.correlation = 77;
      e.externalId = 88;
    }
    c.push(e);
  }
  c.sortByTime();
  const std::string five = c.encode();
  put(dir + "/five_mixed.bin", five);
  put(dir + "/five_truncated.bin", five.substr(0, five.size() / 2));
  put(dir + "/five_trailing.bin", five + "xx");
  std::string badfmt = five;
  badfmt[0] = 7;
  put(dir + "/bad_format.bin", badfmt);
  std::string badcount = five;
  badcount[4] = char(0xff);
  badcount[5] = char(0xff);
  put(dir + "/bad_count.bin", badcount);
  EventChunk big;
  for (int i = 0; i < EventChunk::kMaxEvents; ++i) {
    EventRecord e;
    e.startNs = i * 10LL;
    e.endNs = i * 10LL + 5;
    e.nameId = i % 7;
    big.push(e);
  }
  put(dir + "/full_plain.bin", big.encode());
  put(dir + "/header_only.bin", five.substr(0, 12));
}
