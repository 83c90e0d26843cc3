// AdamW with its state off the accelerator, as ZeRO-Offload places it (Ren et al.,
// arXiv:2101.06840): the two moments and a float32 master copy of every parameter live in
// host memory, the update runs on the host's cores, and only the gradients (device to
// host) and the updated parameters (host to device) cross the bus, 8 bytes per parameter
// per step. It frees AdamW's 8 bytes of device memory per parameter.
//
// On CUDA, step() pipelines the work parameter by parameter on a copy stream of its own:
// every gradient's download is queued at once behind an event on the compute stream;
// the host updates parameter i as soon as its download has landed (while later ones are
// still in flight), then queues its upload, which overlaps the host's update of parameter
// i+1. The compute stream waits on an event after the last upload, so step() returns
// when the last host update is done: the next step's batch and forward are queued while
// the last uploads are still in flight. The host buffers that cross the bus are pinned
// (page-locked), so that the copies are asynchronous DMA. What this does not do is
// ZeRO-Offload's one-step delayed update, which overlaps the whole host update with the
// next step's forward and backward at the cost of computing each gradient at weights one
// update old.
//
// Parameters on the CPU take the same path with host-to-host copies. That is what the
// tests check against torch::optim::AdamW; the training pipeline skips offload off CUDA,
// where there is no device memory to relieve (PipelineSkipReason).
//
// Thread-safety: an optimizer belongs to one training loop.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace seqbench::training {

// Parameter groups carry torch::optim::AdamWOptions (lr, betas, eps, weight_decay; amsgrad
// is refused), so that the trainer sets learning rates and saves checkpoints through the
// same interface as for AdamW.
class OffloadedAdamW : public torch::optim::Optimizer {
 public:
  OffloadedAdamW(std::vector<torch::optim::OptimizerParamGroup> groups,
                 torch::optim::AdamWOptions defaults);

  // Called once per optimizer step, after the gradients are complete (clipped, unscaled).
  // Parameters without a gradient are left alone. `closure` must be null. On CUDA it
  // returns with the parameters' uploads queued before anything later on the current
  // stream, not finished.
  torch::Tensor step(LossClosure closure = nullptr) override;
  void save(torch::serialize::OutputArchive& archive) const override;
  // Throws c10::Error when the archive's state does not fit these parameters. The master
  // copies are taken from the parameters again at the next step, so load the parameters
  // first or after: either way the step uses their loaded values.
  void load(torch::serialize::InputArchive& archive) override;

  // Bytes of the two moments (AdamW's state, now on the host), for every parameter that
  // has taken a step: what OptimizerStateBytes() reports, comparable with AdamW's.
  int64_t StateBytes() const;
  // Every host byte this optimizer holds: the moments, the master copies and the gradient
  // staging buffers.
  int64_t HostBytes() const;

 private:
  struct ParameterState {
    int64_t step = 0;
    // Host tensors, [numel] float32, pinned when the parameter is on CUDA.
    torch::Tensor master, gradient, first, second;
    bool master_current = false;  // false: copy it from the parameter before the update
  };
  // One parameter of this step: flat views of it and of its gradient, its state (whose
  // step count is already advanced) and its group's options.
  struct Work {
    torch::Tensor parameter, grad;
    ParameterState* state;
    const torch::optim::AdamWOptions* options;
  };

  ParameterState& StateOf(size_t group, size_t index, const torch::Tensor& parameter);
  void StepOnCuda(const std::vector<Work>& work);

  std::vector<std::vector<ParameterState>> states_;  // [group][parameter]
  std::optional<c10::Stream> copy_stream_;           // CUDA: taken from LibTorch's pool once
};

}  // namespace seqbench::training
