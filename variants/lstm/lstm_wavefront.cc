// `lstm_wavefront`: layer-parallel execution over the anti-diagonals. Cell (l, t) needs
// only (l, t-1) and (l-1, t), so every cell with l + t = s can run at once: with L
// layers and T steps the critical path drops from L*T cells to T+L-1.
//
// On CPU the layers are split into `threads` contiguous stages, one thread of an OpenMP
// team each (the caller runs the first), and time into blocks of `block` steps. For each block a
// stage runs its layers in order; a layer first projects the whole block of inputs from the layer
// below in one GEMM (lstm_fused's hoisting, per block), then steps through it with one recurrent
// addmm a step. A finished block is published with a release-store of the layer's step counter,
// which the next stage reads with acquire: no lock per cell, and a waiting stage spins with yield.
// The critical path is (T/block + stages - 1) blocks. Every cell does the same arithmetic whatever
// the thread count, so results are identical for 1, 2 or L threads.
//
// A block's work comes in two forms (LayerBlocks): with grad mode on, or off the CPU, the
// ATen graph of an addmm and a cell update a step, which autograd goes back through; for
// inference on the CPU, lstm_fused's hand-written forward (fused_layer.h) run a block at a
// time in each layer's time-major buffers, so that one stage costs what lstm_fused's
// layers cost and the stages' overlap is the whole gain.
//
// BLAS threads: the stages are the parallelism, one core each; a BLAS that threads every
// GEMM as well (OpenBLAS does by default) oversubscribes those cores. OpenBLAS's OpenMP
// build runs serially inside the stages' OpenMP region; for a pthreads build, while more
// than one stage runs, OpenBLAS is set to one thread for the life of the variant (set in OnSetup,
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
#ifdef _OPENMP
#include <omp.h>
#endif

#include <atomic>
#include <exception>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "variants/core/registry.h"
#include "variants/lstm/fused_layer.h"
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

// What a stage does to one layer's blocks, in one of two forms (below). The weights and
// the layers' inputs are read-only while the stages run.
// Thread-safety: Begin and Run are called on layer l's stage thread only, for its own
// layer, after the layer below published the block (Wavefront orders them); Gather on the
// caller's thread after every stage joined.
class LayerBlocks {
 public:
  virtual ~LayerBlocks() = default;
  // Before layer l's first block, on its stage's thread (its stream current on CUDA).
  virtual void Begin(int64_t l) = 0;
  // Layer l's steps [start, start + size).
  virtual void Run(int64_t l, int64_t start, int64_t size) = 0;
  // outputs [B,T,H], h_n and c_n [L,B,H].
  virtual LstmOutputs Gather() = 0;
};

// The form autograd can go back through, on any device: per block one GEMM for the
// input projection, then an addmm and FusedCellUpdate a step, as lstm_fused's graph.
// outputs_[l][t] is written once by layer l's stage, then read by layer l+1's.
class GraphBlocks final : public LayerBlocks {
 public:
  // inputs: [B,T,D]; mask: [B,T] or undefined (no padding); not written.
  GraphBlocks(const torch::Tensor& inputs, const torch::Tensor& mask, const Weights& w,
              int64_t block)
      : inputs_(inputs),
        layers_(static_cast<int64_t>(w.layers.size())),
        block_(block),
        outputs_(layers_, std::vector<torch::Tensor>(inputs.size(1))),
        h_(layers_),
        c_(layers_) {
    for (const LayerWeights& lw : w.layers) {
      input_weights_.push_back(lw.weight_ih.t());
      recurrent_weights_.push_back(lw.weight_hh.t());
      biases_.push_back(lw.bias_ih + lw.bias_hh);
    }
    // Layer 0's inputs are all known: its input projection is one GEMM over T, [B,T,4H].
    // Cut once, before the stages start: a narrow per block or a select per step would
    // make the backward scatter into [B,T,4H] zero buffers over and over (O(T^2)).
    first_blocks_ = (torch::matmul(inputs, input_weights_[0]) + biases_[0]).split(block, 1);
    if (mask.defined()) mask_steps_ = mask.unbind(1);
  }

  void Begin(int64_t l) override {
    h_[l] = torch::zeros({inputs_.size(0), inputs_.size(2)}, inputs_.options());
    c_[l] = h_[l];
  }

  void Run(int64_t l, int64_t start, int64_t size) override {
    torch::Tensor projected;  // [B,size,4H]: this block's input part of the gates
    if (l == 0) {
      projected = first_blocks_[start / block_];
    } else {
      const std::vector<torch::Tensor> below(outputs_[l - 1].begin() + start,
                                             outputs_[l - 1].begin() + start + size);
      projected = torch::matmul(torch::stack(below, 1), input_weights_[l]) + biases_[l];
    }
    const std::vector<torch::Tensor> projected_steps = projected.unbind(1);
    torch::Tensor &h = h_[l], &c = c_[l];
    for (int64_t t = start; t < start + size; ++t) {
      const auto gates = torch::addmm(projected_steps[t - start], h, recurrent_weights_[l]);
      auto [h_next, c_next] = FusedCellUpdate(gates, c);
      const auto keep = mask_steps_.empty() ? torch::Tensor() : mask_steps_[t].unsqueeze(1);
      c = KeepWhere(keep, c_next, c);
      h = KeepWhere(keep, h_next, h);
      outputs_[l][t] = h;
    }
  }

