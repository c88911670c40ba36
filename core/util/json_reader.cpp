#include "core/util/json_reader.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/util/error.h"

namespace shardscope::core {
namespace {

constexpr std::size_t kChunk = 1 << 20;

inline bool isWs(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

inline bool isDigit(char c) { return c >= '0' && c <= '9'; }

void appendUtf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid.
std::size_t utf8SeqLen(const unsigned char* s, std::size_t avail) {
  const unsigned char c = s[0];
  std::size_t len;
  std::uint32_t min;
  std::uint32_t cp;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) {
    len = 2, min = 0x80, cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3, min = 0x800, cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4, min = 0x10000, cp = c & 0x07;
  } else {
    return 0;
  }
  if (avail < len) return 0;
  for (std::size_t i = 1; i < len; ++i) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

}  // namespace

void appendJsonString(std::string& out, std::string_view s) {
  static const char* hex = "0123456789abcdef";
  out.push_back('"');
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  std::size_t run = 0;  // start of the pending plain run
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
      ++i;
      continue;
    }
    if (c >= 0x80) {
      const std::size_t len = utf8SeqLen(p + i, n - i);
      if (len > 0) {
        i += len;
        continue;
      }
    }
    out.append(s.data() + run, i - run);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out.push_back(hex[c >> 4]);
          out.push_back(hex[c & 15]);
        } else {
          out += "\\ufffd";  // invalid UTF-8 byte
        }
    }
    ++i;
    run = i;
  }
  out.append(s.data() + run, n - run);
  out.push_back('"');
}

JsonReader::JsonReader(InputSource& in, JsonLimits limits) : in_(&in), limits_(limits), buf_(kChunk) { data_ = buf_.data(); }

JsonReader::JsonReader(std::string_view text, std::string label, JsonLimits limits)
    : in_(nullptr), label_(std::move(label)), limits_(limits) {
  // Parse in place: the caller keeps `text` alive; nothing is copied or allocated.
  data_ = const_cast<char*>(text.data());
  end_ = text.size();
  eof_ = true;
}

void JsonReader::fail(const std::string& msg) const {
  const std::uint64_t at = offsetMap_ ? offsetMap_(tokenOffset_) : tokenOffset_;
  throw Error(path() + ": byte offset " + std::to_string(at) + ": " + msg);
}

bool JsonReader::fill() {
  if (eof_) return false;  // also the in-place mode: all the data is there from the start
  const std::size_t keep = capturing_ ? std::min(captureStart_, pos_) : pos_;
  if (keep > 0) {
    std::memmove(buf_.data(), buf_.data() + keep, end_ - keep);
    base_ += keep;
    end_ -= keep;
    pos_ -= keep;
    if (capturing_) captureStart_ -= keep;
  }
  if (end_ == buf_.size()) {
    // One token is larger than the buffer: grow, within the string limit.
    if (buf_.size() >= limits_.maxStringBytes + 64)
      fail("a single value is longer than " + std::to_string(limits_.maxStringBytes >> 20) +
           " MiB; refusing it (is this really a trace?)");
    buf_.resize(std::min(buf_.size() * 2, limits_.maxStringBytes + 64));
    data_ = buf_.data();
  }
  const std::size_t got = in_->read(buf_.data() + end_, buf_.size() - end_);
  if (got == 0) {
    eof_ = true;
    return false;
  }
  end_ += got;
  return true;
}

bool JsonReader::skipWs() {
  for (;;) {
    while (pos_ < end_ && isWs(data_[pos_])) ++pos_;
    if (pos_ < end_) return true;
    if (!fill()) return false;
  }
}

