// `fused_recurrent`: `batched` with the recurrence of each layer in one hand-written C++
// kernel, forward and backward. Each (sequence, head) pair is one task of
// at::parallel_for; its dh×dh state stays in a local buffer (16 KiB at dh = 64, in L1/L2)
// for the whole sequence, and each step is one pass over the state's rows that updates it
// and accumulates the output. Instead of every state, forward keeps one state every
// kSegment steps; backward recomputes a segment's states into a local buffer (kSegment+1
// states, in L2) and walks it in reverse, again one pass over the rows per step. So the
// recurrence moves O(T/kSegment · dh²) bytes per task through memory instead of autograd's
// several passes over [B,H,dh,dh] per step, at the price of running it forward twice.
//
// The kernel reads the layer's fused projection [B,T,4D] where the GEMM wrote it: the
// query's scale is applied to a row as the step reads it, the padding rule is the
// sequence's length (its steps after it are not run), and backward writes the gradient of
// all four projections into one [B,T,4D] tensor, the decay's sigmoid derivative included.
// What ATen would do as a dozen passes over [B,T,D] a layer (scale, mask, bias, sigmoid,
// copies to contiguous heads, their backwards and the concatenation of four gradients)
// is one sigmoid and one bias-gradient sum.
// The step kernels themselves are in recurrence_kernels.cc (vector ones for float32).
#include "variants/simple_rnn/fused_recurrent.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <vector>

#include "variants/core/language_model.h"
#include "variants/core/registry.h"
#include "variants/simple_rnn/recurrence_kernels.h"

namespace seqbench::simple_rnn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Steps between saved states: the backward's recompute buffer is (kSegment + 1)·dh² values
// per task (272 KiB at dh = 64, float32), and the saved states are T/kSegment of them.
constexpr int64_t kSegment = 16;

// One head's columns of a [rows, C] tensor: step t of head h of sequence b starts at
// data + (first_row[b] + t)·C + first + h·dh (Layout).
template <typename scalar_t>
struct HeadColumns {
  scalar_t* data;
  int64_t columns;  // C
  int64_t first;
};

// The rows one (sequence, head) task reads and writes, as raw pointers: calling
// data_ptr() checks the tensor each time, several times a step. Row t of tensor `which`
// (its place in the list it was made from) is start[which] + t·step[which].
template <typename scalar_t, size_t N>
struct TaskRows {
  std::array<scalar_t*, N> start{};
  std::array<int64_t, N> step{};

  TaskRows(const std::array<HeadColumns<scalar_t>, N>& tensors, int64_t first_row, int64_t h,
           int64_t width) {
    for (size_t i = 0; i < N; ++i) {
      step[i] = tensors[i].columns;
      start[i] = tensors[i].data + first_row * step[i] + tensors[i].first + h * width;
    }
  }
  scalar_t* operator()(size_t which, int64_t t) const { return start[which] + t * step[which]; }
  // Asks for step t's rows ahead of their use: a task's rows lie C values apart, a stride
  // the hardware prefetchers follow poorly, and backward walks it in reverse.
  void Prefetch(int64_t t, int64_t width) const {
    constexpr int64_t kLine = 64 / sizeof(scalar_t);
    for (size_t i = 0; i < N; ++i) {
      for (int64_t j = 0; j < width; j += kLine) __builtin_prefetch((*this)(i, t) + j);
    }
  }
};

// The tensors' places in a task's rows: forward reads q, k, v (parts of the projection)
// and the decay, and writes o; backward reads the same and dO, and writes the four parts
// of the projection's gradient.
enum ForwardRow : size_t { kQ, kK, kV, kDecay, kO, kForwardRows };
enum BackwardRow : size_t { kDO = kO, kDQ, kDK, kDV, kDLogit, kBackwardRows };

