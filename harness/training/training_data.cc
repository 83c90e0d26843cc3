#include "harness/training/training_data.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>
#include <stdexcept>

#include "harness/text_data.h"

namespace seqbench::training {
namespace {

std::string DefaultPath(const std::string& corpus) {
  if (corpus == "fortunes") return "/usr/share/games/fortunes";
  if (corpus == "edict") return "/usr/share/edict/edict";
  throw std::invalid_argument("corpus '" + corpus + "' needs a path");
}

text::Corpus LoadCorpus(const DataOptions& options) {
  const std::string path = options.path.empty() ? DefaultPath(options.corpus) : options.path;
  if (options.path.empty() && !std::filesystem::exists(path)) {
    throw text::DataError(path, "not found; install the Debian package '" + options.corpus +
                                    "' (ci/install-deps does) or give a path");
  }
  if (options.corpus == "fortunes") return text::LoadFortunes(path);
  if (options.corpus == "edict") return text::LoadEdict(path);
  if (options.corpus == "rotten_tomatoes") return text::LoadRottenTomatoes(path);
  if (options.corpus == "daily_dialog") return text::LoadDailyDialog(path);
  throw std::invalid_argument("unknown corpus '" + options.corpus +
                              "'; known: daily_dialog, edict, fortunes, rotten_tomatoes, "
                              "recall, synthetic");
}

Samples SyntheticSamples(const DataOptions& options, std::mt19937_64& generator) {
  if (options.synthetic_min_length < 2 || options.synthetic_min_length > options.max_length) {
    throw std::invalid_argument("synthetic_min_length must be in [2, max_length]");
  }
  std::uniform_int_distribution<int64_t> uniform(options.synthetic_min_length, options.max_length);
  std::lognormal_distribution<double> lognormal(
      std::log(static_cast<double>(options.synthetic_median_length)), options.synthetic_sigma);
  const auto length = [&]() -> int64_t {
    if (options.synthetic_lengths == "fixed") return options.max_length;
    if (options.synthetic_lengths == "uniform") return uniform(generator);
    const auto drawn = static_cast<int64_t>(std::llround(lognormal(generator)));
    return std::clamp(drawn, options.synthetic_min_length, options.max_length);
  };
  if (options.synthetic_lengths != "uniform" && options.synthetic_lengths != "lognormal" &&
      options.synthetic_lengths != "fixed") {
    throw std::invalid_argument("synthetic_lengths must be uniform, lognormal or fixed, got '" +
                                options.synthetic_lengths + "'");
  }
  std::uniform_int_distribution<int64_t> byte(0, 255);
  Samples samples(options.synthetic_samples);
  for (auto& sample : samples) {
    sample.resize(length());
    for (auto& token : sample) token = byte(generator);
  }
  return samples;
}

}  // namespace

TrainingData LoadTrainingData(const DataOptions& options, uint64_t seed) {
  if (options.max_length < 2) throw std::invalid_argument("max_length must be at least 2");
  if (options.validation_samples < 1) {
    throw std::invalid_argument("validation_samples must be at least 1");
  }
  std::mt19937_64 generator(seed);
  Samples samples;
  std::string name = options.corpus;
  if (options.corpus == "synthetic") {
    samples = SyntheticSamples(options, generator);
  } else if (options.corpus == "recall") {
    if (RecallMaxLength(options.recall) > options.max_length) {
      throw std::invalid_argument("max_length " + std::to_string(options.max_length) +
                                  " is below the longest recall " + "sample (" +
                                  std::to_string(RecallMaxLength(options.recall)) + " tokens)");
    }
    samples = MakeRecallSamples(options.recall, options.synthetic_samples, generator);
  } else {
    const text::Corpus corpus = LoadCorpus(options);
    samples = SplitToMaxLength(corpus.sequences, options.max_length);
  }
  std::shuffle(samples.begin(), samples.end(), generator);
  if (options.max_samples > 0 && static_cast<int64_t>(samples.size()) > options.max_samples) {
    samples.resize(options.max_samples);
  }
  if (static_cast<int64_t>(samples.size()) <= options.validation_samples) {
    throw std::invalid_argument(name + " has " + std::to_string(samples.size()) +
                                " samples: too few to hold out " +
                                std::to_string(options.validation_samples) + " for validation");
  }
  TrainingData data;
  data.validation.assign(samples.begin(), samples.begin() + options.validation_samples);
  data.train.assign(samples.begin() + options.validation_samples, samples.end());
  const auto lengths = Lengths(data.train);
  const int64_t tokens = std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
  data.description = name + ": " + std::to_string(data.train.size()) + " samples, " +
                     std::to_string(tokens) + " tokens (at most " +
                     std::to_string(options.max_length) + " a sample), " +
                     std::to_string(data.validation.size()) + " held out";
  return data;
}

}  // namespace seqbench::training
