// lstm_fused's layer on the CPU as one autograd node (fused_layer.h). Buffers are
// time-major, [T,B,·], so that step t's rows are one contiguous [B,·] block: the
// recurrent GEMM reads and writes them in place, and backward's weight gradients are
// single products over all T·B rows. The nonlinearities are ATen's own vector kernels
// (sigmoid_, tanh_ on a step's gate columns); what is left of a step, the cell update,
// the padding rule and the backward's gate arithmetic, is a plain loop over the step's
// rows here.
#include "variants/lstm/fused_layer.h"

#include <ATen/Dispatch.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace seqbench::lstm {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// One layer call's buffers, time-major: row (t, b) of a [T,B,W] buffer starts at
// (t·B + b)·W; the step buffers (gates, tanh_c) may hold one block of steps only, whose
// row 0 is step `origin`. `runs[b]` is sequence b's length: its steps from runs[b] on are
// padding, where the state is carried unchanged.
template <typename scalar_t>
struct Rows {
  int64_t batch = 0, hidden = 0;
  int64_t origin = 0;
  const int64_t* runs = nullptr;
  scalar_t* gates = nullptr;   // [T or S,B,4H]: σ(i), σ(f), tanh(g), σ(o) once activated
  scalar_t* h = nullptr;       // [T,B,H]
  scalar_t* c = nullptr;       // [T,B,H]
  scalar_t* tanh_c = nullptr;  // [T or S,B,H]

  bool padded(int64_t t, int64_t b) const { return t >= runs[b]; }
  scalar_t* gate(int64_t t, int64_t b) const {
    return gates + ((t - origin) * batch + b) * 4 * hidden;
  }
  scalar_t* tanh_at(int64_t t, int64_t b) const {
    return tanh_c + ((t - origin) * batch + b) * hidden;
  }
  scalar_t* at(scalar_t* base, int64_t t, int64_t b) const {
    return base + (t * batch + b) * hidden;
  }
};

template <typename scalar_t>
Rows<scalar_t> RowsOf(const torch::Tensor& gates, const torch::Tensor& h, const torch::Tensor& c,
                      const torch::Tensor& tanh_c, const torch::Tensor& runs, int64_t origin = 0) {
  Rows<scalar_t> rows;
  rows.origin = origin;
  rows.batch = h.size(1);
  rows.hidden = h.size(2);
  rows.runs = runs.data_ptr<int64_t>();
  rows.gates = gates.data_ptr<scalar_t>();
  rows.h = h.data_ptr<scalar_t>();
  rows.c = c.data_ptr<scalar_t>();
  rows.tanh_c = tanh_c.data_ptr<scalar_t>();
  return rows;
}

// c_t = σ(f)·c_{t-1} + σ(i)·tanh(g) on the real rows; a padded row keeps c_{t-1}. Step 0
// starts from c = 0 and is real for every sequence (lengths are at least 1).
template <typename scalar_t>
void UpdateCell(const Rows<scalar_t>& rows, int64_t t) {
  const int64_t hidden = rows.hidden;
  for (int64_t b = 0; b < rows.batch; ++b) {
    scalar_t* c = rows.at(rows.c, t, b);
    const scalar_t* c_prev = t > 0 ? rows.at(rows.c, t - 1, b) : nullptr;
    if (rows.padded(t, b)) {
      std::copy(c_prev, c_prev + hidden, c);
      continue;
    }
    const scalar_t *i = rows.gate(t, b), *f = i + hidden, *g = i + 2 * hidden;
    for (int64_t j = 0; j < hidden; ++j) {
      c[j] = i[j] * g[j] + (c_prev ? f[j] * c_prev[j] : scalar_t(0));
    }
  }
}

