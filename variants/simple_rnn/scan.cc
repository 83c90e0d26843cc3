// `scan`: no loop over timesteps. The sequence is cut into chunks of C positions; inside
// a chunk the recurrence is evaluated in closed form with attention-like matmuls, and
// only one state per chunk is passed on (a loop over T/C chunks of elementwise work), as
// in Gated Linear Attention / flash-linear-attention's chunkwise form.
// The chunkwise form itself is variants/simple_rnn/chunkwise.h (stepwise prefills with it).
#include "variants/core/registry.h"
#include "variants/simple_rnn/chunkwise.h"
#include "variants/simple_rnn/model.h"

namespace seqbench::simple_rnn {
namespace {

class Scan final : public Variant {
 public:
  Capabilities capabilities() const override {
    Capabilities caps = BaseCapabilities("parallel scan");
    caps.float32 = {2e-4, 2e-5};  // sums in another order than the step loop
    caps.float64 = {1e-9, 1e-11};
    caps.options["chunk_size"] = "positions per chunk (default 16)";
    return caps;
  }

  ForwardOutput Forward(const Batch& batch) override {
    const int64_t chunk = OptionOr("chunk_size", kDefaultChunkSize);
    TORCH_CHECK(chunk >= 1, "scan: chunk_size must be at least 1, got ", chunk);
    return ForwardBatched(Weights::View(parameters(), config().num_layers), batch,
                          config().num_heads, ChunkwiseMixer(chunk));
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("scan", Scan,
                          "chunkwise parallel form: matmuls inside chunks, a state per chunk");

}  // namespace seqbench::simple_rnn
