#include "core/util/input_source.h"

#include <zlib.h>
#if SHARDSCOPE_HAVE_ISAL
#include <isa-l/igzip_lib.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>

#include "core/util/error.h"

namespace shardscope::core {
namespace {

class FileHandle {
 public:
  explicit FileHandle(const std::string& path) : f_(std::fopen(path.c_str(), "rb")) {
    if (!f_) throw Error(path + ": cannot open: " + std::strerror(errno));
  }
  ~FileHandle() {
    if (f_) std::fclose(f_);
  }
  FileHandle(const FileHandle&) = delete;
  FileHandle& operator=(const FileHandle&) = delete;
  std::FILE* get() const { return f_; }

 private:
  std::FILE* f_;
};

std::uint64_t sizeOf(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(path + ": is a directory, expected a trace file");
  const auto s = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<std::uint64_t>(s);
}

class PlainSource final : public InputSource {
 public:
  PlainSource(const std::string& path, std::uint64_t size) : file_(path), size_(size) { path_ = path; }
  std::size_t read(char* buf, std::size_t n) override {
    const std::size_t got = std::fread(buf, 1, n, file_.get());
    if (got < n && std::ferror(file_.get())) throw Error(path_ + ": read error: " + std::strerror(errno));
    offset_ += got;
    return got;
  }
  std::uint64_t fileOffset() const override { return offset_; }
  std::uint64_t fileSize() const override { return size_; }

 private:
  FileHandle file_;
  std::uint64_t size_;
  std::uint64_t offset_ = 0;
};

// What both inflaters share: the compressed file read in 256 KiB pieces, the compressed offset that
// messages name, and the rule that the file may end only between members (concatenated members are
// legal gzip; zero padding after the last one is tolerated).
class GzipSourceBase : public InputSource {
 public:
  std::uint64_t fileSize() const override { return size_; }

 protected:
  GzipSourceBase(const std::string& path, std::uint64_t size) : file_(path), size_(size), in_(1 << 18) { path_ = path; }
  // The next piece of compressed input into in(); 0 at the end of the file, which is an error
  // while a member is open.
  std::size_t refill() {
    const std::size_t got = std::fread(in_.data(), 1, in_.size(), file_.get());
    if (got == 0) {
      if (std::ferror(file_.get())) throw Error(path_ + ": read error: " + std::strerror(errno));
      if (memberOpen_)
        throw Error(path_ + ": truncated gzip stream (ends at compressed byte " + std::to_string(offset_) +
                    " in the middle of a member)");
    }
    offset_ += got;
    return got;
  }
  unsigned char* in() { return reinterpret_cast<unsigned char*>(in_.data()); }
  bool atEnd() const { return std::feof(file_.get()) != 0; }
  // Skips zero padding after a member; true when nothing follows (the stream is finished).
  bool endOfMember(unsigned char*& next, std::uint32_t& avail) {
    memberOpen_ = false;
    while (avail > 0 && *next == 0) {
      ++next;
      --avail;
    }
    finished_ = avail == 0 && atEnd();
    return finished_;
  }
  [[noreturn]] void corrupt(std::uint32_t availIn, const std::string& why) const {
    throw Error(path_ + ": corrupt gzip data near compressed byte " + std::to_string(offset_ - availIn) +
                (why.empty() ? std::string() : " (" + why + ")"));
  }

  FileHandle file_;
  std::uint64_t size_;
  std::vector<char> in_;
  std::uint64_t offset_ = 0;  // compressed bytes read so far
  bool memberOpen_ = false;
  bool finished_ = false;
};

class GzipSource final : public GzipSourceBase {
 public:
  GzipSource(const std::string& path, std::uint64_t size) : GzipSourceBase(path, size) {
    std::memset(&zs_, 0, sizeof zs_);
    if (inflateInit2(&zs_, 15 + 32) != Z_OK) throw Error(path + ": cannot initialise zlib");
  }
  ~GzipSource() override { inflateEnd(&zs_); }