// h_t = σ(o)·tanh(c_t) on the real rows; a padded row keeps h_{t-1}.
template <typename scalar_t>
void UpdateHidden(const Rows<scalar_t>& rows, int64_t t) {
  const int64_t hidden = rows.hidden;
  for (int64_t b = 0; b < rows.batch; ++b) {
    scalar_t* h = rows.at(rows.h, t, b);
    if (rows.padded(t, b)) {
      const scalar_t* h_prev = rows.at(rows.h, t - 1, b);
      std::copy(h_prev, h_prev + hidden, h);
      continue;
    }
    const scalar_t *o = rows.gate(t, b) + 3 * hidden, *tanh_c = rows.tanh_at(t, b);
    for (int64_t j = 0; j < hidden; ++j) h[j] = o[j] * tanh_c[j];
  }
}

// One step forward: the recurrent product onto the step's input projection, the
// nonlinearities in place, the cell and the hidden state. w_hh: [4H,H].
template <typename scalar_t>
void ForwardStep(const LayerBuffers& buffers, const Rows<scalar_t>& rows, const torch::Tensor& w_hh,
                 int64_t t) {
  const int64_t hidden = rows.hidden;
  torch::Tensor gates = buffers.gates[t - rows.origin];  // [B,4H]
  if (t > 0) gates.addmm_(buffers.h[t - 1], w_hh.t());
  gates.narrow(1, 0, 2 * hidden).sigmoid_();
  gates.narrow(1, 2 * hidden, hidden).tanh_();
  gates.narrow(1, 3 * hidden, hidden).sigmoid_();
  UpdateCell(rows, t);
  torch::Tensor tanh_c = buffers.tanh_c[t - rows.origin];
  torch::tanh_out(tanh_c, buffers.c[t]);
  UpdateHidden(rows, t);
}

// Backward's running gradients, [B,H] each: d_h of h_t from the steps after t (the
// recurrent product's result), d_c of c_t, and `carried`, the part of d_h_{t-1} a padded
// row passes straight through (0 on real rows).
struct Carried {
  torch::Tensor d_h, d_c, carried;
};

// One step of backward through the cell, writing d_gates (pre-activation, [4H] a row) for
// step t and updating d_c and `carried`. d_out: [T,B,H], the loss's gradient of the
// outputs; padded rows get zero gate gradients and pass d_h on unchanged.
template <typename scalar_t>
void GateGradients(const Rows<scalar_t>& rows, const Carried& running, const scalar_t* d_out,
                   scalar_t* d_gates, int64_t t) {
  const int64_t hidden = rows.hidden;
  const scalar_t* d_h_rows = running.d_h.data_ptr<scalar_t>();
  scalar_t* carried_rows = running.carried.data_ptr<scalar_t>();
  scalar_t* d_c_rows = running.d_c.data_ptr<scalar_t>();
  for (int64_t b = 0; b < rows.batch; ++b) {
    const scalar_t* d_h = d_h_rows + b * hidden;
    const scalar_t* d_o_row = d_out + (t * rows.batch + b) * hidden;
    scalar_t* carried = carried_rows + b * hidden;
    scalar_t* d_c = d_c_rows + b * hidden;
    scalar_t* d_gate = d_gates + (t * rows.batch + b) * 4 * hidden;
    if (rows.padded(t, b)) {
      for (int64_t j = 0; j < hidden; ++j) carried[j] = d_h[j] + d_o_row[j];
      std::fill_n(d_gate, 4 * hidden, scalar_t(0));
      continue;
    }
    const scalar_t *i = rows.gate(t, b), *f = i + hidden, *g = i + 2 * hidden, *o = i + 3 * hidden;
    const scalar_t* tanh_c = rows.tanh_at(t, b);
    const scalar_t* c_prev = t > 0 ? rows.at(rows.c, t - 1, b) : nullptr;
    for (int64_t j = 0; j < hidden; ++j) {
      const scalar_t d_hidden = d_h[j] + d_o_row[j];
      const scalar_t d_cell = d_c[j] + d_hidden * o[j] * (scalar_t(1) - tanh_c[j] * tanh_c[j]);
      d_gate[j] = d_cell * g[j] * i[j] * (scalar_t(1) - i[j]);
      d_gate[hidden + j] = c_prev ? d_cell * c_prev[j] * f[j] * (scalar_t(1) - f[j]) : scalar_t(0);
      d_gate[2 * hidden + j] = d_cell * i[j] * (scalar_t(1) - g[j] * g[j]);
      d_gate[3 * hidden + j] = d_hidden * tanh_c[j] * o[j] * (scalar_t(1) - o[j]);
      d_c[j] = d_cell * f[j];
      carried[j] = 0;
    }
  }
}

