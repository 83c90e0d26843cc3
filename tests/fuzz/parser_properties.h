// Properties every parser of user-written files must have, shared by the libFuzzer targets
// of tests/fuzz/: a refusal is a SuiteError (anything else escapes to libFuzzer, which
// reports it), and the place it names exists in the text (a line of it, column from 1), so that an
// editor can jump to it. A broken property aborts, which libFuzzer records as a crash with the
// input that caused it.
//
// Thread-safety: stateless functions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "harness/suite_error.h"

namespace seqbench::fuzz {

inline void CheckErrorLocation(const SuiteError& error, const std::string& text,
                               const std::string& path) {
  // The last line may be empty (text ending in a newline): an error at the end is there.
  const int64_t lines = std::count(text.begin(), text.end(), '\n') + 1;
  const bool located = error.line() >= 1 && error.line() <= lines && error.column() >= 1;
  const bool named = error.path() == path && !error.message().empty();
  if (!located || !named) std::abort();
}

}  // namespace seqbench::fuzz