// Where one call's sequences lie in the projection, with D = heads·width. Padded,
// projected is [B,T,4D] and sequence b's step t is row b·T + t; packed, projected is
// [N,4D] holding the sequences' real steps one after another (N = Σ lengths), and step t
// of sequence b is row lengths[0] + … + lengths[b−1] + t. Sequence b runs runs[b] steps;
// a padded layout's rows after them, up to T, are padding.
struct Layout {
  int64_t batch = 0, steps = 0, heads = 0, width = 0;  // steps: T, or the longest sequence
  bool padded = true;
  std::vector<int64_t> first_row, runs;
  int64_t model() const { return heads * width; }
  int64_t segments() const { return (steps + kSegment - 1) / kSegment; }
  int64_t rows_end(int64_t b) const { return padded ? steps : runs[b]; }  // rows it owns
};

// lengths: [B] int64 on the CPU, contiguous.
Layout LayoutOf(const torch::Tensor& projected, const torch::Tensor& lengths, int64_t heads,
                bool packed) {
  Layout layout;
  layout.batch = lengths.size(0);
  layout.heads = heads;
  layout.width = projected.size(-1) / 4 / heads;
  layout.padded = !packed;
  const int64_t* length = lengths.data_ptr<int64_t>();
  int64_t row = 0;
  for (int64_t b = 0; b < layout.batch; ++b) {
    TORCH_CHECK(length[b] >= 1, "fused_recurrent: every length must be at least 1");
    layout.first_row.push_back(packed ? row : b * projected.size(1));
    layout.runs.push_back(packed ? length[b] : std::min(projected.size(1), length[b]));
    layout.steps = std::max(layout.steps, length[b]);
    row += length[b];
  }
  if (packed) {
    TORCH_CHECK(projected.dim() == 2 && projected.size(0) == row,
                "fused_recurrent: packed projections must be [sum(lengths), 4D]");
  } else {
    TORCH_CHECK(projected.dim() == 3 && projected.size(0) == layout.batch,
                "fused_recurrent: projections must be [B,T,4D] with lengths [B]");
    layout.steps = projected.size(1);
  }
  return layout;
}

// The parts of the projection in their order: q, k, v, then the decay's logits.
template <typename scalar_t>
std::array<HeadColumns<scalar_t>, 4> Parts(const torch::Tensor& projected, const Layout& layout) {
  scalar_t* data = projected.data_ptr<scalar_t>();
  const int64_t columns = 4 * layout.model();
  return {{{data, columns, 0},
           {data, columns, layout.model()},
           {data, columns, 2 * layout.model()},
           {data, columns, 3 * layout.model()}}};
}

// A [rows, D] tensor's heads: the decay, o, and o's gradient.
template <typename scalar_t>
HeadColumns<scalar_t> Whole(const torch::Tensor& tensor, const Layout& layout) {
  return {tensor.data_ptr<scalar_t>(), layout.model(), 0};
}

// scaled = scale·row, over `width` values.
template <typename scalar_t>
void ScaleRow(const scalar_t* row, scalar_t scale, scalar_t* scaled, int64_t width) {
  for (int64_t j = 0; j < width; ++j) scaled[j] = scale * row[j];
}

