// OpProfile: where a step's time goes, op by op: LibTorch's autograd profiler (its legacy
// RecordProfile, in LibTorch 1.13 and 2.x) records every ATen op of `steps` calls of a
// step that the calling thread runs, and the ops are summed by name. Its callbacks are
// thread-local: the share of a parallel op that OpenMP's other threads run is not recorded
// as events of theirs; on the calling thread it is inside the op's own time. An op's self time
// is its own duration less that of the ops it called on the same thread; custom autograd
// nodes and hand-written kernels appear under their node's name (e.g.
// "torch::autograd::CppNode<...>"), BLAS calls made outside ATen inside it. The profiler's
// own overhead (a few microseconds an op) is in the figures: they apportion a step, they
// do not time it (`seqbench run` does).
//
// Thread-safety: one profile at a time per thread (the legacy profiler is per-thread state).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace seqbench {

struct OpTime {
  std::string name;
  double calls = 0;     // per step
  double self_ms = 0;   // per step
  double total_ms = 0;  // per step, with the ops it called
};

struct OpProfile {
  int64_t steps = 0;
  double wall_ms = 0;       // per step, the profiled steps' wall time
  double self_ms = 0;       // per step, every op's self time
  std::vector<OpTime> ops;  // by self time, largest first
};

// Runs `step` `steps` times (at least 1) under the profiler.
OpProfile ProfileSteps(const std::function<void()>& step, int64_t steps);

// The ops' time from a RecordProfile trace (chrome trace JSON: events with name, ts, dur
// in microseconds and tid), per step over `steps`. Throws std::runtime_error on JSON that
// is not such a trace. Separate for the tests.
OpProfile SummarizeTrace(const std::string& trace_json, int64_t steps);

}  // namespace seqbench
