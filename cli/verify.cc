// `seqbench verify`: runs the correctness check of every variant of a family against
// its baseline on one synthetic workload, and prints the errors it measured (the same
// check `seqbench run` performs per case, without timing or storage), and the O(T)
// scaling check (harness/scaling.h) of every variant that declares O(T) work: the checks
// ctest holds the built-in variants to, for a plugin's variants.
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <regex>

#include "cli/command.h"
#include "harness/equivalence.h"
#include "harness/key_pattern.h"
#include "harness/memory.h"
#include "harness/scaling.h"
#include "harness/workload.h"
#include "reports/escape/terminal.h"
#include "variants/core/registry.h"

namespace po = boost::program_options;

namespace seqbench::cli {
namespace {

torch::ScalarType DtypeOption(const std::string& name) {
  if (const auto dtype = ParseDtype(name)) return *dtype;
  throw UsageError("verify: --dtype must be float32 or float64, got '" + name + "'");
}

// `verify`'s flags, checked.
struct VerifyFlags {
  ModelConfig config;
  BatchShape shape;
  std::string baseline_key, filter, dtype_name;
  uint64_t seed = 0;
  int64_t generate_tokens = 0;
  torch::ScalarType dtype = torch::kFloat32;
  std::optional<KeyPattern> pattern;
  const FamilyEntry* family = nullptr;
};

// Parses the flags; false after --help.
bool ParseVerifyFlags(const std::vector<std::string>& args, VerifyFlags& f) {
  ModelConfig& config = f.config;
  BatchShape& shape = f.shape;
  po::options_description options(
      "Usage: seqbench verify [OPTIONS]\n\n"
      "Checks every variant of a family against the baseline on the same weights and a\n"
      "synthetic ragged batch: logits and loss (forward), plus every parameter gradient\n"
      "(train), and greedy tokens (generate). A variant that declares O(T) work is also\n"
      "held to the scaling check: the bytes one train step allocates at T=64, 2T and 4T,\n"
      "whose growth (4T-2T)/(2T-T) is 2 for linear work and at most 2.3 here (a per-step\n"
      "select() in an autograd loop shows as about 4; fixed costs cancel).\n"
      "Exits 1 if any variant is out of its declared tolerance or not O(T). With\n"
      "`seqbench --plugin LIB.so verify`, the plugin's variants are held to both.\n\nOptions");
  options.add_options()("help,h", "show this help")(
      "family", po::value(&config.family)->default_value("simple_rnn"), "model family")(
      "baseline", po::value(&f.baseline_key),
      "reference variant (default: the family's variant of category \"reference\": baseline, "
      "lstm_loop, naive)")("filter", po::value(&f.filter)->default_value(".*"),
                           "regex on variant keys")(
      "dtype", po::value(&f.dtype_name)->default_value("float32"), "float32 or float64")(
      "vocab-size", po::value(&config.vocab_size)->default_value(256), "vocabulary size V")(
      "width", po::value(&config.width)->default_value(64), "width D")(
      "layers", po::value(&config.num_layers)->default_value(2), "layers L")(
      "heads", po::value(&config.num_heads)->default_value(4), "heads H")(
      "ffn", po::value(&config.ffn)->default_value("gelu"),
      "feed-forward activation (attention family): gelu, swiglu or geglu")(
      "batch", po::value(&shape.batch_size)->default_value(4), "batch size B")(
      "seq-len", po::value(&shape.max_length)->default_value(64), "padded length T")(
      "min-len", po::value(&shape.min_length)->default_value(8),
      "shortest sequence (0: no padding)")(
      "generate-tokens", po::value(&f.generate_tokens)->default_value(16), "tokens to generate")(
      "seed", po::value(&f.seed)->default_value(1), "seed of weights and data");
  po::options_description hidden;
  // The old spellings, kept for one release.
  int64_t old_vocab = 0, old_generate = 0;  // written before the defaults are: applied below
  hidden.add_options()("vocab", po::value(&old_vocab))("generate", po::value(&old_generate));
  const auto values = ParseArguments(args, options, hidden, {}, "verify");
  if (!values) return false;
  if (values->count("vocab")) config.vocab_size = old_vocab;
  if (values->count("generate")) f.generate_tokens = old_generate;
  return true;
}

// The family's one variant of category "reference", unless --baseline named one.
std::string DefaultBaseline(const std::string& family) {
  std::vector<std::string> references;
  for (const VariantEntry* entry : GlobalVariants().Entries()) {
    if (entry->capabilities.family == family && entry->capabilities.category == "reference")
      references.push_back(entry->key);
  }
  if (references.size() != 1) {
    std::string listed;
    for (const auto& key : references) listed += " " + key;
    throw UsageError("verify: family '" + family + "' has " + std::to_string(references.size()) +
                     " variants of category \"reference\" (" + listed +
                     " ); name the reference with --baseline");
  }
  return references.front();
}

// The flags' meaning: dtype, pattern, family, baseline, and the suite fields' bounds, all
// checked before any tensor exists.
void CheckVerifyFlags(VerifyFlags& f) {
  f.dtype = DtypeOption(f.dtype_name);
  CheckFilterFlag("verify", f.filter);
  f.pattern.emplace(f.filter);
  try {
    f.family = &GlobalFamilies().Get(f.config.family);
  } catch (const UnknownKeyError& error) {
    throw UsageError(std::string("verify: ") + error.what());
  }
  if (f.baseline_key.empty()) f.baseline_key = DefaultBaseline(f.config.family);
  if (!GlobalVariants().Contains(f.baseline_key)) {
    throw UsageError("verify: unknown baseline '" + f.baseline_key +
                     "'; known variants: " + GlobalVariants().JoinedKeys());
  }
  const auto check_field = [](const char* name, const char* flag, int64_t value) {
    const WorkloadField& field = *FindWorkloadField(name);
    if (value < field.min || value > field.max) {
      throw UsageError("verify: " + std::string(flag) + " must be between " +
                       std::to_string(field.min) + " and " + std::to_string(field.max) + ", got " +
                       std::to_string(value));
    }
  };
  check_field("batch", "--batch", f.shape.batch_size);
  check_field("seq_len", "--seq-len", f.shape.max_length);
  check_field("min_len", "--min-len", f.shape.min_length);
  check_field("generate_tokens", "--generate-tokens", f.generate_tokens);
  check_field("vocab_size", "--vocab-size", f.config.vocab_size);
  check_field("width", "--width", f.config.width);
  check_field("layers", "--layers", f.config.num_layers);
  check_field("heads", "--heads", f.config.num_heads);
  if (f.shape.min_length > f.shape.max_length) {
    throw UsageError("verify: --min-len (" + std::to_string(f.shape.min_length) +
                     ") must not exceed --seq-len (" + std::to_string(f.shape.max_length) + ")");
  }
  try {
    f.family->validate(f.config);
  } catch (const std::exception& error) {
    throw UsageError("verify: invalid model for family '" + f.config.family +
                     "': " + DescribeError(error));
  }
}

// Why `entry` is not verified here, or "" when it is.
std::string NotVerifiedBecause(const VariantEntry& entry) {
  const Capabilities& caps = entry.capabilities;
  if (!caps.unavailable.empty()) return "not verified: " + caps.unavailable;
  if (!caps.Supports(torch::kCPU))
    return "CUDA only: not verified here; seqbench run checks it on a GPU";
  return "";
}

// The O(T) check of a variant that claims it (harness/scaling.h): one line; true if held.
bool VerifyScaling(const VerifyFlags& f, const VariantEntry& entry, const ParameterSet& weights) {
  const ScalingCheck check = CheckTrainScaling(entry.key, f.config, weights, f.dtype);
  std::printf(
      "%-14s %-9s %lld, %lld, %lld bytes a train step at T=%lld, 2T, 4T: growth %.3gx "
      "(O(T): %.3gx at most) %s\n",
      escape::TerminalText(entry.key, false).c_str(), "scaling", (long long)check.bytes[0],
      (long long)check.bytes[1], (long long)check.bytes[2], (long long)check.steps, check.ratio(),
      kLinearBytesRatio, check.linear() ? "ok" : "NOT O(T)");
  return check.linear();
}

// Checks one variant in every mode it supports and prints a line a mode; true if all
// passed.
bool VerifyVariant(const VerifyFlags& f, const VariantEntry& entry, const ParameterSet& weights,
                   const Batch& batch, const Batch& prompt) {
  const Capabilities& caps = entry.capabilities;
  bool all_passed = true;
  for (const Mode mode : {Mode::kTrain, Mode::kForward, Mode::kGenerate}) {
    if (!caps.Supports(mode)) continue;
    auto reference = CreateVariant(f.baseline_key);
    auto candidate = entry.factory();
    reference->Setup(f.config, weights, torch::kCPU, f.dtype);
    candidate->Setup(f.config, weights, torch::kCPU, f.dtype);
    const EquivalenceResult result =
        CheckEquivalence(*candidate, *reference, mode, mode == Mode::kGenerate ? prompt : batch,
                         caps.ToleranceFor(f.dtype), f.generate_tokens);
    all_passed = all_passed && result.passed();
    if (mode == Mode::kGenerate) {
      std::printf("%-14s %-9s %35lld mismatched tokens of %lld %29s %s\n",
                  escape::TerminalText(entry.key, false).c_str(), "generate",
                  (long long)result.mismatched_tokens,
                  (long long)(f.shape.batch_size * f.generate_tokens), "",
                  result.passed() ? "ok" : "MISMATCH");
      continue;
    }
    std::printf(
        "%-14s %-9s %11.3g %11.3g %11.3g %11.3g %11.3g  %-22s %s\n",
        escape::TerminalText(entry.key, false).c_str(), std::string(ModeName(mode)).c_str(),
        result.logits.max_abs, result.logits.max_rel, result.loss.max_abs, result.gradients.max_abs,
        result.gradients.max_rel,
        mode == Mode::kTrain ? escape::TerminalText(result.worst_gradient, false).c_str() : "-",
        result.passed() ? "ok" : "MISMATCH");
  }
  if (caps.Supports(Mode::kTrain) && caps.complexity == "T") {
    all_passed = VerifyScaling(f, entry, weights) && all_passed;
  }
  return all_passed;
}

void PrintVerifyHeader(const VerifyFlags& f) {
  const ModelConfig& config = f.config;
  std::printf("%s%s %s V=%lld D=%lld L=%lld H=%lld  B=%lld T=%lld (min %lld)  seed=%llu\n",
              config.family.c_str(), config.ffn == "gelu" ? "" : (" ffn=" + config.ffn).c_str(),
              DtypeName(f.dtype).c_str(), (long long)config.vocab_size, (long long)config.width,
              (long long)config.num_layers, (long long)config.num_heads,
              (long long)f.shape.batch_size, (long long)f.shape.max_length,
              (long long)f.shape.min_length, (unsigned long long)f.seed);
  std::printf("%-14s %-9s %11s %11s %11s %11s %11s  %-22s %s\n", "variant", "mode", "logits_abs",
              "logits_rel", "loss_abs", "grad_abs", "grad_rel", "worst_grad", "result");
}

}  // namespace

int RunVerify(const std::vector<std::string>& args) {
  VerifyFlags f;
  if (!ParseVerifyFlags(args, f)) return 0;
  CheckVerifyFlags(f);
  // Sizes beyond the machine are refused before allocating (MemoryLimitExceeded: exit 2).
  CountingCpuAllocator::Install();
  const ParameterSet weights = f.family->init_weights(f.config, f.seed);
  const Batch batch = MakeBatch(f.shape, f.config.vocab_size, f.seed + 1);
  const Batch prompt =
      MakeBatch({f.shape.batch_size, f.shape.max_length, 0}, f.config.vocab_size, f.seed + 2);
  PrintVerifyHeader(f);
  bool all_passed = true;
  for (const VariantEntry* entry : GlobalVariants().Entries()) {
    const Capabilities& caps = entry->capabilities;
    if (entry->key == f.baseline_key || !f.pattern->Matches(entry->key)) continue;
    if (caps.family != f.config.family && entry->origin != "built-in") {
      // A plugin's variant of another family: say so rather than pass it over in silence.
      std::printf("%-14s (not verified: a %s variant; give --family %s)\n",
                  escape::TerminalText(entry->key, false).c_str(),
                  escape::TerminalText(caps.family, false).c_str(),
                  escape::TerminalText(caps.family, false).c_str());
      continue;
    }
    if (caps.family != f.config.family || !caps.Supports(f.dtype)) continue;
    if (const std::string why = NotVerifiedBecause(*entry); !why.empty()) {
      std::printf("%-14s (%s)\n", escape::TerminalText(entry->key, false).c_str(),
                  escape::TerminalText(why, false).c_str());
      continue;
    }
    all_passed = VerifyVariant(f, *entry, weights, batch, prompt) && all_passed;
  }
  return all_passed ? 0 : 1;
}

}  // namespace seqbench::cli
