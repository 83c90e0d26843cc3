// The training pipeline: batching plans, the loader, the schedule, the loss scaler,
// gradient accumulation, mixed precision, checkpoints and the training suite format.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "base/files.h"
#include "harness/memory.h"
#include "harness/text_data.h"
#include "harness/training/data_loader.h"
#include "harness/training/pipeline.h"
#include "harness/training/trainer.h"
#include "harness/training/training_data.h"
#include "harness/training/training_suite.h"
#include "tests/test_support.h"
#include "variants/core/torch_compat.h"

namespace seqbench::training {
namespace {

// Lengths skewed like real text: many short samples, a long tail.
Samples SkewedSamples(int64_t count, uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::lognormal_distribution<double> length(3.5, 0.8);
  std::uniform_int_distribution<int64_t> byte(0, 255);
  Samples samples(count);
  for (auto& sample : samples) {
    sample.resize(std::clamp<int64_t>(static_cast<int64_t>(length(generator)), 2, 128));
    for (auto& token : sample) token = byte(generator);
  }
  return samples;
}

void CheckEverySampleOnce(const BatchPlan& plan, size_t count) {
  std::vector<int> seen(count, 0);
  for (const auto& batch : plan) {
    for (const int64_t index : batch) ++seen.at(index);
  }
  for (size_t i = 0; i < count; ++i) {
    INFO("sample " << i);
    CHECK(seen[i] == 1);
  }
}

TEST_CASE("every policy uses every sample exactly once per epoch", "[training]") {
  const Samples samples = SkewedSamples(1000, 1);
  const auto lengths = Lengths(samples);
  for (const auto policy : {BatchingPolicy::kFixed, BatchingPolicy::kBucketed,
                            BatchingPolicy::kTokenBudget, BatchingPolicy::kCurriculum}) {
    BatchingOptions options;
    options.policy = policy;
    options.batch_size = 16;
    options.pool_batches = 8;
    options.token_budget = 512;
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
      INFO(BatchingPolicyName(policy) << " epoch " << epoch);
      CheckEverySampleOnce(PlanEpoch(lengths, options, 7, epoch), samples.size());
    }
    // Epochs differ, and a plan is reproducible.
    CHECK(PlanEpoch(lengths, options, 7, 0) != PlanEpoch(lengths, options, 7, 1));
    CHECK(PlanEpoch(lengths, options, 7, 1) == PlanEpoch(lengths, options, 7, 1));
  }
}

TEST_CASE("curriculum batching visits the first epoch short to long, then shuffles", "[training]") {
  const Samples samples = SkewedSamples(1000, 4);
  const auto lengths = Lengths(samples);
  BatchingOptions curriculum;
  curriculum.policy = BatchingPolicy::kCurriculum;
  curriculum.batch_size = 16;
  // The longest sample of each batch, in the order the epoch visits them.
  const auto longest_per_batch = [&](const BatchPlan& plan) {
    std::vector<int64_t> longest;
    for (const auto& batch : plan) {
      int64_t most = 0;
      for (const int64_t index : batch) most = std::max(most, lengths[index]);
      longest.push_back(most);
    }
    return longest;
  };
  const BatchPlan first = PlanEpoch(lengths, curriculum, 5, 0);
  REQUIRE(first.size() == (samples.size() + 15) / 16);
  for (const auto& batch : first) CHECK(batch.size() <= 16);
  // Every length of a batch is at most every length of the next.
  const std::vector<int64_t> longest = longest_per_batch(first);
  for (size_t b = 1; b < first.size(); ++b) {
    int64_t shortest = lengths[first[b].front()];
    for (const int64_t index : first[b]) shortest = std::min(shortest, lengths[index]);
    CHECK(longest[b - 1] <= shortest);
  }
  CHECK(longest.front() < longest.back());
  // From the second epoch on: fixed's plan, batch for batch.
  BatchingOptions fixed = curriculum;
  fixed.policy = BatchingPolicy::kFixed;
  CHECK(PlanEpoch(lengths, curriculum, 5, 1) == PlanEpoch(lengths, fixed, 5, 1));
  const std::vector<int64_t> second = longest_per_batch(PlanEpoch(lengths, curriculum, 5, 1));
  CHECK_FALSE(std::is_sorted(second.begin(), second.end()));
}

TEST_CASE("token budgets bound B·T_max and beat fixed batches on padding", "[training]") {
  const Samples samples = SkewedSamples(2000, 2);
  const auto lengths = Lengths(samples);
  BatchingOptions budget;
  budget.policy = BatchingPolicy::kTokenBudget;
  budget.token_budget = 1024;
  const BatchPlan plan = PlanEpoch(lengths, budget, 3, 0);
  for (const auto& batch : plan) {
    int64_t longest = 0;
    for (const int64_t index : batch) longest = std::max(longest, lengths[index]);
    CHECK(longest * static_cast<int64_t>(batch.size()) <= budget.token_budget);
  }
  BatchingOptions fixed;
  fixed.batch_size = 16;
  BatchingOptions bucketed = fixed;
  bucketed.policy = BatchingPolicy::kBucketed;
  const double fixed_efficiency =
      MeasurePadding(PlanEpoch(lengths, fixed, 3, 0), lengths).efficiency();
  const double bucketed_efficiency =
      MeasurePadding(PlanEpoch(lengths, bucketed, 3, 0), lengths).efficiency();
  const double budget_efficiency = MeasurePadding(plan, lengths).efficiency();
  CHECK(bucketed_efficiency > fixed_efficiency + 0.2);
  CHECK(budget_efficiency > fixed_efficiency + 0.2);
  CHECK(budget_efficiency <= 1.0);

  budget.token_budget = 100;  // below the longest sample (128)
  CHECK_THROWS_WITH(PlanEpoch(lengths, budget, 3, 0), Catch::Contains("below the longest sample"));
}

TEST_CASE("long texts are split, not truncated; tails without a target are dropped", "[training]") {
  const std::vector<std::vector<int64_t>> sequences = {{1, 2, 3, 4, 5, 6, 7}, {8}, {9, 10}};
  const Samples samples = SplitToMaxLength(sequences, 3);
  // {1,2,3} {4,5,6} ({7} dropped), ({8} dropped), {9,10}
  REQUIRE(samples.size() == 3);
  CHECK(samples[1] == std::vector<int64_t>{4, 5, 6});
  CHECK(samples[2] == std::vector<int64_t>{9, 10});
}

TEST_CASE("the loader's stream is the same for any number of workers", "[training]") {
  const Samples samples = SkewedSamples(300, 4);
  BatchingOptions batching;
  batching.policy = BatchingPolicy::kBucketed;
  batching.batch_size = 8;
  // 300 samples in batches of 8: 38 batches an epoch, so 100 batches cross two epochs.
  const auto stream = [&](int64_t workers, int64_t prefetch) {
    DataLoader loader(samples, batching, LoaderOptions{workers, prefetch, false}, 11, text::kPad);
    std::vector<torch::Tensor> batches;
    for (int i = 0; i < 100; ++i) batches.push_back(loader.Next().tokens);
    CHECK(loader.position() == LoaderPosition{2, 24});
    return batches;
  };
  const auto reference = stream(0, 1);
  for (const auto& [workers, prefetch] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 4}, {4, 16}}) {
    INFO(workers << " workers, prefetch " << prefetch);
    const auto batches = stream(workers, prefetch);
    for (size_t i = 0; i < batches.size(); ++i) REQUIRE(torch::equal(batches[i], reference[i]));
  }
  // Starting at a position continues the same stream.
  DataLoader resumed(samples, batching, LoaderOptions{2, 4, false}, 11, text::kPad, {1, 5});
  CHECK(torch::equal(resumed.Next().tokens, reference[38 + 5]));
}

