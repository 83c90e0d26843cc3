// `seqbench generate`: greedy decoding from a `seqbench train` checkpoint through an
// incremental decoder (the `stepwise` variant by default), printing the text and the
// latency of the prefill and of each new token.
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "cli/command.h"
#include "harness/text_data.h"
#include "harness/training/trainer.h"
#include "reports/escape/terminal.h"
#include "reports/format.h"
#include "results/case_identity.h"
#include "stats/statistics.h"
#include "variants/core/registry.h"

namespace po = boost::program_options;

namespace seqbench::cli {
namespace {

// Seconds since `start`, after the device has finished its queued work.
double SecondsSince(std::chrono::steady_clock::time_point start, const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct GenerateFlags {
  std::string checkpoint, prompt, variant_key, device_name;
  int64_t num_tokens = 20;
};

// Parses and checks the flags, before anything is read or allocated; false after --help.
bool ParseGenerateFlags(const std::vector<std::string>& args, GenerateFlags& f) {
  po::options_description options(
      "Usage: seqbench generate --checkpoint FILE --prompt TEXT [-n N] [OPTIONS]\n\n"
      "Greedy generation from a training checkpoint: the prompt is prefilled once, then\n"
      "each new token costs one recurrent step. The markers <en>, <ja>, <eos> and <pad> in\n"
      "the prompt are special tokens, as in the edict training data, e.g.\n"
      "  seqbench generate --checkpoint edict.pt --prompt \"<en> I love apple <ja>\" -n 20\n"
      "Stops early after <eos>.\n\nOptions");
  options.add_options()("help,h", "show this help")(
      "checkpoint", po::value(&f.checkpoint),
      "a checkpoint written by seqbench train --checkpoint")("prompt", po::value(&f.prompt),
                                                             "the text to continue")(
      "generate-tokens,n", po::value(&f.num_tokens)->default_value(20),
      "tokens to generate at most (a suite's generate_tokens)")(
      "variant", po::value(&f.variant_key)->default_value("stepwise"),
      "an incremental-decoding variant of the checkpoint's family")(
      "device", po::value(&f.device_name)->default_value("cpu"), "cpu or cuda");
  po::options_description hidden;
  // The old spelling of --generate-tokens, kept for one release.
  int64_t old_tokens = 0;  // written before the default is: applied below
  hidden.add_options()("tokens", po::value(&old_tokens));
  const auto values = ParseArguments(args, options, hidden, {}, "generate");
  if (!values) return false;
  if (values->count("tokens")) f.num_tokens = old_tokens;
  if (f.checkpoint.empty())
    throw UsageError("generate: give --checkpoint FILE (from seqbench train --checkpoint)");
  if (f.prompt.empty()) throw UsageError("generate: give --prompt TEXT");
  // The suite key's bound (generate_tokens), before a cache of that many steps is allocated.
  const WorkloadField& tokens_field = *FindWorkloadField("generate_tokens");
  if (f.num_tokens < tokens_field.min || f.num_tokens > tokens_field.max) {
    throw UsageError("generate: --generate-tokens (-n) must be between " +
                     std::to_string(tokens_field.min) + " and " + std::to_string(tokens_field.max) +
                     ", got " + std::to_string(f.num_tokens));
  }
  if (f.device_name != "cpu" && f.device_name != "cuda")
    throw UsageError("generate: --device must be cpu or cuda");
  return true;
}

// The checkpoint's model in the named incremental decoder, set up on the device.
std::unique_ptr<Variant> LoadDecoder(const GenerateFlags& f, training::CheckpointModel& model) {
  try {
    model = training::ReadCheckpointModel(f.checkpoint);
  } catch (const std::exception& error) {
    throw UsageError("generate: " + DescribeError(error));
  }
  std::unique_ptr<Variant> variant;
  try {
    variant = CreateVariant(f.variant_key);
  } catch (const std::exception& error) {
    throw UsageError("generate: --variant: " + std::string(error.what()));
  }
  if (dynamic_cast<IncrementalDecoder*>(variant.get()) == nullptr) {
    throw UsageError("generate: variant '" + f.variant_key +
                     "' does not decode incrementally; use stepwise");
  }
  if (variant->capabilities().family != model.model.family) {
    throw UsageError("generate: variant '" + f.variant_key + "' is of family '" +
                     variant->capabilities().family + "', the checkpoint of '" +
                     model.model.family + "'");
  }
  variant->Setup(model.model, model.weights, torch::Device(f.device_name), torch::kFloat32);
  return variant;
}

// Greedy tokens after the prompt, and the time of the prefill and of each new token.
struct Generation {
  std::vector<int64_t> tokens;
  double prefill_s = 0;
  std::vector<double> token_s;
};

Generation Decode(IncrementalDecoder& decoder, const std::vector<int64_t>& prompt_ids,
                  int64_t num_tokens, const torch::Device& device) {
  torch::NoGradGuard no_grad;
  const auto prompt = torch::tensor(prompt_ids, torch::kInt64).reshape({1, -1}).to(device);
  IncrementalDecoder::DecodeState state;
  Generation generation;
  auto start = std::chrono::steady_clock::now();
  torch::Tensor logits = decoder.Prefill(prompt, num_tokens - 1, state);
  int64_t next = logits.argmax(-1).item<int64_t>();
  generation.prefill_s = SecondsSince(start, device);
  generation.tokens.push_back(next);
  while (static_cast<int64_t>(generation.tokens.size()) < num_tokens && next != text::kEos) {
    start = std::chrono::steady_clock::now();
    logits = decoder.Step(torch::tensor({next}, torch::kInt64).to(device), state);
    next = logits.argmax(-1).item<int64_t>();
    generation.token_s.push_back(SecondsSince(start, device));
    generation.tokens.push_back(next);
  }
  return generation;
}

void PrintGeneration(const GenerateFlags& f, const training::CheckpointModel& model,
                     size_t prompt_tokens, const Generation& generation) {
  const std::string output = text::Decode(generation.tokens);
  // The model's bytes are shown, never sent to the terminal as control sequences.
  std::printf("%s%s\n", escape::TerminalText(f.prompt).c_str(),
              escape::TerminalText(output).c_str());
  try {
    text::CheckUtf8(output, "output");
  } catch (const text::DataError&) {
    // Byte-level tokens: -n may stop inside a multi-byte character, or the model may emit
    // bytes that form none.
    std::printf(
        "(the generated bytes are not all valid UTF-8: a character cut by -n, or "
        "bytes the model put together wrongly)\n");
  }
  std::printf("\ncheckpoint %s (step %lld, %s D=%lld L=%lld), variant %s on %s\n",
              escape::TerminalText(f.checkpoint).c_str(), (long long)model.step,
              escape::TerminalText(model.model.family, false).c_str(), (long long)model.model.width,
              (long long)model.model.num_layers, escape::TerminalText(f.variant_key, false).c_str(),
              escape::TerminalText(f.device_name, false).c_str());
  std::printf("prefill: %zu prompt tokens in %s (first new token included)\n", prompt_tokens,
              FormatDuration(generation.prefill_s).c_str());
  const std::vector<double>& token_s = generation.token_s;
  if (!token_s.empty()) {
    const auto [fastest, slowest] = std::minmax_element(token_s.begin(), token_s.end());
    std::printf("per new token: median %s (min %s, max %s) over %zu tokens\n",
                FormatDuration(stats::Median(token_s)).c_str(), FormatDuration(*fastest).c_str(),
                FormatDuration(*slowest).c_str(), token_s.size());
  }
}

}  // namespace

int RunGenerate(const std::vector<std::string>& args) {
  GenerateFlags f;
  if (!ParseGenerateFlags(args, f)) return 0;
  std::vector<int64_t> prompt_ids;
  try {
    prompt_ids = text::EncodeWithSpecialTokens(f.prompt, "--prompt");
  } catch (const std::exception& error) {
    throw UsageError("generate: " + DescribeError(error));
  }
  training::CheckpointModel model;
  const std::unique_ptr<Variant> variant = LoadDecoder(f, model);
  const Generation generation = Decode(*dynamic_cast<IncrementalDecoder*>(variant.get()),
                                       prompt_ids, f.num_tokens, torch::Device(f.device_name));
  PrintGeneration(f, model, prompt_ids.size(), generation);
  return 0;
}

}  // namespace seqbench::cli
