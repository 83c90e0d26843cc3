// User text in a CSV cell (`report --format csv`): RFC 4180 quoting, and the spreadsheet
// formula guard that OWASP recommends, so that a cell is data in every reader.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

namespace seqbench::escape {

// VisibleText(text) on one line; a cell that starts with "=", "+", "-", "@", a tab or a
// carriage return (what spreadsheets evaluate as a formula) gains a leading "'"; then,
// where it holds a comma, a double quote, a line break or a leading or trailing blank,
// RFC 4180 quoting (the field in double quotes, each inner one doubled). Numbers that
// seqbench formats itself are written without it: a negative number is data there.
std::string CsvField(const std::string& text);

}  // namespace seqbench::escape