class LstmLayerFunction : public torch::autograd::Function<LstmLayerFunction> {
 public:
  // x: [T,B,I] time-major, contiguous; w_ih: [4H,I]; w_hh: [4H,H]; b_ih, b_hh: [4H];
  // runs: [B] int64 -> {h: [T,B,H] (padding repeats the last h), c_n: [B,H]}.
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& w_ih, const torch::Tensor& w_hh,
                               const torch::Tensor& b_ih, const torch::Tensor& b_hh,
                               const torch::Tensor& runs) {
    const int64_t steps = x.size(0);
    const LayerBuffers buffers = LayerBuffersFor(steps, w_hh.size(1), runs, x.options(), steps);
    ForwardBlock(buffers, x, w_ih, w_hh, b_ih + b_hh, 0);
    ctx->save_for_backward({x, w_ih, w_hh, buffers.gates, buffers.h, buffers.c, buffers.tanh_c});
    ctx->saved_data["runs"] = runs;
    return {buffers.h, buffers.c[steps - 1].clone()};
  }

  // grads: {d h [T,B,H], d c_n [B,H]}, either undefined when unused -> {d x [T,B,I],
  // d w_ih, d w_hh, d b_ih, d b_hh, none}.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    TORCH_CHECK(!torch::GradMode::is_enabled(),
                "lstm_fused's CPU layer has a first-order backward only (no create_graph)");
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &w_ih = saved[1], &w_hh = saved[2];
    const LayerBuffers buffers{saved[3], saved[4], saved[5], saved[6],
                               ctx->saved_data["runs"].toTensor()};
    const int64_t steps = x.size(0), batch = x.size(1), hidden = w_hh.size(1);
    const torch::Tensor d_out =
        grads[0].defined() ? grads[0].contiguous() : torch::zeros_like(buffers.h);
    auto d_gates = torch::empty_like(buffers.gates);
    Carried running{torch::zeros({batch, hidden}, x.options()),
                    grads[1].defined() ? grads[1].clone(at::MemoryFormat::Contiguous)
                                       : torch::zeros({batch, hidden}, x.options()),
                    torch::empty({batch, hidden}, x.options())};
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "lstm_layer_backward", [&] {
      const auto rows =
          RowsOf<scalar_t>(buffers.gates, buffers.h, buffers.c, buffers.tanh_c, buffers.runs);
      for (int64_t t = steps - 1; t >= 0; --t) {
        GateGradients(rows, running, d_out.data_ptr<scalar_t>(), d_gates.data_ptr<scalar_t>(), t);
        // d h_{t-1} = carried + dGates_t·W_hh: the recurrent product's backward.
        if (t > 0) torch::addmm_out(running.d_h, running.carried, d_gates[t], w_hh);
      }
    });
    return WeightGradients(x, w_ih, w_hh, buffers.h, d_gates);
  }

 private:
  // The products over all steps at once: dGates [T·B,4H] against the inputs and the
  // previous hidden states (h_{-1} = 0 contributes nothing, so step 0 is left out).
  static variable_list WeightGradients(const torch::Tensor& x, const torch::Tensor& w_ih,
                                       const torch::Tensor& w_hh, const torch::Tensor& h,
                                       const torch::Tensor& d_gates) {
    const int64_t steps = x.size(0), gates = d_gates.size(2);
    const auto flat = d_gates.view({-1, gates});
    const auto d_x = flat.mm(w_ih).view({steps, x.size(1), x.size(2)});
    const auto d_w_ih = flat.t().mm(x.reshape({-1, x.size(2)}));
    const auto d_w_hh = steps > 1 ? d_gates.narrow(0, 1, steps - 1)
                                        .reshape({-1, gates})
                                        .t()
                                        .mm(h.narrow(0, 0, steps - 1).reshape({-1, h.size(2)}))
                                  : torch::zeros_like(w_hh);
    const auto d_b = flat.sum(0);
    return {d_x, d_w_ih, d_w_hh, d_b, d_b.clone(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor RunsOf(const torch::Tensor& mask, int64_t batch, int64_t steps) {
  if (!mask.defined()) return torch::full({batch}, steps, torch::kInt64);
  const torch::Tensor runs = mask.sum(1).to(torch::kCPU, torch::kInt64).contiguous();
  TORCH_CHECK(
      runs.size(0) == batch && runs.min().item<int64_t>() >= 1,
      "the hand-written LSTM layer: the mask must be [B,T] with at least one real position a row");
  // The loops take a row's real positions to be its first runs[b]: a prefix each.
  const auto prefix = torch::arange(steps, runs.options()).unsqueeze(0) < runs.unsqueeze(1);
  TORCH_CHECK(
      torch::equal(prefix, mask.to(torch::kCPU, torch::kBool)),
      "the hand-written LSTM layer: the mask must mark a prefix of each row (right padding)");
  return runs;
}

LayerBuffers LayerBuffersFor(int64_t steps, int64_t hidden, const torch::Tensor& runs,
                             const torch::TensorOptions& options, int64_t block_steps) {
  const int64_t batch = runs.size(0);
  LayerBuffers buffers;
  buffers.gates = torch::empty({block_steps, batch, 4 * hidden}, options);
  buffers.h = torch::empty({steps, batch, hidden}, options);
  buffers.c = torch::empty_like(buffers.h);
  buffers.tanh_c = torch::empty({block_steps, batch, hidden}, options);
  buffers.runs = runs;
  return buffers;
}

void ForwardBlock(const LayerBuffers& buffers, const torch::Tensor& x, const torch::Tensor& w_ih,
                  const torch::Tensor& w_hh, const torch::Tensor& bias, int64_t start) {
  const int64_t size = x.size(0), batch = x.size(1), steps = buffers.h.size(0);
  // Step buffers as long as the layer are indexed by step, a block's by step - start.
  const int64_t origin = buffers.gates.size(0) == steps ? 0 : start;
  TORCH_CHECK(x.is_contiguous() && batch == buffers.h.size(1) && start + size <= steps &&
                  start - origin + size <= buffers.gates.size(0),
              "ForwardBlock: x must be a contiguous [S,B,I] block inside the buffers' steps");
  torch::Tensor block_gates =
      buffers.gates.narrow(0, start - origin, size).view({size * batch, -1});
  torch::addmm_out(block_gates, bias, x.view({size * batch, x.size(2)}), w_ih.t());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "lstm_layer_forward", [&] {
    const auto rows =
        RowsOf<scalar_t>(buffers.gates, buffers.h, buffers.c, buffers.tanh_c, buffers.runs, origin);
    for (int64_t t = start; t < start + size; ++t) ForwardStep(buffers, rows, w_hh, t);
  });
}

LayerOutputs HandWrittenLayer(const torch::Tensor& x, const LayerWeights& layer,
                              const torch::Tensor& mask) {
  TORCH_CHECK(x.device().is_cpu(), "lstm_fused: the hand-written layer runs on the CPU");
  const int64_t batch = x.size(0), steps = x.size(1);
  const auto runs = RunsOf(mask, batch, steps);
  const auto time_major = x.transpose(0, 1).contiguous();  // [T,B,I]
  const auto out = LstmLayerFunction::apply(time_major, layer.weight_ih, layer.weight_hh,
                                            layer.bias_ih, layer.bias_hh, runs);
  return {out[0].transpose(0, 1), out[0].select(0, steps - 1), out[1]};
}

}  // namespace seqbench::lstm
