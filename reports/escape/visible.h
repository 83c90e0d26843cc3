// The base every text sink starts from: user text (suite, variant and option names,
// labels, messages, environment values) made valid UTF-8 and visible. What a sink's syntax
// needs on top of it is that sink's own module (markdown.h, csv.h, json.h, terminal.h,
// html.h; gnuplot's quoting is GnuplotQuoted in reports/plot.h).
//
// Thread-safety: pure functions.
#pragma once

#include <string>

namespace seqbench::escape {

// `text` with what is not well-formed UTF-8 (a stray continuation byte, a truncated or
// overlong sequence, a surrogate, past U+10FFFF) replaced by U+FFFD, one per maximal
// subpart (Unicode's recommended practice, as Python's "replace" and browsers decode).
// Valid text comes back unchanged.
std::string ValidUtf8(const std::string& text);

// ValidUtf8(text) with what a reader cannot see, or what would act on a terminal, shown
// as an escape instead: C0 controls and DEL as \xNN (ESC as \x1b), C1 controls
// (U+0080-U+009F) and the bidirectional overrides and isolates (U+202A-U+202E,
// U+2066-U+2069: "Trojan source") as \uNNNN. A tab stays; a line break (LF, or CR LF)
// stays when `keep_line_breaks`, else becomes one space; a lone CR is always \x0d, so
// that it cannot overwrite a line.
std::string VisibleText(const std::string& text, bool keep_line_breaks = false);

}  // namespace seqbench::escape