JsonReader::Token JsonReader::next() {
  for (;;) {
    // Inline fast path: traces put at most a space or a newline and indentation between tokens.
    while (pos_ < end_ && isWs(data_[pos_])) ++pos_;
    if (pos_ >= end_ && !skipWs()) {
      tokenOffset_ = base_ + pos_;
      if (expect_ == Expect::Done) return Token::End;
      if (!anyToken_) fail("empty document (no JSON value)");
      fail("unexpected end of input (truncated JSON, " + std::to_string(stack_.size()) + " containers still open)");
    }
    const char c = data_[pos_];
    tokenOffset_ = base_ + pos_;
    anyToken_ = true;
    switch (expect_) {
      case Expect::Done:
        fail("unexpected data after the end of the JSON document");
      case Expect::Colon:
        if (c != ':') fail("expected ':' after an object key");
        ++pos_;
        expect_ = Expect::Value;
        continue;
      case Expect::CommaOrEnd: {
        const char top = static_cast<char>(stack_.back());
        if (c == ',') {
          ++pos_;
          expect_ = top == '{' ? Expect::KeyOrEnd : Expect::Value;
          if (top == '{') {
            // After a comma only a key may follow (no trailing commas).
            while (pos_ < end_ && isWs(data_[pos_])) ++pos_;
            if (pos_ >= end_ && !skipWs()) fail("unexpected end of input after ','");
            tokenOffset_ = base_ + pos_;
            if (data_[pos_] != '"') fail("expected an object key after ','");
          } else {
            while (pos_ < end_ && isWs(data_[pos_])) ++pos_;
            if (pos_ >= end_ && !skipWs()) fail("unexpected end of input after ','");
            tokenOffset_ = base_ + pos_;
            if (data_[pos_] == ']') fail("trailing ',' before ']'");
          }
          continue;
        }
        if ((c == '}' && top == '{') || (c == ']' && top == '[')) {
          ++pos_;
          stack_.pop_back();
          afterValue();
          return top == '{' ? Token::EndObject : Token::EndArray;
        }
        fail(std::string("expected ',' or '") + (top == '{' ? '}' : ']') + "'");
      }
      case Expect::KeyOrEnd:
        if (c == '}') {
          ++pos_;
          stack_.pop_back();
          afterValue();
          return Token::EndObject;
        }
        if (c != '"') fail("expected an object key (a string)");
        lexString(true);
        expect_ = Expect::Colon;
        // Usual layout `"key": value`: consume the colon now instead of in another next() round.
        if (pos_ + 1 < end_ && data_[pos_] == ':') {
          ++pos_;
          expect_ = Expect::Value;
        } else if (pos_ + 2 < end_ && data_[pos_] == ' ' && data_[pos_ + 1] == ':') {
          pos_ += 2;
          expect_ = Expect::Value;
        }
        return Token::Key;
      case Expect::ValueOrEnd:
        if (c == ']') {
          ++pos_;
          stack_.pop_back();
          afterValue();
          return Token::EndArray;
        }
        [[fallthrough]];
      case Expect::Value:
        switch (c) {
          case '{':
          case '[':
            if (stack_.size() >= limits_.maxDepth)
              fail("JSON nested deeper than " + std::to_string(limits_.maxDepth) + " levels");
            stack_.push_back(static_cast<std::uint8_t>(c));
            ++pos_;
            expect_ = c == '{' ? Expect::KeyOrEnd : Expect::ValueOrEnd;
            return c == '{' ? Token::BeginObject : Token::BeginArray;
          case '"':
            lexString(false);
            afterValue();
            return Token::String;
          case 't':
            lexLiteral("true");
            afterValue();
            return Token::True;
          case 'f':
            lexLiteral("false");
            afterValue();
            return Token::False;
          case 'n':
            lexLiteral("null");
            afterValue();
            return Token::Null;
          default:
            if (c == '-' || isDigit(c)) {
              lexNumber();
              afterValue();
              return Token::Number;
            }
            if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f)
              fail("unexpected byte 0x" + std::string(1, "0123456789abcdef"[(static_cast<unsigned char>(c) >> 4)]) +
                   std::string(1, "0123456789abcdef"[static_cast<unsigned char>(c) & 15]) + " (not JSON text)");
            fail(std::string("unexpected character '") + c + "'");
        }
    }
  }
}

void JsonReader::afterValue() { expect_ = stack_.empty() ? Expect::Done : Expect::CommaOrEnd; }

