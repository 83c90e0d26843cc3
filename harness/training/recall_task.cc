#include "harness/training/recall_task.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>

#include "harness/text_data.h"
#include "harness/training/trainer.h"

namespace seqbench::training {
namespace {

constexpr int64_t kKeys = 26, kValues = 10, kFillers = 26;

void CheckOptions(const RecallOptions& options) {
  if (options.pairs < 1 || options.pairs > kKeys) {
    throw std::invalid_argument("recall_pairs must be in [1, 26] (keys are 'A'-'Z'), got " +
                                std::to_string(options.pairs));
  }
  if (options.distances.empty()) throw std::invalid_argument("recall_distances is empty");
  for (const int64_t distance : options.distances) {
    // At least one filler token between the last pair and the query, whichever pair it
    // asks for: otherwise the query would sit inside the pairs.
    if (distance < 2 * options.pairs) {
      throw std::invalid_argument("recall distance " + std::to_string(distance) +
                                  " is shorter than the pairs (2 x recall_pairs = " +
                                  std::to_string(2 * options.pairs) + ")");
    }
  }
}

}  // namespace

int64_t RecallMaxLength(const RecallOptions& options) {
  CheckOptions(options);
  const int64_t longest = *std::max_element(options.distances.begin(), options.distances.end());
  // The last pair's value sits at 2·pairs − 1; the query `longest` after it, then the answer.
  return 2 * options.pairs - 1 + longest + 2;
}

Samples MakeRecallSamples(const RecallOptions& options, int64_t count, std::mt19937_64& generator) {
  CheckOptions(options);
  std::uniform_int_distribution<int64_t> value('0', '0' + kValues - 1);
  std::uniform_int_distribution<int64_t> filler('a', 'a' + kFillers - 1);
  std::uniform_int_distribution<int64_t> queried(0, options.pairs - 1);
  std::vector<int64_t> keys(kKeys);
  std::iota(keys.begin(), keys.end(), int64_t{'A'});
  Samples samples(count);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t distance = options.distances[i % options.distances.size()];
    std::shuffle(keys.begin(), keys.end(), generator);
    const int64_t pair = queried(generator);
    const int64_t query = 2 * pair + 1 + distance;
    std::vector<int64_t>& sample = samples[i];
    sample.resize(query + 2);
    for (int64_t p = 0; p < options.pairs; ++p) {
      sample[2 * p] = keys[p];
      sample[2 * p + 1] = value(generator);
    }
    for (int64_t t = 2 * options.pairs; t < query; ++t) sample[t] = filler(generator);
    sample[query] = sample[2 * pair];
    sample[query + 1] = sample[2 * pair + 1];
  }
  return samples;
}

int64_t RecallDistance(const std::vector<int64_t>& sample) {
  const auto n = static_cast<int64_t>(sample.size());
  if (n < 4) return 0;
  const int64_t query = n - 2;
  for (int64_t p = query - 2; p >= 0; --p) {
    if (sample[p] == sample[query]) return query - (p + 1);
  }
  return 0;
}

void AddRecallScores(const torch::Tensor& logits, const Samples& samples,
                     const std::vector<int64_t>& indices, std::vector<RecallScore>& scores) {
  TORCH_CHECK(logits.dim() == 3 && logits.size(0) == static_cast<int64_t>(indices.size()),
              "AddRecallScores: logits must be [B,T,V] with B = the samples given, got ",
              logits.sizes());
  for (const int64_t index : indices) {
    TORCH_CHECK(index >= 0 && index < static_cast<int64_t>(samples.size()) &&
                    static_cast<int64_t>(samples[index].size()) <= logits.size(1),
                "AddRecallScores: sample ", index, " is not one of the ", samples.size(),
                " given, or is longer than the logits' T = ", logits.size(1));
  }
  // The logits at the query predict the answer; argmax over the vocabulary at once.
  const torch::Tensor predicted = logits.argmax(-1).to(torch::kCPU);  // [B,T]
  const auto prediction = predicted.accessor<int64_t, 2>();
  for (size_t b = 0; b < indices.size(); ++b) {
    const std::vector<int64_t>& sample = samples[indices[b]];
    const int64_t distance = RecallDistance(sample);
    if (distance == 0) continue;
    auto score = std::lower_bound(scores.begin(), scores.end(), distance,
                                  [](const RecallScore& s, int64_t d) { return s.distance < d; });
    if (score == scores.end() || score->distance != distance) {
      score = scores.insert(score, RecallScore{distance, 0, 0});
    }
    const auto query = static_cast<int64_t>(sample.size()) - 2;
    score->correct += prediction[b][query] == sample.back() ? 1 : 0;
    ++score->total;
  }
}

std::vector<RecallScore> ScoreRecall(Trainer& trainer, const RecallOptions& options) {
  CheckOptions(options);
  // Every distance from the start, so that the ranks' counts line up for the sum.
  std::vector<RecallScore> scores;
  for (const int64_t distance :
       std::set<int64_t>(options.distances.begin(), options.distances.end())) {
    scores.push_back(RecallScore{distance, 0, 0});
  }
  const size_t distances = scores.size();
  trainer.ForEachValidationBatch(
      [&](const Batch&, const std::vector<int64_t>& indices, const ForwardOutput& output) {
        AddRecallScores(output.logits, trainer.validation(), indices, scores);
      });
  TORCH_CHECK(scores.size() == distances,
              "ScoreRecall: a validation sample is at a distance the options do not name");
  std::vector<double> counts;
  for (const RecallScore& score : scores) counts.push_back(static_cast<double>(score.correct));
  for (const RecallScore& score : scores) counts.push_back(static_cast<double>(score.total));
  counts = trainer.SumOverRanks(counts);
  for (size_t i = 0; i < distances; ++i) {
    scores[i].correct = static_cast<int64_t>(counts[i]);
    scores[i].total = static_cast<int64_t>(counts[distances + i]);
  }
  return scores;
}

}  // namespace seqbench::training
