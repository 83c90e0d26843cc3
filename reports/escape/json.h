// JSON that seqbench writes (`report --format json|gbench-json`, `compare --format json`):
// always valid UTF-8, whatever bytes a suite, label or message held.
//
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace seqbench::escape {

// document.dump(indent), with its strings and keys made valid UTF-8 by ValidUtf8 instead
// of an exception, so that a report is never lost to one bad byte. dump() escapes
// quotes, backslashes and control characters (ESC as \u001b) itself.
std::string DumpJson(const nlohmann::json& document, int indent = 2);

}  // namespace seqbench::escape
