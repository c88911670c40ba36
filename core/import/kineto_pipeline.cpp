#include "core/import/kineto_pipeline.h"

#include <pthread.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

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

// Reads one file: the top-level keys itself, the events only as raw text cut by skipContainerFast
// (no tokens). Split mode (a parser is not given): the events are copied into segments that the
// parser threads parse. Per-file mode: the events are parsed right here, straight from the inflate
// buffer (no copy), into batches for `out`.
class FileSplitter {
 public:
  FileSplitter(const ImportOptions& opt, SegmentQueue* work, BatchQueue* out, std::uint64_t& seq, KinetoParser* parser = nullptr)
      : opt_(opt), work_(work), out_(out), seq_(seq), parser_(parser) {}

  void setOut(BatchQueue* out) { out_ = out; }

  void splitFile(int fileIndex, const std::string& path) {
    file_ = fileIndex;
    path_ = path;
    header_ = FileHeader{};
    stats_ = ImportFileStats{};
    stats_.path = path;
    events_ = 0;
    // Split mode reads ahead on a prefetch thread; in per-file mode every core already has a file
    // of its own, and inflating straight into the reader's buffer saves a copy.
    auto in = parser_ ? openInput(path) : prefetch(openInput(path));
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
    if (!out_->push(std::move(done))) throw Cancelled();
    in_ = nullptr;
  }

 private:
  static constexpr std::size_t kSegmentEvents = 4096;
  static constexpr std::size_t kSegmentBytes = 2u << 20;

