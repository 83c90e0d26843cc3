// `lstm_torch`: what a user would pick instead, and the bar for the others: the op that
// torch::nn::LSTM::forward dispatches to (at::lstm: cuDNN on CUDA, LibTorch's native or
// oneDNN path on CPU), called with this variant's own parameters so that gradients land
// on them. Ragged batches go through pack_padded_sequence, as with nn::LSTM. The tests
// check it against a real torch::nn::LSTM module loaded with the same weights.
// `train` follows grad mode: cuDNN refuses a backward through an op run with train=false
// (with no dropout both give the same numbers).
#include "variants/core/registry.h"
#include "variants/lstm/model.h"

namespace seqbench::lstm {
namespace {

namespace rnn = torch::nn::utils::rnn;

class LstmTorch final : public LstmVariant {
 public:
  Capabilities capabilities() const override { return LstmCapabilities("library (cuDNN/oneDNN)"); }

  LstmOutputs Run(const torch::Tensor& inputs, const torch::Tensor& mask) override {
    const Weights w = weights();
    const int64_t layers = static_cast<int64_t>(w.layers.size());
    const auto zeros = torch::zeros({layers, inputs.size(0), inputs.size(2)}, inputs.options());
    const auto flat = w.FlatLstmWeights();
    if (!mask.defined()) {
      auto [outputs, h_n, c_n] =
          torch::lstm(inputs, {zeros, zeros}, flat, /*has_biases=*/true, layers,
                      /*dropout=*/0.0, /*train=*/torch::GradMode::is_enabled(),
                      /*bidirectional=*/false, /*batch_first=*/true);
      return {outputs, h_n, c_n};
    }
    const auto lengths = mask.sum(1).to(torch::kCPU, torch::kLong);
    const rnn::PackedSequence packed =
        rnn::pack_padded_sequence(inputs, lengths, /*batch_first=*/true, /*enforce_sorted=*/false);
    auto [data, h_n, c_n] = torch::lstm(packed.data(), packed.batch_sizes(), {zeros, zeros}, flat,
                                        /*has_biases=*/true, layers, /*dropout=*/0.0,
                                        /*train=*/torch::GradMode::is_enabled(),
                                        /*bidirectional=*/false);
    const rnn::PackedSequence output(data, packed.batch_sizes(), packed.sorted_indices(),
                                     packed.unsorted_indices());
    auto [padded, unused_lengths] = rnn::pad_packed_sequence(output, /*batch_first=*/true,
                                                             /*padding_value=*/0.0, inputs.size(1));
    // The packed op returns states in length-sorted order; nn::LSTM restores the batch's.
    const auto unsorted = packed.unsorted_indices();
    return {padded, h_n.index_select(1, unsorted), c_n.index_select(1, unsorted)};
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("lstm_torch", LstmTorch,
                          "torch::nn::LSTM's own op (at::lstm) with the same weights");

}  // namespace seqbench::lstm