// projected: [...,4D] and decay: [...,D] (sigmoid(logits + b_g)), contiguous, laid out as
// `layout` says; initial: [B,H,dh,dh] contiguous -> {o: [...,D] (0 at padding), final
// state, saved: [B,H,segments,dh,dh] (the state before steps 0, kSegment, 2·kSegment, ...)}.
std::vector<torch::Tensor> RecurrenceForward(const torch::Tensor& projected,
                                             const torch::Tensor& decay,
                                             const torch::Tensor& initial, const Layout& layout) {
  const int64_t width = layout.width, area = width * width, heads = layout.heads;
  auto o = torch::empty_like(decay);
  auto final_state = initial.clone();
  auto saved =
      torch::empty({layout.batch, heads, layout.segments(), width, width}, initial.options());
  AT_DISPATCH_FLOATING_TYPES(projected.scalar_type(), "fused_recurrent_forward", [&] {
    const StepKernels<scalar_t> kernels = KernelsFor(scalar_t{}, width);
    const auto parts = Parts<scalar_t>(projected, layout);
    const std::array<HeadColumns<scalar_t>, kForwardRows> tensors = {
        parts[0], parts[1], parts[2], Whole<scalar_t>(decay, layout), Whole<scalar_t>(o, layout)};
    const scalar_t scale = scalar_t(1) / std::sqrt(static_cast<scalar_t>(width));
    at::parallel_for(0, layout.batch * heads, 1, [&](int64_t begin, int64_t end) {
      std::vector<scalar_t> query(width);
      for (int64_t task = begin; task < end; ++task) {
        const int64_t b = task / heads, run = layout.runs[b];
        const TaskRows<scalar_t, kForwardRows> rows(tensors, layout.first_row[b], task % heads,
                                                    width);
        scalar_t* state = final_state.data_ptr<scalar_t>() + task * area;
        scalar_t* checkpoints = saved.data_ptr<scalar_t>() + task * layout.segments() * area;
        for (int64_t t = run; t < layout.rows_end(b); ++t) {
          std::fill_n(rows(kO, t), width, scalar_t(0));
        }
        for (int64_t t = 0; t < run; ++t) {
          if (t % kSegment == 0) std::copy(state, state + area, checkpoints + t / kSegment * area);
          if (t + 1 < run) rows.Prefetch(t + 1, width);
          ScaleRow(rows(kQ, t), scale, query.data(), width);
          kernels.forward(state, query.data(), rows(kK, t), rows(kV, t), rows(kDecay, t),
                          rows(kO, t), width);
        }
      }
    });
  });
  return {o, final_state, saved};
}

// The gradient of the decay's logits from that of the decay g = sigmoid(logits):
// d_logits = d_g·g·(1 − g).
template <typename scalar_t>
void DecayLogitGradient(const scalar_t* d_decay, const scalar_t* decay, scalar_t* d_logits,
                        int64_t width) {
  for (int64_t j = 0; j < width; ++j)
    d_logits[j] = d_decay[j] * decay[j] * (scalar_t(1) - decay[j]);
}

// Returns {d projected: [...,4D] (0 at padding), d initial}. Inputs as RecurrenceForward's
// and its `saved`; d_o: [...,D] and d_final: [B,H,dh,dh], contiguous.
std::vector<torch::Tensor> RecurrenceBackward(const torch::Tensor& projected,
                                              const torch::Tensor& decay,
                                              const torch::Tensor& saved, const torch::Tensor& d_o,
                                              const torch::Tensor& d_final, const Layout& layout) {
  const int64_t width = layout.width, area = width * width, heads = layout.heads;
  auto d_projected = torch::empty_like(projected);
  auto d_initial = d_final.clone();
  AT_DISPATCH_FLOATING_TYPES(projected.scalar_type(), "fused_recurrent_backward", [&] {
    const StepKernels<scalar_t> kernels = KernelsFor(scalar_t{}, width);
    const auto parts = Parts<scalar_t>(projected, layout);
    const auto d_parts = Parts<scalar_t>(d_projected, layout);
    const std::array<HeadColumns<scalar_t>, kBackwardRows> tensors = {
        parts[0],
        parts[1],
        parts[2],
        Whole<scalar_t>(decay, layout),
        Whole<scalar_t>(d_o, layout),
        d_parts[0],
        d_parts[1],
        d_parts[2],
        d_parts[3]};
    const scalar_t scale = scalar_t(1) / std::sqrt(static_cast<scalar_t>(width));
    at::parallel_for(0, layout.batch * heads, 1, [&](int64_t begin, int64_t end) {
      // The states of one segment: states[s] is the state after s of its steps. Step 0 has
      // no step before it: its call's previous dO is zeros and its previous dq unused.
      std::vector<scalar_t> states((kSegment + 1) * area), query(width), d_decay(width),
          no_d_o(width, scalar_t(0)), unused_d_q(width);
      for (int64_t task = begin; task < end; ++task) {
        const int64_t b = task / heads, run = layout.runs[b];
        const TaskRows<scalar_t, kBackwardRows> rows(tensors, layout.first_row[b], task % heads,
                                                     width);
        scalar_t* d_state = d_initial.data_ptr<scalar_t>() + task * area;
        const scalar_t* checkpoints = saved.data_ptr<scalar_t>() + task * layout.segments() * area;
        for (int64_t t = run; t < layout.rows_end(b); ++t) {
          for (const BackwardRow gradient : {kDQ, kDK, kDV, kDLogit}) {
            std::fill_n(rows(gradient, t), width, scalar_t(0));
          }
        }
        for (int64_t segment = (run + kSegment - 1) / kSegment - 1; segment >= 0; --segment) {
          const int64_t first = segment * kSegment, last = std::min(run, first + kSegment);
          std::copy(checkpoints + segment * area, checkpoints + (segment + 1) * area,
                    states.begin());
          for (int64_t t = first; t < last; ++t) {
            scalar_t* next = states.data() + (t - first + 1) * area;
            rows.Prefetch(t, width);  // for the walk back, in reverse, that follows
            kernels.recompute(next, next - area, rows(kK, t), rows(kV, t), rows(kDecay, t), width);
          }
          if (last == run) {  // the sequence's last step: no later call writes its dq
            kernels.query_gradient(states.data() + (last - first) * area, rows(kDO, last - 1),
                                   rows(kDQ, last - 1), width);
            ScaleRow(rows(kDQ, last - 1), scale, rows(kDQ, last - 1), width);  // q entered scaled
          }
          for (int64_t t = last - 1; t >= first; --t) {
            const scalar_t* previous = states.data() + (t - first) * area;  // S_{t-1}
            scalar_t* previous_d_q = t > 0 ? rows(kDQ, t - 1) : unused_d_q.data();
            ScaleRow(rows(kQ, t), scale, query.data(), width);
            kernels.backward(d_state, previous, query.data(), rows(kK, t), rows(kV, t),
                             rows(kDecay, t), rows(kDO, t),
                             t > 0 ? rows(kDO, t - 1) : no_d_o.data(), rows(kDK, t), rows(kDV, t),
                             d_decay.data(), previous_d_q, width);
            ScaleRow(previous_d_q, scale, previous_d_q, width);
            DecayLogitGradient(d_decay.data(), rows(kDecay, t), rows(kDLogit, t), width);
          }
        }
      }
    });
  });
  return {d_projected, d_initial};
}