JsonReader::Token JsonReader::lexString(bool isKey) {
  // pos_ is at the opening quote. Fast path: no escapes, the whole string inside the buffer.
  std::size_t i = pos_ + 1;
  for (;;) {
    const std::size_t stop = findQuoteOrBackslash(data_, i, end_);
    if (stop < end_ && data_[stop] == '\\') {
      i = stop;
      break;  // slow path from the backslash
    }
    if (stop < end_) {
      text_ = std::string_view(data_ + pos_ + 1, stop - pos_ - 1);
      pos_ = stop + 1;
      return isKey ? Token::Key : Token::String;
    }
    const std::size_t off = end_ - pos_;
    if (off > limits_.maxStringBytes) fail("string longer than " + std::to_string(limits_.maxStringBytes >> 20) + " MiB");
    if (!fill()) fail("unterminated string (end of input inside a string)");
    i = pos_ + off;
  }
  // Slow path: unescape into scratch_.
  scratch_.assign(data_ + pos_ + 1, i - pos_ - 1);
  auto need = [&](std::size_t n) {
    while (end_ - i < n) {
      const std::size_t off = i - pos_;
      if (!fill()) fail("unterminated string (end of input inside a string)");
      i = pos_ + off;
    }
  };
  // True when the next bytes at i are `lit`, reading more input if needed (never fails at the end).
  auto peekIs = [&](std::size_t at, std::string_view lit) {
    while (end_ - at < lit.size()) {
      const std::size_t off = at - pos_, offI = i - pos_;
      const bool more = fill();
      at = pos_ + off;
      i = pos_ + offI;
      if (!more) return false;
    }
    return std::string_view(data_ + at, lit.size()) == lit;
  };
  auto hex4 = [&]() -> std::uint32_t {
    need(4);
    std::uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = data_[i++];
      v <<= 4;
      if (h >= '0' && h <= '9')
        v |= static_cast<std::uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f')
        v |= static_cast<std::uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        v |= static_cast<std::uint32_t>(h - 'A' + 10);
      else
        fail("invalid \\u escape in string");
    }
    return v;
  };
  for (;;) {
    need(1);
    const char c = data_[i];
    if (c == '"') {
      pos_ = i + 1;
      text_ = scratch_;
      return isKey ? Token::Key : Token::String;
    }
    if (scratch_.size() > limits_.maxStringBytes)
      fail("string longer than " + std::to_string(limits_.maxStringBytes >> 20) + " MiB");
    if (c != '\\') {
      // Copy the plain run up to the next quote/backslash in one go.
      std::size_t j = i;
      while (j < end_ && data_[j] != '"' && data_[j] != '\\') ++j;
      scratch_.append(data_ + i, j - i);
      i = j;
      // Keep the consumed part out of the buffer so long strings do not force it to grow.
      pos_ = i - 1;  // any index <= i works; fill() keeps [pos_, end_)
      continue;
    }
    need(2);
    const char e = data_[i + 1];
    i += 2;
    switch (e) {
      case '"':
        scratch_.push_back('"');
        break;
      case '\\':
        scratch_.push_back('\\');
        break;
      case '/':
        scratch_.push_back('/');
        break;
      case 'b':
        scratch_.push_back('\b');
        break;
      case 'f':
        scratch_.push_back('\f');
        break;
      case 'n':
        scratch_.push_back('\n');
        break;
      case 'r':
        scratch_.push_back('\r');
        break;
      case 't':
        scratch_.push_back('\t');
        break;
      case 'u': {
        std::uint32_t cp = hex4();
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          // A high surrogate pairs only with an immediately following \uDC00-\uDFFF; anything else
          // leaves it unpaired (U+FFFD) and is decoded on its own by the next loop iteration.
          bool paired = false;
          if (peekIs(i, "\\u")) {
            std::size_t save = i;
            i += 2;
            const std::uint32_t lo = hex4();
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
              paired = true;
            } else {
              i = save;
            }
          }
          if (!paired) cp = 0xFFFD;
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
          cp = 0xFFFD;
        }
        appendUtf8(scratch_, cp);
        break;
      }
      default:
        fail(std::string("invalid escape '\\") + e + "' in string");
    }
    pos_ = i - 1 > pos_ ? i - 1 : pos_;
  }
}

