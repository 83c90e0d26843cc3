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
#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <omp.h>

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

// Holds the calling thread's ATen intra-op parallelism at one thread while it lives.
// ATen's parallel regions (OpenMP) take their team size from the calling thread's OpenMP
// setting, which ATen sets on a thread's first parallel op to the process's
// at::set_num_threads count: without this each stage would open a team of that size for
// every elementwise op, and the teams' spinning threads would fight the stages for the
// cores. The constructor runs that first-op initialisation itself, so that it cannot undo
// the setting later. OpenBLAS's OpenMP build sizes its GEMMs by the same setting.
class SerialAtenOps {
 public:
  SerialAtenOps() : previous_(InitialisedThreads()) { omp_set_num_threads(1); }
  ~SerialAtenOps() { omp_set_num_threads(previous_); }
  SerialAtenOps(const SerialAtenOps&) = delete;
  SerialAtenOps& operator=(const SerialAtenOps&) = delete;

 private:
  static int InitialisedThreads() {
    at::internal::lazy_init_num_threads();
    return omp_get_max_threads();
  }
  const int previous_;
};

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

// One forward's wavefront: what the stages share, and a stage's work. The weights, layer
// 0's projection and the mask are read-only while the stages run; outputs[l][t] is written
// once by layer l's stage, then published through done[l].
// Thread-safety: RunStage runs on each stage's thread, on its own layers only; the rest
// on the caller's thread.
class Wavefront {
 public:
  // inputs: [B,T,D]; mask: [B,T] or undefined (no padding); not written.
  Wavefront(const torch::Tensor& inputs, const torch::Tensor& mask, const Weights& w,
            int64_t stages, int64_t block, StageStreamSet& stream_set)
      : inputs_(inputs),
        mask_(mask),
        layers_(static_cast<int64_t>(w.layers.size())),
        steps_(inputs.size(1)),
        stages_(stages),
        block_(block),
        outputs_(layers_, std::vector<torch::Tensor>(steps_)),
        done_(layers_),
        h_n_(layers_),
        c_n_(layers_),
        errors_(stages),
        grad_enabled_(torch::GradMode::is_enabled()) {
    for (const LayerWeights& lw : w.layers) {
      input_weights_.push_back(lw.weight_ih.t());
      recurrent_weights_.push_back(lw.weight_hh.t());
      biases_.push_back(lw.bias_ih + lw.bias_hh);
    }
    for (auto& counter : done_) counter.store(0);
    // Layer 0's inputs are all known: its input projection is one GEMM over T, [B,T,4H].
    // Cut once, before the stages start: a narrow per block or a select per step would
    // make the backward scatter into [B,T,4H] zero buffers over and over (O(T^2)).
    first_blocks_ = (torch::matmul(inputs, input_weights_[0]) + biases_[0]).split(block, 1);
    if (mask.defined()) mask_steps_ = mask.unbind(1);
    // Last: on CUDA it records the event every stage's stream waits for, which must come
    // after the caller's stream issued the biases and layer 0's projection above.
    streams_.emplace(inputs, stages, layers_, (steps_ + block - 1) / block, stream_set);
  }

  // Runs stages 1.. on threads of their own and stage 0 on the caller's, then gathers:
  // outputs [B,T,H], h_n and c_n [L,B,H]. Rethrows a stage's error.
  LstmOutputs Run() {
    std::vector<std::thread> workers;
    for (int64_t stage = 1; stage < stages_; ++stage)
      workers.emplace_back([this, stage] { RunStage(stage); });
    RunStage(0);
    for (auto& worker : workers) worker.join();
    for (const auto& error : errors_) {
      if (error) std::rethrow_exception(error);  // a stage's own error, before any of Join's
    }
    streams_->Join();
    return {torch::stack(outputs_[layers_ - 1], 1), torch::stack(h_n_, 0), torch::stack(c_n_, 0)};
  }