TEST_CASE("the cosine schedule at known steps", "[training]") {
  ScheduleOptions schedule;
  schedule.peak = 1.0;
  schedule.warmup_steps = 10;
  schedule.cycle_steps = 100;
  schedule.min_ratio = 0.1;
  CHECK(LearningRateAt(schedule, 0) == Approx(0.1));    // 1/10 of the way up
  CHECK(LearningRateAt(schedule, 9) == Approx(1.0));    // warmup's last step
  CHECK(LearningRateAt(schedule, 10) == Approx(1.0));   // cosine starts at the peak
  CHECK(LearningRateAt(schedule, 60) == Approx(0.55));  // half way: (peak + min) / 2
  CHECK(LearningRateAt(schedule, 110) == Approx(0.1));  // the end of the cycle
  CHECK(LearningRateAt(schedule, 500) == Approx(0.1));  // and it stays there
  schedule.restarts = true;
  schedule.cycle_multiplier = 2;
  CHECK(LearningRateAt(schedule, 110) == Approx(1.0));   // restart
  CHECK(LearningRateAt(schedule, 210) == Approx(0.55));  // half of the 200-step second cycle
  CHECK(LearningRateAt(schedule, 310) == Approx(1.0));   // the third cycle
}

TEST_CASE("the loss scaler backs off on overflow and grows after good steps", "[training]") {
  LossScalerOptions options;
  options.initial_scale = 1024;
  options.growth_interval = 3;
  DynamicLossScaler scaler(options);
  auto parameter = torch::ones({4}, torch::requires_grad());
  parameter.mutable_grad() = torch::full({4}, 2048.0);
  CHECK(scaler.UnscaleGradients({parameter}));
  CHECK(torch::allclose(parameter.grad(), torch::full({4}, 2.0)));  // divided by the scale
  scaler.Update(true);
  scaler.Update(true);
  CHECK(scaler.scale() == 1024);
  CHECK(scaler.good_steps() == 2);
  scaler.Update(true);  // the third good step in a row
  CHECK(scaler.scale() == 2048);
  CHECK(scaler.good_steps() == 0);

  parameter.mutable_grad() = torch::tensor({1.0f, INFINITY, 0.0f, 1.0f});
  CHECK_FALSE(scaler.UnscaleGradients({parameter}));
  scaler.Update(false);
  CHECK(scaler.scale() == 1024);
  parameter.mutable_grad() = torch::tensor({1.0f, NAN, 0.0f, 1.0f});
  CHECK_FALSE(scaler.UnscaleGradients({parameter}));
  scaler.Update(true);
  scaler.Update(false);  // an overflow resets the run of good steps
  CHECK(scaler.scale() == 512);
  CHECK(scaler.good_steps() == 0);
}

