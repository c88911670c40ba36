#include "core/import/kineto_pipeline.h"

#include <pthread.h>

#include <algorithm>
#include <cstdlib>

#include "core/util/error.h"
#include "core/util/input_source.h"
#include "core/util/json.h"

namespace shardscope::core::kineto {
namespace {

using Token = JsonReader::Token;

int workerCount() {
  int workers = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 4);
  if (const char* env = std::getenv("SHARDSCOPE_IMPORT_THREADS")) workers = std::clamp(std::atoi(env), 1, 16);
  return workers;
}

// Reads one file on the producer thread: the top-level keys itself, the events only as raw text cut
// into segments (skipContainerFast: no tokens), which the parser threads parse.
class FileSplitter {
 public:
  FileSplitter(const ImportOptions& opt, SegmentQueue& work, BatchQueue& out, std::uint64_t& seq)
      : opt_(opt), work_(work), out_(out), seq_(seq) {}

  void splitFile(int fileIndex, const std::string& path) {
    file_ = fileIndex;
    path_ = path;
    header_ = FileHeader{};
    stats_ = ImportFileStats{};
    stats_.path = path;
    events_ = 0;
    auto in = prefetch(openInput(path));
    stats_.bytes = in->fileSize();
    in_ = in.get();
    JsonReader r(*in, opt_.limits);
    Token t = r.next();
    if (t == Token::BeginArray) {
      // The Chrome trace format also allows a bare array of events.
      splitEvents(r);
    } else if (t == Token::BeginObject) {
      bool sawEvents = false;
      for (;;) {
        t = r.next();
        if (t == Token::EndObject) break;
        const std::string key(r.text());
        t = r.next();
        if (key == "traceEvents") {
          if (t != Token::BeginArray) r.fail("'traceEvents' must be an array");
          sawEvents = true;
          splitEvents(r);
        } else if (key == "baseTimeNanoseconds") {
          if (t != Token::Number) r.fail("'baseTimeNanoseconds' must be a number");
          auto v = parseInt(r.text());
          if (!v || *v < 0 || *v > kMaxAbsNs) r.fail("'baseTimeNanoseconds' is out of range");
          header_.baseTimeNs = *v;
          if (sawEvents) header_.baseAfterEvents = true;
        } else if (key == "distributedInfo") {
          if (t != Token::BeginObject) {
            r.skipValue(t);
            warnings_.push_back(fileLabel(path_) + ": 'distributedInfo' is not an object; ignored");
            continue;
          }
          // pg_config lists every rank of every group: a 100k-GPU job is millions of nodes.
          KinetoParser::parseDistributedInfo(readJsonValue(r, t, 1u << 22), header_, path_);
        } else if (key == "deviceProperties") {
          JsonValue v = readJsonValue(r, t, 1u << 16);
          header_.devicePropertiesJson = v.dump();
        } else if (t == Token::String || t == Token::Number || t == Token::True || t == Token::False) {
          JsonValue v = readJsonValue(r, t);
          header_.metadata.set(key, std::move(v));
        } else {
          r.skipValue(t);
        }
      }
      if (r.next() != Token::End) r.fail("unexpected data after the JSON document");
      if (!sawEvents) r.fail("no 'traceEvents' array: this JSON is not a Chrome/Kineto trace");
    } else {
      r.fail("expected a JSON object with 'traceEvents' (or an array of events); this is not a trace");
    }
    stats_.jsonBytes = r.tokenOffset();
    stats_.traceEvents = events_;
    auto done = std::make_unique<Batch>();
    done->file = file_;
    done->seq = seq_++;
    done->fileDone = true;
    done->fileOffset = in_->fileOffset();
    done->header = std::move(header_);
    done->stats = stats_;
    done->warnings = std::move(warnings_);
    warnings_.clear();
    if (!out_.push(std::move(done))) throw Cancelled();
    in_ = nullptr;
  }

 private:
  static constexpr std::size_t kSegmentEvents = 4096;
  static constexpr std::size_t kSegmentBytes = 2u << 20;

  void splitEvents(JsonReader& r) {
    startSegment();
    for (;;) {
      const Token t = r.next();
      if (t == Token::EndArray) break;
      if (t != Token::BeginObject)
        throw Error(path_ + ": event #" + std::to_string(events_) + " (byte offset " + std::to_string(r.tokenOffset()) +
                    "): is not a JSON object");
      const std::uint64_t at = r.tokenOffset();
      r.beginCapture();
      r.skipContainerFast();
      const std::string_view raw = r.endCapture();
      seg_->localStart.push_back(seg_->text.size());
      seg_->fileStart.push_back(at);
      seg_->text.append(raw);
      seg_->text.push_back(',');
      ++events_;
      if (seg_->localStart.size() >= kSegmentEvents || seg_->text.size() >= kSegmentBytes) {
        dispatch();
        startSegment();
      }
    }
    if (!seg_->localStart.empty()) dispatch();
    seg_.reset();
  }

