#include "variants/simple_rnn/chunk_operands.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace seqbench::simple_rnn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The sizes of one call. A task is one (sequence, head, chunk) triple, numbered in the
// operands' [B,H,N] order, so that task i's rows are rows i·C … i·C + C − 1 of every
// [B,H,N,C,dh] operand and row i of the [B,H,N,dh] chunk decays.
struct ChunkGeometry {
  int64_t batch = 0, steps = 0, heads = 0, width = 0, chunk = 0, chunks = 0;

  ChunkGeometry(const torch::Tensor& projected, int64_t num_heads, int64_t chunk_size)
      : batch(projected.size(0)),
        steps(projected.size(1)),
        heads(num_heads),
        width(projected.size(2) / 4 / num_heads),
        chunk(chunk_size),
        chunks((projected.size(1) + chunk_size - 1) / chunk_size) {}

  int64_t model() const { return heads * width; }
  int64_t tasks() const { return batch * heads * chunks; }
  std::vector<int64_t> operand_shape() const { return {batch, heads, chunks, chunk, width}; }
  std::vector<int64_t> decay_shape() const { return {batch, heads, chunks, width}; }
};

// Where one task reads and writes: sequence b, head h, positions n·C … of the sequence.
struct Task {
  int64_t b, h, first;

  Task(const ChunkGeometry& geo, int64_t task)
      : b(task / (geo.heads * geo.chunks)),
        h(task / geo.chunks % geo.heads),
        first(task % geo.chunks * geo.chunk) {}
};

// The operands' storage, forward's outputs and backward's saved values alike.
template <typename scalar_t>
struct OperandPointers {
  scalar_t *decayed_q, *unscaled_k, *v, *chunk_decay;

  explicit OperandPointers(const std::vector<torch::Tensor>& tensors)
      : decayed_q(tensors[0].data_ptr<scalar_t>()),
        unscaled_k(tensors[1].data_ptr<scalar_t>()),
        v(tensors[2].data_ptr<scalar_t>()),
        chunk_decay(tensors[3].data_ptr<scalar_t>()) {}
};

// One task forward. log_decay: [B,T,D] log g (0 is not assumed at padding: the task
// skips padding); decays: the task's [C,dh] rows of E_t, written (backward reads them).
// Positions past T are written as zeros; padding positions keep the running decay and
// write a zero key.
template <typename scalar_t>
void ForwardTask(const ChunkGeometry& geo, int64_t task, const scalar_t* projected,
                 const scalar_t* log_decay, const int64_t* lengths, scalar_t scale,
                 const OperandPointers<scalar_t>& out, scalar_t* decays, scalar_t* log_b) {
  const Task at(geo, task);
  const int64_t dh = geo.width, model = geo.model();
  std::fill_n(log_b, dh, scalar_t(0));
  for (int64_t c = 0; c < geo.chunk; ++c) {
    const int64_t t = at.first + c, row = (task * geo.chunk + c) * dh;
    scalar_t* decay = decays + c * dh;
    if (t >= geo.steps) {
      std::fill_n(out.decayed_q + row, dh, scalar_t(0));
      std::fill_n(out.unscaled_k + row, dh, scalar_t(0));
      std::fill_n(out.v + row, dh, scalar_t(0));
      std::copy_n(decays + (c - 1) * dh, dh, decay);  // c >= 1: T >= 1 lies in chunk 0
      continue;
    }
    const scalar_t* q = projected + (at.b * geo.steps + t) * 4 * model + at.h * dh;
    const scalar_t* l = log_decay + (at.b * geo.steps + t) * model + at.h * dh;
    const bool real = t < lengths[at.b];
    if (real) {
      for (int64_t j = 0; j < dh; ++j) log_b[j] += l[j];
    }
    for (int64_t j = 0; j < dh; ++j) decay[j] = std::exp(log_b[j]);
    for (int64_t j = 0; j < dh; ++j) out.decayed_q[row + j] = q[j] * scale * decay[j];
    for (int64_t j = 0; j < dh; ++j) {
      out.unscaled_k[row + j] = real ? q[model + j] / decay[j] : scalar_t(0);
    }
    std::copy_n(q + 2 * model, dh, out.v + row);
  }
  std::copy_n(decays + (geo.chunk - 1) * dh, dh, out.chunk_decay + task * dh);
}

// Scratch of one thread's backward tasks.
template <typename scalar_t>
struct BackwardScratch {
  std::vector<scalar_t> log_gradient, suffix;

  BackwardScratch(int64_t chunk, int64_t width) : log_gradient(chunk * width), suffix(width) {}
};