TEST_CASE("k accumulated micro-batches give the large batch's gradient and update", "[training]") {
  const Samples train = SkewedSamples(64, 5), validation = SkewedSamples(16, 6);
  TrainingConfig large = testing::SmallTrainingConfig();
  large.clip_norm = 0;  // compare raw gradients
  TrainingConfig accumulated = large;
  accumulated.batching.batch_size = 2;
  accumulated.accumulation = 4;  // the same 8 samples: a fixed plan chunks one shuffled order
  Trainer large_trainer(large, train, validation);
  Trainer accumulated_trainer(accumulated, train, validation);
  const StepResult a = large_trainer.Step();
  const StepResult b = accumulated_trainer.Step();
  CHECK(a.tokens == b.tokens);
  CHECK(b.padded_tokens < a.padded_tokens);  // micro-batches pad to their own longest
  CHECK(b.loss == Approx(a.loss).epsilon(1e-6));
  const auto& expected = large_trainer.variant().parameters();
  const auto& actual = accumulated_trainer.variant().parameters();
  for (const auto& item : expected) {
    INFO(item.key());
    const auto& other = actual[item.key()];
    CHECK(torch::allclose(other.grad(), item.value().grad(), 1e-5, 1e-7));
    CHECK(torch::allclose(other, item.value(), 1e-5, 1e-7));
  }
  // The property must be able to fail: unweighted micro-batch means differ.
  CHECK_FALSE(torch::allclose(actual["embedding"].grad(), 4 * expected["embedding"].grad()));
}

TEST_CASE("training resumes from a checkpoint with the same next losses", "[training]") {
  const Samples train = SkewedSamples(80, 7), validation = SkewedSamples(16, 8);
  TrainingConfig config = testing::SmallTrainingConfig();
  config.loader.workers = 2;
  const std::string path =
      (std::filesystem::temp_directory_path() / "seqbench_training_test.pt").string();
  // 14 steps cross an epoch; bit for bit: same data, same state.
  const auto losses = testing::StepAcrossResume(config, train, validation, path, 8, 14);
  CHECK(losses.loaded_step == 8);
  CHECK(losses.resumed == losses.straight);
  const CheckpointModel model = ReadCheckpointModel(path);
  CHECK(model.step == 8);
  CHECK(model.model.width == 16);

  TrainingConfig other = config;
  other.schedule.peak = 2e-2;
  Trainer mismatched(other, train, validation);
  CHECK_THROWS_WITH(mismatched.Load(path), Catch::Contains("different training configuration"));
  CHECK_THROWS_WITH(mismatched.Load(path + ".missing"), Catch::Contains("no such checkpoint"));

  // A longer schedule (a run extended to more steps) loads; the learning rate differs from
  // then on, so the losses may too, but the state is the checkpoint's.
  TrainingConfig longer = config;
  longer.schedule.cycle_steps = config.schedule.cycle_steps * 2;
  Trainer extended(longer, train, validation);
  extended.Load(path);
  CHECK(extended.step() == 8);
  std::filesystem::remove(path);
}

TEST_CASE("an attention checkpoint keeps its feed-forward kind", "[training]") {
  const Samples train = SkewedSamples(40, 7), validation = SkewedSamples(8, 8);
  TrainingConfig config = testing::SmallTrainingConfig();
  config.variant = "naive";
  config.model.family = "attention";
  config.model.ffn = "swiglu";
  // gelu, the default, stays out of the fingerprint: checkpoints from before the key resume.
  TrainingConfig gelu = config;
  gelu.model.ffn = "gelu";
  CHECK(gelu.Fingerprint().find("ffn") == std::string::npos);
  CHECK(config.Fingerprint() != gelu.Fingerprint());
  TrainingConfig geglu = config;
  geglu.model.ffn = "geglu";  // the same shapes as swiglu: only the fingerprint tells
  CHECK(config.Fingerprint() != geglu.Fingerprint());

  const std::string path =
      (std::filesystem::temp_directory_path() / "seqbench_training_ffn_test.pt").string();
  Trainer trainer(config, train, validation);
  trainer.Step();
  trainer.Save(path);
  const CheckpointModel model = ReadCheckpointModel(path);  // shapes checked as it reads
  CHECK(model.model.ffn == "swiglu");
  CHECK(model.weights.size() == trainer.variant().parameters().size());
  Trainer other(geglu, train, validation);
  CHECK_THROWS_WITH(other.Load(path), Catch::Contains("different training configuration"));
  std::filesystem::remove(path);
}

TEST_CASE("a checkpoint is written whole, never through a planted link", "[training]") {
  const Samples train = SkewedSamples(40, 7), validation = SkewedSamples(8, 8);
  const TrainingConfig config = testing::SmallTrainingConfig();
  const std::filesystem::path folder =
      std::filesystem::temp_directory_path() / ("seqbench_ckpt_" + std::to_string(getpid()));
  std::filesystem::create_directories(folder);
  const std::filesystem::path victim = folder / "victim.txt";
  const std::filesystem::path path = folder / "model.pt";
  { std::ofstream(victim) << "keep me"; }
  Trainer trainer(config, train, validation);
  trainer.Step();
  // The link at the checkpoint's path, and at the name the old writer used for its
  // temporary: neither may be followed.
  std::filesystem::create_symlink(victim, path.string() + ".partial");
  trainer.Save(path.string());
  std::filesystem::create_symlink(victim, folder / "link.pt");
  CHECK_THROWS_AS(trainer.Save((folder / "link.pt").string()), OutputRefused);
  std::ifstream kept(victim);
  std::string text((std::istreambuf_iterator<char>(kept)), std::istreambuf_iterator<char>());
  CHECK(text == "keep me");
  // What was written is a whole checkpoint, and no temporary is left beside it.
  Trainer other(config, train, validation);
  other.Load(path.string());
  CHECK(other.step() == 1);
  int entries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    (void)entry;
    ++entries;
  }
  CHECK(entries == 4);  // victim, model.pt, the two links
  RemoveTree(folder.string());
}

