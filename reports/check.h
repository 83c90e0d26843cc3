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

struct ExpectationOutcome {
  std::string expectation;  // what was required, in words
  std::string measured;     // what the run shows
  bool held = false;
};

// The expectation's bounds in words: ">= 1.3", "<= 0.8", ">= 1 and <= 2".
std::string DescribeBound(const Expectation& expectation);

// Evaluates the expectations stored with a run (RunRecord::expectations) on its cases:
// speedup: Speedup(variant, over) (reports/report.h: the ratio of median throughputs);
// memory_ratio: activation bytes of `variant` / activation bytes of `over`;
// all_correct: every case ok (skipped cases count as not run, not as failures).
// Each matching pair must hold; no matching pair is a failure.
std::vector<ExpectationOutcome> EvaluateExpectations(const std::vector<Expectation>& expectations,
                                                     const std::vector<CaseRecord>& cases);

}  // namespace seqbench
