// A Variant is one implementation strategy of a model family for a workload: the same
// mathematical function (the family's specification, e.g. variants/simple_rnn/README.md)
// computed a different way. The harness builds every variant of a case from the same
// shared weights and batch, checks it against the suite's baseline, then times it.
//
// Thread-safety: a Variant instance is driven by one thread at a time. Distinct
// instances share nothing and may run concurrently.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace seqbench {

// What one timed step of a case does.
enum class Mode {
  kTrain,     // forward, backward and an optimizer step
  kForward,   // inference under no-grad
  kGenerate,  // prefill P prompt tokens, then N greedy tokens
};

std::string_view ModeName(Mode mode);
std::optional<Mode> ParseMode(std::string_view name);
std::string DeviceName(c10::DeviceType type);
std::string DtypeName(c10::ScalarType dtype);
// Parses "float32" / "float64" (what suites and the command line accept).
std::optional<c10::ScalarType> ParseDtype(std::string_view name);
// An exception's message for users and the results store: c10::Error's without the
// C++ backtrace LibTorch 1.13 appends to what().
std::string DescribeError(const std::exception& error);

// Shapes and sizes of a model. Families read the fields they need (LSTM ignores heads;
// only attention has a feed-forward block).
struct ModelConfig {
  std::string family;
  int64_t vocab_size = 256;
  int64_t width = 128;  // D
  int64_t num_layers = 2;
  int64_t num_heads = 4;     // H; head width dh = D / H
  std::string ffn = "gelu";  // feed-forward activation: gelu | swiglu | geglu
};

// Named tensors in a fixed order: the shared weights of a model, or their gradients.
using ParameterSet = torch::OrderedDict<std::string, torch::Tensor>;

// A right-padded batch of token sequences. Positions t >= lengths[b] are padding:
// they leave the recurrent state unchanged and give nothing to the loss.
struct Batch {
  torch::Tensor tokens;   // [B,T] int64
  torch::Tensor lengths;  // [B] int64 (on CPU), 1 <= lengths[b] <= T

  int64_t batch_size() const { return tokens.size(0); }
  int64_t max_length() const { return tokens.size(1); }
  // Non-padding tokens: what throughput is counted in.
  int64_t NumTokens() const;
  // True at non-padding positions. mask: [B,T] bool, on the tokens' device.
  torch::Tensor PaddingMask() const;
};

struct ForwardOutput {
  torch::Tensor logits;  // [B,T,V]; values at padding positions are unspecified
  torch::Tensor loss;    // [] mean next-token cross-entropy over non-padding targets
};

// Elementwise |actual - expected| <= atol + rtol * |expected|, as torch::allclose.
struct Tolerance {
  double rtol = 0;
  double atol = 0;
};

// What a variant supports, declared once by the variant and checked by the harness
// before a case runs.
struct Capabilities {
  std::string family;
  // The kind of optimization, for the reports' "Improvement Cat." column.
  std::string category;
  std::vector<Mode> modes;
  std::vector<c10::DeviceType> devices;
  std::vector<c10::ScalarType> dtypes;
  // How far the variant may stray from the family baseline, per dtype.
  Tolerance float32{1e-4, 1e-5};
  Tolerance float64{1e-10, 1e-12};
  // The integer options the variant reads from VariantOptions: name -> meaning.
  std::map<std::string, std::string> options;
  // How the bytes allocated by one train step grow with the sequence length T: "T"
  // (linear) unless a variant states otherwise. The tests hold every variant to it by
  // counting allocations at T and 2T.
  std::string complexity = "T";
  // Non-empty: why this build cannot run the variant at all (e.g. an operator the LibTorch
  // it was compiled against lacks). Its cases are skipped with this reason.
  std::string unavailable;

  bool Supports(Mode mode) const;
  bool Supports(c10::DeviceType device) const;
  bool Supports(c10::ScalarType dtype) const;
  Tolerance ToleranceFor(c10::ScalarType dtype) const;
};

// What one timed step evaluates, counted in positions of the model: the input of a
// family's cost formula (FamilyEntry::step_cost), for the roofline columns.
struct StepWork {
  Mode mode = Mode::kTrain;
  // Positions run through the layers, padding included where the variant computes it.
  int64_t positions = 0;
  // Positions whose logits the output head computes.
  int64_t head_positions = 0;
  // Train mode: positions whose time mixing runs forward a second time in backward
  // (gradient checkpointing).
  int64_t recomputed_positions = 0;
  int64_t element_bytes = 4;  // of the variant's dtype
  // Attention families: the (query, key) pairs one layer's attention evaluates, summed over
  // the batch (T·(T+1)/2 a sequence under a causal mask), and in train mode those whose
  // scores backward computes again (flash attention's recomputed tiles).
  double attention_pairs = 0;
  double recomputed_pairs = 0;
};

