// User text in HTML that seqbench writes (the site's pages): character data or a quoted
// attribute value, never markup.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

namespace seqbench::escape {

// VisibleText(text) on one line with "&", "<", ">", '"' and "'" as character references:
// safe as element content and inside a single- or double-quoted attribute value.
std::string HtmlText(const std::string& text);

}  // namespace seqbench::escape
