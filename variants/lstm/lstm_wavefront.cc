// `lstm_wavefront`: layer-parallel execution over the anti-diagonals. Cell (l, t) needs
// only (l, t-1) and (l-1, t), so every cell with l + t = s can run at once: with L
// layers and T steps the critical path drops from L*T cells to T+L-1.
//
// On CPU the layers are split into `threads` contiguous stages, one thread each (the
// caller runs the first), and time into blocks of `block` steps. For each block a stage
// runs its layers in order; a layer first projects the whole block of inputs from the
// layer below in one GEMM (lstm_fused's hoisting, per block), then steps through it with
// one recurrent addmm a step. A finished block is published with a release-store of the
// layer's step counter, which the next stage reads with acquire: no lock per cell, and a
// waiting stage spins with yield. The critical path is (T/block + stages - 1) blocks.
// Every cell does the same arithmetic whatever the thread count, so results are
// identical for 1, 2 or L threads.
//
// BLAS threads: the stages are the parallelism, one core each; a BLAS that threads every
// GEMM as well (OpenBLAS does by default) oversubscribes those cores. While more than one
// stage runs, OpenBLAS is set to one thread for the life of the variant (set in OnSetup,
// restored by the destructor: switching it every forward wakes and parks OpenBLAS's own
// threads, which measured as ±30% noise), found at run time so that any other BLAS is
// left alone.
//
// On CUDA the same stages run, each host thread issuing onto its own CUDA stream, so that
// the stages' kernels can overlap on the GPU (on the default stream they would serialise):
// a hand-off from layer l to the next stage is an event recorded on l's stream after its
// block and waited on by the consumer's stream before it reads the block (Appleyard et al.,
// arXiv:1604.01946, section 3.3). The host-side counter still orders the two threads, so
// that the event is recorded before anyone waits on it. Stream code is compiled in CUDA
// builds of LibTorch only (SEQBENCH_WITH_CUDA_STREAMS); CPU builds keep the threads alone.
//
// Gradients: the forward runs in the worker threads with the caller's grad mode, and
// backward goes through the autograd engine as usual (the wavefront covers forward only;
// the engine orders each backward op on its forward op's stream).
#include <dlfcn.h>

#include <atomic>
#include <exception>
#include <optional>
#include <thread>

#include "variants/core/registry.h"
#include "variants/lstm/model.h"