JsonReader::Token JsonReader::lexNumber() {
  std::size_t i = pos_;
  // Fast path: an integer or a plain decimal inside the buffer (nearly every number in a trace).
  {
    std::size_t j = pos_ + (data_[pos_] == '-' ? 1 : 0);
    const std::size_t first = j;
    while (j < end_ && isDigit(data_[j])) ++j;
    if (j < end_ && j > first && !(data_[first] == '0' && j - first > 1)) {
      if (data_[j] == '.') {
        const std::size_t frac = ++j;
        while (j < end_ && isDigit(data_[j])) ++j;
        if (j == frac) j = end_;  // "1." is malformed: let the slow path say so
      }
      if (j < end_) {
        const char c = data_[j];
        if (c != '.' && c != 'e' && c != 'E' && c != '-' && c != '+') {
          text_ = std::string_view(data_ + pos_, j - pos_);
          pos_ = j;
          return Token::Number;
        }
      }
    }
  }
  for (;;) {
    while (i < end_) {
      const char c = data_[i];
      if (isDigit(c) || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E')
        ++i;
      else
        break;
    }
    if (i < end_ || eof_) break;
    const std::size_t off = i - pos_;
    if (off > 4096) fail("number literal longer than 4096 characters");
    const bool more = fill();
    i = pos_ + off;  // fill() may have moved the buffer, even when it read nothing
    if (!more) break;
  }
  const std::string_view s(data_ + pos_, i - pos_);
  // Validate: -?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?
  std::size_t k = 0;
  auto bad = [&]() { fail("malformed number '" + std::string(s.substr(0, 40)) + "'"); };
  if (k < s.size() && s[k] == '-') ++k;
  if (k >= s.size() || !isDigit(s[k])) bad();
  if (s[k] == '0') {
    ++k;
  } else {
    while (k < s.size() && isDigit(s[k])) ++k;
  }
  if (k < s.size() && s[k] == '.') {
    ++k;
    if (k >= s.size() || !isDigit(s[k])) bad();
    while (k < s.size() && isDigit(s[k])) ++k;
  }
  if (k < s.size() && (s[k] == 'e' || s[k] == 'E')) {
    ++k;
    if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
    if (k >= s.size() || !isDigit(s[k])) bad();
    while (k < s.size() && isDigit(s[k])) ++k;
  }
  if (k != s.size()) bad();
  text_ = s;
  pos_ = i;
  return Token::Number;
}

void JsonReader::lexLiteral(std::string_view word) {
  while (end_ - pos_ < word.size()) {
    if (!fill()) fail("unexpected end of input in a literal");
  }
  if (std::string_view(data_ + pos_, word.size()) != word) fail("invalid literal (expected '" + std::string(word) + "')");
  pos_ += word.size();
  text_ = word;
}

void JsonReader::skipContainerFast() {
  // pos_ stays just after the opening bracket while scanning (capture keeps the bytes anyway), so a
  // malformed container can be re-read by the full tokenizer below.
  std::string open(1, data_[pos_ - 1]);  // brackets still open, to catch mismatches
  bool inString = false;
  std::size_t skip = 0;  // index just after an escaped character
  std::size_t i = pos_;
  // Returns true when the container is closed (or handed to the tokenizer).
  auto visit = [&](std::size_t j) -> bool {
    if (j < skip) return false;
    const char c = data_[j];
    if (inString) {
      if (c == '\\')
        skip = j + 2;
      else if (c == '"')
        inString = false;
      return false;
    }
    switch (c) {
      case '"':
        inString = true;
        return false;
      case '{':
      case '[':
        if (stack_.size() + open.size() >= limits_.maxDepth) {
          tokenOffset_ = base_ + j;
          fail("JSON nested deeper than " + std::to_string(limits_.maxDepth) + " levels");
        }
        open.push_back(c);
        return false;
      case '}':
      case ']':
        if (open.back() != (c == '}' ? '{' : '[')) {
          // Malformed: let the full tokenizer find the first error from the container's start, so
          // the message is the one a normal parse gives.
          expect_ = open.front() == '{' ? Expect::KeyOrEnd : Expect::ValueOrEnd;
          skipValue(open.front() == '{' ? Token::BeginObject : Token::BeginArray);
          return true;
        }
        open.pop_back();
        if (open.empty()) {
          pos_ = j + 1;
          stack_.pop_back();
          afterValue();
          return true;
        }
        return false;
      default:
        return false;
    }
  };
  for (;;) {
    if (i >= end_) {
      const std::size_t off = i - pos_, skipOff = skip > pos_ ? skip - pos_ : 0;
      const bool more = fill();
      i = pos_ + off;
      skip = pos_ + skipOff;
      if (!more) fail("unexpected end of input (truncated JSON inside an event)");
      continue;
    }
#if defined(__SSE2__)
    // 64 bytes without a backslash: every quote toggles the string state, so the bytes inside
    // strings are a prefix-XOR of the quote mask, and only brackets outside strings need a visit.
    if (i + 64 <= end_ && i >= skip) {
      std::uint64_t q = 0, bs = 0, br = 0;
      for (int k = 0; k < 4; ++k) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data_ + i + 16 * k));
        q |= static_cast<std::uint64_t>(static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')))))
             << (16 * k);
        bs |= static_cast<std::uint64_t>(static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('\\')))))
              << (16 * k);
        const __m128i b =
            _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('{')), _mm_cmpeq_epi8(v, _mm_set1_epi8('}'))),
                         _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('[')), _mm_cmpeq_epi8(v, _mm_set1_epi8(']'))));
        br |= static_cast<std::uint64_t>(static_cast<unsigned>(_mm_movemask_epi8(b))) << (16 * k);
      }
      if (bs == 0) {
        std::uint64_t inside = q;
        inside ^= inside << 1;
        inside ^= inside << 2;
        inside ^= inside << 4;
        inside ^= inside << 8;
        inside ^= inside << 16;
        inside ^= inside << 32;
        if (inString) inside = ~inside;
        std::uint64_t structural = br & ~inside;
        const bool endsInString = ((__builtin_popcountll(q) & 1) != 0) != inString;
        while (structural) {
          const std::size_t j = i + static_cast<std::size_t>(__builtin_ctzll(structural));
          inString = false;  // a bracket outside strings: visit() must see it as structural
          if (visit(j)) return;
          structural &= structural - 1;
        }
        inString = endsInString;
        i += 64;
        continue;
      }
    }
    // 16 bytes at a time: visit only quotes, backslashes and brackets (brackets inside strings are
    // ignored by visit()).
    if (i + 16 <= end_) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data_ + i));
      const __m128i m =
          _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                       _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('{')), _mm_cmpeq_epi8(v, _mm_set1_epi8('}'))),
                                    _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('[')), _mm_cmpeq_epi8(v, _mm_set1_epi8(']')))));
      unsigned mask = static_cast<unsigned>(_mm_movemask_epi8(m));
      while (mask) {
        if (visit(i + static_cast<std::size_t>(__builtin_ctz(mask)))) return;
        mask &= mask - 1;
      }
      i += 16;
      continue;
    }