  std::size_t read(char* buf, std::size_t n) override {
    if (finished_) return 0;
    zs_.next_out = reinterpret_cast<Bytef*>(buf);
    zs_.avail_out = static_cast<uInt>(n);
    while (zs_.avail_out > 0) {
      if (zs_.avail_in == 0) {
        const std::size_t got = refill();
        if (got == 0) {
          finished_ = true;
          break;
        }
        zs_.next_in = in();
        zs_.avail_in = static_cast<uInt>(got);
      }
      memberOpen_ = true;
      const int rc = inflate(&zs_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        if (endOfMember(zs_.next_in, zs_.avail_in)) break;
        if (inflateReset(&zs_) != Z_OK) throw Error(path_ + ": zlib reset failed");
        continue;
      }
      if (rc == Z_BUF_ERROR && zs_.avail_in == 0) continue;  // needs more input; loop refills
      if (rc != Z_OK) corrupt(zs_.avail_in, zs_.msg ? zs_.msg : "");
    }
    return n - zs_.avail_out;
  }
  std::uint64_t fileOffset() const override { return offset_ - zs_.avail_in; }

 private:
  z_stream zs_;
};

#if SHARDSCOPE_HAVE_ISAL
// The same gzip reading through ISA-L's igzip inflate (2-3x zlib's speed on x86; identical output,
// the CRC and length of every member checked). Chosen when the build has ISA-L, unless
// SHARDSCOPE_INFLATE=zlib asks for zlib (comparisons, and the test that both agree).
class IsalGzipSource final : public GzipSourceBase {
 public:
  IsalGzipSource(const std::string& path, std::uint64_t size)
      : GzipSourceBase(path, size), st_(std::make_unique<inflate_state>()) {
    isal_inflate_init(st_.get());
    st_->crc_flag = ISAL_GZIP;
  }

  std::size_t read(char* buf, std::size_t n) override {
    if (finished_) return 0;
    inflate_state& st = *st_;
    const auto want = static_cast<std::uint32_t>(std::min<std::size_t>(n, 0xffffffffu));
    st.next_out = reinterpret_cast<std::uint8_t*>(buf);
    st.avail_out = want;
    while (st.avail_out > 0) {
      if (st.avail_in == 0) {
        const std::size_t got = refill();
        if (got == 0) {
          finished_ = true;
          break;
        }
        st.next_in = in();
        st.avail_in = static_cast<std::uint32_t>(got);
      }
      memberOpen_ = true;
      const int rc = isal_inflate(&st);
      if (rc < 0) corrupt(st.avail_in, isalError(rc));
      if (st.block_state == ISAL_BLOCK_FINISH) {
        if (endOfMember(st.next_in, st.avail_in)) break;
        // The next member: a fresh state, keeping where input and output stand.
        std::uint8_t* next = st.next_in;
        const std::uint32_t avail = st.avail_in;
        std::uint8_t* out = st.next_out;
        const std::uint32_t room = st.avail_out;
        isal_inflate_reset(&st);
        st.crc_flag = ISAL_GZIP;
        st.next_in = next;
        st.avail_in = avail;
        st.next_out = out;
        st.avail_out = room;
      }
    }
    return want - st.avail_out;
  }
  std::uint64_t fileOffset() const override { return offset_ - st_->avail_in; }