#if SEQBENCH_WITH_CUDA_STREAMS
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace seqbench::lstm {
namespace {

#if SEQBENCH_WITH_CUDA_STREAMS
// Holds a stage's stream current on its thread while alive.
using StreamScope = std::optional<c10::cuda::CUDAStreamGuard>;

// The stages' streams, taken from LibTorch's pool once per variant and kept: the caching
// allocator reuses a block only on the stream it was allocated on, so fresh streams every
// forward (the pool hands them out in rotation) would pay cudaMalloc inside timed steps.
// Thread-safety: filled on the caller's thread before the stages start.
class StageStreamSet {
 public:
  const std::vector<c10::cuda::CUDAStream>& For(int64_t stages, c10::DeviceIndex device) {
    if (static_cast<int64_t>(streams_.size()) != stages || device_ != device) {
      streams_.clear();
      for (int64_t stage = 0; stage < stages; ++stage) {
        streams_.push_back(c10::cuda::getStreamFromPool(false, device));
      }
      device_ = device;
    }
    return streams_;
  }

 private:
  std::vector<c10::cuda::CUDAStream> streams_;
  c10::DeviceIndex device_ = -1;
};

// One CUDA stream per stage and one event per (layer, block) hand-off, for one forward.
// Thread-safety: Enter, Published and Consume are called by the stage threads, each on
// its own stage and its own layers' events (a consumer waits only on an event the host
// counter shows recorded); the constructor and Join run on the caller's thread.
class StageStreams {
 public:
  // inputs: [B,T,D] on the device the stages run on; a CPU tensor disables every call.
  StageStreams(const torch::Tensor& inputs, int64_t stages, int64_t layers, int64_t blocks,
               StageStreamSet& set)
      : enabled_(inputs.is_cuda()), blocks_(blocks) {
    if (!enabled_) return;
    caller_ = c10::cuda::getCurrentCUDAStream(inputs.device().index());
    started_.record(*caller_);  // the inputs and layer 0's projection are issued before it
    streams_ = set.For(stages, inputs.device().index());
    handoffs_.resize(layers * blocks);
  }

  // On stage `stage`'s thread before its first launch (allocation included): its stream
  // becomes current for the thread and waits for the caller's work issued so far.
  void Enter(int64_t stage, StreamScope& scope) {
    if (!enabled_) return;
    scope.emplace(streams_[stage]);
    started_.block(streams_[stage]);
  }
  // After layer `layer`'s block `block` is issued, before the host counter publishes it.
  void Published(int64_t layer, int64_t block) {
    if (enabled_) handoffs_[layer * blocks_ + block].record(c10::cuda::getCurrentCUDAStream());
  }
  // Before reading layer `layer`'s block `block` issued by another stage.
  void Consume(int64_t layer, int64_t block) {
    if (enabled_) handoffs_[layer * blocks_ + block].block(c10::cuda::getCurrentCUDAStream());
  }
  // On the caller's thread after the stage threads joined: the caller's stream waits for
  // every stage, so that what it issues next (and the allocator's reuse of the stages'
  // blocks, freed from its stream) comes after them.
  void Join() {
    if (!enabled_) return;
    for (const auto& stream : streams_) {
      at::cuda::CUDAEvent finished;
      finished.record(stream);
      finished.block(*caller_);
    }
  }

 private:
  bool enabled_;
  int64_t blocks_;
  std::optional<c10::cuda::CUDAStream> caller_;
  at::cuda::CUDAEvent started_;
  std::vector<c10::cuda::CUDAStream> streams_;
  std::vector<at::cuda::CUDAEvent> handoffs_;
};
#else
struct StreamScope {};
struct StageStreamSet {};

// Without CUDA in the build the stages are host threads only (see the file comment).
class StageStreams {
 public:
  StageStreams(const torch::Tensor&, int64_t, int64_t, int64_t, StageStreamSet&) {}
  void Enter(int64_t, StreamScope&) {}
  void Published(int64_t, int64_t) {}
  void Consume(int64_t, int64_t) {}
  void Join() {}
};
#endif

// Sets OpenBLAS (if it is the loaded BLAS) to one thread for this object's lifetime. The
// setting is process-wide: the harness runs one variant at a time, so lifetimes nest.
class SingleThreadedOpenBlas {
 public:
  SingleThreadedOpenBlas() {
    set_ = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
    const auto get = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
    if (set_ == nullptr || get == nullptr) return;
    previous_ = get();
    set_(1);
  }
  ~SingleThreadedOpenBlas() {
    if (set_ != nullptr && previous_ > 0) set_(previous_);
  }
  SingleThreadedOpenBlas(const SingleThreadedOpenBlas&) = delete;
  SingleThreadedOpenBlas& operator=(const SingleThreadedOpenBlas&) = delete;

 private:
  void (*set_)(int) = nullptr;
  int previous_ = 0;
};

class LstmWavefront final : public LstmVariant {
 public:
  Capabilities capabilities() const override {
    Capabilities caps = LstmCapabilities("layer parallelism");
    caps.options["block"] = "steps per hand-off between stages (default 16)";
    caps.options["threads"] =
        "worker threads, each running a contiguous group of layers (default: one per layer)";
    return caps;
  }

  LstmOutputs Run(const torch::Tensor& inputs, const torch::Tensor& mask) override {
    const Weights w = weights();
    const int64_t layers = static_cast<int64_t>(w.layers.size());
    const int64_t steps = inputs.size(1);
    const int64_t stages = std::min(OptionOr("threads", layers), layers);
    const int64_t block = OptionOr("block", 16);
    TORCH_CHECK(stages >= 1, "lstm_wavefront: threads must be at least 1, got ", stages);
    TORCH_CHECK(block >= 1, "lstm_wavefront: block must be at least 1, got ", block);

    // Shared, read-only during the wavefront.
    std::vector<torch::Tensor> input_weights, recurrent_weights, biases;
    for (const LayerWeights& lw : w.layers) {
      input_weights.push_back(lw.weight_ih.t());
      recurrent_weights.push_back(lw.weight_hh.t());
      biases.push_back(lw.bias_ih + lw.bias_hh);
    }
    // Layer 0's inputs are all known: its input projection is one GEMM over T.
    const auto first_projection = torch::matmul(inputs, input_weights[0]) + biases[0];  // [B,T,4H]
    // Cut once, before the stages start: a narrow per block or a select per step would make
    // the backward scatter into [B,T,4H] zero buffers over and over (O(T^2)).
    const std::vector<torch::Tensor> first_blocks = first_projection.split(block, 1);
    const std::vector<torch::Tensor> mask_steps =
        mask.defined() ? mask.unbind(1) : std::vector<torch::Tensor>();

    // outputs[l][t] is written once by layer l's stage, then published through done[l].
    std::vector<std::vector<torch::Tensor>> outputs(layers, std::vector<torch::Tensor>(steps));
    std::vector<std::atomic<int64_t>> done(layers);
    for (auto& counter : done) counter.store(0);
    std::vector<torch::Tensor> h_n(layers), c_n(layers);
    std::atomic<bool> failed{false};
    std::vector<std::exception_ptr> errors(stages);
    const bool grad_enabled = torch::GradMode::is_enabled();
    const int64_t blocks = (steps + block - 1) / block;
    StageStreams streams(inputs, stages, layers, blocks, stream_set_);

    const auto run_stage = [&](int64_t stage) {
      try {
        torch::AutoGradMode grad_mode(grad_enabled);  // grad mode is thread-local
        StreamScope on_stage_stream;
        streams.Enter(stage, on_stage_stream);
        const int64_t first = stage * layers / stages, last = (stage + 1) * layers / stages;
        std::vector<torch::Tensor> h, c;
        for (int64_t l = first; l < last; ++l) {
          h.push_back(torch::zeros({inputs.size(0), inputs.size(2)}, inputs.options()));
          c.push_back(h.back());
        }
        for (int64_t start = 0; start < steps; start += block) {
          const int64_t size = std::min(block, steps - start);
          for (int64_t l = first; l < last; ++l) {
            torch::Tensor projected;  // [B,size,4H]: this block's input part of the gates
            if (l == 0) {
              projected = first_blocks[start / block];
            } else {
              if (l == first) {  // the layer below belongs to another stage
                while (done[l - 1].load(std::memory_order_acquire) < start + size) {
                  if (failed.load(std::memory_order_relaxed)) return;
                  std::this_thread::yield();
                }
                streams.Consume(l - 1, start / block);
              }
              const std::vector<torch::Tensor> below(outputs[l - 1].begin() + start,
                                                     outputs[l - 1].begin() + start + size);
              projected = torch::matmul(torch::stack(below, 1), input_weights[l]) + biases[l];
            }
            const int64_t k = l - first;
            const std::vector<torch::Tensor> projected_steps = projected.unbind(1);
            for (int64_t t = start; t < start + size; ++t) {
              const auto gates =
                  torch::addmm(projected_steps[t - start], h[k], recurrent_weights[l]);
              auto [h_next, c_next] = FusedCellUpdate(gates, c[k]);
              const auto keep = mask.defined() ? mask_steps[t].unsqueeze(1) : torch::Tensor();
              c[k] = KeepWhere(keep, c_next, c[k]);
              h[k] = KeepWhere(keep, h_next, h[k]);
              outputs[l][t] = h[k];
            }
            if (l == last - 1 && l + 1 < layers) streams.Published(l, start / block);
            done[l].store(start + size, std::memory_order_release);
          }
        }
        for (int64_t l = first; l < last; ++l) {
          h_n[l] = h[l - first];
          c_n[l] = c[l - first];
        }
      } catch (...) {
        errors[stage] = std::current_exception();
        failed.store(true);
      }
    };

    std::vector<std::thread> workers;
    for (int64_t stage = 1; stage < stages; ++stage) workers.emplace_back(run_stage, stage);
    run_stage(0);
    for (auto& worker : workers) worker.join();
    for (const auto& error : errors) {
      if (error) std::rethrow_exception(error);  // a stage's own error, before any of Join's
    }
    streams.Join();
    return {torch::stack(outputs[layers - 1], 1), torch::stack(h_n, 0), torch::stack(c_n, 0)};
  }

 protected:
  void OnSetup() override {
    blas_threads_.reset();
    if (std::min(OptionOr("threads", config().num_layers), config().num_layers) > 1) {
      blas_threads_.emplace();
    }
  }

 private:
  std::optional<SingleThreadedOpenBlas> blas_threads_;
  StageStreamSet stream_set_;  // CUDA builds: the stages' streams, kept across forwards
};

}  // namespace

SEQBENCH_REGISTER_VARIANT(
    "lstm_wavefront", LstmWavefront,
    "layer-parallel wavefront: one thread per layer group, lock-free hand-off");

}  // namespace seqbench::lstm
