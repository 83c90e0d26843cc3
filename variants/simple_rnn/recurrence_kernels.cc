#include "variants/simple_rnn/recurrence_kernels.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace seqbench::simple_rnn {
namespace {

#define SEQBENCH_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#define SEQBENCH_INLINE __attribute__((always_inline)) inline

// ---- Plain loops: any width, float or double.

template <typename scalar_t>
SEQBENCH_INLINE void LoopForward(scalar_t* __restrict state, const scalar_t* __restrict q,
                                 const scalar_t* __restrict k, const scalar_t* __restrict v,
                                 const scalar_t* __restrict g, scalar_t* __restrict o,
                                 int64_t width) {
  std::fill(o, o + width, scalar_t(0));
  for (int64_t i = 0; i < width; ++i) {
    scalar_t* __restrict row = state + i * width;
    const scalar_t decay = g[i], key = k[i], query = q[i];
    for (int64_t j = 0; j < width; ++j) {
      row[j] = decay * row[j] + key * v[j];
      o[j] += query * row[j];
    }
  }
}

template <typename scalar_t>
SEQBENCH_INLINE void LoopRecompute(scalar_t* __restrict next, const scalar_t* __restrict previous,
                                   const scalar_t* __restrict k, const scalar_t* __restrict v,
                                   const scalar_t* __restrict g, int64_t width) {
  for (int64_t i = 0; i < width; ++i) {
    const scalar_t decay = g[i], key = k[i];
    for (int64_t j = 0; j < width; ++j) {
      next[i * width + j] = decay * previous[i * width + j] + key * v[j];
    }
  }
}

template <typename scalar_t>
SEQBENCH_INLINE void LoopBackward(scalar_t* __restrict d_state, const scalar_t* __restrict previous,
                                  const scalar_t* __restrict q, const scalar_t* __restrict k,
                                  const scalar_t* __restrict v, const scalar_t* __restrict g,
                                  const scalar_t* __restrict d_o,
                                  const scalar_t* __restrict previous_d_o, scalar_t* __restrict d_k,
                                  scalar_t* __restrict d_v, scalar_t* __restrict d_g,
                                  scalar_t* __restrict previous_d_q, int64_t width) {
  std::fill(d_v, d_v + width, scalar_t(0));
  for (int64_t i = 0; i < width; ++i) {
    scalar_t* __restrict d_row = d_state + i * width;
    const scalar_t* __restrict previous_row = previous + i * width;
    const scalar_t query = q[i], key = k[i];
    scalar_t dk = 0, dg = 0, dq = 0;
    // Without it the three sums are added in order, lane by lane: a chain of scalar adds
    // that took most of the backward's time. Reassociating them changes only rounding.
#pragma omp simd reduction(+ : dk, dg, dq)
    for (int64_t j = 0; j < width; ++j) {
      d_row[j] += query * d_o[j];  // o_t = S_tᵀ·q_t feeds S_t
      dk += d_row[j] * v[j];
      d_v[j] += key * d_row[j];
      dg += d_row[j] * previous_row[j];
      dq += previous_row[j] * previous_d_o[j];
      d_row[j] *= g[i];
    }
    d_k[i] = dk;
    d_g[i] = dg;
    previous_d_q[i] = dq;
  }
}

template <typename scalar_t>
SEQBENCH_INLINE void LoopQueryGradient(const scalar_t* __restrict state,
                                       const scalar_t* __restrict d_o, scalar_t* __restrict d_q,
                                       int64_t width) {
  for (int64_t i = 0; i < width; ++i) {
    scalar_t dq = 0;
#pragma omp simd reduction(+ : dq)
    for (int64_t j = 0; j < width; ++j) dq += state[i * width + j] * d_o[j];
    d_q[i] = dq;
  }
}

// ---- Vector kernels: float32, width a multiple of kBlock<V>, at most kMaxWidth.

// GCC warns that a vector passed by value changes the ABI in the narrower copies; these
// helpers are always inlined into the kernels, so no call passes one.
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float Vec8 __attribute__((vector_size(32)));      // 8 floats, aligned
typedef float Vec16 __attribute__((vector_size(64)));     // 16 floats, aligned
typedef int32_t Lanes8 __attribute__((vector_size(32)));  // a shuffle's indices
constexpr int64_t kBlockVecs = 4;   // vectors of state columns a pass keeps in registers
constexpr int64_t kMaxWidth = 256;  // bounds the backward's row sums (up to 48 KiB)

template <typename V>
constexpr int64_t kLanes = sizeof(V) / sizeof(float);
template <typename V>
constexpr int64_t kBlock = kBlockVecs* kLanes<V>;  // 32 columns for Vec8, 64 for Vec16

template <typename V>
SEQBENCH_INLINE V Load(const float* p) {
  typedef float Unaligned __attribute__((vector_size(sizeof(V)), aligned(4)));
  return *reinterpret_cast<const Unaligned*>(p);
}
template <typename V>
SEQBENCH_INLINE void Store(float* p, V x) {
  typedef float Unaligned __attribute__((vector_size(sizeof(V)), aligned(4)));
  *reinterpret_cast<Unaligned*>(p) = x;
}
template <typename V>
SEQBENCH_INLINE V Splat(float x) {
  return V{} + x;  // a broadcast (`V{x,...}` is not)
}

// The lane sums of 8 vectors a[0..7], as one vector (lane i: the sum of a[i]'s lanes): a
// transposing tree of shuffles and adds (14 shuffles and 7 adds for 8 sums, where 8
// separate reductions take 24 of each). Each level adds the two halves of blocks of w
// lanes taken alternately from a pair of vectors, w = 1, 2, 4.
SEQBENCH_INLINE Vec8 LaneSums(const Vec8* a) {
  const Lanes8 even = {0, 8, 2, 10, 4, 12, 6, 14}, odd = {1, 9, 3, 11, 5, 13, 7, 15};
  Vec8 pairs[4];
  for (int p = 0; p < 4; ++p) {
    pairs[p] = __builtin_shuffle(a[2 * p], a[2 * p + 1], even) +
               __builtin_shuffle(a[2 * p], a[2 * p + 1], odd);
  }
  const Lanes8 low = {0, 1, 8, 9, 4, 5, 12, 13}, high = {2, 3, 10, 11, 6, 7, 14, 15};
  const Vec8 quads0 =
      __builtin_shuffle(pairs[0], pairs[1], low) + __builtin_shuffle(pairs[0], pairs[1], high);
  const Vec8 quads1 =
      __builtin_shuffle(pairs[2], pairs[3], low) + __builtin_shuffle(pairs[2], pairs[3], high);
  const Lanes8 first = {0, 1, 2, 3, 8, 9, 10, 11}, second = {4, 5, 6, 7, 12, 13, 14, 15};
  return __builtin_shuffle(quads0, quads1, first) + __builtin_shuffle(quads0, quads1, second);
}

// The same for 16 vectors a[0..15]: each folded to 8 lanes first (its two halves added),
// then the 8-lane tree twice. A 16-lane tree of two-source shuffles took a quarter of the
// backward's time (measured: 250 of 1060 ns a step at dh = 64); folding costs 16 extracts
// and adds, and the 8-lane shuffles are cheap.
SEQBENCH_INLINE Vec16 LaneSums(const Vec16* a) {
  Vec8 halves[16];
  for (int i = 0; i < 16; ++i) {
    halves[i] = __builtin_shufflevector(a[i], a[i], 0, 1, 2, 3, 4, 5, 6, 7) +
                __builtin_shufflevector(a[i], a[i], 8, 9, 10, 11, 12, 13, 14, 15);
  }
  const Vec8 low = LaneSums(halves), high = LaneSums(halves + 8);
  return __builtin_shufflevector(low, high, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}

template <typename V>
SEQBENCH_INLINE void VecForward(float* __restrict state, const float* __restrict q,
                                const float* __restrict k, const float* __restrict v,
                                const float* __restrict g, float* __restrict o, int64_t width) {
  constexpr int64_t lanes = kLanes<V>;
  for (int64_t block = 0; block < width; block += kBlock<V>) {
    V values[kBlockVecs], outputs[kBlockVecs];
    for (int64_t c = 0; c < kBlockVecs; ++c) {
      values[c] = Load<V>(v + block + c * lanes);
      outputs[c] = Splat<V>(0);
    }
    for (int64_t i = 0; i < width; ++i) {
      const V decay = Splat<V>(g[i]), key = Splat<V>(k[i]), query = Splat<V>(q[i]);
      float* row = state + i * width + block;
      for (int64_t c = 0; c < kBlockVecs; ++c) {
        const V updated = decay * Load<V>(row + c * lanes) + key * values[c];
        Store(row + c * lanes, updated);
        outputs[c] += query * updated;
      }
    }
    for (int64_t c = 0; c < kBlockVecs; ++c) Store(o + block + c * lanes, outputs[c]);
  }
}

template <typename V>
SEQBENCH_INLINE void VecRecompute(float* __restrict next, const float* __restrict previous,
                                  const float* __restrict k, const float* __restrict v,
                                  const float* __restrict g, int64_t width) {
  constexpr int64_t lanes = kLanes<V>;
  for (int64_t block = 0; block < width; block += kBlock<V>) {
    V values[kBlockVecs];
    for (int64_t c = 0; c < kBlockVecs; ++c) values[c] = Load<V>(v + block + c * lanes);
    for (int64_t i = 0; i < width; ++i) {
      const V decay = Splat<V>(g[i]), key = Splat<V>(k[i]);
      const int64_t at = i * width + block;
      for (int64_t c = 0; c < kBlockVecs; ++c) {
        Store(next + at + c * lanes, decay * Load<V>(previous + at + c * lanes) + key * values[c]);
      }
    }
  }
}

template <typename V>
SEQBENCH_INLINE void VecBackward(float* __restrict d_state, const float* __restrict previous,
                                 const float* __restrict q, const float* __restrict k,
                                 const float* __restrict v, const float* __restrict g,
                                 const float* __restrict d_o, const float* __restrict previous_d_o,
                                 float* __restrict d_k, float* __restrict d_v,
                                 float* __restrict d_g, float* __restrict previous_d_q,
                                 int64_t width) {
  constexpr int64_t lanes = kLanes<V>;
  // Per row, the lanes of its three sums (dk = dS_t·v, dg = (dS_t ⊙ S_{t-1})·1 and the
  // previous step's dq = S_{t-1}·dO_{t-1}) over the blocks done so far.
  V sums_q[kMaxWidth], sums_k[kMaxWidth], sums_g[kMaxWidth];
  for (int64_t block = 0; block < width; block += kBlock<V>) {
    V d_outputs[kBlockVecs], previous_d_outputs[kBlockVecs], values[kBlockVecs],
        d_values[kBlockVecs];
    for (int64_t c = 0; c < kBlockVecs; ++c) {
      d_outputs[c] = Load<V>(d_o + block + c * lanes);
      previous_d_outputs[c] = Load<V>(previous_d_o + block + c * lanes);
      values[c] = Load<V>(v + block + c * lanes);
      d_values[c] = Splat<V>(0);
    }
    for (int64_t i = 0; i < width; ++i) {
      const V query = Splat<V>(q[i]), key = Splat<V>(k[i]), decay = Splat<V>(g[i]);
      V dq = Splat<V>(0), dk = Splat<V>(0), dg = Splat<V>(0);
      const int64_t at = i * width + block;
      for (int64_t c = 0; c < kBlockVecs; ++c) {
        const int64_t j = at + c * lanes;
        const V d_row = Load<V>(d_state + j) + query * d_outputs[c];  // o_t = S_tᵀ·q_t feeds S_t
        const V previous_row = Load<V>(previous + j);
        dq += previous_row * previous_d_outputs[c];
        dk += d_row * values[c];
        d_values[c] += key * d_row;
        dg += d_row * previous_row;
        Store(d_state + j, d_row * decay);
      }
      sums_q[i] = block == 0 ? dq : sums_q[i] + dq;
      sums_k[i] = block == 0 ? dk : sums_k[i] + dk;
      sums_g[i] = block == 0 ? dg : sums_g[i] + dg;
    }
    for (int64_t c = 0; c < kBlockVecs; ++c) Store(d_v + block + c * lanes, d_values[c]);
  }
  for (int64_t i = 0; i < width; i += lanes) {
    Store(previous_d_q + i, LaneSums(sums_q + i));
    Store(d_k + i, LaneSums(sums_k + i));
    Store(d_g + i, LaneSums(sums_g + i));
  }
}

// ---- The compiled copies (target_clones on plain functions: a template cannot carry it).

#define SEQBENCH_LOOP_KERNELS(scalar_t)                                                         \
  SEQBENCH_CLONES void LoopForwardOf(scalar_t* state, const scalar_t* q, const scalar_t* k,     \
                                     const scalar_t* v, const scalar_t* g, scalar_t* o,         \
                                     int64_t width) {                                           \
    LoopForward(state, q, k, v, g, o, width);                                                   \
  }                                                                                             \
  SEQBENCH_CLONES void LoopRecomputeOf(scalar_t* next, const scalar_t* previous,                \
                                       const scalar_t* k, const scalar_t* v, const scalar_t* g, \
                                       int64_t width) {                                         \
    LoopRecompute(next, previous, k, v, g, width);                                              \
  }                                                                                             \
  SEQBENCH_CLONES void LoopBackwardOf(                                                          \
      scalar_t* d_state, const scalar_t* previous, const scalar_t* q, const scalar_t* k,        \
      const scalar_t* v, const scalar_t* g, const scalar_t* d_o, const scalar_t* previous_d_o,  \
      scalar_t* d_k, scalar_t* d_v, scalar_t* d_g, scalar_t* previous_d_q, int64_t width) {     \
    LoopBackward(d_state, previous, q, k, v, g, d_o, previous_d_o, d_k, d_v, d_g, previous_d_q, \
                 width);                                                                        \
  }                                                                                             \
  SEQBENCH_CLONES void LoopQueryGradientOf(const scalar_t* state, const scalar_t* d_o,          \
                                           scalar_t* d_q, int64_t width) {                      \
    LoopQueryGradient(state, d_o, d_q, width);                                                  \
  }
SEQBENCH_LOOP_KERNELS(float)
SEQBENCH_LOOP_KERNELS(double)
#undef SEQBENCH_LOOP_KERNELS

// The vector kernels of one vector type V, each a plain function carrying `target`.
#define SEQBENCH_VECTOR_KERNELS(V, target)                                                         \
  target void V##ForwardOf(float* state, const float* q, const float* k, const float* v,           \
                           const float* g, float* o, int64_t width) {                              \
    VecForward<V>(state, q, k, v, g, o, width);                                                    \
  }                                                                                                \
  target void V##RecomputeOf(float* next, const float* previous, const float* k, const float* v,   \
                             const float* g, int64_t width) {                                      \
    VecRecompute<V>(next, previous, k, v, g, width);                                               \
  }                                                                                                \
  target void V##BackwardOf(float* d_state, const float* previous, const float* q, const float* k, \
                            const float* v, const float* g, const float* d_o,                      \
                            const float* previous_d_o, float* d_k, float* d_v, float* d_g,         \
                            float* previous_d_q, int64_t width) {                                  \
    VecBackward<V>(d_state, previous, q, k, v, g, d_o, previous_d_o, d_k, d_v, d_g, previous_d_q,  \
                   width);                                                                         \
  }
