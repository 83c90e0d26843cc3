// `batched_cudagraph`: `batched` with its whole train step (forward, backward and the SGD
// update) or forward step captured once in a CUDA graph and replayed, so that the
// T·L small kernels of the time loop cost one graph launch instead of one CPU-side launch
// each: the C++ counterpart of torch.compile(mode="reduce-overhead") in the seeds.
//
// A graph replays fixed addresses and fixed shapes: the variant keeps static tokens and
// mask buffers, and captures again when a batch's shape or lengths change (the mask, and
// with it the graph, depends on them). Outputs are copied out of the graph's buffers,
// which the next replay overwrites; gradients stay in them, where parameters().grad()
// points.
//
// CUDA only: the capture code is compiled where CMake finds a CUDA LibTorch
// (SEQBENCH_WITH_CUDA_GRAPHS); elsewhere the variant still registers, declares CUDA as its
// only device, and the harness skips it.
#include "variants/core/registry.h"
#include "variants/core/torch_compat.h"
#include "variants/simple_rnn/model.h"

#if SEQBENCH_WITH_CUDA_GRAPHS
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace seqbench::simple_rnn {
namespace {

#if SEQBENCH_WITH_CUDA_GRAPHS
// Makes `waiter` wait for the work queued so far on `producer` (through an event:
// CUDAStream has no wait() of its own in LibTorch 1.13).
void WaitFor(const c10::cuda::CUDAStream& waiter, const c10::cuda::CUDAStream& producer) {
  at::cuda::CUDAEvent event;
  event.record(producer);
  event.block(waiter);
}
#endif

class BatchedCudaGraph final : public Variant {
 public:
  Capabilities capabilities() const override {
    Capabilities capabilities = BaseCapabilities("launch overhead (CUDA graph)");
    capabilities.modes = {Mode::kTrain, Mode::kForward};
    capabilities.devices = {c10::DeviceType::CUDA};
    return capabilities;
  }

  // Eager, as `batched`: what a graph captures, and the path for anything not replayed.
  ForwardOutput Forward(const Batch& batch) override {
    return ForwardBatched(Weights::View(parameters(), config().num_layers), batch,
                          config().num_heads, StepLoopMixer());
  }

#if SEQBENCH_WITH_CUDA_GRAPHS
  ForwardOutput TrainStep(const Batch& batch) override { return Replay(train_, batch, true); }
  ForwardOutput InferStep(const Batch& batch) override { return Replay(infer_, batch, false); }

 private:
  struct Captured {
    at::cuda::CUDAGraph graph;
    std::vector<int64_t> lengths;  // what the graph was captured for
    torch::Tensor tokens, mask;    // static inputs: [B,T] int64, [B,T] bool or undefined
    ForwardOutput output;          // static outputs, overwritten by each replay
  };

  // One step of the captured kind, eagerly; captured as is.
  ForwardOutput Step(const Captured& captured, bool train) {
    const Weights weights = Weights::View(parameters(), config().num_layers);
    if (!train) {
      torch::NoGradGuard no_grad;
      return ForwardMasked(weights, captured.tokens, captured.mask, config().num_heads,
                           StepLoopMixer());
    }
    ForwardOutput output =
        ForwardMasked(weights, captured.tokens, captured.mask, config().num_heads, StepLoopMixer());
    output.loss.backward();
    torch::NoGradGuard no_grad;
    // Plain SGD, as Variant::TrainStep's optimizer: p -= lr * grad, in place.
    for (const auto& parameter : parameters().values()) {
      const_cast<torch::Tensor&>(parameter).add_(parameter.grad(), -kTrainLearningRate);
    }
    return output;
  }

  void Capture(std::unique_ptr<Captured>& slot, const Batch& batch, bool train) {
    TORCH_CHECK(device().is_cuda(), "batched_cudagraph runs on CUDA only");
    auto captured = std::make_unique<Captured>();
    const auto lengths = batch.lengths.to(torch::kCPU).contiguous();
    captured->lengths.assign(lengths.data_ptr<int64_t>(),
                             lengths.data_ptr<int64_t>() + lengths.numel());
    captured->tokens = batch.tokens.to(device()).clone();
    const bool has_padding = lengths.min().item<int64_t>() < batch.max_length();
    captured->mask = has_padding ? batch.PaddingMask() : torch::Tensor();

    // Warm up on a side stream first (cuBLAS handles, autograd's device threads), as
    // PyTorch's whole-network capture recipe does. Forward and backward only: the weights
    // must not move before the step the caller asked for.
    const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
    WaitFor(side, c10::cuda::getCurrentCUDAStream());
    {
      c10::cuda::CUDAStreamGuard guard(side);
      for (int i = 0; i < 3; ++i) {
        const Weights weights = Weights::View(parameters(), config().num_layers);
        auto output = ForwardMasked(weights, captured->tokens, captured->mask, config().num_heads,
                                    StepLoopMixer());
        if (train) output.loss.backward();
      }
    }
    WaitFor(c10::cuda::getCurrentCUDAStream(), side);
    // Gradients dropped: backward inside the capture allocates them in the graph's pool,
    // where every replay writes them.
    compat::ClearGradients(parameters().values());
    {
      c10::cuda::CUDAStreamGuard guard(side);
      captured->graph.capture_begin();
      captured->output = Step(*captured, train);
      captured->graph.capture_end();
    }
    WaitFor(c10::cuda::getCurrentCUDAStream(), side);
    slot = std::move(captured);
  }

  ForwardOutput Replay(std::unique_ptr<Captured>& slot, const Batch& batch, bool train) {
    const auto lengths = batch.lengths.to(torch::kCPU).contiguous();
    const bool same =
        slot && slot->tokens.sizes() == batch.tokens.sizes() &&
        std::equal(slot->lengths.begin(), slot->lengths.end(), lengths.data_ptr<int64_t>());
    if (!same) Capture(slot, batch, train);
    slot->tokens.copy_(batch.tokens, /*non_blocking=*/true);
    slot->graph.replay();
    return {slot->output.logits.clone(), slot->output.loss.clone()};
  }

  std::unique_ptr<Captured> train_, infer_;
#else
  ForwardOutput TrainStep(const Batch& batch) override { return Unavailable(); }
  ForwardOutput InferStep(const Batch& batch) override { return Unavailable(); }

 private:
  static ForwardOutput Unavailable() {
    TORCH_CHECK(false,
                "batched_cudagraph: this seqbench was built without a CUDA LibTorch (no CUDA "
                "graphs); build against one (ci/gpu/run)");
    return {};
  }
#endif
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("batched_cudagraph", BatchedCudaGraph,
                          "batched, its whole step captured in a CUDA graph and replayed");

}  // namespace seqbench::simple_rnn
