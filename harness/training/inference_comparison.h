// The trained weights run through another variant of their family, for inference: how far
// int8 inference (or any other forward) moves the held-out loss, the greedy choices and the
// logits from the trained float32 model's, and what the other variant holds in memory.
// Random weights, which the benchmark suites check against, give near-flat logits whose
// argmax any rounding flips; a trained model's confident predictions are what a quantised
// model is deployed to keep, so this is where its error is read.
//
// Thread-safety: CompareInference runs the trainer's model and builds the other variant on
// the calling thread (the trainer's).
#pragma once

#include <cstdint>
#include <string>

namespace seqbench::training {

class Trainer;

struct InferenceComparison {
  std::string variant;
  // Mean next-token loss over every held-out target, nats/token: through the trainer's own
  // variant (what Trainer::Evaluate() gives) and through `variant`, in one pass over the
  // same batches.
  double reference_loss = 0;
  double loss = 0;
  int64_t targets = 0;
  // Teacher-forced: the share of held-out positions (padding left out) whose argmax over
  // the vocabulary is the same, and the root mean square of the logits' difference there.
  double argmax_agreement = 0;
  double logit_rms_error = 0;
  // Free-running: greedy continuations of held-out prompts by both models (the trainer's
  // variant re-running its Forward(), `variant` through its own Generate(), incremental
  // where it decodes incrementally). The share of generated tokens that are the same at the
  // same position, and the mean number that agree before the first difference.
  double generated_agreement = 0;
  double generated_common_prefix = 0;
  int64_t generated_tokens = 0;  // prompts × tokens per prompt
  // Bytes `variant` holds once set up and run (the CPU heap's bytes in use after the
  // comparison less before Setup()): its weights in whatever form it and its kernels keep
  // them, the engine's packed copies included. Read after a first comparison, discarded,
  // so that the libraries' once-per-process caches are not counted (on the CPU that doubles
  // the comparison's time). -1 where not counted (CUDA).
  int64_t weight_bytes = -1;

  double LossDifference() const { return loss - reference_loss; }
  // exp(loss difference): the factor by which `variant` multiplies the perplexity.
  double PerplexityRatio() const;
};

struct GenerationProbe {
  int64_t prompts = 16;        // the first held-out samples at least prompt_tokens long
  int64_t prompt_tokens = 32;  // each prompt: a sample's first tokens
  int64_t new_tokens = 32;
};

// Sets `variant_key` (a registered variant of the trained model's family that runs forward
// in float32 on the trainer's device) up with the trainer's current weights and compares
// it with the trainer's variant over the validation samples (each rank its share, the sums
// over the data-parallel group) and on greedy continuations of `probe.prompts` of them
// (every rank the same ones). Throws c10::Error when the variant cannot run this model.
InferenceComparison CompareInference(Trainer& trainer, const std::string& variant_key,
                                     const GenerationProbe& probe = {});

}  // namespace seqbench::training