TEST_CASE("a resume may change the schedule's length and nothing else", "[training]") {
  TrainingConfig config = EffectiveConfig(testing::SmallTrainingConfig());
  const std::string fingerprint = config.Fingerprint();
  CHECK(MatchForResume(fingerprint, fingerprint).kind == ResumeMatch::kSame);

  TrainingConfig longer = config;
  longer.schedule.cycle_steps = config.schedule.cycle_steps + 100;
  const ResumeMatch match = MatchForResume(fingerprint, longer.Fingerprint());
  CHECK(match.kind == ResumeMatch::kScheduleLength);
  CHECK(match.checkpoint_cycle == std::to_string(config.schedule.cycle_steps));
  CHECK(match.resuming_cycle == std::to_string(longer.schedule.cycle_steps));

  TrainingConfig other = longer;
  other.schedule.peak *= 2;  // with the length: still another configuration
  CHECK(MatchForResume(fingerprint, other.Fingerprint()).kind == ResumeMatch::kDifferent);
  other = config;
  other.variant_options["chunk_size"] = 4;
  CHECK(MatchForResume(fingerprint, other.Fingerprint()).kind == ResumeMatch::kDifferent);
}

TEST_CASE("bf16 autocast trains on the CPU close to fp32", "[training]") {
  const Samples train = SkewedSamples(64, 9), validation = SkewedSamples(16, 10);
  // fused runs ATen ops only; the others have their own autograd functions, which see
  // bf16 projections beside a float32 state.
  const std::string variant =
      GENERATE(as<std::string>{}, "fused", "batched", "checkpointed", "fused_recurrent");
  INFO(variant);
  TrainingConfig fp32 = testing::SmallTrainingConfig();
  fp32.variant = variant;
  TrainingConfig bf16 = fp32;
  bf16.precision = Precision::kBFloat16;
  bf16.loss_scaling = true;  // harmless with bf16; exercises the scaler end to end
  Trainer a(fp32, train, validation), b(bf16, train, validation);
  for (int i = 0; i < 5; ++i) {
    const StepResult x = a.Step(), y = b.Step();
    CHECK_FALSE(y.skipped);
    CHECK(y.loss == Approx(x.loss).epsilon(0.02));
    CHECK(y.loss != x.loss);  // it really ran in lower precision
  }
  CHECK(b.Evaluate() == Approx(a.Evaluate()).epsilon(0.02));
  if (!compat::AutocastSupports(c10::DeviceType::CPU, torch::kHalf)) {  // LibTorch < 2.4
    TrainingConfig fp16 = fp32;
    fp16.precision = Precision::kFloat16;
    CHECK_THROWS_WITH(Trainer(fp16, train, validation), Catch::Contains("not supported on cpu"));
  }
}

