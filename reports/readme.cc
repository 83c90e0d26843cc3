#include "reports/readme.h"

#include <algorithm>
#include <regex>
#include <sstream>

namespace seqbench {
namespace {

constexpr char kBegin[] = "<!-- seqbench:begin";
constexpr char kEnd[] = "<!-- seqbench:end -->";

int64_t LineAt(const std::string& text, size_t offset) {
  return 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n');
}

}  // namespace

std::string RewriteReadme(const std::string& text, const std::string& path,
                          const SectionRenderer& render) {
  std::string output;
  size_t cursor = 0;  // text before this is in `output` already
  size_t search = 0;  // where the next marker may start
  int64_t sections = 0;
  const auto fail = [&](size_t offset, const std::string& message) {
    throw ReadmeError(path + ":" + std::to_string(LineAt(text, offset)) + ": " + message);
  };
  while (true) {
    const size_t begin = text.find(kBegin, search);
    const size_t stray_end = text.find(kEnd, search);
    if (begin == std::string::npos) {
      if (stray_end != std::string::npos)
        fail(stray_end, "seqbench:end without a seqbench:begin before it");
      break;
    }
    if (stray_end != std::string::npos && stray_end < begin) {
      fail(stray_end, "seqbench:end without a seqbench:begin before it");
    }
    const size_t begin_close = text.find("-->", begin);
    if (begin_close == std::string::npos)
      fail(begin, "seqbench:begin marker is not closed with -->");
    const size_t content_start = begin_close + 3;
    const size_t end = text.find(kEnd, content_start);
    if (end == std::string::npos)
      fail(begin, "seqbench:begin without a matching <!-- seqbench:end -->");
    const size_t nested = text.find(kBegin, content_start);
    if (nested != std::string::npos && nested < end)
      fail(nested, "seqbench:begin inside another section");

    ReadmeSection section;
    section.line = LineAt(text, begin);
    std::istringstream attributes(
        text.substr(begin + sizeof(kBegin) - 1, begin_close - begin - sizeof(kBegin) + 1));
    std::string attribute;
    const std::regex pattern("([a-z_]+)=([^\\s]+)");
    while (attributes >> attribute) {
      std::smatch match;
      if (!std::regex_match(attribute, match, pattern)) {
        fail(begin,
             "malformed attribute '" + attribute + "' in seqbench:begin; expected key=value");
      }
      section.attributes[match[1]] = match[2];
    }
    std::string content;
    try {
      content = render(section);
    } catch (const ReadmeError& error) {
      fail(begin, error.what());
    }
    output += text.substr(cursor, content_start - cursor);
    output += "\n" + content;
    if (!content.empty() && content.back() != '\n') output += "\n";
    cursor = end;  // the end marker and what follows are copied next
    search = end + sizeof(kEnd) - 1;
    ++sections;
  }
  if (sections == 0) {
    throw ReadmeError(path +
                      ": no seqbench sections; add <!-- seqbench:begin suite=NAME device=cpu --> "
                      "and <!-- seqbench:end --> where the tables belong");
  }
  output += text.substr(cursor);
  return output;
}

}  // namespace seqbench
