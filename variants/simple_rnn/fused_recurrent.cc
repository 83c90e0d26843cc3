// `fused_recurrent`: `batched` with the recurrence of each layer in one hand-written C++
// kernel, forward and backward. Each (sequence, head) pair is one task of
// at::parallel_for; its dh×dh state stays in a local buffer (16 KiB at dh = 64, in L1/L2)
// for the whole sequence, and each step is one pass over the state's rows that updates it
// and accumulates the output. Instead of every state, forward keeps one state every
// kSegment steps; backward recomputes a segment's states into a local buffer (kSegment+1
// states, in L2) and walks it in reverse, again one pass over the rows per step. So the
// recurrence moves O(T/kSegment · dh²) bytes per task through memory instead of autograd's
// several passes over [B,H,dh,dh] per step, at the price of running it forward twice.
// The projections, norms and head stay ATen GEMMs under autograd, as in `batched`.
#include "variants/simple_rnn/fused_recurrent.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "variants/core/registry.h"
#include "variants/simple_rnn/model.h"

namespace seqbench::simple_rnn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Steps between saved states: the backward's recompute buffer is (kSegment + 1)·dh² values
// per task (272 KiB at dh = 64, float32), and the saved states are T/kSegment of them.
constexpr int64_t kSegment = 16;

// The inputs of one (sequence, head) task, as row pointers into [B,T,H,dh] tensors: step t
// of the task starts at base + t·stride.
template <typename scalar_t>
struct Sequence {
  const scalar_t* q;
  const scalar_t* k;
  const scalar_t* v;
  const scalar_t* g;
  int64_t stride;  // H·dh
};

// One step forward: S = diag(g)·S + k·vᵀ and, when kWithOutput, o = Sᵀ·q, in one pass
// over the rows of S (the backward's recompute needs only the states: 3 of 5 FLOPs).
// state: [dh,dh], written in place; o: [dh], written when kWithOutput.
template <bool kWithOutput, typename scalar_t>
__attribute__((always_inline)) inline void StepForwardImpl(scalar_t* __restrict state,
                                                           const scalar_t* __restrict q,
                                                           const scalar_t* __restrict k,
                                                           const scalar_t* __restrict v,
                                                           const scalar_t* __restrict g,
                                                           scalar_t* __restrict o, int64_t width) {
  if (kWithOutput) std::fill(o, o + width, scalar_t(0));
  for (int64_t i = 0; i < width; ++i) {
    scalar_t* __restrict row = state + i * width;
    const scalar_t decay = g[i], key = k[i], query = kWithOutput ? q[i] : scalar_t(0);
    for (int64_t j = 0; j < width; ++j) {
      row[j] = decay * row[j] + key * v[j];
      if (kWithOutput) o[j] += query * row[j];
    }
  }
}

// One step backward, in one pass over the rows. On entry d_state holds the gradient of the
// state after this step from the steps after it; on exit, that of the state before it.
// state: S_t, previous: S_{t-1}; d_o: [dh]; d_q, d_k, d_g: [dh] written; d_v: [dh] written.
template <typename scalar_t>
__attribute__((always_inline)) inline void StepBackwardImpl(
    scalar_t* __restrict d_state, const scalar_t* __restrict state,
    const scalar_t* __restrict previous, const scalar_t* __restrict q, const scalar_t* __restrict k,
    const scalar_t* __restrict v, const scalar_t* __restrict g, const scalar_t* __restrict d_o,
    scalar_t* __restrict d_q, scalar_t* __restrict d_k, scalar_t* __restrict d_v,
    scalar_t* __restrict d_g, int64_t width) {
  std::fill(d_v, d_v + width, scalar_t(0));
  for (int64_t i = 0; i < width; ++i) {
    scalar_t* __restrict d_row = d_state + i * width;
    const scalar_t* __restrict row = state + i * width;
    const scalar_t* __restrict previous_row = previous + i * width;
    const scalar_t query = q[i], key = k[i];
    scalar_t dq = 0, dk = 0, dg = 0;
    // Without it the three sums are added in order, lane by lane: a chain of scalar adds
    // that took most of the backward's time. Reassociating them changes only rounding.
#pragma omp simd reduction(+ : dq, dk, dg)
    for (int64_t j = 0; j < width; ++j) {
      d_row[j] += query * d_o[j];  // o_t = S_tᵀ·q_t feeds S_t
      dq += row[j] * d_o[j];
      dk += d_row[j] * v[j];
      d_v[j] += key * d_row[j];
      dg += d_row[j] * previous_row[j];
      d_row[j] *= g[i];
    }
    d_q[i] = dq;
    d_k[i] = dk;
    d_g[i] = dg;
  }
}

