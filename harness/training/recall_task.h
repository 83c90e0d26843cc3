// The associative-recall task of the long-range study (docs/analysis.md, section 4): each
// sample stores a few key–value pairs, then filler, then asks for one key's value again,
// so that the answer depends on a token exactly `distance` positions back. A sample reads
//
//   K1 v1 K2 v2 K3 v3 K4 v4  f f f … f  K2 v2
//   └──── pairs (shuffled keys) ─────┘  └ filler ┘ query answer
//
// keys 'A'–'Z' (distinct within a sample), values '0'–'9', filler 'a'–'z', all drawn
// uniformly, and `distance` = position(query) − position(the queried value). The answer is
// the sample's last token, so the task is plain next-token training on the samples and its
// score needs nothing stored beside them: RecallDistance() reads the distance back.
//
// Thread-safety: RecallMaxLength and RecallDistance are pure; MakeRecallSamples advances the
// caller's generator and AddRecallScores adds into the caller's scores (one caller at a time
// per generator, per scores); ScoreRecall runs the trainer's model (the trainer's thread).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "harness/training/batching.h"
#include "variants/core/variant.h"

namespace seqbench::training {

class Trainer;  // harness/training/trainer.h, which needs the data options this file serves

struct RecallOptions {
  std::vector<int64_t> distances;  // each >= 2·pairs, so that filler separates them
  int64_t pairs = 4;               // key–value pairs a sample stores, 1..26
};

// The longest sample the options make: the pairs, the longest distance and the answer.
// Throws std::invalid_argument for options out of range, as MakeRecallSamples does.
int64_t RecallMaxLength(const RecallOptions& options);

// `count` samples, the distances taken in turn from options.distances (so each distance has
// count/|distances| of them, ±1), the queried pair uniform over the pairs. Throws
// std::invalid_argument for options out of range.
Samples MakeRecallSamples(const RecallOptions& options, int64_t count, std::mt19937_64& generator);

// The distance of a sample MakeRecallSamples made (see above); 0 when the second-to-last
// token has no earlier occurrence with a token after it. Meaningless for other text.
int64_t RecallDistance(const std::vector<int64_t>& sample);

struct RecallScore {
  int64_t distance = 0;
  int64_t correct = 0;  // samples whose answer is the argmax of the logits that predict it
  int64_t total = 0;
  double accuracy() const { return total == 0 ? 0.0 : static_cast<double>(correct) / total; }
};

// Greedy accuracy on each of the trainer's validation samples' answer, at each distance of
// `options` (ascending), over the trainer's data-parallel group: every rank scores its share
// of the samples (Trainer::ForEachValidationBatch) and every rank must call it.
std::vector<RecallScore> ScoreRecall(Trainer& trainer, const RecallOptions& options);

// The counting half of ScoreRecall, for one batch: logits: [B,T,V] (read only) of the samples
// `indices` (in that order, each at most T tokens), added into `scores` (kept sorted by
// distance; a distance not yet there is inserted). Samples of distance 0 are left out.
void AddRecallScores(const torch::Tensor& logits, const Samples& samples,
                     const std::vector<int64_t>& indices, std::vector<RecallScore>& scores);

}  // namespace seqbench::training
