#pragma once
// A streaming pull parser for JSON: constant memory whatever the document size, iterative (no
// recursion, so deep nesting cannot overflow the stack), with byte offsets in every error.
// Strings and numbers are returned as views that stay valid until the next call to next().
#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/input_source.h"

namespace shardscope::core {

struct JsonLimits {
  std::size_t maxDepth = 128;
  std::size_t maxStringBytes = 16u << 20;  // one string; a trace's longest names are a few KiB
};

class JsonReader {
 public:
  enum class Token { BeginObject, EndObject, BeginArray, EndArray, Key, String, Number, True, False, Null, End };

  JsonReader(InputSource& in, JsonLimits limits = {});
  // Reads a document already in memory, in place (no copy); `label` names it in errors.
  JsonReader(std::string_view text, std::string label, JsonLimits limits = {});

  Token next();
  // Key/String: the unescaped text. Number: the raw text (validated against the JSON grammar).
  std::string_view text() const { return text_; }
  // Byte offset (in the uncompressed stream) where the current token starts.
  std::uint64_t tokenOffset() const { return tokenOffset_; }
  std::size_t depth() const { return stack_.size(); }
  // Skips the value that starts with `first` (already returned by next()).
  void skipValue(Token first);
  // Appends the compact JSON text of the value starting with `first` to out (strings re-escaped).
  void copyValue(Token first, std::string& out);
  // Raw capture: beginCapture() right after next() returned a token keeps the input from that token's
  // first byte; endCapture() returns the raw text from there to the end of the last token.
  void beginCapture();
  std::string_view endCapture();
  // Right after next() returned BeginObject/BeginArray: skips to the matching close by scanning
  // only strings and brackets (no tokens, no validation of what is inside: whoever parses the
  // captured text later validates it). Used to split an event array between parser threads.
  void skipContainerFast();
  // Right after next() returned BeginObject/BeginArray: the bytes buffered from that bracket on (the
  // container, all of it or a part, and maybe what follows). Valid until the next call.
  std::string_view bufferedFromToken() const {
    const auto at = static_cast<std::size_t>(tokenOffset_ - base_);
    return {data_ + at, end_ - at};
  }
  // Right after next() returned BeginObject/BeginArray: the container is the first n bytes of
  // bufferedFromToken(), already validated by the caller (a fully checked scan): continue after it.
  void skipContainerBytes(std::size_t n) {
    pos_ = static_cast<std::size_t>(tokenOffset_ - base_) + n;
    stack_.pop_back();
    afterValue();
  }
  // Maps offsets of this reader's stream to offsets of the original file in error messages.
  void setOffsetMap(std::function<std::uint64_t(std::uint64_t)> map) { offsetMap_ = std::move(map); }
  [[noreturn]] void fail(const std::string& msg) const;
  const std::string& path() const { return in_ ? in_->path() : label_; }

 private:
  enum class Expect : std::uint8_t { Value, KeyOrEnd, Colon, CommaOrEnd, ValueOrEnd, Done };
  bool fill();  // keeps [pos_, end_) and reads more; false at end of input
  bool skipWs();
  Token lexString(bool isKey);
  Token lexNumber();
  void lexLiteral(std::string_view word);
  void afterValue();

  InputSource* in_;
  std::string label_;
  JsonLimits limits_;
  std::vector<char> buf_;  // owned buffer for streamed input
  char* data_ = nullptr;   // buf_.data(), or the caller's text in the in-place mode
  std::size_t pos_ = 0;
  std::size_t end_ = 0;
  std::uint64_t base_ = 0;  // stream offset of buf_[0]
  bool eof_ = false;
  std::vector<std::uint8_t> stack_;  // '{' or '['
  Expect expect_ = Expect::Value;
  std::string_view text_;
  std::string scratch_;
  std::uint64_t tokenOffset_ = 0;
  bool anyToken_ = false;
  bool capturing_ = false;
  std::size_t captureStart_ = 0;
  std::function<std::uint64_t(std::uint64_t)> offsetMap_;
};

// Appends raw JSON text with the whitespace outside strings removed.
void appendCompactJson(std::string& out, std::string_view raw);

// Index of the first '"' or '\\' in p[i, end), or end. Strings in traces are short: a 16-byte SIMD
// step beats two memchr calls (one per character) that each pay a call and setup.
inline std::size_t findQuoteOrBackslash(const char* p, std::size_t i, std::size_t end) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i bslash = _mm_set1_epi8('\\');
  while (i + 16 <= end) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    const int mask = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)));
    if (mask) return i + static_cast<std::size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
    i += 16;
  }
#endif
  while (i < end && p[i] != '"' && p[i] != '\\') ++i;
  return i;
}

// Appends s to out as a JSON string literal (quotes included). Invalid UTF-8 becomes U+FFFD so the
// output is always valid JSON.
void appendJsonString(std::string& out, std::string_view s);

}  // namespace shardscope::core
