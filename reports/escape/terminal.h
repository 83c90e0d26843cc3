// User text that the command line prints for a person at a terminal (`show`, `list`,
// `compare`, progress lines, warnings): shown, never acted on. An ESC byte in a suite
// name could otherwise recolour, move the cursor, retitle the window or hide text.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

namespace seqbench::escape {

// VisibleText(text, keep_line_breaks): no control byte but tab and line feed, valid UTF-8,
// no bidirectional override.
std::string TerminalText(const std::string& text, bool keep_line_breaks = true);

}  // namespace seqbench::escape
