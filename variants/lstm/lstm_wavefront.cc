// `lstm_wavefront`: layer-parallel execution over the anti-diagonals. Cell (l, t) needs
// only (l, t-1) and (l-1, t), so every cell with l + t = s can run at once: with L
// layers and T steps the critical path drops from L*T cells to T+L-1.
//
// On CPU the layers are split into `threads` contiguous stages, one thread each (the
// caller runs the first). A stage walks t = 0..T-1 and, for each of its layers, waits
// until the layer below has published step t, computes the cell and publishes it: a
// release-store of a per-layer step counter, read with acquire by the layer above. No
// lock per cell; a waiting stage spins with yield. Every cell does the same arithmetic
// whatever the thread count, so results are identical for 1, 2 or L threads.
//
// Gradients: the forward runs in the worker threads with the caller's grad mode, and
// backward goes through the autograd engine as usual (the wavefront covers forward only).
#include <atomic>
#include <exception>
#include <thread>

#include "variants/core/registry.h"
#include "variants/lstm/model.h"

namespace seqbench::lstm {
namespace {

class LstmWavefront final : public LstmVariant {
 public:
  Capabilities capabilities() const override {
    Capabilities caps = LstmCapabilities("layer parallelism");
    caps.options["threads"] =
        "worker threads, each running a contiguous group of layers (default: one per layer)";
    return caps;
  }

  LstmOutputs Run(const torch::Tensor& inputs, const torch::Tensor& mask) override {
    const Weights w = weights();
    const int64_t layers = static_cast<int64_t>(w.layers.size());
    const int64_t steps = inputs.size(1);
    const int64_t stages = std::min(OptionOr("threads", layers), layers);
    TORCH_CHECK(stages >= 1, "lstm_wavefront: threads must be at least 1, got ", stages);

    // Shared, read-only during the wavefront.
    std::vector<torch::Tensor> input_weights, recurrent_weights, biases;
    for (const LayerWeights& lw : w.layers) {
      input_weights.push_back(lw.weight_ih.t());
      recurrent_weights.push_back(lw.weight_hh.t());
      biases.push_back(lw.bias_ih + lw.bias_hh);
    }
    // Layer 0's inputs are all known: its input projection is one GEMM over T.
    const auto first_projection = torch::matmul(inputs, input_weights[0]) + biases[0];  // [B,T,4H]

    // outputs[l][t] is written once by layer l's stage, then published through done[l].
    std::vector<std::vector<torch::Tensor>> outputs(layers, std::vector<torch::Tensor>(steps));
    std::vector<std::atomic<int64_t>> done(layers);
    for (auto& counter : done) counter.store(0);
    std::vector<torch::Tensor> h_n(layers), c_n(layers);
    std::atomic<bool> failed{false};
    std::vector<std::exception_ptr> errors(stages);
    const bool grad_enabled = torch::GradMode::is_enabled();

    const auto run_stage = [&](int64_t stage) {
      try {
        torch::AutoGradMode grad_mode(grad_enabled);  // grad mode is thread-local
        const int64_t first = stage * layers / stages, last = (stage + 1) * layers / stages;
        std::vector<torch::Tensor> h, c;
        for (int64_t l = first; l < last; ++l) {
          h.push_back(torch::zeros({inputs.size(0), inputs.size(2)}, inputs.options()));
          c.push_back(h.back());
        }
        for (int64_t t = 0; t < steps; ++t) {
          const auto keep = mask.defined() ? mask.select(1, t).unsqueeze(1) : torch::Tensor();
          for (int64_t l = first; l < last; ++l) {
            torch::Tensor input_part;
            if (l == 0) {
              input_part = first_projection.select(1, t);
            } else {
              while (done[l - 1].load(std::memory_order_acquire) <= t) {
                if (failed.load(std::memory_order_relaxed)) return;
                std::this_thread::yield();
              }
              input_part = torch::addmm(biases[l], outputs[l - 1][t], input_weights[l]);
            }
            const int64_t k = l - first;
            const auto gates = torch::addmm(input_part, h[k], recurrent_weights[l]);
            auto [h_next, c_next] = FusedCellUpdate(gates, c[k]);
            c[k] = KeepWhere(keep, c_next, c[k]);
            h[k] = KeepWhere(keep, h_next, h[k]);
            outputs[l][t] = h[k];
            done[l].store(t + 1, std::memory_order_release);
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
      if (error) std::rethrow_exception(error);
    }
    return {torch::stack(outputs[layers - 1], 1), torch::stack(h_n, 0), torch::stack(c_n, 0)};
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT(
    "lstm_wavefront", LstmWavefront,
    "layer-parallel wavefront: one thread per layer group, lock-free hand-off");

}  // namespace seqbench::lstm