 private:
  // Stage `stage`: its contiguous layers, block after block; an error stops every stage.
  void RunStage(int64_t stage) {
    try {
      torch::AutoGradMode grad_mode(grad_enabled_);  // grad mode is thread-local
      std::optional<SerialAtenOps> serial;           // the stages are the parallelism
      if (stages_ > 1) serial.emplace();
      StreamScope on_stage_stream;
      streams_->Enter(stage, on_stage_stream);
      const int64_t first = stage * layers_ / stages_, last = (stage + 1) * layers_ / stages_;
      std::vector<torch::Tensor> h, c;  // [B,H] a layer of this stage
      for (int64_t l = first; l < last; ++l) {
        h.push_back(torch::zeros({inputs_.size(0), inputs_.size(2)}, inputs_.options()));
        c.push_back(h.back());
      }
      for (int64_t start = 0; start < steps_; start += block_) {
        for (int64_t l = first; l < last; ++l) {
          if (!RunBlock(l, first, start, h[l - first], c[l - first])) return;
          if (l == last - 1 && l + 1 < layers_) streams_->Published(l, start / block_);
          done_[l].store(std::min(start + block_, steps_), std::memory_order_release);
        }
      }
      for (int64_t l = first; l < last; ++l) {
        h_n_[l] = h[l - first];
        c_n_[l] = c[l - first];
      }
    } catch (...) {
      errors_[stage] = std::current_exception();
      failed_.store(true);
    }
  }

  // Layer l's block from step `start`, on its state h, c: [B,H] (replaced step by step).
  // False when another stage failed while this one waited for the layer below.
  bool RunBlock(int64_t l, int64_t first, int64_t start, torch::Tensor& h, torch::Tensor& c) {
    const int64_t size = std::min(block_, steps_ - start);
    torch::Tensor projected;  // [B,size,4H]: this block's input part of the gates
    if (l == 0) {
      projected = first_blocks_[start / block_];
    } else {
      if (l == first) {  // the layer below belongs to another stage
        while (done_[l - 1].load(std::memory_order_acquire) < start + size) {
          if (failed_.load(std::memory_order_relaxed)) return false;
          std::this_thread::yield();
        }
        streams_->Consume(l - 1, start / block_);
      }
      const std::vector<torch::Tensor> below(outputs_[l - 1].begin() + start,
                                             outputs_[l - 1].begin() + start + size);
      projected = torch::matmul(torch::stack(below, 1), input_weights_[l]) + biases_[l];
    }
    const std::vector<torch::Tensor> projected_steps = projected.unbind(1);
    for (int64_t t = start; t < start + size; ++t) {
      const auto gates = torch::addmm(projected_steps[t - start], h, recurrent_weights_[l]);
      auto [h_next, c_next] = FusedCellUpdate(gates, c);
      const auto keep = mask_.defined() ? mask_steps_[t].unsqueeze(1) : torch::Tensor();
      c = KeepWhere(keep, c_next, c);
      h = KeepWhere(keep, h_next, h);
      outputs_[l][t] = h;
    }
    return true;
  }

  const torch::Tensor& inputs_;
  const torch::Tensor& mask_;
  const int64_t layers_, steps_, stages_, block_;
  std::vector<torch::Tensor> input_weights_, recurrent_weights_, biases_;
  std::vector<torch::Tensor> first_blocks_, mask_steps_;
  std::vector<std::vector<torch::Tensor>> outputs_;
  std::vector<std::atomic<int64_t>> done_;
  std::vector<torch::Tensor> h_n_, c_n_;
  std::atomic<bool> failed_{false};
  std::vector<std::exception_ptr> errors_;
  const bool grad_enabled_;
  std::optional<StageStreams> streams_;  // set last in the constructor (see there)
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
    const int64_t stages = std::min(OptionOr("threads", layers), layers);
    const int64_t block = OptionOr("block", 16);
    TORCH_CHECK(stages >= 1, "lstm_wavefront: threads must be at least 1, got ", stages);
    TORCH_CHECK(block >= 1, "lstm_wavefront: block must be at least 1, got ", block);
    return Wavefront(inputs, mask, w, stages, block, stream_set_).Run();
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