  LstmOutputs Gather() override {
    return {torch::stack(outputs_[layers_ - 1], 1), torch::stack(h_, 0), torch::stack(c_, 0)};
  }

 private:
  const torch::Tensor& inputs_;
  const int64_t layers_, block_;
  std::vector<torch::Tensor> input_weights_, recurrent_weights_, biases_;
  std::vector<torch::Tensor> first_blocks_, mask_steps_;
  std::vector<std::vector<torch::Tensor>> outputs_;
  std::vector<torch::Tensor> h_, c_;  // [B,H] a layer: its state after its last block
};

// The form for inference on the CPU (grad mode off): lstm_fused's hand-written forward
// (fused_layer.h) a block at a time, in each layer's time-major buffers, so that a stage
// runs the same kernels as lstm_fused does for a whole layer: a block's input projection
// reads the layer below's contiguous rows in place (no stack), and a step is one addmm in
// place, ATen's activations on the gate columns and a loop for the cell (the graph form
// runs eight or so ATen ops on fresh [B,·] tensors a step).
class BufferedBlocks final : public LayerBlocks {
 public:
  // inputs: [B,T,D] on the CPU, float32/float64; mask: [B,T] right padding or undefined.
  BufferedBlocks(const torch::Tensor& inputs, const torch::Tensor& mask, const Weights& w,
                 int64_t block)
      : time_major_(inputs.transpose(0, 1).contiguous()), layers_(w.layers) {
    const int64_t batch = inputs.size(0), steps = inputs.size(1);
    const torch::Tensor runs = RunsOf(mask, batch, steps);
    for (const LayerWeights& lw : layers_) {
      biases_.push_back(lw.bias_ih + lw.bias_hh);
      // A layer's gates and tanh(c) are read only within their step: one block's rows.
      buffers_.push_back(LayerBuffersFor(steps, lw.weight_hh.size(1), runs, inputs.options(),
                                         std::min(block, steps)));
    }
  }

  // Whether this form computes the variant's forward for these inputs.
  static bool Applies(const torch::Tensor& inputs) {
    return !torch::GradMode::is_enabled() && inputs.device().is_cpu() &&
           (inputs.scalar_type() == torch::kFloat || inputs.scalar_type() == torch::kDouble);
  }

  void Begin(int64_t) override {}

  void Run(int64_t l, int64_t start, int64_t size) override {
    const torch::Tensor& below = l == 0 ? time_major_ : buffers_[l - 1].h;  // [T,B,I]
    ForwardBlock(buffers_[l], below.narrow(0, start, size), layers_[l].weight_ih,
                 layers_[l].weight_hh, biases_[l], start);
  }

  LstmOutputs Gather() override {
    std::vector<torch::Tensor> h_n, c_n;  // padding repeats the last state: step T-1's
    for (const LayerBuffers& layer : buffers_) {
      h_n.push_back(layer.h[-1]);
      c_n.push_back(layer.c[-1]);
    }
    return {buffers_.back().h.transpose(0, 1), torch::stack(h_n, 0), torch::stack(c_n, 0)};
  }

 private:
  const torch::Tensor time_major_;  // [T,B,D]
  const std::vector<LayerWeights>& layers_;
  std::vector<torch::Tensor> biases_;
  std::vector<LayerBuffers> buffers_;
};

// One forward's wavefront: the stages' threads, their hand-offs and errors; the work of a
// block is `blocks`'. done_[l] counts layer l's published steps.
// Thread-safety: RunStage runs on each stage's thread, on its own layers only; the rest
// on the caller's thread.
class Wavefront {
 public:
  Wavefront(LayerBlocks& blocks, int64_t layers, int64_t steps, int64_t stages, int64_t block,
            StageStreams& streams)
      : blocks_(blocks),
        layers_(layers),
        steps_(steps),
        stages_(stages),
        block_(block),
        streams_(streams),
        done_(layers),
        errors_(stages),
        grad_enabled_(torch::GradMode::is_enabled()) {
    for (auto& counter : done_) counter.store(0);
  }

  // Runs the stages on one OpenMP team, stage 0 on the caller's thread, then gathers.
  // Rethrows a stage's error.
  LstmOutputs Run() {
    if (stages_ == 1) {
      RunStage(0);
    } else {
      RunStagesOnTeam();
      // The team's closing barrier orders the stages' writes before what follows, but it is
      // libgomp's, which ThreadSanitizer does not see (the tsan preset): these acquire loads
      // pair with every stage's last release, so that it sees the order too.
      failed_.load(std::memory_order_acquire);
      for (const auto& counter : done_) counter.load(std::memory_order_acquire);
    }
    for (const auto& error : errors_) {
      if (error) std::rethrow_exception(error);  // a stage's own error, before any of Join's
    }
    streams_.Join();
    return blocks_.Gather();
  }

