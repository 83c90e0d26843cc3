#include "reports/escape/html.h"

#include "reports/escape/visible.h"

namespace seqbench::escape {

std::string HtmlText(const std::string& text) {
  std::string escaped;
  for (const char c : VisibleText(text)) {
    switch (c) {
      case '&':
        escaped += "&amp;";
        break;
      case '<':
        escaped += "&lt;";
        break;
      case '>':
        escaped += "&gt;";
        break;
      case '"':
        escaped += "&quot;";
        break;
      case '\'':
        escaped += "&#39;";
        break;
      default:
        escaped += c;
    }
  }
  return escaped;
}

}  // namespace seqbench::escape
