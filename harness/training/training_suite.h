// A TrainingSuite is a parsed `suites/training*.toml` file: one dataset, one model, and
// a list of pipelines (training configurations) that `seqbench train` runs side by side,
// each for its own number of steps, so that their throughput and loss curves compare
// within one run. The format is documented in suites/README.md; errors are SuiteErrors
// ("path:line:column: message").
//
// Thread-safety: immutable after parsing; safe to read from any thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/suite.h"
#include "harness/training/trainer.h"
#include "harness/training/training_data.h"

namespace seqbench::training {

// The largest count a training key or flag takes (steps, samples, intervals): 2^30.
inline constexpr int64_t kMaxCount = int64_t{1} << 30;

struct PipelineSpec {
  std::string name;  // unique in the suite; the case key and "variant" of reports
  // The pipeline this one's ratios are against in the reports (default: the suite's
  // reference), so that one suite can hold several combinations, each beside its own
  // baseline.
  std::string reference;
  TrainingConfig config;
  int64_t steps = 100;
  int64_t eval_every = 50;    // validation loss every this many steps, and at the end
  int64_t timing_warmup = 5;  // first steps left out of the throughput figures
  int64_t line = 0;
  // The cosine schedule decays over the steps after warmup (the suite set no cycle_steps),
  // so that a --steps override changes its length too.
  bool cycle_follows_steps = true;
  // The suite set no `ranks`: the pipeline trains on every rank of the world it runs in
  // (`seqbench train` sets config.data_parallel.ranks to the world's size).
  bool ranks_from_world = true;
  // The pipeline set its own `model = { ... }` sizes, which Describe() then shows.
  bool model_overridden = false;
  // Variants of the pipeline's family that its trained weights run through for inference
  // after the last step (`evaluate_with`), each compared with the trained variant on the
  // held-out samples (harness/training/inference_comparison.h).
  std::vector<std::string> evaluate_with;
  // A later pipeline distils from this one (distill_from): its trained model is kept.
  bool keep_model = false;
  int64_t DefaultCycleSteps() const {
    return std::max<int64_t>(1, steps - config.schedule.warmup_steps);
  }

  // "variant=scan batching=token_budget budget=4096 workers=2 accumulation=1 amp=bf16":
  // the options that tell pipelines apart, for the reports' table.
  std::string Describe() const;
};

struct TrainingSuite {
  std::string path, text, name, description;
  DataOptions data;
  uint64_t data_seed = 1;  // the train/validation split
  std::string reference;   // the pipelines' default reference (PipelineSpec::reference)
  std::vector<PipelineSpec> pipelines;
  std::vector<Expectation> expectations;  // what: throughput | memory_ratio | loss_match |
                                          // validation_loss_ratio | all_correct

  const PipelineSpec& Pipeline(const std::string& name) const;
};

// True when `text` is a training suite (it has [[pipelines]]) rather than a benchmark suite.
bool IsTrainingSuiteText(const std::string& text);
TrainingSuite ParseTrainingSuite(const std::string& text, const std::string& path);
TrainingSuite LoadTrainingSuiteFile(const std::string& path);

}  // namespace seqbench::training
