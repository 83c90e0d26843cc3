#include "reports/escape/csv.h"

#include <cstring>

#include "reports/escape/visible.h"

namespace seqbench::escape {

std::string CsvField(const std::string& text) {
  std::string field = VisibleText(text);
  // VisibleText has already shown a CR as \x0d and turned line breaks into spaces; a tab
  // stays, and starts a formula in some spreadsheets.
  if (!field.empty() && std::strchr("=+-@\t", field[0]) != nullptr) field.insert(0, 1, '\'');
  const bool needs_quotes =
      field.find_first_of(",\"\n\r") != std::string::npos ||
      (!field.empty() && (field.front() == ' ' || field.back() == ' ' || field.back() == '\t'));
  if (!needs_quotes) return field;
  std::string quoted = "\"";
  for (const char c : field) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

}  // namespace seqbench::escape
