#include "reports/markdown.h"

#include <cctype>
#include <cstring>
#include <stdexcept>

namespace seqbench {

std::string EscapeCell(const std::string& text) {
  // Only what would start markup is neutralised: "<" before a letter, "/", "!" or "?" (an
  // HTML tag, comment or declaration) and "&" before a letter or "#" (an entity), so that
  // "<=" and "a & b" stay readable in a terminal.
  const auto next_is = [&](size_t i, const char* starters) {
    if (i + 1 >= text.size()) return false;
    const unsigned char next = static_cast<unsigned char>(text[i + 1]);
    return std::isalpha(next) || std::strchr(starters, next) != nullptr;
  };
  std::string escaped;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '|' || c == '`' || c == '\\') {
      escaped += '\\';
      escaped += c;
    } else if (c == '\n' || c == '\r') {
      escaped += ' ';
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

MarkdownTable::MarkdownTable(std::vector<std::string> headers) {
  for (const auto& header : headers) headers_.push_back(EscapeCell(header));
}

void MarkdownTable::AddRow(const std::vector<std::string>& cells) {
  if (cells.size() != headers_.size()) {
    throw std::invalid_argument("table row has " + std::to_string(cells.size()) +
                                " cells, header has " + std::to_string(headers_.size()));
  }
  std::vector<std::string> row;
  for (const auto& cell : cells) row.push_back(EscapeCell(cell));
  rows_.push_back(std::move(row));
}

std::string MarkdownTable::Render() const {
  const auto line = [](const std::vector<std::string>& cells) {
    std::string text = "|";
    for (const auto& cell : cells) text += " " + cell + " |";
    return text + "\n";
  };
  std::string text = line(headers_);
  text += "|";
  for (size_t i = 0; i < headers_.size(); ++i) text += "---|";
  text += "\n";
  for (const auto& row : rows_) text += line(row);
  return text;
}

}  // namespace seqbench
