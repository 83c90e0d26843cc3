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

#include "results/records.h"

namespace seqbench {

struct ExpectationOutcome {
  std::string expectation;  // what was required, in words
  std::string measured;     // what the run shows
  bool held = false;
};

// The expectation's bounds in words: ">= 1.3", "<= 0.8", ">= 1 and <= 2".
std::string DescribeBound(const Expectation& expectation);

// The confidence level of a speedup's bootstrap interval in `check`.
inline constexpr double kCheckConfidence = 0.95;

// Evaluates the expectations stored with a run (RunRecord::expectations) on its cases:
// speedup: Speedup(variant, over) (reports/report.h: the ratio of median throughputs),
// which falls short only when its whole 95% bootstrap interval (stats/statistics.h)
// misses the bound (with fewer than 3 samples a side, when the ratio itself does);
// memory_ratio: activation bytes of `variant` / activation bytes of `over`;
// recompute_ratio: recompute_factor of `variant` / that of `over` (1 when both are 0), the
// machine-independent price of two checkpointing schedules;
// time_per_doubling: for every variant (or `variant`) and workload, the median step time
// at 2x over that at x for each doubling of the workload field `over` (reports/fit.h
// Doublings()), judged on its bootstrap interval like a speedup; a matching case that did
// not end ok (skipped aside) falls short, as an unmeasured length;
// gemm_floor: each case of `variant`, its median step over its GEMM floor (the "× GEMM
// floor" of reports/run_facts.h: the time its matrix products take at the GEMM rate
// `run` measured), a point estimate, since the rate is one measurement; a case that did
// not end ok, or a run without the rate (`run` null), falls short;
// all_correct: every case ok (skipped cases count as not run, not as failures).
// Each matching pair must hold; no matching pair is a failure.
std::vector<ExpectationOutcome> EvaluateExpectations(const std::vector<Expectation>& expectations,
                                                     const std::vector<CaseRecord>& cases,
                                                     const RunRecord* run = nullptr);

}  // namespace seqbench