// The 8-float kernels: AVX2 and FMA where the CPU has them, else SSE2.
SEQBENCH_VECTOR_KERNELS(Vec8, SEQBENCH_CLONES)
// The 16-float kernels, AVX-512 only: KernelsFor gives them where the CPU has it.
SEQBENCH_VECTOR_KERNELS(Vec16, __attribute__((target("arch=x86-64-v4"))))
#undef SEQBENCH_VECTOR_KERNELS

template <typename V>
bool Applies(int64_t width) {
  return width % kBlock<V> == 0 && width <= kMaxWidth;
}

}  // namespace

KernelSet WidestKernelSetOfThisCpu() {
  // ATEN_CPU_CAPABILITY below avx512 caps these kernels as it caps ATen's: the counting
  // child's pinning (avx2) then reaches them on any host, native counters included.
  const char* capability = std::getenv("ATEN_CPU_CAPABILITY");
  if (capability != nullptr && std::strcmp(capability, "avx512") != 0) return KernelSet::kVector8;
  __builtin_cpu_init();
  return __builtin_cpu_supports("x86-64-v4") ? KernelSet::kVector16 : KernelSet::kVector8;
}

const char* KernelSetName(KernelSet set) {
  switch (set) {
    case KernelSet::kVector16:
      return "16-float vectors (AVX-512)";
    case KernelSet::kVector8:
      return "8-float vectors (AVX2 and FMA, else SSE2)";
    case KernelSet::kLoops:
      break;
  }
  return "loops";
}

StepKernels<float> KernelsFor(float, int64_t width, KernelSet widest) {
  if (widest == KernelSet::kVector16 && Applies<Vec16>(width)) {
    return {Vec16ForwardOf, Vec16RecomputeOf, Vec16BackwardOf, LoopQueryGradientOf,
            KernelSet::kVector16};
  }
  if (widest != KernelSet::kLoops && Applies<Vec8>(width)) {
    return {Vec8ForwardOf, Vec8RecomputeOf, Vec8BackwardOf, LoopQueryGradientOf,
            KernelSet::kVector8};
  }
  return {LoopForwardOf, LoopRecomputeOf, LoopBackwardOf, LoopQueryGradientOf, KernelSet::kLoops};
}

StepKernels<float> KernelsFor(float, int64_t width) {
  static const KernelSet widest = WidestKernelSetOfThisCpu();
  return KernelsFor(float{}, width, widest);
}

StepKernels<double> KernelsFor(double, int64_t /*width*/) {
  return {LoopForwardOf, LoopRecomputeOf, LoopBackwardOf, LoopQueryGradientOf, KernelSet::kLoops};
}

}  // namespace seqbench::simple_rnn
