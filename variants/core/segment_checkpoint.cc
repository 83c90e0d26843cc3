#include "variants/core/segment_checkpoint.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

namespace seqbench {
namespace {

using torch::autograd::variable_list;

class SegmentBackward : public torch::autograd::Node {
 public:
  SegmentBackward(SegmentFn segment, torch::Tensor input, std::vector<torch::Tensor> parameters)
      : segment_(std::move(segment)),
        input_(std::move(input)),
        parameters_(std::move(parameters)) {}

  std::string name() const override { return "CheckpointedSegmentBackward"; }

  // grads: one per output of the segment (undefined for outputs nothing used). Returns the
  // gradients of the input and of each parameter, in the order of the node's next edges.
  variable_list apply(variable_list&& grads) override {
    TORCH_CHECK(segment_,
                "a checkpointed segment was back-propagated through twice; it keeps "
                "its input for one backward only (retain_graph is not supported)");
    torch::AutoGradMode enable_grad(true);
    const torch::Tensor input = input_.detach().requires_grad_(true);
    const std::vector<torch::Tensor> outputs = segment_(input);
    TORCH_CHECK(outputs.size() == grads.size(), "a checkpointed segment returned ", outputs.size(),
                " outputs when run again, ", grads.size(),
                " the first time: it must be deterministic");
    variable_list differentiated, upstream;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (grads[i].defined() && outputs[i].requires_grad()) {
        differentiated.push_back(outputs[i]);
        upstream.push_back(grads[i]);
      }
    }
    // Gradients for the input and the parameters that require them; a frozen parameter's
    // stays undefined (torch::autograd::grad refuses a tensor that does not require grad).
    variable_list wrt = {input};
    std::vector<size_t> positions = {0};
    for (size_t i = 0; i < parameters_.size(); ++i) {
      if (parameters_[i].defined() && parameters_[i].requires_grad()) {
        wrt.push_back(parameters_[i]);
        positions.push_back(i + 1);
      }
    }
    variable_list result(1 + parameters_.size());
    if (!differentiated.empty()) {
      const variable_list computed =
          torch::autograd::grad(differentiated, wrt, upstream, /*retain_graph=*/false,
                                /*create_graph=*/false, /*allow_unused=*/true);
      for (size_t i = 0; i < computed.size(); ++i) result[positions[i]] = computed[i];
    }
    release_variables();
    return result;
  }

  void release_variables() override {
    segment_ = nullptr;
    input_.reset();
    parameters_.clear();
  }

 private:
  SegmentFn segment_;
  torch::Tensor input_;
  std::vector<torch::Tensor> parameters_;
};

}  // namespace

std::vector<torch::Tensor> CheckpointedSegment(const SegmentFn& segment, const torch::Tensor& input,
                                               const std::vector<torch::Tensor>& parameters) {
  const bool needs_graph =
      torch::GradMode::is_enabled() &&
      (input.requires_grad() ||
       std::any_of(parameters.begin(), parameters.end(),
                   [](const torch::Tensor& parameter) { return parameter.requires_grad(); }));
  if (!needs_graph) return segment(input);
  std::vector<torch::Tensor> outputs;
  {
    torch::NoGradGuard no_grad;
    outputs = segment(input);
  }
  auto node = std::shared_ptr<SegmentBackward>(new SegmentBackward(segment, input, parameters),
                                               torch::autograd::deleteNode);
  node->set_next_edges(torch::autograd::collect_next_edges(input, parameters));
  for (torch::Tensor& output : outputs) {
    // set_history would rewire the input's own gradient edge if the segment handed it back.
    TORCH_CHECK(!output.is_same(input), "a checkpointed segment must not return its input");
    torch::autograd::set_history(output, node);
  }
  return outputs;
}

}  // namespace seqbench
