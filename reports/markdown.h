// A Markdown table that stays a table whatever its cells hold: every cell is user text
// escaped by escape::MarkdownText, and every row has exactly the header's columns.
//
// Thread-safety: a value type; no shared state.
#pragma once

#include <string>
#include <vector>

namespace seqbench {

class MarkdownTable {
 public:
  explicit MarkdownTable(std::vector<std::string> headers);
  // Cells are escaped here; throws std::invalid_argument on a wrong cell count.
  void AddRow(const std::vector<std::string>& cells);
  std::string Render() const;
  size_t rows() const { return rows_.size(); }

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace seqbench
