#include "reports/escape/markdown.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "reports/escape/visible.h"

namespace seqbench::escape {
namespace {

bool AsciiAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// Where `text` opens with a block marker (CommonMark 4-5): the index of the character to
// escape so that it does not, or npos. A block quote's ">"; a heading's, list item's or
// thematic break's run of "#", "-", "+", "*" or "=" followed by a blank or the end (escape
// its first character); an ordered list's digits then "." or ")" followed by a blank or
// the end (escape the "." or ")", as a backslash before a digit is no escape).
size_t BlockMarker(const std::string& text) {
  if (text.empty()) return std::string::npos;
  const char first = text[0];
  size_t end = 0;
  if (std::isdigit(static_cast<unsigned char>(first))) {
    while (end + 1 < text.size() && std::isdigit(static_cast<unsigned char>(text[end + 1]))) ++end;
    if (end + 1 >= text.size() || (text[end + 1] != '.' && text[end + 1] != ')')) {
      return std::string::npos;
    }
    ++end;
  } else if (first == '>') {
    return 0;
  } else if (std::strchr("#-+=*", first) != nullptr) {
    while (end + 1 < text.size() && text[end + 1] == first) ++end;
  } else {
    return std::string::npos;
  }
  const bool blank_after = end + 1 >= text.size() || text[end + 1] == ' ' || text[end + 1] == '\t';
  if (!blank_after) return std::string::npos;
  return std::isdigit(static_cast<unsigned char>(first)) ? end : 0;
}

// Whether the ":" at text[i] would make GitHub link what is around it: "://", or the end
// of "mailto" or "xmpp" (which link even without "//").
bool AutolinkColon(const std::string& text, size_t i) {
  if (text.compare(i + 1, 2, "//") == 0) return true;
  const auto ends_with = [&](const char* scheme) {
    const size_t n = std::strlen(scheme);
    if (i < n) return false;
    for (size_t k = 0; k < n; ++k) {
      if (std::tolower(static_cast<unsigned char>(text[i - n + k])) != scheme[k]) return false;
    }
    return true;
  };
  return ends_with("mailto") || ends_with("xmpp");
}

}  // namespace

std::string MarkdownText(const std::string& text) {
  std::string visible = VisibleText(text);
  visible.erase(0, visible.find_first_not_of(" \t"));
  const size_t marker = BlockMarker(visible);
  const auto next_is = [&](size_t i, const char* starters) {
    if (i + 1 >= visible.size()) return false;
    const char next = visible[i + 1];
    return std::isalpha(static_cast<unsigned char>(next)) || std::strchr(starters, next) != nullptr;
  };
  std::string escaped;
  escaped.reserve(visible.size() + 8);
  for (size_t i = 0; i < visible.size(); ++i) {
    const char c = visible[i];
    const bool intraword_underscore = c == '_' && i > 0 && i + 1 < visible.size() &&
                                      AsciiAlnum(visible[i - 1]) && AsciiAlnum(visible[i + 1]);
    const bool autolink_colon = c == ':' && AutolinkColon(visible, i);
    const bool autolink_dot = c == '.' && i >= 3 && (i == 3 || !AsciiAlnum(visible[i - 4])) &&
                              std::tolower(static_cast<unsigned char>(visible[i - 1])) == 'w' &&
                              std::tolower(static_cast<unsigned char>(visible[i - 2])) == 'w' &&
                              std::tolower(static_cast<unsigned char>(visible[i - 3])) == 'w';
    if (std::strchr("\\`|*[]~", c) != nullptr || (c == '_' && !intraword_underscore) ||
        autolink_colon || autolink_dot || i == marker) {
      escaped += '\\';
      escaped += c;
    } else if (c == '<' && next_is(i, "/!?")) {
      escaped += "&lt;";
    } else if (c == '&' && next_is(i, "#")) {
      escaped += "&amp;";
    } else {
      escaped += c;
    }
  }
  return escaped;
}

std::string MarkdownDestination(const std::string& path) {
  const std::string visible = VisibleText(path);
  if (visible.find_first_of(" \t()<>\\") == std::string::npos) return visible;
  std::string bracketed = "<";
  for (const char c : visible) {
    if (c == '<' || c == '>' || c == '\\') bracketed += '\\';
    bracketed += c;
  }
  return bracketed + ">";
}

std::string MarkdownCode(const std::string& text) {
  const std::string visible = VisibleText(text);
  if (visible.empty()) return "";
  size_t longest = 0, run = 0;
  for (const char c : visible) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(longest + 1, '`');
  // A blank on each side, which CommonMark strips again, where the text starts or ends with
  // a backtick (it would join the fence) or both starts and ends with a blank (which would
  // be stripped from the text itself).
  const bool all_blank = visible.find_first_not_of(' ') == std::string::npos;
  const bool pad = visible.front() == '`' || visible.back() == '`' ||
                   (!all_blank && visible.front() == ' ' && visible.back() == ' ');
  const std::string space = pad ? " " : "";
  return fence + space + visible + space + fence;
}

}  // namespace seqbench::escape