// The step kernels as compiled functions, once for AVX2 and FMA (8 floats a vector) and
// once for any x86-64 (SSE2, 4), chosen when the program loads (GCC's target_clones): the
// build stays portable and this machine gets its wider vectors.
#define SEQBENCH_STEP_KERNELS(scalar_t)                                                            \
  __attribute__((target_clones("arch=haswell", "default"))) void StepForward(                      \
      scalar_t* state, const scalar_t* q, const scalar_t* k, const scalar_t* v, const scalar_t* g, \
      scalar_t* o, int64_t width) {                                                                \
    StepForwardImpl<true>(state, q, k, v, g, o, width);                                            \
  }                                                                                                \
  __attribute__((target_clones("arch=haswell", "default"))) void StepStateOnly(                    \
      scalar_t* state, const scalar_t* k, const scalar_t* v, const scalar_t* g, int64_t width) {   \
    StepForwardImpl<false>(state, static_cast<const scalar_t*>(nullptr), k, v, g,                  \
                           static_cast<scalar_t*>(nullptr), width);                                \
  }                                                                                                \
  __attribute__((target_clones("arch=haswell", "default"))) void StepBackward(                     \
      scalar_t* d_state, const scalar_t* state, const scalar_t* previous, const scalar_t* q,       \
      const scalar_t* k, const scalar_t* v, const scalar_t* g, const scalar_t* d_o, scalar_t* d_q, \
      scalar_t* d_k, scalar_t* d_v, scalar_t* d_g, int64_t width) {                                \
    StepBackwardImpl(d_state, state, previous, q, k, v, g, d_o, d_q, d_k, d_v, d_g, width);        \
  }
SEQBENCH_STEP_KERNELS(float)
SEQBENCH_STEP_KERNELS(double)
#undef SEQBENCH_STEP_KERNELS

// q, k, v, g: [B,T,H,dh] contiguous; initial: [B,H,dh,dh] contiguous; lengths: [B] int64
// on the CPU, the steps each sequence runs (the rest are padding: o written 0, the state
// carried unchanged, as a masked step would leave it when its query is 0) ->
// {o: [B,T,H,dh], final state, saved: [B,H,ceil(T/kSegment),dh,dh] (the state before
// steps 0, kSegment, 2·kSegment, ...)}.
std::vector<torch::Tensor> RecurrenceForward(const torch::Tensor& q, const torch::Tensor& k,
                                             const torch::Tensor& v, const torch::Tensor& g,
                                             const torch::Tensor& initial,
                                             const torch::Tensor& lengths) {
  const int64_t batch = q.size(0), steps = q.size(1), heads = q.size(2), width = q.size(3);
  const int64_t segments = (steps + kSegment - 1) / kSegment;
  auto o = torch::empty_like(q);
  auto final_state = initial.clone();
  auto saved = torch::empty({batch, heads, segments, width, width}, initial.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "fused_recurrent_forward", [&] {
    at::parallel_for(0, batch * heads, 1, [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end; ++task) {
        const int64_t b = task / heads, h = task % heads;
        const int64_t offset = (b * steps * heads + h) * width, stride = heads * width;
        scalar_t* state = final_state.data_ptr<scalar_t>() + task * width * width;
        scalar_t* checkpoints = saved.data_ptr<scalar_t>() + task * segments * width * width;
        const int64_t run = std::min(steps, lengths.data_ptr<int64_t>()[b]);
        for (int64_t t = run; t < steps; ++t) {
          scalar_t* o_row = o.data_ptr<scalar_t>() + offset + t * stride;
          std::fill(o_row, o_row + width, scalar_t(0));
        }
        for (int64_t t = 0; t < run; ++t) {
          if (t % kSegment == 0) {
            std::copy(state, state + width * width, checkpoints + (t / kSegment) * width * width);
          }
          const int64_t at = offset + t * stride;
          StepForward(state, q.data_ptr<scalar_t>() + at, k.data_ptr<scalar_t>() + at,
                      v.data_ptr<scalar_t>() + at, g.data_ptr<scalar_t>() + at,
                      o.data_ptr<scalar_t>() + at, width);
        }
      }
    });
  });
  return {o, final_state, saved};
}