TEST_CASE("training suites: defaults, overrides and errors with their line", "[training]") {
  const std::string good = R"(name = "t"
description = "test"
reference = "plain"
[data]
corpus = "synthetic"
max_length = 64
[model]
width = 32
[train]
variant = "fused"
steps = 40
batch_size = 8
[[pipelines]]
name = "plain"
[[pipelines]]
name = "budget"
batching = "token_budget"
token_budget = 512
warmup_steps = 4
[[expect]]
what = "throughput"
variant = "budget"
over = "plain"
at_least = 1.0
)";
  const TrainingSuite suite = ParseTrainingSuite(good, "t.toml");
  REQUIRE(suite.pipelines.size() == 2);
  CHECK(suite.pipelines[0].config.batching.batch_size == 8);
  CHECK(suite.pipelines[1].config.batching.policy == BatchingPolicy::kTokenBudget);
  CHECK(suite.pipelines[1].config.schedule.cycle_steps == 36);  // steps - warmup
  CHECK(suite.pipelines[1].cycle_follows_steps);  // so `train --steps` lengthens it too
  CHECK(suite.pipelines[1].DefaultCycleSteps() == 36);
  CHECK(suite.pipelines[0].config.model.vocab_size == text::kVocabularySize);
  CHECK(IsTrainingSuiteText(good));
  CHECK_FALSE(IsTrainingSuiteText("name = \"x\"\n[grid]\nbatch = 1\n"));

  // The good suite with its text `from` replaced by `to`.
  const auto edited = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    return text.replace(at, from.size(), to);
  };
  const auto error_of = [&](const std::string& from, const std::string& to) {
    try {
      ParseTrainingSuite(edited(from, to), "t.toml");
    } catch (const SuiteError& error) {
      return std::to_string(error.line()) + ": " + error.message();
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of("token_budget = 512", "token_budget = 32"),
             Catch::StartsWith("15: ") && Catch::Contains("at least [data] max_length (64)"));
  CHECK_THAT(error_of("batch_size = 8", "batch_sise = 8"),
             Catch::StartsWith("12: ") && Catch::Contains("unknown key 'batch_sise'"));
  CHECK_THAT(error_of("variant = \"fused\"", "variant = \"nope\""),
             Catch::StartsWith("10: ") && Catch::Contains("known variants:"));
  CHECK_THAT(error_of("name = \"budget\"", "name = \"plain\""),
             Catch::Contains("duplicate pipeline name 'plain'"));
  CHECK_THAT(error_of("over = \"plain\"", "over = \"nobody\""),
             Catch::StartsWith("23: ") && Catch::Contains("not a pipeline name"));
  // members: the world ranks of a data-parallel pipeline, from rank 0 up.
  {
    const TrainingSuite with_members =
        ParseTrainingSuite(edited("warmup_steps = 4", "members = [0, 3]"), "t.toml");
    const auto& options = with_members.pipelines[1].config.data_parallel;
    CHECK(options.ranks == 2);
    CHECK(options.Members() == std::vector<int64_t>{0, 3});
    CHECK_FALSE(with_members.pipelines[1].ranks_from_world);
    CHECK(with_members.pipelines[1].Describe().find("ranks=2") != std::string::npos);
    CHECK(with_members.pipelines[1].Describe().find("members=0,3") != std::string::npos);
    CHECK(with_members.pipelines[0].config.data_parallel.Members() == std::vector<int64_t>{0});
  }
  // reference: each pipeline's ratios against its own baseline, the suite's by default.
  {
    const TrainingSuite grouped =
        ParseTrainingSuite(edited("warmup_steps = 4",
                                  "reference = \"budget\"\nclip_norm = 0\nweight_decay = 0\n"
                                  "warmup_steps = 0\nmin_lr_ratio = 1"),
                           "t.toml");
    CHECK(grouped.pipelines[0].reference == "plain");
    CHECK(grouped.pipelines[1].reference == "budget");
    CHECK(grouped.pipelines[0].Describe().find("clip") == std::string::npos);
    CHECK_THAT(grouped.pipelines[1].Describe(), Catch::Contains("weight_decay=0") &&
                                                    Catch::Contains("lr=constant") &&
                                                    Catch::Contains("clip=off"));
    CHECK_THAT(error_of("warmup_steps = 4", "reference = \"nobody\""),
               Catch::StartsWith("19: ") && Catch::Contains("reference 'nobody'") &&
                   Catch::Contains("budget, plain"));
  }
  {
    const TrainingSuite eight_bit =
        ParseTrainingSuite(edited("warmup_steps = 4", "optimizer = \"adamw8bit\""), "t.toml");
    CHECK(eight_bit.pipelines[1].config.optimizer == OptimizerKind::kAdamW8bit);
    CHECK(eight_bit.pipelines[0].config.optimizer == OptimizerKind::kAdamW);
    CHECK(eight_bit.pipelines[1].Describe().find("optimizer=adamw8bit") != std::string::npos);
    CHECK(eight_bit.pipelines[0].Describe().find("optimizer") == std::string::npos);
  }
  // LAMB and LARS: the learning rate they run at is in the description; LARS's two
  // options in the fingerprint, and refused for any other optimizer.
  {
    const TrainingSuite layerwise = ParseTrainingSuite(
        edited("warmup_steps = 4",
               "optimizer = \"lars\"\nmomentum = 0.75\ntrust_coefficient = 0.02"),
        "t.toml");
    const TrainingConfig& lars = layerwise.pipelines[1].config;
    CHECK(lars.optimizer == OptimizerKind::kLars);
    CHECK(lars.lars.momentum == 0.75);
    CHECK(lars.lars.trust_coefficient == 0.02);
    CHECK_THAT(layerwise.pipelines[1].Describe(),
               Catch::Contains("optimizer=lars peak_lr=0.003 momentum=0.75 trust=0.02"));
    CHECK_THAT(lars.Fingerprint(), Catch::Contains("momentum=0.75 trust_coefficient=0.02"));
    CHECK(layerwise.pipelines[0].config.Fingerprint().find("momentum") == std::string::npos);
    const TrainingSuite lamb =
        ParseTrainingSuite(edited("warmup_steps = 4", "optimizer = \"lamb\""), "t.toml");
    CHECK(lamb.pipelines[1].config.optimizer == OptimizerKind::kLamb);
    CHECK_THAT(lamb.pipelines[1].Describe(), Catch::Contains("optimizer=lamb peak_lr=0.003"));
  }
  CHECK_THAT(error_of("warmup_steps = 4", "momentum = 0.5"),
             Catch::StartsWith("15: ") && Catch::Contains("LARS's"));
  // Pruning: its end defaults to the pipeline's last step; its keys checked together.
  {
    const TrainingSuite pruned =
        ParseTrainingSuite(edited("warmup_steps = 4", "prune_sparsity = 0.5"), "t.toml");
    const PruningOptions& p = pruned.pipelines[1].config.pruning;
    CHECK(p.sparsity == 0.5);
    CHECK(p.start == 0);
    CHECK(p.end == 40);
    CHECK_THAT(pruned.pipelines[1].Describe(), Catch::Contains("prune=0.5@0..40/1"));
    CHECK_FALSE(pruned.pipelines[0].config.pruning.enabled());
    const TrainingSuite shaped = ParseTrainingSuite(
        edited("warmup_steps = 4",
               "prune_sparsity = 0.75\nprune_start = 5\nprune_end = 40\nprune_every = 5"),
        "t.toml");
    CHECK(shaped.pipelines[1].config.pruning.start == 5);
    CHECK(shaped.pipelines[1].config.pruning.every == 5);
    // [train]'s schedule, and a pipeline that opts out with a sparsity of 0.
    std::string text =
        edited("batch_size = 8\n", "batch_size = 8\nprune_sparsity = 0.5\nprune_start = 4\n");
    text.replace(text.find("warmup_steps = 4"), 16, "prune_sparsity = 0");
    const TrainingSuite opted_out = ParseTrainingSuite(text, "t.toml");
    CHECK(opted_out.pipelines[0].config.pruning.enabled());
    CHECK_FALSE(opted_out.pipelines[1].config.pruning.enabled());
  }
  CHECK_THAT(error_of("warmup_steps = 4", "prune_sparsity = 1"),
             Catch::StartsWith("19: ") && Catch::Contains("below 1"));
  CHECK_THAT(error_of("warmup_steps = 4", "prune_sparsity = 0.5\nprune_end = 41"),
             Catch::StartsWith("15: ") && Catch::Contains("past its steps (40)"));
  CHECK_THAT(error_of("warmup_steps = 4", "prune_sparsity = 0.5\nprune_start = 40"),
             Catch::StartsWith("15: ") && Catch::Contains("must come before prune_end (40)"));
  CHECK_THAT(error_of("warmup_steps = 4", "prune_start = 3"),
             Catch::StartsWith("15: ") && Catch::Contains("pruning, which is off"));
  // Written, not merely different from LARS's defaults: 0.9 and 0.001 are those defaults.
  CHECK_THAT(error_of("warmup_steps = 4", "momentum = 0.9"),
             Catch::StartsWith("15: ") && Catch::Contains("LARS's"));
  CHECK_THAT(error_of("warmup_steps = 4", "trust_coefficient = 0.001"),
             Catch::StartsWith("15: ") && Catch::Contains("LARS's"));
  CHECK_THAT(error_of("warmup_steps = 4", "optimizer = \"lars\"\nmomentum = 1"),
             Catch::StartsWith("20: ") && Catch::Contains("below 1"));
  CHECK_THAT(error_of("warmup_steps = 4", "optimizer = \"lars\"\ntrust_coefficient = 0"),
             Catch::StartsWith("20: ") && Catch::Contains("above 0"));
  {
    const TrainingSuite offloaded =
        ParseTrainingSuite(edited("warmup_steps = 4", "offload = \"cpu\""), "t.toml");
    CHECK(offloaded.pipelines[1].config.offload_optimizer);
    CHECK_FALSE(offloaded.pipelines[0].config.offload_optimizer);
    CHECK(offloaded.pipelines[1].Describe().find("offload=cpu") != std::string::npos);
    CHECK(offloaded.pipelines[1].config.Fingerprint().find("offload=cpu") != std::string::npos);
    CHECK(offloaded.pipelines[0].config.Fingerprint().find("offload") == std::string::npos);
  }
  CHECK_THAT(error_of("warmup_steps = 4", "offload = \"gpu\""),
             Catch::StartsWith("19: ") && Catch::Contains("none, cpu"));
  CHECK_THAT(error_of("warmup_steps = 4", "offload = \"cpu\"\noptimizer = \"adamw8bit\""),
             Catch::StartsWith("15: ") && Catch::Contains("does not combine") &&
                 Catch::Contains("'budget'"));
  CHECK_THAT(error_of("warmup_steps = 4", "optimizer = \"sgd\""),
             Catch::StartsWith("19: ") && Catch::Contains("adamw8bit, lamb, lars"));
  CHECK_THAT(error_of("warmup_steps = 4", "members = [1, 2]"),
             Catch::StartsWith("19: ") && Catch::Contains("must start at rank 0"));
  CHECK_THAT(error_of("warmup_steps = 4", "members = [0, 2, 2]"),
             Catch::StartsWith("19: ") && Catch::Contains("ascend"));
  CHECK_THAT(error_of("warmup_steps = 4", "members = [0, 2]\nranks = 3"),
             Catch::Contains("give one of them"));
  // distill_from: an earlier pipeline teaches, and keeps its model for it.
  {
    const TrainingSuite distilled =
        ParseTrainingSuite(edited("warmup_steps = 4", "distill_from = \"plain\""), "t.toml");
    CHECK(distilled.pipelines[1].config.distillation.teacher == "plain");
    CHECK(distilled.pipelines[0].keep_model);
    CHECK_FALSE(distilled.pipelines[1].keep_model);
    CHECK_THAT(distilled.pipelines[1].Describe(), Catch::Contains("distill=plain T=2 alpha=0.5"));
    CHECK_THAT(distilled.pipelines[1].config.Fingerprint(), Catch::Contains("distill=plain/2/0.5"));
    CHECK_FALSE(suite.pipelines[0].keep_model);
  }
  CHECK_THAT(error_of("warmup_steps = 4", "distill_from = \"budget\""),
             Catch::StartsWith("15: ") && Catch::Contains("not a pipeline before this one"));
  CHECK_THAT(error_of("warmup_steps = 4", "distill_from = \"nobody\""),
             Catch::StartsWith("15: ") && Catch::Contains("'nobody'"));
  CHECK_THAT(error_of("warmup_steps = 4", "distill_weight = 0.3"),
             Catch::StartsWith("15: ") && Catch::Contains("add distill_from"));
  CHECK_THAT(error_of("warmup_steps = 4", "distill_from = \"plain\"\ndistill_weight = 1.5"),
             Catch::StartsWith("20: "));
  CHECK_THAT(error_of("warmup_steps = 4", "distill_from = \"plain\"\ndistill_temperature = 0"),
             Catch::StartsWith("20: ") && Catch::Contains("above 0"));
  // zero: ZeRO-1 on the pipeline's ranks; stages 2 and 3 are not built; one rank refused.
  {
    const TrainingSuite sharded =
        ParseTrainingSuite(edited("warmup_steps = 4", "ranks = 2\nzero = 1"), "t.toml");
    CHECK(sharded.pipelines[1].config.data_parallel.zero_stage == 1);
    CHECK(sharded.pipelines[0].config.data_parallel.zero_stage == 0);
    CHECK_THAT(sharded.pipelines[1].Describe(),
               Catch::Contains("ranks=2") && Catch::Contains("zero=1"));
    CHECK(sharded.pipelines[0].Describe().find("zero") == std::string::npos);
  }
  CHECK_THAT(error_of("warmup_steps = 4", "ranks = 2\nzero = 2"), Catch::StartsWith("20: "));
  CHECK_THAT(error_of("warmup_steps = 4", "ranks = 1\nzero = 1"),
             Catch::StartsWith("15: ") && Catch::Contains("zero = 1 shards"));
  // evaluate_with: forward variants of the pipeline's family, each once.
  {
    const TrainingSuite evaluated = ParseTrainingSuite(
        edited("warmup_steps = 4", "evaluate_with = [\"stepwise\", \"int8_dynamic\"]"), "t.toml");
    CHECK(evaluated.pipelines[1].evaluate_with ==
          std::vector<std::string>{"stepwise", "int8_dynamic"});
    CHECK(evaluated.pipelines[0].evaluate_with.empty());
  }
  CHECK_THAT(error_of("warmup_steps = 4", "evaluate_with = [\"int9\"]"),
             Catch::StartsWith("19: ") && Catch::Contains("known variants:") &&
                 Catch::Contains("int8_dynamic"));
  CHECK_THAT(error_of("warmup_steps = 4", "evaluate_with = [\"naive\"]"),
             Catch::StartsWith("19: ") && Catch::Contains("family 'attention'") &&
                 Catch::Contains("'simple_rnn'"));
  CHECK_THAT(error_of("warmup_steps = 4", "evaluate_with = [\"stepwise\", \"stepwise\"]"),
             Catch::StartsWith("19: ") && Catch::Contains("twice"));
  CHECK_THAT(error_of("warmup_steps = 4", "evaluate_with = []"),
             Catch::StartsWith("19: ") && Catch::Contains("non-empty array"));
  CHECK_THAT(error_of("warmup_steps = 4", "device = \"cuda\"\nevaluate_with = [\"int8_dynamic\"]"),
             Catch::StartsWith("20: ") && Catch::Contains("does not run on cuda"));
  if (!compat::AutocastSupports(c10::DeviceType::CPU, torch::kHalf)) {
    CHECK_THAT(error_of("warmup_steps = 4", "amp = \"fp16\""),
               Catch::Contains("not supported on the CPU"));
  }
}

