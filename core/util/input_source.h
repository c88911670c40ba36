#pragma once
// Chunked byte sources for the streaming importers: a plain file or a gzip stream (any number of
// concatenated members). Memory use is a fixed buffer, whatever the file size.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace shardscope::core {

class InputSource {
 public:
  virtual ~InputSource() = default;
  // Reads up to n bytes; returns 0 at end of data. Throws core::Error on I/O or format errors.
  virtual std::size_t read(char* buf, std::size_t n) = 0;
  // Bytes consumed from the file on disk (compressed bytes for gzip), for progress.
  virtual std::uint64_t fileOffset() const = 0;
  virtual std::uint64_t fileSize() const = 0;
  const std::string& path() const { return path_; }

 protected:
  std::string path_;
};

// Opens `path`, detecting gzip by its magic bytes (not by extension).
std::unique_ptr<InputSource> openInput(const std::string& path);

// Reads (and inflates) `inner` ahead on its own thread into a few fixed buffers, so decompression
// and the kernel copy overlap with parsing. Errors of the inner source surface from read().
std::unique_ptr<InputSource> prefetch(std::unique_ptr<InputSource> inner, std::size_t bufferBytes = 1u << 20, int buffers = 4);

// Reads a whole source into memory, refusing more than maxBytes. For small files (configs) only.
std::string readAll(InputSource& in, std::size_t maxBytes);

}  // namespace shardscope::core
