// The CI gate: evaluates a suite's expectations on one finished run. Expectations are
// ratios between variants measured side by side in that run, which shared machines keep
// far steadier than absolute times.
//
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "results/store.h"

namespace seqbench {

struct RatioExpectation {
  std::string what;     // speedup | memory_ratio | all_correct
  std::string variant;  // the variant name the ratio is about
  std::string over;     // the variant it is compared with, on the same workload
  std::optional<double> at_least, at_most;
  std::map<std::string, std::string> where;  // case fields that select the cases
  int64_t line = 0;                          // in the suite file
};

struct ExpectationOutcome {
  std::string expectation;  // what was required, in words
  std::string measured;     // what the run shows
  bool held = false;
};

// The expectation's bounds in words: ">= 1.3", "<= 0.8", ">= 1 and <= 2".
std::string DescribeBound(const RatioExpectation& expectation);

// speedup: median runtime of `over` / median runtime of `variant`;
// memory_ratio: activation bytes of `variant` / activation bytes of `over`;
// all_correct: every case ok (skipped cases count as not run, not as failures).
// Each matching pair must hold; no matching pair is a failure.
std::vector<ExpectationOutcome> EvaluateExpectations(
    const std::vector<RatioExpectation>& expectations, const std::vector<CaseRecord>& cases);

}  // namespace seqbench
