#include "reports/escape/terminal.h"

#include <cstdint>

#include "reports/escape/visible.h"

namespace seqbench::escape {
namespace {

// The code point of the UTF-8 sequence at text[at] (valid: TerminalText's output), and the
// bytes it takes.
char32_t Decode(const std::string& text, size_t at, size_t& length) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(at);
  length = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
  if (at + length > text.size()) length = 1;  // not valid after all: a column a byte
  if (length == 1) return lead;
  char32_t code = lead & (0x7F >> length);
  for (size_t i = 1; i < length; ++i) code = (code << 6) | (byte(at + i) & 0x3F);
  return code;
}

// Unicode's combining marks in the ranges text is most likely to use (no column).
bool Combining(char32_t c) {
  return (c >= 0x0300 && c <= 0x036F) || (c >= 0x1AB0 && c <= 0x1AFF) ||
         (c >= 0x1DC0 && c <= 0x1DFF) || (c >= 0x20D0 && c <= 0x20FF) ||
         (c >= 0xFE20 && c <= 0xFE2F) || c == 0x200B || c == 0x200C || c == 0x200D;
}

// East Asian Wide and Fullwidth blocks and the emoji planes (two columns), as wcwidth has.
bool Wide(char32_t c) {
  return (c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0x303E) ||
         (c >= 0x3041 && c <= 0x33FF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0xA000 && c <= 0xA4CF) ||
         (c >= 0xAC00 && c <= 0xD7A3) || (c >= 0xF900 && c <= 0xFAFF) ||
         (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0xFF00 && c <= 0xFF60) ||
         (c >= 0xFFE0 && c <= 0xFFE6) || (c >= 0x1F300 && c <= 0x1F64F) ||
         (c >= 0x1F900 && c <= 0x1F9FF) || (c >= 0x20000 && c <= 0x3FFFD);
}

}  // namespace

std::string TerminalText(const std::string& text, bool keep_line_breaks) {
  return VisibleText(text, keep_line_breaks);
}

size_t TerminalColumns(const std::string& shown) {
  size_t columns = 0;
  for (size_t at = 0, length = 1; at < shown.size(); at += length) {
    const char32_t c = Decode(shown, at, length);
    columns += Combining(c) ? 0 : Wide(c) ? 2 : 1;
  }
  return columns;
}

std::string PadToColumns(const std::string& shown, size_t columns) {
  const size_t used = TerminalColumns(shown);
  return used >= columns ? shown : shown + std::string(columns - used, ' ');
}

}  // namespace seqbench::escape
