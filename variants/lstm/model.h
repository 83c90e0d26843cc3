// The multi-layer LSTM language model (specification: variants/lstm/README.md): the
// SimpleRNN's embedding and head around a stack of LSTM layers with PyTorch's gate order
// (i, f, g, o) and PyTorch's parameter layout, so the weights load into torch::nn::LSTM.
// Every lstm variant derives from LstmVariant and differs only in how it runs the stack.
//
// Thread-safety: free functions over tensors are safe from any thread; an LstmVariant,
// like every Variant, is driven by one thread at a time (lstm_wavefront uses worker
// threads internally and joins them before returning).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <utility>
#include <vector>

#include "variants/core/language_model.h"
#include "variants/core/variant.h"

namespace seqbench::lstm {

inline constexpr char kFamily[] = "lstm";

// Throws unless sizes are positive.
void ValidateConfig(const ModelConfig& config);

// The shared initialisation, drawn in float64 from a private generator. Names, with
// H = width: embedding [V,H]; layers.{l}.{weight_ih [4H,H], weight_hh [4H,H], bias_ih
// [4H], bias_hh [4H]} (torch::nn::LSTM's weight_ih_l{l} and friends, U(-1/sqrt(H),
// 1/sqrt(H)) as PyTorch initialises them); norm_out [H]; w_out [H,V].
ParameterSet InitWeights(const ModelConfig& config, uint64_t seed);

struct LayerWeights {
  torch::Tensor weight_ih, weight_hh, bias_ih, bias_hh;
};

struct Weights {
  torch::Tensor embedding;
  std::vector<LayerWeights> layers;
  torch::Tensor norm_out, w_out;

  static Weights View(const ParameterSet& parameters, int64_t num_layers);
  // [w_ih, w_hh, b_ih, b_hh] per layer: the flat list at::lstm and torch::nn::LSTM use.
  std::vector<torch::Tensor> FlatLstmWeights() const;
};

// The recurrent stack's results.
struct LstmOutputs {
  torch::Tensor outputs;  // [B,T,H] top layer; values at padding positions unspecified
  torch::Tensor h_n;      // [L,B,H] after each sequence's last token
  torch::Tensor c_n;      // [L,B,H]
};

// The pointwise half of a cell, from the pre-activation gates [B,4H] (i, f, g, o) and
// the cell state [B,H] -> (h, c).
std::pair<torch::Tensor, torch::Tensor> CellUpdate(const torch::Tensor& gates,
                                                   const torch::Tensor& c);

// The same update with fewer kernels: one sigmoid over all four gates (g's share is
// unused), one tanh for g, and addcmul for the cell. Same arithmetic, same result.
std::pair<torch::Tensor, torch::Tensor> FusedCellUpdate(const torch::Tensor& gates,
                                                        const torch::Tensor& c);

// Padding leaves the state unchanged: where `keep` [B,1] is false, the old state stays.
// keep undefined: no padding at this step.
torch::Tensor KeepWhere(const torch::Tensor& keep, const torch::Tensor& updated,
                        const torch::Tensor& old);

// One layer as lstm_fused runs it: the input projection of all T steps as one GEMM with both
// biases folded in, then one [H,4H] recurrent addmm a step. On the CPU one autograd node
// with a hand-written backward (HandWrittenLayer, fused_layer.h); elsewhere autograd's
// graph of addmm and FusedCellUpdate() a step (steps unbound once). x: [B,T,H]; mask:
// [B,T] bool or undefined -> {outputs [B,T,H], h [B,H], c [B,H]} (h_n and c_n of the
// layer: padding keeps the state).
struct LayerOutputs {
  torch::Tensor outputs, h, c;
};
LayerOutputs FusedLayer(const torch::Tensor& x, const LayerWeights& layer,
                        const torch::Tensor& mask);

// A step's pre-activation gates from its share of the input projection, projected_t: [B,4H]
// (biases included), and the previous h: [B,H] -> [B,4H]. Neither is written.
using GatesOfStep =
    std::function<torch::Tensor(const torch::Tensor& projected_t, const torch::Tensor& h)>;

// FusedLayer's time loop, for any recurrent product (lstm_int8_dynamic's is in int8):
// projected: [B,T,4H], the input projection of every step with both biases; mask: [B,T]
// bool or undefined. The state starts at zero, and padding keeps it.
LayerOutputs RunSteps(const torch::Tensor& projected, const torch::Tensor& mask,
                      const GatesOfStep& gates_of_step);

// Base of every lstm variant: Forward() is the shared embedding, Run() and the head.
// The family's step cost (FamilyEntry::step_cost): LanguageModelCost() with 16·D² FLOPs
// per position and layer (the input and recurrent [D,4D] GEMMs).
StepCost StepCostOf(const ModelConfig& config, const StepWork& work);

class LstmVariant : public Variant {
 public:
  Capabilities capabilities() const override;
  ForwardOutput Forward(const Batch& batch) override;

  // The stack alone on an embedded batch. inputs: [B,T,H]; mask: [B,T] bool or undefined.
  virtual LstmOutputs Run(const torch::Tensor& inputs, const torch::Tensor& mask) = 0;
  // Embeds the batch and runs the stack.
  LstmOutputs RunBatch(const Batch& batch);

 protected:
  Weights weights() const { return Weights::View(parameters(), config().num_layers); }
  // Capabilities with this variant's category; all modes but generate's incremental form.
  static Capabilities LstmCapabilities(const std::string& category);
};

}  // namespace seqbench::lstm
