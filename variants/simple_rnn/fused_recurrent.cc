// `fused_recurrent`: `batched` with the recurrence of each layer in one hand-written C++
// kernel, forward and backward. Each (sequence, head) pair is one task of
// at::parallel_for; its dh×dh state stays in a local buffer (16 KiB at dh = 64, in L1/L2)
// for the whole sequence, and each step is one pass over the state's rows that updates it
// and accumulates the output. Instead of every state, forward keeps one state every
// kSegment steps; backward recomputes a segment's states into a local buffer (kSegment+1
// states, in L2) and walks it in reverse, again one pass over the rows per step. So the
// recurrence moves O(T/kSegment · dh²) bytes per task through memory instead of autograd's
// several passes over [B,H,dh,dh] per step, at the price of running it forward twice.
// The step kernels themselves are in recurrence_kernels.cc (vector ones for float32).
// The projections, norms and head stay ATen GEMMs under autograd, as in `batched`.
#include "variants/simple_rnn/fused_recurrent.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <initializer_list>
#include <vector>

#include "variants/core/registry.h"
#include "variants/simple_rnn/model.h"
#include "variants/simple_rnn/recurrence_kernels.h"

namespace seqbench::simple_rnn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Steps between saved states: the backward's recompute buffer is (kSegment + 1)·dh² values
// per task (272 KiB at dh = 64, float32), and the saved states are T/kSegment of them.
constexpr int64_t kSegment = 16;

// Raw pointers to the tensors a kernel reads and writes each step: calling data_ptr()
// checks the tensor each time, several times a step.
template <typename scalar_t>
struct Rows {
  std::vector<scalar_t*> bases;
  int64_t stride = 0, width = 0;

  Rows(std::initializer_list<const torch::Tensor*> tensors, int64_t heads, int64_t width)
      : stride(heads * width), width(width) {
    for (const torch::Tensor* tensor : tensors) bases.push_back(tensor->data_ptr<scalar_t>());
  }
  // Row t of tensor `which` (its place in the constructor's list) in the task at `offset`.
  scalar_t* operator()(size_t which, int64_t offset, int64_t t) const {
    return bases[which] + offset + t * stride;
  }
  // Asks for step t's rows of every tensor ahead of their use: a task's rows lie H·dh
  // apart, a stride the hardware prefetchers follow poorly, and backward walks it in
  // reverse.
  void Prefetch(int64_t offset, int64_t t) const {
    constexpr int64_t kLine = 64 / sizeof(scalar_t);
    for (scalar_t* base : bases) {
      for (int64_t j = 0; j < width; j += kLine) __builtin_prefetch(base + offset + t * stride + j);
    }
  }
};

// The tensors' places in a call's Rows: the inputs, then o (forward) or dO and the
// gradients (backward).
enum RowTensor : size_t { kQ, kK, kV, kG, kO, kDO = kO, kDQ, kDK, kDV, kDG };

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
    const StepKernels<scalar_t> kernels = KernelsFor(scalar_t{}, width);
    const Rows<scalar_t> rows({&q, &k, &v, &g, &o}, heads, width);
    const int64_t* run_lengths = lengths.data_ptr<int64_t>();
    at::parallel_for(0, batch * heads, 1, [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end; ++task) {
        const int64_t b = task / heads, h = task % heads;
        const int64_t offset = (b * steps * heads + h) * width;
        scalar_t* state = final_state.data_ptr<scalar_t>() + task * width * width;
        scalar_t* checkpoints = saved.data_ptr<scalar_t>() + task * segments * width * width;
        const int64_t run = std::min(steps, run_lengths[b]);
        for (int64_t t = run; t < steps; ++t) std::fill_n(rows(kO, offset, t), width, scalar_t(0));
        for (int64_t t = 0; t < run; ++t) {
          if (t % kSegment == 0) {
            std::copy(state, state + width * width, checkpoints + (t / kSegment) * width * width);
          }
          if (t + 1 < run) rows.Prefetch(offset, t + 1);
          kernels.forward(state, rows(kQ, offset, t), rows(kK, offset, t), rows(kV, offset, t),
                          rows(kG, offset, t), rows(kO, offset, t), width);
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
    const StepKernels<scalar_t> kernels = KernelsFor(scalar_t{}, width);
    const Rows<scalar_t> rows({&q, &k, &v, &g, &d_o, &d_q, &d_k, &d_v, &d_g}, heads, width);
    const int64_t* run_lengths = lengths.data_ptr<int64_t>();
    at::parallel_for(0, batch * heads, 1, [&](int64_t begin, int64_t end) {
      // The states of one segment: states[s] is the state after s of its steps.
      std::vector<scalar_t> states((kSegment + 1) * width * width);
      for (int64_t task = begin; task < end; ++task) {
        const int64_t b = task / heads, h = task % heads;
        const int64_t offset = (b * steps * heads + h) * width;
        scalar_t* d_state = d_initial.data_ptr<scalar_t>() + task * width * width;
        const scalar_t* checkpoints = saved.data_ptr<scalar_t>() + task * segments * width * width;
        const int64_t run = std::min(steps, run_lengths[b]);
        for (int64_t t = run; t < steps; ++t) {
          for (const RowTensor gradient : {kDQ, kDK, kDV, kDG}) {
            std::fill_n(rows(gradient, offset, t), width, scalar_t(0));
          }
        }
        for (int64_t segment = (run + kSegment - 1) / kSegment - 1; segment >= 0; --segment) {
          const int64_t first = segment * kSegment, last = std::min(run, first + kSegment);
          std::copy(checkpoints + segment * width * width,
                    checkpoints + (segment + 1) * width * width, states.begin());
          for (int64_t t = first; t < last; ++t) {
            scalar_t* next = states.data() + (t - first + 1) * width * width;
            rows.Prefetch(offset, t);  // for the walk back, in reverse, that follows
            kernels.recompute(next, next - width * width, rows(kK, offset, t), rows(kV, offset, t),
                              rows(kG, offset, t), width);
          }
          for (int64_t t = last - 1; t >= first; --t) {
            const scalar_t* state = states.data() + (t - first + 1) * width * width;
            kernels.backward(d_state, state, state - width * width, rows(kQ, offset, t),
                             rows(kK, offset, t), rows(kV, offset, t), rows(kG, offset, t),
                             rows(kDO, offset, t), rows(kDQ, offset, t), rows(kDK, offset, t),
                             rows(kDV, offset, t), rows(kDG, offset, t), width);
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
