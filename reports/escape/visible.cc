#include "reports/escape/visible.h"

#include <cstdint>
#include <cstdio>

namespace seqbench::escape {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

// The length of the well-formed UTF-8 sequence at text[i] (RFC 3629's table), or 0 if
// there is none; then `*invalid` is the length of the maximal subpart to replace (the lead
// byte and the continuation bytes that were still possible, at least 1).
size_t SequenceLength(const std::string& text, size_t i, size_t* invalid = nullptr) {
  if (invalid) *invalid = 1;
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  const uint8_t lead = byte(i);
  if (lead < 0x80) return 1;
  size_t length = 0;
  uint8_t low = 0x80, high = 0xBF;  // the second byte's range
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // no overlong forms
    if (lead == 0xED) high = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;  // nothing past U+10FFFF
  } else {
    return 0;
  }
  for (size_t k = 1; k < length; ++k) {
    const bool possible = i + k < text.size() && byte(i + k) >= (k == 1 ? low : 0x80) &&
                          byte(i + k) <= (k == 1 ? high : 0xBF);
    if (!possible) {
      if (invalid) *invalid = k;
      return 0;
    }
  }
  return length;
}

uint32_t CodePoint(const std::string& text, size_t i, size_t length) {
  const auto byte = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(text[k])); };
  if (length == 1) return byte(i);
  uint32_t code = byte(i) & (0xFFu >> (length + 1));
  for (size_t k = 1; k < length; ++k) code = (code << 6) | (byte(i + k) & 0x3F);
  return code;
}

bool Invisible(uint32_t code) {
  return (code >= 0x80 && code <= 0x9F) || (code >= 0x202A && code <= 0x202E) ||
         (code >= 0x2066 && code <= 0x2069);
}

}  // namespace

std::string ValidUtf8(const std::string& text) {
  std::string valid;
  valid.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    size_t invalid = 1;
    const size_t length = SequenceLength(text, i, &invalid);
    if (length == 0) {
      valid += kReplacement;
      i += invalid;
    } else {
      valid.append(text, i, length);
      i += length;
    }
  }
  return valid;
}

std::string VisibleText(const std::string& text, bool keep_line_breaks) {
  const std::string valid = ValidUtf8(text);
  std::string visible;
  visible.reserve(valid.size());
  char escaped[16];  // "\\u" and up to 8 hex digits, as GCC cannot bound `code`
  for (size_t i = 0; i < valid.size();) {
    const size_t length = SequenceLength(valid, i);  // >= 1: the text is valid now
    const uint32_t code = CodePoint(valid, i, length);
    if (code == '\r' && i + 1 < valid.size() && valid[i + 1] == '\n') {
      ++i;  // CR LF: one line break, the LF's
      continue;
    }
    if (code == '\n') {
      visible += keep_line_breaks ? '\n' : ' ';
    } else if (code == '\t') {
      visible += '\t';
    } else if (code < 0x20 || code == 0x7F) {
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", code);
      visible += escaped;
    } else if (Invisible(code)) {
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", code);
      visible += escaped;
    } else {
      visible.append(valid, i, length);
    }
    i += length;
  }
  return visible;
}

}  // namespace seqbench::escape