// The work of one timed step, in the units a roofline divides by the step's time:
// floating-point operations (a multiply-add is 2) and compulsory bytes, i.e. what has to
// cross between main memory and the cores even if everything reused within the step
// stayed in cache. The families' READMEs give their formulas.
struct StepCost {
  double flops = 0;
  double bytes = 0;
  // Of `flops`, those done as matrix products (projections, gate GEMMs, attention's q·k and
  // p·v): over the GEMM rate measured in the same run, the step's GEMM floor, the time no
  // implementation that keeps these products goes below (reports' "× GEMM floor").
  double gemm_flops = 0;
};

// Integer parameters of a variant, e.g. {"chunk_size": 64}. Keys must be declared in
// Capabilities::options; Setup() rejects the others.
using VariantOptions = std::map<std::string, int64_t>;

class Variant {
 public:
  virtual ~Variant() = default;

  // Called by `seqbench list` and by the harness before Setup(), to filter cases.
  virtual Capabilities capabilities() const = 0;

  // Called once per case, before the correctness check and the warmup. Copies `weights`
  // (the family's shared initialisation) to `device`/`dtype` as this variant's own
  // trainable parameters, then calls OnSetup().
  void Setup(const ModelConfig& config, const ParameterSet& weights, torch::Device device,
             torch::ScalarType dtype, const VariantOptions& options = {});

  // The model function, differentiable. Called by the default steps below; the
  // correctness check calls it through them.
  virtual ForwardOutput Forward(const Batch& batch) = 0;

  // The timed unit of `train` mode: gradients are cleared, Forward(), backward, and one
  // SGD step (learning rate kTrainLearningRate). After it returns, parameters() hold the
  // updated weights and their .grad() the gradients of this step.
  virtual ForwardOutput TrainStep(const Batch& batch);

  // The timed unit of `forward` mode: Forward() under no-grad.
  virtual ForwardOutput InferStep(const Batch& batch);

  // The timed unit of `generate` mode: greedy decoding of `num_tokens` tokens after
  // `prompt`. The default re-runs Forward() over the whole prefix for every new token,
  // as the seed baseline did: O(N * (P + N)) tokens of work.
  // prompt: [B,P] int64 without padding. Returns [B,N] int64.
  virtual torch::Tensor Generate(const torch::Tensor& prompt, int64_t num_tokens);

  // Called by the runner once per case, after Setup(), for the roofline columns: what
  // one timed step on `batch` (generate: `num_tokens` new tokens after the prompt
  // batch.tokens) evaluates. The default describes the default steps: every position of
  // the padded [B,T] batch through layers and head, and in generate mode the whole prefix
  // again for every new token. Variants that skip padding, recompute or decode
  // incrementally override it.
  virtual StepWork Work(Mode mode, const Batch& batch, int64_t num_tokens) const;

  // Called by the runner once per case, after Setup() and before the correctness check:
  // a non-empty reason skips the case and is stored as its message (a workload past a
  // memory budget the variant states, say). The default runs every case.
  virtual std::string SkipReason(Mode mode, const Batch& batch, int64_t num_tokens) const {
    return "";
  }

  const ParameterSet& parameters() const { return parameters_; }
  const ModelConfig& config() const { return config_; }
  torch::Device device() const { return device_; }
  torch::ScalarType dtype() const { return dtype_; }
  // An option's value, or `fallback` when the suite did not set it.
  int64_t OptionOr(const std::string& name, int64_t fallback) const;

  static constexpr double kTrainLearningRate = 1e-3;

 protected:
  // Called at the end of Setup(), once parameters() are in place: validate options,
  // precompute what the steps reuse.
  virtual void OnSetup() {}

 private:
  ModelConfig config_;
  ParameterSet parameters_;
  VariantOptions options_;
  torch::Device device_ = torch::kCPU;
  torch::ScalarType dtype_ = torch::kFloat32;
  std::unique_ptr<torch::optim::SGD> optimizer_;
};

// Implemented, next to Variant, by variants that decode incrementally: work per new token
// independent of the prefix for a recurrence (stepwise), linear in it for attention with a
// key/value cache, instead of re-running the prefix. `seqbench generate` and the generate mode use
// it.
class IncrementalDecoder {
 public:
  // Whatever the variant carries between tokens (for a recurrence: one state per layer).
  struct DecodeState {
    std::vector<torch::Tensor> tensors;
  };

  virtual ~IncrementalDecoder() = default;

  // Runs the whole prompt once. prompt: [B,P] int64 -> logits of the last position [B,V].
  // `max_steps`: the most Step() calls that will follow (what a cache must hold room for).
  virtual torch::Tensor Prefill(const torch::Tensor& prompt, int64_t max_steps,
                                DecodeState& state) = 0;
  // Advances by one token. token: [B] int64 -> logits [B,V].
  virtual torch::Tensor Step(const torch::Tensor& token, DecodeState& state) = 0;
};

// Greedy decoding of `num_tokens` tokens through `decoder` under no-grad: Prefill() once,
// then one Step() per token after the first, in NVTX ranges "prefill" and "decode". What
// incremental variants' Generate() does. prompt: [B,P] int64 -> [B,N] int64.
torch::Tensor GreedyDecode(IncrementalDecoder& decoder, const torch::Tensor& prompt,
                           int64_t num_tokens);

}  // namespace seqbench