  void splitEvents(JsonReader& r) {
    if (parser_) {
      parseEvents(r);
      return;
    }
    startSegment();
    for (;;) {
      const std::string_view raw = nextEvent(r);
      if (raw.empty()) break;
      seg_->localStart.push_back(seg_->text.size());
      seg_->fileStart.push_back(at_);
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

  // The raw text of the next event (empty at the end of the array); at_ is its byte offset.
  std::string_view nextEvent(JsonReader& r) {
    const Token t = r.next();
    if (t == Token::EndArray) return {};
    return cutEvent(r, t);
  }

  // The raw text of the event whose first token next() just returned.
  std::string_view cutEvent(JsonReader& r, Token t) {
    if (t != Token::BeginObject)
      throw Error(path_ + ": event #" + std::to_string(events_) + " (byte offset " + std::to_string(r.tokenOffset()) +
                  "): is not a JSON object");
    at_ = r.tokenOffset();
    r.beginCapture();
    r.skipContainerFast();
    return r.endCapture();  // valid until the next r.next()
  }

  // Per-file mode: each event is parsed while its text is still in the reader's buffer; batches of
  // the same size as the segments go to the writer.
  void parseEvents(JsonReader& r) {
    std::size_t inBatch = 0, bytes = 0;
    // The direct scanner finds an event's end itself (one pass over its text instead of the bracket
    // scan and then the scanner) unless the event is unusual or straddles the end of the buffer;
    // those take the usual way. Its nesting stays far below any depth limit a caller would set.
    const bool prefix = opt_.limits.maxDepth >= 40;
    for (;;) {
      const Token t = r.next();
      if (t == Token::EndArray) break;
      if (inBatch == 0) parser_->beginBatch(file_, seq_++, header_.baseTimeNs);
      std::size_t n = 0;
      if (t == Token::BeginObject && prefix) {
        at_ = r.tokenOffset();
        n = parser_->addEventPrefix(r.bufferedFromToken(), at_, events_);
        if (n) r.skipContainerBytes(n);
      }
      if (!n) {
        const std::string_view raw = cutEvent(r, t);
        parser_->addEvent(raw, at_, events_);
        n = raw.size();
      }
      ++events_;
      ++inBatch;
      bytes += n + 1;
      if (inBatch >= kSegmentEvents || bytes >= kSegmentBytes) {
        emit();
        inBatch = bytes = 0;
      }
    }
    if (inBatch) emit();
  }

  void emit() {
    if (opt_.cancel && opt_.cancel->isCancelled()) throw Cancelled();
    if (!out_->push(parser_->takeBatch(in_->fileOffset()))) throw Cancelled();
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
    if (!work_->push(std::move(seg_))) throw Cancelled();
  }

  const ImportOptions& opt_;
  SegmentQueue* work_;
  BatchQueue* out_;
  std::uint64_t& seq_;
  KinetoParser* parser_;
  std::uint64_t at_ = 0;
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

// Split mode: one thread reads and cuts the files into segments, `workers` threads parse segments,
// the caller writes; batches carry a sequence number and are handed out in file order. Per-file
// mode: `workers` threads each take the next file and read, cut and parse it alone into that file's
// queue; the caller writes the files' queues one after the other.
KinetoPipeline::KinetoPipeline(const ImportOptions& opt, const std::vector<std::string>& files)
    : opt_(opt),
      workers_(workerCount()),
      perFile_(perFileMode(files.size(), workers_)),
      work_(static_cast<std::size_t>(2 * workers_)),
      queue_(static_cast<std::size_t>(2 * workers_ + 2)) {
  for (int w = 0; w < workers_; ++w) {
    parsers_.push_back(std::make_unique<KinetoParser>(opt, w, files));
    parsers_.back()->setPool(&pool_);
  }
  if (perFile_) {
    startPerFile(files);
    return;
  }
  producer_ = std::thread([this, &files] {
    pthread_setname_np(pthread_self(), "ss-read");  // visible in perf/top
    FileSplitter splitter(opt_, &work_, &queue_, seqCounter_);
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

bool KinetoPipeline::perFileMode(std::size_t files, int workers) {
  if (const char* env = std::getenv("SHARDSCOPE_IMPORT_PIPELINE")) {
    if (std::string_view(env) == "split") return false;
    if (std::string_view(env) == "files") return true;
  }
  // One file (or one core): cutting it into segments is what spreads its parsing over the cores.
  return files >= 2 && workers >= 2;
}

void KinetoPipeline::startPerFile(const std::vector<std::string>& files) {
  // The writer is the one stage that cannot be shared: the workers must be able to read whole files
  // ahead of it (a few batches would leave one worker at a time working, the one on the writer's
  // file). Memory stays bounded: a worker starts file i only while i <= the writer's file +
  // workers, and waits on the file's queue past kFileQueueBatches batches (about a 250k-event
  // trace's worth).
  for (std::size_t i = 0; i < files.size(); ++i) fileQueues_.push_back(std::make_unique<BatchQueue>(kFileQueueBatches));
  for (int w = 0; w < workers_; ++w) {
    parserThreads_.emplace_back([this, w, &files] {
      pthread_setname_np(pthread_self(), "ss-file");
      std::uint64_t seq = 0;  // per worker: its batches' order within each file is all that matters
      FileSplitter splitter(opt_, nullptr, nullptr, seq, parsers_[static_cast<std::size_t>(w)].get());
      for (;;) {
        // Files are taken in order, so the file the writer waits for is always being read.
        const std::size_t i = nextFile_.fetch_add(1);
        if (i >= files.size()) return;
        {
          std::unique_lock lk(windowMutex_);
          windowCv_.wait(lk, [&] { return i <= writing_ + static_cast<std::size_t>(workers_) || windowStop_; });
          if (windowStop_) return;
        }
        splitter.setOut(fileQueues_[i].get());
        try {
          splitter.splitFile(static_cast<int>(i), files[i]);
        } catch (...) {
          {
            std::lock_guard lk(errorMutex_);
            if (!error_) error_ = std::current_exception();  // the first error wins, whatever its file
          }
          stopPerFile();
          return;
        }
      }
    });
  }
}

void KinetoPipeline::stopPerFile() {
  for (auto& q : fileQueues_) q->stop();
  std::lock_guard lk(windowMutex_);
  windowStop_ = true;
  windowCv_.notify_all();
}

KinetoPipeline::~KinetoPipeline() {
  work_.stop();
  queue_.stop();
  stopPerFile();
  if (producer_.joinable()) producer_.join();
  for (auto& t : parserThreads_)
    if (t.joinable()) t.join();
}

std::unique_ptr<Batch> KinetoPipeline::next() {
  if (perFile_) return nextPerFile();
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

std::unique_ptr<Batch> KinetoPipeline::nextPerFile() {
  if (currentFile_ >= fileQueues_.size()) return nullptr;
  auto b = fileQueues_[currentFile_]->pop();
  if (!b) {
    std::lock_guard lk(errorMutex_);
    if (error_) std::rethrow_exception(error_);
    throw Cancelled();
  }
  if (b->fileDone) {
    ++currentFile_;
    std::lock_guard lk(windowMutex_);
    writing_ = currentFile_;
    windowCv_.notify_all();
  }
  if (opt_.cancel && opt_.cancel->isCancelled()) throw Cancelled();
  return b;
}

}  // namespace shardscope::core::kineto
