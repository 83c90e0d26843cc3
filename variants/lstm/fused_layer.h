// The CPU form of lstm_fused's layer: one autograd node per layer with a hand-written
// backward through time, the structure of cuDNN's and haste's LSTM layers. Forward keeps
// each step's activated gates, cell state and tanh(c) in time-major buffers; backward
// walks time in reverse with one [B,4H]·[4H,H] product and one pass over a step's gates
// per step, and takes the weight gradients of all steps at the end as three large GEMMs
// (Σ_t dGates_tᵀ·x_t, Σ_t dGates_tᵀ·h_{t-1} and the inputs' dGates·W_ih). Autograd's
// graph of the same loop records about ten nodes a step and runs each as its own kernel.
//
// The same forward is exposed a block of steps at a time (LayerBuffers, ForwardBlock) for
// lstm_wavefront, whose stages run each layer's blocks as the layer below publishes them.
//
// Thread-safety: stateless functions; the tensors they return are new. ForwardBlock writes
// only its block's rows of the buffers it is given: calls on different layers' buffers may
// run on different threads.
#pragma once

#include <torch/torch.h>

#include "variants/lstm/model.h"

namespace seqbench::lstm {

// FusedLayer's CPU implementation. x: [B,T,I] (not written); mask: [B,T] bool, true at
// each sequence's first lengths[b] positions, or undefined -> {outputs [B,T,H] (a view of
// a time-major buffer; padding repeats the sequence's last h), h_n [B,H], c_n [B,H]}.
LayerOutputs HandWrittenLayer(const torch::Tensor& x, const LayerWeights& layer,
                              const torch::Tensor& mask);

// runs: [B] int64 on the CPU, sequence b's length, from mask: [B,T] bool (a right-padded
// prefix a row; checked) or undefined (every row T long).
torch::Tensor RunsOf(const torch::Tensor& mask, int64_t batch, int64_t steps);

// One layer's forward, time-major so that step t's rows are one contiguous [B,·] block.
// The step buffers (gates, tanh_c) hold every step when the layer's backward needs them,
// or one block's (S rows, row 0 the block's first step) for inference a block at a time.
struct LayerBuffers {
  torch::Tensor gates;   // [T or S,B,4H]: the input projection, then σ(i), σ(f), tanh(g), σ(o)
  torch::Tensor h, c;    // [T,B,H]; a padded row repeats its sequence's last state
  torch::Tensor tanh_c;  // [T or S,B,H]
  torch::Tensor runs;    // [B] int64 (RunsOf)
};

// Uninitialised buffers for `steps` steps of a [B,H] state (B = runs' size) in `options`'
// dtype on the CPU, the step buffers `block_steps` long (steps, or the largest block).
LayerBuffers LayerBuffersFor(int64_t steps, int64_t hidden, const torch::Tensor& runs,
                             const torch::TensorOptions& options, int64_t block_steps);

// Steps [start, start + S) of one layer, written into `buffers` (h and c must hold the
// steps before `start`): the block's input projection x·w_ihᵀ + bias as one GEMM into the
// gate rows, then per step the recurrent addmm in place and the cell. x: [S,B,I],
// contiguous, not written; w_ih: [4H,I]; w_hh: [4H,H]; bias: [4H] (b_ih + b_hh).
void ForwardBlock(const LayerBuffers& buffers, const torch::Tensor& x, const torch::Tensor& w_ih,
                  const torch::Tensor& w_hh, const torch::Tensor& bias, int64_t start);

}  // namespace seqbench::lstm