// The first half of a task's backward, in position order: the gradients of q, k and v
// (written into d_projected), and log_gradient[c] = ∂L/∂log E_t from each operand's own
// factor of E_t. decays: the
// task's [C,dh] rows of E_t, as forward wrote them.
template <typename scalar_t>
void GradientsInOrder(const ChunkGeometry& geo, int64_t task, const scalar_t* decays,
                      const int64_t* lengths, scalar_t scale,
                      const OperandPointers<scalar_t>& saved, const OperandPointers<scalar_t>& grad,
                      scalar_t* d_projected, BackwardScratch<scalar_t>& scratch) {
  const Task at(geo, task);
  const int64_t dh = geo.width, model = geo.model();
  for (int64_t c = 0; c < geo.chunk; ++c) {
    const int64_t t = at.first + c, row = (task * geo.chunk + c) * dh;
    scalar_t* p = scratch.log_gradient.data() + c * dh;
    if (t >= geo.steps) {
      std::fill_n(p, dh, scalar_t(0));
      continue;
    }
    const scalar_t* decay = decays + c * dh;
    scalar_t* d = d_projected + (at.b * geo.steps + t) * 4 * model + at.h * dh;
    const bool real = t < lengths[at.b];
    for (int64_t j = 0; j < dh; ++j) d[j] = scale * decay[j] * grad.decayed_q[row + j];
    for (int64_t j = 0; j < dh; ++j) {
      d[model + j] = real ? grad.unscaled_k[row + j] / decay[j] : scalar_t(0);
    }
    std::copy_n(grad.v + row, dh, d + 2 * model);
    for (int64_t j = 0; j < dh; ++j) {
      p[j] = grad.decayed_q[row + j] * saved.decayed_q[row + j] -
             grad.unscaled_k[row + j] * saved.unscaled_k[row + j];
    }
  }
}

// One task backward: GradientsInOrder, then the walk back that turns ∂L/∂log E_t into
// ∂L/∂log g_s = Σ_{t≥s} ∂L/∂log E_t and the logits' gradient σ(−logit_s)·that (0 at
// padding). complement: [B,T,D] σ(−logit), formed as such rather than as 1 − g, which
// keeps no significant digits of a decay near 1.
template <typename scalar_t>
void BackwardTask(const ChunkGeometry& geo, int64_t task, const scalar_t* decays,
                  const scalar_t* complement, const int64_t* lengths, scalar_t scale,
                  const OperandPointers<scalar_t>& saved, const OperandPointers<scalar_t>& grad,
                  scalar_t* d_projected, BackwardScratch<scalar_t>& scratch) {
  GradientsInOrder(geo, task, decays, lengths, scale, saved, grad, d_projected, scratch);
  const Task at(geo, task);
  const int64_t dh = geo.width, model = geo.model();
  scalar_t* last = scratch.log_gradient.data() + (geo.chunk - 1) * dh;
  for (int64_t j = 0; j < dh; ++j) {
    last[j] += grad.chunk_decay[task * dh + j] * saved.chunk_decay[task * dh + j];
  }
  scalar_t* suffix = scratch.suffix.data();
  std::fill_n(suffix, dh, scalar_t(0));
  for (int64_t c = geo.chunk - 1; c >= 0; --c) {
    const int64_t t = at.first + c;
    const scalar_t* p = scratch.log_gradient.data() + c * dh;
    for (int64_t j = 0; j < dh; ++j) suffix[j] += p[j];
    if (t >= geo.steps) continue;
    const scalar_t* sigma = complement + (at.b * geo.steps + t) * model + at.h * dh;
    scalar_t* d_logit = d_projected + (at.b * geo.steps + t) * 4 * model + 3 * model + at.h * dh;
    const bool real = t < lengths[at.b];
    for (int64_t j = 0; j < dh; ++j) d_logit[j] = real ? suffix[j] * sigma[j] : scalar_t(0);
  }
}

