#include "reports/markdown.h"

#include <stdexcept>

#include "reports/escape/markdown.h"

namespace seqbench {

MarkdownTable::MarkdownTable(std::vector<std::string> headers) {
  for (const auto& header : headers) headers_.push_back(escape::MarkdownText(header));
}

void MarkdownTable::AddRow(const std::vector<std::string>& cells) {
  if (cells.size() != headers_.size()) {
    throw std::invalid_argument("table row has " + std::to_string(cells.size()) +
                                " cells, header has " + std::to_string(headers_.size()));
  }
  std::vector<std::string> row;
  for (const auto& cell : cells) row.push_back(escape::MarkdownText(cell));
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
