// User text that the command line prints for a person at a terminal (`show`, `list`,
// `compare`, progress lines, warnings): shown, never acted on. An ESC byte in a suite
// name could otherwise recolour, move the cursor, retitle the window or hide text.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>

namespace seqbench::escape {

// VisibleText(text, keep_line_breaks): no control byte but tab and line feed, valid UTF-8,
// no bidirectional override.
std::string TerminalText(const std::string& text, bool keep_line_breaks = true);

// The columns a terminal gives one line of TerminalText's output: one a code point, two
// for East Asian wide and fullwidth characters and emoji, none for combining marks (a
// table's column is padded by what the eye sees, not by bytes).
size_t TerminalColumns(const std::string& shown);

// `shown` followed by spaces up to `columns` columns (none when it is as wide already).
std::string PadToColumns(const std::string& shown, size_t columns);

}  // namespace seqbench::escape
