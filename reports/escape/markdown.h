// User text inside Markdown that seqbench writes (README sections, `report`, `check`,
// `compare`): rendered by CommonMark with GitHub's extensions (tables, autolinks,
// strikethrough), it reads back as the same text and never as markup.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

namespace seqbench::escape {

// VisibleText(text) on one line (line breaks become spaces), leading blanks dropped, and
// backslash-escaped or entity-encoded where it would otherwise start syntax: `\`, `` ` ``,
// `|` (a table cell's end), `*`, `[`, `]`, `~`; `_` unless between two ASCII letters or
// digits (where it cannot emphasise, as in fused_recurrent); "<" before a letter, "/", "!"
// or "?" (a tag, comment or autolink) and "&" before a letter or "#" (an entity); the ":"
// of "://" and the "." of "www." (GitHub's autolinks); and at the start, a heading, block
// quote, list or thematic-break marker. E-mail addresses stay (GitHub links them as
// mailto:, which runs nothing). Safe in a table cell, a list item and a paragraph.
std::string MarkdownText(const std::string& text);

// A relative path as a link or image destination: as it is, or in <...> (with "<", ">"
// and "\\" backslash-escaped) where a blank, a parenthesis or those would end it early.
std::string MarkdownDestination(const std::string& path);

// VisibleText(text) on one line as a code span, outside a table: delimited by one more
// backtick than its longest run of them, and padded where it starts or ends with one, so
// that nothing in it ends the span (CommonMark 6.1). "`plain`" for plain.
std::string MarkdownCode(const std::string& text);

}  // namespace seqbench::escape
