// The elementwise linear recurrence h_t = a_t ⊙ h_{t-1} + b_t (h_{-1} = h0), the time
// mixing of QRNN's fo-pooling, minGRU and minLSTM (variants/{qrnn,min_gru,min_lstm}). Two
// evaluations of it, so that those families' variants differ only in which one they call:
// a sequential pass over raw memory with a hand-written backward, and the log-space
// parallel scan of the minGRU/minLSTM paper (Feng et al. 2024, arXiv:2410.01201; Heinsen
// 2023, arXiv:2311.06281).
//
// Thread-safety: free functions over tensors; safe from any thread.
#pragma once

#include <torch/torch.h>

namespace seqbench {

// The recurrence in one pass forward and one back, as one autograd node: O(T·N) work and
// only a, h and h0 saved, instead of the 3 nodes and 3 saved tensors a step that autograd
// builds for a loop of tensor ops. On CPU a kernel over raw memory (vectorised over N,
// parallel over B); elsewhere the same pass in tensor ops over unbound steps.
// a, b: [B,T,N]; h0: [B,N] -> h: [B,T,N]. Differentiable in a, b and h0. Inputs of
// different floating types are promoted to a common one; all three on one device.
torch::Tensor LinearRecurrence(const torch::Tensor& a, const torch::Tensor& b,
                               const torch::Tensor& h0);

namespace detail {
// LinearRecurrence() through its tensor-op passes whatever the device: what runs off the
// CPU, exposed so that the CPU tests hold it to the literal loop too.
torch::Tensor LinearRecurrenceWithTensorOps(const torch::Tensor& a, const torch::Tensor& b,
                                            const torch::Tensor& h0);
}  // namespace detail

// The same recurrence from h0 = 0 as a parallel scan in log space, for b > 0:
//   A_t = Σ_{r≤t} log a_r,   log h_t = A_t + logcumsumexp_{s≤t}(log b_s − A_s)
// Two cumulative ops over T instead of a sequential loop: O(T) work, O(log T) depth on a
// parallel machine. A_t falls without bound over long sequences, so in float32 h_t carries a
// relative error near 6e-8·|A_t| (the cancellation between A_t and the logcumsumexp).
// log_a, log_b: [B,T,N] -> h: [B,T,N], differentiable through autograd.
torch::Tensor LogSpaceLinearRecurrence(const torch::Tensor& log_a, const torch::Tensor& log_b);

// The minGRU paper's candidate activation g(x) = x + 0.5 for x >= 0, σ(x) below: continuous,
// increasing and positive, so that the states it feeds stay positive and have a logarithm
// (what the log-space scan needs). Elementwise, any shape.
torch::Tensor PositiveActivation(const torch::Tensor& x);
// log g(x), computed without forming g(x) for x < 0 (log_sigmoid, exact to the last bit,
// where softplus's linear cut-off at 20 is 2e-9 off), so that it stays finite where σ(x)
// underflows.
torch::Tensor LogPositiveActivation(const torch::Tensor& x);

}  // namespace seqbench
