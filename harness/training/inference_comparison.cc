#include "harness/training/inference_comparison.h"

#include <malloc.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "harness/training/trainer.h"
#include "variants/core/registry.h"

namespace seqbench::training {
namespace {

// Bytes the process's heap has handed out and not had back, over all of glibc's arenas.
// Not LibTorch's counting allocator: under QNNPACK, quantized tensors come from LibTorch's
// mobile allocator and the engine packs its weights with its own malloc, neither of which
// that allocator sees; the heap sees both.
int64_t HeapBytesInUse() {
  const struct mallinfo2 info = mallinfo2();
  return static_cast<int64_t>(info.uordblks + info.hblkhd);
}

// Greedy continuations of the first held-out samples that are long enough, by both models.
void CompareGeneration(Trainer& trainer, Variant& other, const GenerationProbe& probe,
                       InferenceComparison& result) {
  std::vector<torch::Tensor> prompts;
  for (const auto& sample : trainer.validation()) {
    if (static_cast<int64_t>(prompts.size()) == probe.prompts) break;
    if (static_cast<int64_t>(sample.size()) < probe.prompt_tokens) continue;
    prompts.push_back(torch::tensor(
        std::vector<int64_t>(sample.begin(), sample.begin() + probe.prompt_tokens), torch::kInt64));
  }
  if (prompts.empty() || probe.new_tokens < 1) return;
  torch::NoGradGuard no_grad;
  const torch::Tensor prompt = torch::stack(prompts).to(trainer.variant().device());  // [G,P]
  const torch::Tensor expected =
      trainer.variant().Generate(prompt, probe.new_tokens).to(torch::kCPU);  // [G,N]
  const torch::Tensor actual = other.Generate(prompt, probe.new_tokens).to(torch::kCPU);
  TORCH_CHECK(actual.sizes() == expected.sizes(), "'", result.variant, "' generated ",
              actual.sizes(), " tokens for ", expected.sizes());
  const torch::Tensor same = (actual == expected).to(torch::kInt64);
  result.generated_tokens = same.numel();
  result.generated_agreement = same.sum().item<double>() / same.numel();
  // Positions before the first difference: a running product of the matches.
  result.generated_common_prefix = same.cumprod(1).sum().item<double>() / same.size(0);
}

// `variant_key` set up with the trainer's current weights, as the trainer's model is.
std::unique_ptr<Variant> SetUpLikeTrained(Trainer& trainer, const std::string& variant_key) {
  const Variant& trained = trainer.variant();
  std::unique_ptr<Variant> other = CreateVariant(variant_key);
  other->Setup(trained.config(), trained.parameters(), trained.device(), torch::kFloat32);
  return other;
}

// Fills `result`'s losses, agreement and generation figures: `other` against the trainer's
// model over the validation batches and the probe.
void CompareOutputs(Trainer& trainer, Variant& other, const GenerationProbe& probe,
                    InferenceComparison& result) {
  // Sums over this rank's batches: losses weighted by targets, then positions.
  double reference_loss_sum = 0, loss_sum = 0, agreeing = 0, squared_error = 0;
  double targets = 0, positions = 0, logits = 0;
  trainer.ForEachValidationBatch([&](const Batch& batch, const std::vector<int64_t>&,
                                     const ForwardOutput& reference) {
    const ForwardOutput output = other.Forward(batch);
    const double batch_targets = static_cast<double>(TargetCount(batch));
    reference_loss_sum += reference.loss.item<double>() * batch_targets;
    loss_sum += output.loss.item<double>() * batch_targets;
    targets += batch_targets;
    const torch::Tensor mask = batch.PaddingMask();                 // [B,T]
    const torch::Tensor expected = reference.logits.index({mask});  // [positions,V]
    const torch::Tensor actual = output.logits.index({mask});
    agreeing += (actual.argmax(-1) == expected.argmax(-1)).sum().item<double>();
    positions += static_cast<double>(expected.size(0));
    squared_error +=
        (actual.to(torch::kFloat64) - expected.to(torch::kFloat64)).square().sum().item<double>();
    logits += static_cast<double>(expected.numel());
  });
  const std::vector<double> sums = trainer.SumOverRanks(
      {reference_loss_sum, loss_sum, targets, agreeing, positions, squared_error, logits});
  TORCH_CHECK(sums[2] > 0 && sums[4] > 0, "no held-out targets to compare '", result.variant,
              "' on");
  result.reference_loss = sums[0] / sums[2];
  result.loss = sums[1] / sums[2];
  result.targets = static_cast<int64_t>(sums[2]);
  result.argmax_agreement = sums[3] / sums[4];
  result.logit_rms_error = std::sqrt(sums[5] / sums[6]);
  CompareGeneration(trainer, other, probe, result);
}

}  // namespace

double InferenceComparison::PerplexityRatio() const { return std::exp(LossDifference()); }

InferenceComparison CompareInference(Trainer& trainer, const std::string& variant_key,
                                     const GenerationProbe& probe) {
  InferenceComparison result;
  result.variant = variant_key;
  const bool on_cpu = trainer.variant().device().is_cpu();
  if (on_cpu) {
    // A first comparison, discarded: what the libraries allocate once per process at a
    // kernel's first use (LibTorch 2.11's pip build kept 9 MB more after a float32 step
    // loop's first run than before it; ci/gpu/README.md, fourth lease) is not the
    // variant's, and is in place before the heap is read.
    InferenceComparison discarded;
    discarded.variant = variant_key;
    CompareOutputs(trainer, *SetUpLikeTrained(trainer, variant_key), probe, discarded);
  }
  const int64_t heap_before = HeapBytesInUse();
  const std::unique_ptr<Variant> other = SetUpLikeTrained(trainer, variant_key);
  CompareOutputs(trainer, *other, probe, result);
  // Measured after the variant has run, with its outputs freed: an engine that packs its
  // weights at the first product (QNNPACK's dynamic linear) holds them from then on.
  if (on_cpu) result.weight_bytes = HeapBytesInUse() - heap_before;
  return result;
}

}  // namespace seqbench::training