TEST_CASE("synthetic data has the length distribution asked for", "[training]") {
  DataOptions options;
  options.corpus = "synthetic";
  options.max_length = 200;
  options.validation_samples = 10;
  options.synthetic_samples = 4000;
  options.synthetic_min_length = 4;
  options.synthetic_lengths = "lognormal";
  options.synthetic_median_length = 40;
  auto lengths = Lengths(LoadTrainingData(options, 1).train);
  std::sort(lengths.begin(), lengths.end());
  CHECK(lengths[lengths.size() / 2] == Approx(40).margin(3));  // the median asked for
  CHECK(lengths.front() >= 4);
  CHECK(lengths.back() <= 200);
  CHECK(lengths[lengths.size() * 99 / 100] > 2 * 40);  // a long tail
  options.synthetic_lengths = "fixed";
  for (const auto length : Lengths(LoadTrainingData(options, 1).train)) REQUIRE(length == 200);
  options.synthetic_lengths = "zipf";
  CHECK_THROWS_WITH(LoadTrainingData(options, 1), Catch::Contains("uniform, lognormal or fixed"));
}

TEST_CASE("prompts name their special tokens", "[text]") {
  const auto ids = text::EncodeWithSpecialTokens("<en> hi <ja>");
  CHECK(ids == std::vector<int64_t>{text::kEn, ' ', 'h', 'i', ' ', text::kJa});
  CHECK(text::Decode(ids) == "<en> hi <ja>");
  CHECK(text::EncodeWithSpecialTokens("a<eos") == std::vector<int64_t>{'a', '<', 'e', 'o', 's'});
}

