// The data a training run learns from: a corpus (harness/text_data.h), synthetic tokens
// or the recall task's samples (harness/training/recall_task.h), cut into samples of at
// most max_length tokens and split into training and validation samples, deterministically
// for a seed.
//
// Thread-safety: pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <string>

#include "harness/training/batching.h"
#include "harness/training/recall_task.h"

namespace seqbench::training {

struct DataOptions {
  // fortunes | edict | rotten_tomatoes | daily_dialog | synthetic | recall
  std::string corpus = "fortunes";
  std::string path;  // "" = where the Debian package installs it (fortunes, edict)
  int64_t max_length = 256;
  int64_t validation_samples = 256;  // held out, never trained on
  int64_t max_samples = 0;           // 0 = every sample; else the first N after shuffling
  // synthetic: random bytes with a controlled length distribution, clamped to
  // [synthetic_min_length, max_length]:
  //   uniform    uniform over that range
  //   lognormal  median synthetic_median_length, log-space spread synthetic_sigma: many
  //              short samples and a long tail, like real text
  //   fixed      every sample max_length tokens (no padding under any batching)
  std::string synthetic_lengths = "uniform";
  int64_t synthetic_samples = 4096;
  int64_t synthetic_min_length = 8;
  int64_t synthetic_median_length = 64;
  double synthetic_sigma = 0.8;
  // recall: synthetic_samples associative-recall samples (harness/training/recall_task.h),
  // every one at most max_length tokens, which must hold RecallMaxLength(recall).
  RecallOptions recall;
};

struct TrainingData {
  std::string description;  // e.g. "fortunes: 17284 samples (max 256 tokens), 256 held out"
  Samples train;
  Samples validation;
};

// Throws text::DataError for unreadable or invalid files (naming the file, and the
// package to install for a missing default corpus), std::invalid_argument for options
// out of range.
TrainingData LoadTrainingData(const DataOptions& options, uint64_t seed);

}  // namespace seqbench::training