class ChunkOperandsFunction : public torch::autograd::Function<ChunkOperandsFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& projected_in,
                               const torch::Tensor& b_g, const torch::Tensor& lengths_in,
                               int64_t heads, int64_t chunk, double scale) {
    const torch::Tensor projected = projected_in.contiguous();
    const torch::Tensor lengths = lengths_in.to(torch::kCPU, torch::kInt64).contiguous();
    const ChunkGeometry geo(projected, heads, chunk);
    // ATen's vectorised log-sigmoid and sigmoid (exact in log space where g is near 1);
    // the kernel forms E_t = exp(Σ log g) per chunk.
    const torch::Tensor logits = projected.narrow(-1, 3 * geo.model(), geo.model()) + b_g;
    const torch::Tensor log_decay = torch::log_sigmoid(logits);
    const torch::Tensor complement = logits.neg().sigmoid_();  // σ(−logit) = ∂log g/∂logit
    std::vector<torch::Tensor> outputs;
    for (int i = 0; i < 3; ++i) {
      outputs.push_back(torch::empty(geo.operand_shape(), projected.options()));
    }
    outputs.push_back(torch::empty(geo.decay_shape(), projected.options()));
    const torch::Tensor decays = torch::empty(geo.operand_shape(), projected.options());
    AT_DISPATCH_FLOATING_TYPES(projected.scalar_type(), "chunk_operands_forward", [&] {
      const OperandPointers<scalar_t> out(outputs);
      const scalar_t* input = projected.data_ptr<scalar_t>();
      const scalar_t* log_g = log_decay.data_ptr<scalar_t>();
      const int64_t* length = lengths.data_ptr<int64_t>();
      scalar_t* decay = decays.data_ptr<scalar_t>();
      const int64_t rows = geo.chunk * geo.width;
      at::parallel_for(0, geo.tasks(), 1, [&](int64_t begin, int64_t end) {
        std::vector<scalar_t> log_b(geo.width);
        for (int64_t task = begin; task < end; ++task) {
          ForwardTask(geo, task, input, log_g, length, static_cast<scalar_t>(scale), out,
                      decay + task * rows, log_b.data());
        }
      });
    });
    ctx->save_for_backward({complement, decays, outputs[0], outputs[1], outputs[3]});
    ctx->saved_data["lengths"] = lengths;
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["chunk"] = chunk;
    ctx->saved_data["scale"] = scale;
    return outputs;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &complement = saved[0], &decays = saved[1];
    const int64_t heads = ctx->saved_data["heads"].toInt();
    const int64_t batch = complement.size(0), steps = complement.size(1);
    const int64_t model = complement.size(2);
    const auto d_projected = torch::empty({batch, steps, 4 * model}, complement.options());
    const ChunkGeometry geo(d_projected, heads, ctx->saved_data["chunk"].toInt());
    std::vector<torch::Tensor> grads;
    for (auto& g : grad_outputs) grads.push_back(g.to(complement.scalar_type()).contiguous());
    // The saved operands in OperandPointers' order (v's slot unused: nothing reads it).
    const std::vector<torch::Tensor> kept = {saved[2], saved[3], saved[2], saved[4]};
    const torch::Tensor lengths = ctx->saved_data["lengths"].toTensor();
    const double scale = ctx->saved_data["scale"].toDouble();
    AT_DISPATCH_FLOATING_TYPES(complement.scalar_type(), "chunk_operands_backward", [&] {
      const OperandPointers<scalar_t> values(kept), grad(grads);
      const scalar_t* decay = decays.data_ptr<scalar_t>();
      const scalar_t* sigma = complement.data_ptr<scalar_t>();
      const int64_t* length = lengths.data_ptr<int64_t>();
      scalar_t* d = d_projected.data_ptr<scalar_t>();
      const int64_t rows = geo.chunk * geo.width;
      at::parallel_for(0, geo.tasks(), 1, [&](int64_t begin, int64_t end) {
        BackwardScratch<scalar_t> scratch(geo.chunk, geo.width);
        for (int64_t task = begin; task < end; ++task) {
          BackwardTask(geo, task, decay + task * rows, sigma, length, static_cast<scalar_t>(scale),
                       values, grad, d, scratch);
        }
      });
    });
    const torch::Tensor d_b_g =
        d_projected.narrow(-1, 3 * model, model).sum(std::vector<int64_t>{0, 1});
    return {d_projected, d_b_g, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

ChunkOperands ChunkOperandsOf(const torch::Tensor& projected, const torch::Tensor& b_g,
                              const torch::Tensor& lengths, int64_t num_heads, int64_t chunk,
                              double scale) {
  TORCH_CHECK(projected.device().is_cpu() && projected.dim() == 3,
              "chunk operands: projected must be a CPU tensor [B,T,4D]");
  TORCH_CHECK(projected.scalar_type() == b_g.scalar_type(),
              "chunk operands: projected and b_g must share a dtype");
  TORCH_CHECK(num_heads >= 1 && projected.size(2) % (4 * num_heads) == 0,
              "chunk operands: the projection must be 4D wide with D a multiple of the heads");
  TORCH_CHECK(chunk >= 1, "chunk operands: chunk must be at least 1, got ", chunk);
  TORCH_CHECK(lengths.dim() == 1 && lengths.size(0) == projected.size(0),
              "chunk operands: lengths must be [B]");
  const auto outputs =
      ChunkOperandsFunction::apply(projected, b_g, lengths, num_heads, chunk, scale);
  return {outputs[0], outputs[1], outputs[2], outputs[3]};
}

}  // namespace seqbench::simple_rnn