TEST_CASE("padding efficiency: real tokens over each batch's samples x its own longest",
          "[training][metrics]") {
  // Lengths 8, 2, 4; batches {2, 4} and {8} (by index): 14 real tokens over 2x4 + 1x8 = 16
  // processed, 0.875; the longest of the epoch for every sample would give 14 / 24.
  const std::vector<int64_t> lengths = {8, 2, 4};
  const PaddingStats stats = MeasurePadding({{1, 2}, {0}}, lengths);
  CHECK(stats.real_tokens == 14);
  CHECK(stats.padded_tokens == 16);
  CHECK(stats.efficiency() == Approx(0.875));
  CHECK(MeasurePadding({}, lengths).efficiency() == 1.0);
}

TEST_CASE("a pipeline's figures: timed steps only, the last tenth's loss, memory above start",
          "[training][metrics]") {
  // 20 logged steps, 5 of warmup: the warmup steps carry more tokens per second than the
  // rest, losses fall, every batch is padded, and 1 MiB was live when training began, so
  // that each figure's wrong neighbour (all steps, every loss, the peak itself) differs.
  PipelineSpec spec;
  spec.timing_warmup = 5;
  std::vector<TrainingStepRecord> steps;
  double elapsed = 0;
  for (int64_t i = 0; i < 20; ++i) {
    TrainingStepRecord step;
    step.step = i + 1;
    step.tokens = i < 5 ? 400 : 100 + 10 * i;
    step.padded_tokens = step.tokens + 20;
    step.loss = 5.0 - 0.2 * static_cast<double>(i);
    elapsed += i < 5 ? 0.05 : 0.1 + 0.06 * static_cast<double>(i % 4);
    step.elapsed_s = elapsed;
    step.loss_scale = 1024.0 / static_cast<double>(1 + i % 4);
    steps.push_back(step);
  }
  steps[9].validation_loss = 3.2;  // the lowest, not the last
  steps[15].validation_loss = 3.5;
  steps[7].skipped = steps[8].skipped = true;
  MemoryUsage memory;
  memory.peak_bytes = (1 << 20) + 3000;
  memory.activation_bytes = 3000;
  memory.max_rss_bytes = 1 << 24;
  spec.config.loss_scaling = true;
  CaseRecord record;
  AddPipelineMetrics(steps, spec, memory, record);

  double timed_tokens = 0, timed_seconds = 0, all_tokens = 0, padded = 0;
  std::vector<double> rates, times;
  for (int64_t i = 0; i < 20; ++i) {
    const double seconds = steps[i].elapsed_s - (i == 0 ? 0 : steps[i - 1].elapsed_s);
    all_tokens += steps[i].tokens;
    padded += steps[i].padded_tokens;
    if (i < 5) continue;
    timed_tokens += steps[i].tokens;
    timed_seconds += seconds;
    rates.push_back(steps[i].tokens / seconds);
    times.push_back(seconds);
  }
  // Written out here with n - 1, not through seqbench's statistics.
  const auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (const double x : v) sum += x;
    return sum / static_cast<double>(v.size());
  };
  const auto sample_sd = [&](const std::vector<double>& v) {
    double squares = 0;
    for (const double x : v) squares += (x - mean(v)) * (x - mean(v));
    return std::sqrt(squares / static_cast<double>(v.size() - 1));
  };
  std::vector<double> sorted_rates = rates;
  std::sort(sorted_rates.begin(), sorted_rates.end());
  // Guards: total tokens over total time differs from the median and the mean step rate.
  REQUIRE(std::abs(sorted_rates[7] - timed_tokens / timed_seconds) > 10);
  REQUIRE(std::abs(mean(rates) - timed_tokens / timed_seconds) > 10);
  CHECK(record.samples_s.size() == 15);
  CHECK(*record.MetricValue("tokens_per_s") == Approx(timed_tokens / timed_seconds));
  CHECK(*record.MetricValue("tokens_per_s_stddev") == Approx(sample_sd(rates)));
  CHECK(*record.MetricValue("runtime_mean_s") == Approx(mean(times)));
  CHECK(*record.MetricValue("runtime_stddev_s") == Approx(sample_sd(times)));
  CHECK(record.tokens_per_step == static_cast<int64_t>(all_tokens) / 20);
  CHECK(*record.MetricValue("padding_efficiency") == Approx(all_tokens / padded));
  // The last tenth: steps 19 and 20, losses 1.4 and 1.2.
  CHECK(*record.MetricValue("final_train_loss") == Approx(1.3));
  CHECK(*record.MetricValue("final_validation_loss") == 3.5);
  CHECK(*record.MetricValue("skipped_steps") == 2);
  CHECK(*record.MetricValue("final_loss_scale") == 256);  // the last step's: 1024 / 4
  // Peak live bytes above what was live before training (README's `peak_bytes`).
  CHECK(*record.MetricValue("peak_bytes") == 3000);
  CHECK(*record.MetricValue("max_rss_bytes") == 1 << 24);
  // Without loss scaling (fp32), no scale to report.
  spec.config.loss_scaling = false;
  CaseRecord unscaled;
  AddPipelineMetrics(steps, spec, memory, unscaled);
  CHECK_FALSE(unscaled.MetricValue("final_loss_scale"));
}

