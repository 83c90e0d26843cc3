// The CPU form of lstm_fused's layer: one autograd node per layer with a hand-written
// backward through time, the structure of cuDNN's and haste's LSTM layers. Forward keeps
// each step's activated gates, cell state and tanh(c) in time-major buffers; backward
// walks time in reverse with one [B,4H]·[4H,H] product and one pass over a step's gates
// per step, and takes the weight gradients of all steps at the end as three large GEMMs
// (Σ_t dGates_tᵀ·x_t, Σ_t dGates_tᵀ·h_{t-1} and the inputs' dGates·W_ih). Autograd's
// graph of the same loop records about ten nodes a step and runs each as its own kernel.
//
// Thread-safety: stateless functions; the tensors they return are new.
#pragma once

#include <torch/torch.h>

#include "variants/lstm/model.h"

namespace seqbench::lstm {

// FusedLayer's CPU implementation. x: [B,T,I] (not written); mask: [B,T] bool, true at
// each sequence's first lengths[b] positions, or undefined -> {outputs [B,T,H] (a view of
// a time-major buffer; padding repeats the sequence's last h), h_n [B,H], c_n [B,H]}.
LayerOutputs HandWrittenLayer(const torch::Tensor& x, const LayerWeights& layer,
                              const torch::Tensor& mask);

}  // namespace seqbench::lstm
