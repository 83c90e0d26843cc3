// The stored record of one benchmark case: a CaseRunner's CaseResult turned into the
// store's CaseRecord, with its identity, raw samples, and the metrics every report reads
// (runtime statistics from stats/statistics.h, throughput, memory, correctness).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "harness/runner.h"
#include "results/records.h"

namespace seqbench {

// `position` is the case's place in the suite's expansion. Metrics: runtime_{mean,median,
// stddev,min,max,q1,q3,iqr}_s and runtime_cv over the samples; tokens_per_s = tokens per
// step / median seconds per step (the throughput that speedups compare); step_flops and
// step_bytes (the family's cost of one step) and gflops_per_s, gbytes_per_s over the median
// step; peak, activation
// and RSS bytes; the correctness errors and `correct`.
CaseRecord ToRecord(const CaseResult& result, int64_t position);

// The runtime metrics of a case timed at `samples_s` (seconds per step): runtime_* over
// the samples, tokens_per_s over the median, and gflops_per_s, gbytes_per_s where the
// step's cost is known (flops > 0). What ToRecord adds, for samples gathered elsewhere
// (seqbench ab gathers a case's samples from several processes).
std::vector<Metric> RuntimeMetrics(const std::vector<double>& samples_s, int64_t tokens_per_step,
                                   double step_flops, double step_bytes);

}  // namespace seqbench