 private:
  static std::string isalError(int rc) {
    switch (rc) {
      case ISAL_INVALID_BLOCK:
        return "invalid deflate block";
      case ISAL_INVALID_SYMBOL:
        return "invalid deflate symbol";
      case ISAL_INVALID_LOOKBACK:
        return "invalid distance too far back";
      case ISAL_INVALID_WRAPPER:
        return "incorrect header check";
      case ISAL_UNSUPPORTED_METHOD:
        return "unknown compression method";
      case ISAL_INCORRECT_CHECKSUM:
        return "incorrect data check";
      default:
        return "inflate error " + std::to_string(rc);
    }
  }
  std::unique_ptr<inflate_state> st_;
};
#endif

class PrefetchSource final : public InputSource {
 public:
  PrefetchSource(std::unique_ptr<InputSource> inner, std::size_t bufferBytes, int buffers)
      : inner_(std::move(inner)), bufferBytes_(bufferBytes), maxBuffers_(static_cast<std::size_t>(buffers)) {
    path_ = inner_->path();
    size_ = inner_->fileSize();
    worker_ = std::thread([this] { run(); });
  }
  ~PrefetchSource() override {
    {
      std::lock_guard lk(m_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }

  std::size_t read(char* buf, std::size_t n) override {
    std::size_t done = 0;
    while (done < n) {
      if (cur_.size == curPos_) {
        std::unique_lock lk(m_);
        cv_.wait(lk, [&] { return !ready_.empty() || finished_; });
        if (ready_.empty()) {
          if (error_) std::rethrow_exception(error_);
          break;  // end of data
        }
        cur_ = std::move(ready_.front());
        ready_.pop_front();
        curPos_ = 0;
        cv_.notify_all();
      }
      const std::size_t k = std::min(n - done, cur_.size - curPos_);
      std::memcpy(buf + done, cur_.data.get() + curPos_, k);
      curPos_ += k;
      done += k;
    }
    return done;
  }
  std::uint64_t fileOffset() const override { return cur_.fileOffset; }
  std::uint64_t fileSize() const override { return size_; }

 private:
  struct Block {
    std::unique_ptr<char[]> data;
    std::size_t size = 0;
    std::uint64_t fileOffset = 0;
  };
  void run() {
    try {
      for (;;) {
        Block b;
        b.data.reset(new char[bufferBytes_]);  // not zero-filled: it is overwritten right away
        b.size = inner_->read(b.data.get(), bufferBytes_);
        const std::size_t got = b.size;
        b.fileOffset = inner_->fileOffset();
        std::unique_lock lk(m_);
        if (got == 0) break;
        cv_.wait(lk, [&] { return ready_.size() < maxBuffers_ || stop_; });
        if (stop_) break;
        ready_.push_back(std::move(b));
        cv_.notify_all();
      }
    } catch (...) {
      std::lock_guard lk(m_);
      error_ = std::current_exception();
    }
    std::lock_guard lk(m_);
    finished_ = true;
    cv_.notify_all();
  }

  std::unique_ptr<InputSource> inner_;
  std::size_t bufferBytes_;
  std::size_t maxBuffers_;
  std::uint64_t size_ = 0;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<Block> ready_;
  Block cur_;
  std::size_t curPos_ = 0;
  bool stop_ = false;
  bool finished_ = false;
  std::exception_ptr error_;
  std::thread worker_;
};

}  // namespace

std::unique_ptr<InputSource> prefetch(std::unique_ptr<InputSource> inner, std::size_t bufferBytes, int buffers) {
  return std::make_unique<PrefetchSource>(std::move(inner), bufferBytes, buffers);
}

std::unique_ptr<InputSource> openInput(const std::string& path) {
  const std::uint64_t size = sizeOf(path);
  unsigned char magic[2] = {0, 0};
  {
    FileHandle f(path);
    const std::size_t got = std::fread(magic, 1, 2, f.get());
    if (got == 0 && size == 0) throw Error(path + ": file is empty");
  }
  if (magic[0] == 0x1f && magic[1] == 0x8b) {
#if SHARDSCOPE_HAVE_ISAL
    const char* inflater = std::getenv("SHARDSCOPE_INFLATE");
    if (!inflater || std::string_view(inflater) != "zlib") return std::make_unique<IsalGzipSource>(path, size);
#endif
    return std::make_unique<GzipSource>(path, size);
  }
  return std::make_unique<PlainSource>(path, size);
}

std::string readAll(InputSource& in, std::size_t maxBytes) {
  std::string out;
  char buf[65536];
  while (std::size_t n = in.read(buf, sizeof buf)) {
    if (out.size() + n > maxBytes) throw Error(in.path() + ": file is larger than " + std::to_string(maxBytes) + " bytes");
    out.append(buf, n);
  }
  return out;
}

}  // namespace shardscope::core