// Returns {dq, dk, dv, dg, d initial}. d_o: [B,T,H,dh] and d_final: [B,H,dh,dh], contiguous;
// lengths as RecurrenceForward's (a padded step's gradients are 0; d_state passes it
// unchanged).
std::vector<torch::Tensor> RecurrenceBackward(const torch::Tensor& q, const torch::Tensor& k,
                                              const torch::Tensor& v, const torch::Tensor& g,
                                              const torch::Tensor& saved, const torch::Tensor& d_o,
                                              const torch::Tensor& d_final,
                                              const torch::Tensor& lengths) {
  const int64_t batch = q.size(0), steps = q.size(1), heads = q.size(2), width = q.size(3);
  const int64_t segments = saved.size(2);
  auto d_q = torch::empty_like(q), d_k = torch::empty_like(k), d_v = torch::empty_like(v),
       d_g = torch::empty_like(g);
  auto d_initial = d_final.clone();
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "fused_recurrent_backward", [&] {
    at::parallel_for(0, batch * heads, 1, [&](int64_t begin, int64_t end) {
      // The states of one segment: states[s] is the state after s of its steps.
      std::vector<scalar_t> states((kSegment + 1) * width * width);
      for (int64_t task = begin; task < end; ++task) {
        const int64_t b = task / heads, h = task % heads;
        const int64_t offset = (b * steps * heads + h) * width, stride = heads * width;
        scalar_t* d_state = d_initial.data_ptr<scalar_t>() + task * width * width;
        const scalar_t* checkpoints = saved.data_ptr<scalar_t>() + task * segments * width * width;
        const int64_t run = std::min(steps, lengths.data_ptr<int64_t>()[b]);
        for (int64_t t = run; t < steps; ++t) {
          for (const torch::Tensor* d : {&d_q, &d_k, &d_v, &d_g}) {
            scalar_t* row = d->data_ptr<scalar_t>() + offset + t * stride;
            std::fill(row, row + width, scalar_t(0));
          }
        }
        for (int64_t segment = (run + kSegment - 1) / kSegment - 1; segment >= 0; --segment) {
          const int64_t first = segment * kSegment, last = std::min(run, first + kSegment);
          std::copy(checkpoints + segment * width * width,
                    checkpoints + (segment + 1) * width * width, states.begin());
          for (int64_t t = first; t < last; ++t) {
            scalar_t* next = states.data() + (t - first + 1) * width * width;
            std::copy(next - width * width, next, next);
            const int64_t at = offset + t * stride;
            StepStateOnly(next, k.data_ptr<scalar_t>() + at, v.data_ptr<scalar_t>() + at,
                          g.data_ptr<scalar_t>() + at, width);
          }
          for (int64_t t = last - 1; t >= first; --t) {
            const scalar_t* state = states.data() + (t - first + 1) * width * width;
            const int64_t at = offset + t * stride;
            StepBackward(d_state, state, state - width * width, q.data_ptr<scalar_t>() + at,
                         k.data_ptr<scalar_t>() + at, v.data_ptr<scalar_t>() + at,
                         g.data_ptr<scalar_t>() + at, d_o.data_ptr<scalar_t>() + at,
                         d_q.data_ptr<scalar_t>() + at, d_k.data_ptr<scalar_t>() + at,
                         d_v.data_ptr<scalar_t>() + at, d_g.data_ptr<scalar_t>() + at, width);
          }
        }
      }
    });
  });
  return {d_q, d_k, d_v, d_g, d_initial};
}