  void startSegment() {
    seg_ = std::make_unique<Segment>();
    seg_->file = file_;
    seg_->firstEvent = events_;
    seg_->baseTimeNs = header_.baseTimeNs;
    seg_->text.reserve(kSegmentBytes + 65536);
    seg_->text.push_back('[');
  }

  void dispatch() {
    seg_->text.back() = ']';  // the trailing ',' closes the array
    seg_->seq = seq_++;
    seg_->fileOffset = in_->fileOffset();
    if (opt_.cancel && opt_.cancel->isCancelled()) throw Cancelled();
    if (!work_.push(std::move(seg_))) throw Cancelled();
  }

  const ImportOptions& opt_;
  SegmentQueue& work_;
  BatchQueue& out_;
  std::uint64_t& seq_;
  int file_ = 0;
  std::string path_;
  FileHeader header_;
  ImportFileStats stats_;
  std::vector<std::string> warnings_;
  std::uint64_t events_ = 0;
  std::unique_ptr<Segment> seg_;
  InputSource* in_ = nullptr;
};

}  // namespace

// One thread reads and cuts the files into segments, `workers` threads parse segments, the caller
// writes. Batches carry a sequence number and are handed out in file order.
KinetoPipeline::KinetoPipeline(const ImportOptions& opt, const std::vector<std::string>& files)
    : opt_(opt),
      workers_(workerCount()),
      work_(static_cast<std::size_t>(2 * workers_)),
      queue_(static_cast<std::size_t>(2 * workers_ + 2)) {
  for (int w = 0; w < workers_; ++w) parsers_.push_back(std::make_unique<KinetoParser>(opt, w, files));
  producer_ = std::thread([this, &files] {
    pthread_setname_np(pthread_self(), "ss-read");  // visible in perf/top
    FileSplitter splitter(opt_, work_, queue_, seqCounter_);
    int i = 0;
    try {
      for (; i < static_cast<int>(files.size()); ++i) splitter.splitFile(i, files[static_cast<std::size_t>(i)]);
      auto end = std::make_unique<Batch>();
      end->last = true;
      end->seq = seqCounter_++;
      work_.close();
      queue_.push(std::move(end));
    } catch (...) {
      auto err = std::make_unique<Batch>();
      err->file = i;
      err->error = std::current_exception();
      err->seq = seqCounter_++;
      work_.close();
      queue_.push(std::move(err));
    }
  });
  for (int w = 0; w < workers_; ++w) {
    parserThreads_.emplace_back([this, w] {
      pthread_setname_np(pthread_self(), "ss-parse");
      for (;;) {
        auto seg = work_.pop();
        if (!seg) return;
        std::unique_ptr<Batch> b;
        try {
          b = parsers_[static_cast<std::size_t>(w)]->parseSegment(*seg);
        } catch (...) {
          b = std::make_unique<Batch>();
          b->file = seg->file;
          b->seq = seg->seq;
          b->error = std::current_exception();
        }
        if (!queue_.push(std::move(b))) return;
      }
    });
  }
}

KinetoPipeline::~KinetoPipeline() {
  work_.stop();
  queue_.stop();
  if (producer_.joinable()) producer_.join();
  for (auto& t : parserThreads_)
    if (t.joinable()) t.join();
}

std::unique_ptr<Batch> KinetoPipeline::next() {
  for (;;) {
    std::unique_ptr<Batch> b;
    if (auto it = pending_.find(nextSeq_); it != pending_.end()) {
      b = std::move(it->second);
      pending_.erase(it);
    } else {
      b = queue_.pop();
      if (!b) throw Cancelled();
      if (b->error) std::rethrow_exception(b->error);  // the first error wins, whatever its order
      if (b->seq != nextSeq_) {
        pending_.emplace(b->seq, std::move(b));
        continue;
      }
    }
    ++nextSeq_;
    if (b->last) return nullptr;
    if (opt_.cancel && opt_.cancel->isCancelled()) throw Cancelled();
    return b;
  }
}

}  // namespace shardscope::core::kineto