#endif
    if (visit(i)) return;
    ++i;
  }
}

void JsonReader::beginCapture() {
  capturing_ = true;
  captureStart_ = static_cast<std::size_t>(tokenOffset_ - base_);
}

std::string_view JsonReader::endCapture() {
  capturing_ = false;
  return std::string_view(data_ + captureStart_, pos_ - captureStart_);
}

namespace {

// Bit k set where block[k] is whitespace outside a string (64 bytes at most). `inString` and
// `escaped` (the block starts with an escaped character) carry across blocks.
std::uint64_t droppableWhitespace(const char* p, std::size_t len, bool& inString, bool& escaped) {
#if defined(__SSE2__)
  if (len == 64 && !escaped) {
    std::uint64_t q = 0, bs = 0, ws = 0;
    for (int k = 0; k < 4; ++k) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * k));
      const auto shift = static_cast<unsigned>(16 * k);
      q |= static_cast<std::uint64_t>(static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('"'))))) << shift;
      bs |= static_cast<std::uint64_t>(static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))))) << shift;
      const __m128i w =
          _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(' ')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\n'))),
                       _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('\r')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\t'))));
      ws |= static_cast<std::uint64_t>(static_cast<unsigned>(_mm_movemask_epi8(w))) << shift;
    }
    if (bs == 0) {
      // Without escapes every quote toggles the string state: the bytes inside strings are the
      // prefix-XOR of the quote mask (whitespace is never a quote, so the edges do not matter).
      if (ws == 0) {
        inString ^= (__builtin_popcountll(q) & 1) != 0;
        return 0;
      }
      std::uint64_t inside = q;
      inside ^= inside << 1;
      inside ^= inside << 2;
      inside ^= inside << 4;
      inside ^= inside << 8;
      inside ^= inside << 16;
      inside ^= inside << 32;
      if (inString) inside = ~inside;
      inString ^= (__builtin_popcountll(q) & 1) != 0;
      return ws & ~inside;
    }
  }