// The kernels as one autograd node per layer. q, k, v, g: [B,T,H,dh]; initial: [B,H,dh,dh];
// lengths: [B] int64 on the CPU (not differentiated) -> {o: [B,T,H,dh], final state}.
class FusedRecurrence : public torch::autograd::Function<FusedRecurrence> {
 public:
  static variable_list forward(AutogradContext* ctx, torch::Tensor q, torch::Tensor k,
                               torch::Tensor v, torch::Tensor g, torch::Tensor initial,
                               torch::Tensor lengths) {
    q = q.contiguous(), k = k.contiguous(), v = v.contiguous(), g = g.contiguous();
    lengths = lengths.to(torch::kCPU, torch::kInt64).contiguous();
    TORCH_CHECK(lengths.dim() == 1 && lengths.size(0) == q.size(0),
                "fused_recurrent: lengths must be [B]");
    auto results = RecurrenceForward(q, k, v, g, initial.contiguous(), lengths);
    ctx->save_for_backward({q, k, v, g, results[2]});
    ctx->saved_data["lengths"] = lengths;
    return {results[0], results[1]};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    // In the inputs' type: under autocast, o's consumer may hand back a bf16 gradient.
    const auto dtype = saved[0].scalar_type();
    const torch::Tensor d_o = grad_outputs[0].defined() ? grad_outputs[0].to(dtype).contiguous()
                                                        : torch::zeros_like(saved[0]);
    const auto& saved_states = saved[4];  // [B,H,segments,dh,dh]
    const torch::Tensor d_final = grad_outputs[1].defined()
                                      ? grad_outputs[1].to(dtype).contiguous()
                                      : torch::zeros({saved_states.size(0), saved_states.size(1),
                                                      saved_states.size(3), saved_states.size(4)},
                                                     saved_states.options());
    auto grads = RecurrenceBackward(saved[0], saved[1], saved[2], saved[3], saved[4], d_o, d_final,
                                    ctx->saved_data["lengths"].toTensor());
    grads.emplace_back();  // lengths: no gradient
    return grads;
  }
};

class FusedRecurrent final : public Variant {
 public:
  Capabilities capabilities() const override {
    Capabilities caps = BaseCapabilities("hand-written kernel");
    caps.devices = {torch::kCPU};  // the kernel is host code
    return caps;
  }

  StepWork Work(Mode mode, const Batch& batch, int64_t num_tokens) const override {
    return WithRecomputedRecurrence(Variant::Work(mode, batch, num_tokens));
  }

  ForwardOutput Forward(const Batch& batch) override {
    return ForwardBatched(Weights::View(parameters(), config().num_layers), batch,
                          config().num_heads, FusedRecurrentMixer());
  }
};

}  // namespace

TimeMixer FusedRecurrentMixer(const torch::Tensor& lengths) {
  return [lengths](const LayerInputs& in, const torch::Tensor& mask, torch::Tensor& state) {
    const torch::Tensor g = Decay(in.decay_logits, mask);
    // The kernel takes one floating type: autocast's bf16 projections are promoted to
    // the state's float32 (the casts carry gradients).
    const auto dtype = PromotedType({in.q, in.k, in.v, g, state});
    // Without lengths every sequence runs all T steps, its padding masked.
    const torch::Tensor steps =
        lengths.defined() ? lengths : torch::full({in.q.size(0)}, in.q.size(1), torch::kInt64);
    auto outputs = FusedRecurrence::apply(in.q.to(dtype), in.k.to(dtype), in.v.to(dtype),
                                          g.to(dtype), state.to(dtype), steps);
    state = outputs[1];
    return outputs[0];
  };
}

SEQBENCH_REGISTER_VARIANT("fused_recurrent", FusedRecurrent,
                          "batched with the recurrence in one C++ kernel per layer (CPU)");

}  // namespace seqbench::simple_rnn
