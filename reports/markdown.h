// A Markdown table that stays a table whatever its cells hold: pipes, backticks, line
// breaks and HTML in cell text are escaped, and every row has exactly the header's columns.
//
// Thread-safety: a value type; no shared state.
#pragma once

#include <string>
#include <vector>

namespace seqbench {

// Escapes text for a table cell: `|` and backticks are backslash-escaped, line breaks
// become spaces, and a "<" or "&" that would start an HTML tag or entity becomes an
// entity, so that no data becomes markup.
std::string EscapeCell(const std::string& text);

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
