// The per-step kernels of `fused_recurrent`'s recurrence (fused_recurrent.cc), on one
// (sequence, head) pair's dh×dh state: S = diag(g)·S + k·vᵀ, o = Sᵀ·q, and the step's
// backward. Three implementations behind one table, chosen once per call by KernelsFor():
// - 16-float vector kernels (AVX-512, x86-64-v4), float32 with dh a multiple of 64 (up to
//   256), on CPUs that have it: the state's columns taken 64 at a time;
// - 8-float vector kernels (GCC's vector extensions), float32 with dh a multiple of 32 (up
//   to 256): the state's columns taken 32 at a time;
// - plain loops for any other width or type, vectorised by the compiler.
// In the vector kernels v, dO and the column sums of a block stay in registers while the
// rows stream through; the backward's three row sums are kept as vectors and reduced a
// vector's worth of rows at once at the end of the step.
// The 8-float kernels and the loops are compiled twice, for x86-64-v3 (AVX2 and FMA) and
// for any x86-64 (SSE2), the copy chosen by the CPU's features when the program loads
// (GCC's target_clones). "arch=x86-64-v3" dispatches on features; "arch=haswell", used
// before, dispatched on the CPU model and ran the SSE2 copy on every CPU that is not a
// Haswell (measured on this project's AMD EPYC VMs). The 16-float ones are chosen by
// KernelsFor from the CPU's features, unless ATEN_CPU_CAPABILITY names a level below
// avx512 (as the counting child's pinning does: counted runs take the 8-float ones, as on
// a CPU without AVX-512, whose instructions valgrind's CPU lacks anyway).
//
// Thread-safety: stateless functions; the caller gives each thread its own state.
#pragma once

#include <cstdint>

namespace seqbench::simple_rnn {

// The implementations, narrowest first.
enum class KernelSet { kLoops, kVector8, kVector16 };

// Row pointers of one step: q, k, v, g, d_o: [dh]; the state pointers: [dh,dh] row-major.
template <typename scalar_t>
struct StepKernels {
  // One step forward, state in place: S = diag(g)·S + k·vᵀ, then o = Sᵀ·q (o written).
  void (*forward)(scalar_t* state, const scalar_t* q, const scalar_t* k, const scalar_t* v,
                  const scalar_t* g, scalar_t* o, int64_t width);
  // The state alone, into a new buffer: next = diag(g)·previous + k·vᵀ (backward's
  // recompute of a segment; next and previous do not overlap).
  void (*recompute)(scalar_t* next, const scalar_t* previous, const scalar_t* k, const scalar_t* v,
                    const scalar_t* g, int64_t width);
  // One step backward. d_state: on entry the gradient of S_t from the steps after t, on
  // exit that of S_{t-1} (in place); previous: S_{t-1}; d_k, d_v, d_g: step t's, written.
  // Step t's dq = S_t·dO_t is not computed here: the call for step t+1 wrote it. This call
  // writes step t−1's, previous_d_q = S_{t-1}·dO_{t-1} (previous_d_o), from S_{t-1} while
  // it is read anyway, so that the walk back reads two dh×dh arrays a step, not three.
  void (*backward)(scalar_t* d_state, const scalar_t* previous, const scalar_t* q,
                   const scalar_t* k, const scalar_t* v, const scalar_t* g, const scalar_t* d_o,
                   const scalar_t* previous_d_o, scalar_t* d_k, scalar_t* d_v, scalar_t* d_g,
                   scalar_t* previous_d_q, int64_t width);
  // The last step's dq = S·dO (no later step's call writes it); d_q written.
  void (*query_gradient)(const scalar_t* state, const scalar_t* d_o, scalar_t* d_q, int64_t width);
  KernelSet set;  // which implementation these are (for tests and the run's record)
};

// The widest kernels this CPU runs: kVector16 with AVX-512 (x86-64-v4) where
// ATEN_CPU_CAPABILITY is unset or avx512, else kVector8.
KernelSet WidestKernelSetOfThisCpu();
// "16-float vectors (AVX-512)", "8-float vectors (...)", "loops".
const char* KernelSetName(KernelSet set);

// The kernels for a head width: the widest vector ones of this CPU where they apply, else
// the loops.
StepKernels<float> KernelsFor(float, int64_t width);
// The same, going no wider than `widest` (tests try each set the CPU runs); `widest` must
// be one the CPU runs.
StepKernels<float> KernelsFor(float, int64_t width, KernelSet widest);
StepKernels<double> KernelsFor(double, int64_t width);

}  // namespace seqbench::simple_rnn