 private:
  // The team is OpenMP's, the pool LibTorch's own ops use: its threads are the ones that
  // would otherwise spin after the caller's last parallel op while separate stage threads
  // ran (measured: a std::thread a stage made the 2-stage forward about 20% slower at 2
  // case threads than at 1). Inside the region ATen's parallel_for and OpenBLAS's OpenMP
  // build see omp_in_parallel() and run serially: the stages are the parallelism. A team
  // smaller than asked (OMP_DYNAMIC, a thread limit) runs stages k, k + team, ... in turn
  // on thread k; a stage waits only on the one below, which has finished or runs on
  // another thread, so no order deadlocks. RunStage catches every error: none may leave
  // the region. A build without OpenMP (SEQBENCH_OPENMP, on by default only with an
  // OpenMP LibTorch such as 1.13) has no team to borrow: a std::thread per stage.
  void RunStagesOnTeam() {
#ifdef _OPENMP
    const int team_size = static_cast<int>(stages_);
#pragma omp parallel num_threads(team_size)
    {
      const int64_t team = omp_get_num_threads();
      for (int64_t stage = omp_get_thread_num(); stage < stages_; stage += team) {
        RunStage(stage);
      }
    }
#else
    std::vector<std::thread> threads;
    for (int64_t stage = 1; stage < stages_; ++stage) {
      threads.emplace_back([this, stage] { RunStage(stage); });
    }
    RunStage(0);
    for (auto& thread : threads) thread.join();
#endif
  }

  // Stage `stage`: its contiguous layers, block after block; an error stops every stage.
  void RunStage(int64_t stage) {
    try {
      torch::AutoGradMode grad_mode(grad_enabled_);  // grad mode is thread-local
      StreamScope on_stage_stream;
      streams_.Enter(stage, on_stage_stream);
      const int64_t first = stage * layers_ / stages_, last = (stage + 1) * layers_ / stages_;
      for (int64_t l = first; l < last; ++l) blocks_.Begin(l);
      for (int64_t start = 0; start < steps_; start += block_) {
        const int64_t size = std::min(block_, steps_ - start);
        for (int64_t l = first; l < last; ++l) {
          if (l == first && l > 0 && !AwaitBelow(l, start, size)) return;
          blocks_.Run(l, start, size);
          if (l == last - 1 && l + 1 < layers_) streams_.Published(l, start / block_);
          done_[l].store(start + size, std::memory_order_release);
        }
      }
    } catch (...) {
      errors_[stage] = std::current_exception();
      failed_.store(true);
    }
  }

  // Waits until layer l-1 (another stage's) published steps up to start + size. False
  // when another stage failed meanwhile.
  bool AwaitBelow(int64_t l, int64_t start, int64_t size) {
    while (done_[l - 1].load(std::memory_order_acquire) < start + size) {
      if (failed_.load(std::memory_order_relaxed)) return false;
      std::this_thread::yield();
    }
    streams_.Consume(l - 1, start / block_);
    return true;
  }

  LayerBlocks& blocks_;
  const int64_t layers_, steps_, stages_, block_;
  StageStreams& streams_;
  std::vector<std::atomic<int64_t>> done_;
  std::atomic<bool> failed_{false};
  std::vector<std::exception_ptr> errors_;
  const bool grad_enabled_;
};

class LstmWavefront final : public LstmVariant {
 public:
  Capabilities capabilities() const override {
    Capabilities caps = LstmCapabilities("layer parallelism");
    caps.options["block"] =
        "steps per hand-off between stages (default 16; with one stage, all of T)";
    caps.options["threads"] =
        "worker threads, each running a contiguous group of layers (default: one per layer)";
    return caps;
  }

  LstmOutputs Run(const torch::Tensor& inputs, const torch::Tensor& mask) override {
    const Weights w = weights();
    const int64_t layers = static_cast<int64_t>(w.layers.size());
    const int64_t stages = std::min(OptionOr("threads", layers), layers);
    // One stage hands nothing off: its best block is the whole layer, lstm_fused's order,
    // which keeps one layer's weights in cache for all T steps (a block of 16 cycles the
    // L layers' weights through L2 every 16 steps: run 92, 1.41x lstm_fused's time at B=1).
    const int64_t block = OptionOr("block", stages > 1 ? 16 : inputs.size(1));
    TORCH_CHECK(stages >= 1, "lstm_wavefront: threads must be at least 1, got ", stages);
    TORCH_CHECK(block >= 1, "lstm_wavefront: block must be at least 1, got ", block);
    std::unique_ptr<LayerBlocks> blocks;
    if (BufferedBlocks::Applies(inputs)) {
      blocks = std::make_unique<BufferedBlocks>(inputs, mask, w, block);
    } else {
      blocks = std::make_unique<GraphBlocks>(inputs, mask, w, block);
    }
    // Last: on CUDA it records the event every stage's stream waits for, which must come
    // after the caller's stream issued the biases and layer 0's projection above.
    StageStreams streams(inputs, stages, layers, (inputs.size(1) + block - 1) / block, stream_set_);
    return Wavefront(*blocks, layers, inputs.size(1), stages, block, streams).Run();
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
