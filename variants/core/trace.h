// NVTX3 ranges, so that an Nsight Systems timeline reads like the suite: one range per
// case ("case <key>"), per phase of the harness (check, warmup, timed, memory) and per
// phase of a step (forward, backward, optimizer; prefill and decode when generating).
// Compiled in whenever the NVTX3 header is found (SEQBENCH_WITH_NVTX), and off until
// SetTracing(true) (`seqbench run --nvtx`), so ranges cost nothing unless asked for.
//
// Thread-safety: SetTracing() is called once before any range; TraceRange may be used from
// any thread (NVTX ranges are per thread).
#pragma once

#include <string>

namespace seqbench {

// Whether NVTX support was compiled into this binary.
bool TracingCompiledIn();
void SetTracing(bool enabled);
bool TracingEnabled();

// Pushes an NVTX range for its lifetime when tracing is enabled.
class TraceRange {
 public:
  explicit TraceRange(const char* name);
  explicit TraceRange(const std::string& name) : TraceRange(name.c_str()) {}
  ~TraceRange();
  TraceRange(const TraceRange&) = delete;
  TraceRange& operator=(const TraceRange&) = delete;

 private:
  bool pushed_ = false;
};

}  // namespace seqbench