#endif
  std::uint64_t drop = 0;
  for (std::size_t k = 0; k < len; ++k) {
    const char c = p[k];
    if (escaped) {
      escaped = false;
    } else if (inString) {
      if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (isWs(c)) {
      drop |= std::uint64_t{1} << k;
    }
  }
  return drop;
}

}  // namespace

void appendCompactJson(std::string& out, std::string_view raw) {
  // The output is written through a pointer with 16-byte stores that may run up to 15 bytes past
  // the data (room for them is made first, the excess cut at the end): a run of kept bytes between
  // two whitespace bytes is one or two stores, not a call to append.
  const char* p = raw.data();
  const std::size_t n = raw.size();
  const std::size_t base = out.size();
  out.resize(base + n + 16);
  char* dst = out.data() + base;
  bool inString = false, escaped = false;
  for (std::size_t i = 0; i < n; i += 64) {
    const std::size_t len = std::min<std::size_t>(64, n - i);
    std::uint64_t drop = droppableWhitespace(p + i, len, inString, escaped);
    // 16-byte loads may read past the block: only where the input goes on far enough.
    [[maybe_unused]] const bool wide = i + 64 + 16 <= n;
    auto copyRun = [&](std::size_t from, std::size_t to) {
      const std::size_t k = to - from;
#if defined(__SSE2__)
      if (wide) {
        for (std::size_t c = 0; c < k; c += 16)
          _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + c),
                           _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + from + c)));
        dst += k;
        return;
      }
#endif
      std::memcpy(dst, p + i + from, k);
      dst += k;
    };
    std::size_t from = 0;
    while (drop) {
      const auto j = static_cast<std::size_t>(__builtin_ctzll(drop));
      copyRun(from, j);
      from = j + 1;
      drop &= drop - 1;
    }
    copyRun(from, len);
  }
  out.resize(static_cast<std::size_t>(dst - out.data()));
}

void JsonReader::skipValue(Token first) {
  if (first != Token::BeginObject && first != Token::BeginArray) return;
  const std::size_t d = depth();
  for (;;) {
    const Token t = next();
    if ((t == Token::EndObject || t == Token::EndArray) && depth() < d) return;
    if (t == Token::End) fail("unexpected end of input");
  }
}

void JsonReader::copyValue(Token first, std::string& out) {
  // needComma per open container; afterKey suppresses the comma before an object member's value.
  std::vector<bool> needComma;
  bool afterKey = false;
  Token t = first;
  for (;;) {
    const bool closing = t == Token::EndObject || t == Token::EndArray;
    if (!closing && !afterKey && !needComma.empty()) {
      if (needComma.back()) out.push_back(',');
      needComma.back() = true;
    }
    afterKey = false;
    switch (t) {
      case Token::BeginObject:
        out.push_back('{');
        needComma.push_back(false);
        break;
      case Token::BeginArray:
        out.push_back('[');
        needComma.push_back(false);
        break;
      case Token::EndObject:
        out.push_back('}');
        needComma.pop_back();
        break;
      case Token::EndArray:
        out.push_back(']');
        needComma.pop_back();
        break;
      case Token::Key:
        appendJsonString(out, text_);
        out.push_back(':');
        afterKey = true;
        break;
      case Token::String:
        appendJsonString(out, text_);
        break;
      case Token::Number:
        out.append(text_);
        break;
      case Token::True:
        out += "true";
        break;
      case Token::False:
        out += "false";
        break;
      case Token::Null:
        out += "null";
        break;
      case Token::End:
        fail("unexpected end of input");
    }
    if (needComma.empty()) return;
    t = next();
  }
}

}  // namespace shardscope::core