TEST_CASE("communication figures: per timed step, the warmup steps left out",
          "[training][metrics][distributed]") {
  // 3 warmup steps that carry ten times more than the 4 timed ones, whose figures differ
  // step to step: the average over all 7, the sum, or the last step would each differ.
  PipelineSpec spec;
  spec.timing_warmup = 3;
  spec.config.data_parallel.bucket_mb = 2.5;
  std::vector<CommunicationStats> steps;
  for (int64_t i = 0; i < 7; ++i) {
    const int64_t scale = i < 3 ? 10 : 1;
    CommunicationStats step;
    step.buckets = scale * (2 + i % 2);                // timed: 3, 2, 3, 2
    step.bytes = scale * 1000 * (i + 1);               // timed: 4000 .. 7000
    step.allreduce_seconds = scale * 0.01 * (i + 1);   // timed: 0.04 .. 0.07
    step.count_allreduces = scale * 3;                 // timed: 3 each
    step.count_allreduce_seconds = scale * 0.001 * i;  // timed: 0.003 .. 0.006
    steps.push_back(step);
  }
  CaseRecord record;
  AddCommunicationMetrics(steps, spec, record);
  CHECK(*record.MetricValue("bucket_mb") == 2.5);
  CHECK(*record.MetricValue("allreduce_buckets_per_step") == Approx(10.0 / 4));
  CHECK(*record.MetricValue("allreduce_bytes_per_step") == Approx(22000.0 / 4));
  CHECK(*record.MetricValue("allreduce_s_per_step") == Approx(0.22 / 4));
  CHECK(*record.MetricValue("count_allreduces_per_step") == Approx(3));
  CHECK(*record.MetricValue("count_allreduce_s_per_step") == Approx(0.018 / 4));
  // Nothing timed (a resumed process that stopped within its warmup): no figures at all.
  CaseRecord none;
  AddCommunicationMetrics({steps.begin(), steps.begin() + 3}, spec, none);
  CHECK(none.metrics.empty());
}

}  // namespace
}  // namespace seqbench::training