// The kernels as one autograd node per layer. projected: [B,T,4D] (padded) or [N,4D]
// (packed, Layout); b_g: [D]; initial: [B,H,dh,dh]; lengths: [B] int64 (not
// differentiated) -> {o: [B,T,D] or [N,D], final state}.
class GatedRecurrenceFunction : public torch::autograd::Function<GatedRecurrenceFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, torch::Tensor projected, torch::Tensor b_g,
                               torch::Tensor initial, torch::Tensor lengths, int64_t heads,
                               bool packed) {
    projected = projected.contiguous();
    lengths = lengths.to(torch::kCPU, torch::kInt64).contiguous();
    TORCH_CHECK(projected.size(-1) % (4 * heads) == 0,
                "fused_recurrent: projections must be 4D wide with D a multiple of the heads");
    TORCH_CHECK(lengths.dim() == 1, "fused_recurrent: lengths must be [B]");
    const Layout layout = LayoutOf(projected, lengths, heads, packed);
    // ATen's vectorised sigmoid, in place on the biased copy; backward reuses it
    // (g·(1 − g)) instead of recomputing it.
    const torch::Tensor decay =
        (projected.narrow(-1, 3 * layout.model(), layout.model()) + b_g).sigmoid_();
    auto results = RecurrenceForward(projected, decay, initial.contiguous(), layout);
    ctx->save_for_backward({projected, decay, results[2]});
    ctx->saved_data["lengths"] = lengths;
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["packed"] = packed;
    return {results[0], results[1]};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &projected = saved[0], &decay = saved[1], &states = saved[2];
    const Layout layout =
        LayoutOf(projected, ctx->saved_data["lengths"].toTensor(), ctx->saved_data["heads"].toInt(),
                 ctx->saved_data["packed"].toBool());
    // In the inputs' type: under autocast, o's consumer may hand back a bf16 gradient.
    const auto dtype = projected.scalar_type();
    const torch::Tensor d_o = grad_outputs[0].defined() ? grad_outputs[0].to(dtype).contiguous()
                                                        : torch::zeros_like(decay);
    const torch::Tensor d_final =
        grad_outputs[1].defined()
            ? grad_outputs[1].to(dtype).contiguous()
            : torch::zeros({states.size(0), states.size(1), states.size(3), states.size(4)},
                           states.options());
    auto grads = RecurrenceBackward(projected, decay, states, d_o, d_final, layout);
    // b_g's gradient: the logits' gradient summed over every row.
    std::vector<int64_t> rows(projected.dim() - 1);
    std::iota(rows.begin(), rows.end(), 0);
    const torch::Tensor d_b_g = grads[0].narrow(-1, 3 * layout.model(), layout.model()).sum(rows);
    return {grads[0], d_b_g, grads[1], torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

class FusedRecurrent final : public Variant {
 public:
  Capabilities capabilities() const override {
    Capabilities caps = BaseCapabilities("hand-written kernel");
    caps.devices = {torch::kCPU};  // the kernel is host code
    return caps;
  }

  // The products run on the padded grid; the kernel runs (and in train recomputes) only
  // each sequence's real steps. The family's formula counts the forward recurrence at every
  // position, padded ones too: its FLOPs are overstated by their share of it.
  StepWork Work(Mode mode, const Batch& batch, int64_t num_tokens) const override {
    StepWork work = Variant::Work(mode, batch, num_tokens);
    if (mode == Mode::kTrain) work.recomputed_positions = batch.NumTokens();
    return work;
  }

  ForwardOutput Forward(const Batch& batch) override {
    const Weights weights = Weights::View(parameters(), config().num_layers);
    const int64_t heads = config().num_heads;
    return ForwardWithFusedHead(
        weights, batch, heads, [&](const torch::Tensor& x, int64_t layer, torch::Tensor& state) {
          return FusedRecurrentLayer(x, weights.layers[layer], heads, batch.lengths, state);
        });
  }
};

}  // namespace

namespace {

torch::Tensor ApplyGatedRecurrence(const torch::Tensor& projected, const torch::Tensor& b_g,
                                   int64_t num_heads, const torch::Tensor& lengths,
                                   torch::Tensor& state, bool packed) {
  // The kernel takes one floating type: autocast's bf16 projections are promoted to the
  // state's float32 (the casts carry gradients).
  const auto dtype = PromotedType({projected, b_g, state});
  auto outputs = GatedRecurrenceFunction::apply(projected.to(dtype), b_g.to(dtype), state.to(dtype),
                                                lengths, num_heads, packed);
  state = outputs[1];
  return outputs[0];
}

}  // namespace

torch::Tensor GatedRecurrence(const torch::Tensor& projected, const torch::Tensor& b_g,
                              int64_t num_heads, const torch::Tensor& lengths,
                              torch::Tensor& state) {
  return ApplyGatedRecurrence(projected, b_g, num_heads, lengths, state, /*packed=*/false);
}

torch::Tensor PackedGatedRecurrence(const torch::Tensor& projected, const torch::Tensor& b_g,
                                    int64_t num_heads, const torch::Tensor& lengths,
                                    torch::Tensor& state) {
  return ApplyGatedRecurrence(projected, b_g, num_heads, lengths, state, /*packed=*/true);
}

torch::Tensor FusedRecurrentLayer(const torch::Tensor& h, const LayerWeights& layer,
                                  int64_t num_heads, const torch::Tensor& lengths,
                                  torch::Tensor& state) {
  const torch::Tensor projected =
      torch::matmul(FusedRmsNorm(h, layer.norm), FusedProjectionWeight(layer));  // [B,T,4D]
  const torch::Tensor o = GatedRecurrence(projected, layer.b_g, num_heads, lengths, state);
  return h + torch::matmul(o, layer.w_o);
}

SEQBENCH_REGISTER_VARIANT("fused_recurrent", FusedRecurrent,
                          "batched with the recurrence in one C++ kernel per layer (CPU)");

}  // namespace seqbench::simple_rnn
