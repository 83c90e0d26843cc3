#include "reports/escape/terminal.h"

#include "reports/escape/visible.h"

namespace seqbench::escape {

std::string TerminalText(const std::string& text, bool keep_line_breaks) {
  return VisibleText(text, keep_line_breaks);
}

}  // namespace seqbench::escape
