// The long-range study's associative-recall task: the samples say what they claim (the
// distance, the answer), the scoring reads the logits that predict the answer and no
// other, and the suite format refuses recall options that cannot make a sample.
#include "harness/training/recall_task.h"

#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>

#include "harness/suite_error.h"
#include "harness/training/training_data.h"
#include "harness/training/training_suite.h"

namespace seqbench::training {
namespace {

bool IsKey(int64_t t) { return t >= 'A' && t <= 'Z'; }
bool IsValue(int64_t t) { return t >= '0' && t <= '9'; }
bool IsFiller(int64_t t) { return t >= 'a' && t <= 'z'; }

TEST_CASE("recall samples hold their pairs, filler, query and answer at the distance", "[recall]") {
  RecallOptions options;
  options.distances = {8, 20, 33};
  options.pairs = 3;
  std::mt19937_64 generator(7);
  const Samples samples = MakeRecallSamples(options, 300, generator);
  REQUIRE(samples.size() == 300);
  std::map<int64_t, int> per_distance;
  int64_t longest = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    INFO("sample " << i);
    const auto& s = samples[i];
    const auto n = static_cast<int64_t>(s.size());
    const int64_t distance = options.distances[i % options.distances.size()];
    longest = std::max(longest, n);
    // The pairs: distinct keys, each followed by a value.
    std::set<int64_t> keys;
    for (int64_t p = 0; p < options.pairs; ++p) {
      REQUIRE(IsKey(s[2 * p]));
      REQUIRE(IsValue(s[2 * p + 1]));
      keys.insert(s[2 * p]);
    }
    CHECK(keys.size() == static_cast<size_t>(options.pairs));
    // Then filler up to the query, which is one of the keys, then that key's value.
    for (int64_t t = 2 * options.pairs; t < n - 2; ++t) REQUIRE(IsFiller(s[t]));
    const int64_t query = n - 2;
    REQUIRE(keys.count(s[query]) == 1);
    int64_t value_at = -1;
    for (int64_t p = 0; p < options.pairs; ++p) {
      if (s[2 * p] == s[query]) value_at = 2 * p + 1;
    }
    CHECK(s[n - 1] == s[value_at]);
    CHECK(query - value_at == distance);
    CHECK(RecallDistance(s) == distance);
    ++per_distance[distance];
  }
  for (const int64_t d : options.distances) CHECK(per_distance[d] == 100);
  // Some sample asks for the last pair at the longest distance: the bound is reached.
  CHECK(longest == RecallMaxLength(options));
  CHECK(RecallMaxLength(options) == 2 * 3 - 1 + 33 + 2);

  std::mt19937_64 same(7), other(8);
  CHECK(MakeRecallSamples(options, 300, same) == samples);
  CHECK(MakeRecallSamples(options, 300, other) != samples);

  options.distances = {5};  // shorter than the 6 tokens of 3 pairs
  CHECK_THROWS_WITH(MakeRecallSamples(options, 1, generator), Catch::Contains("shorter"));
  options.distances = {8};
  options.pairs = 27;
  CHECK_THROWS_WITH(MakeRecallSamples(options, 1, generator), Catch::Contains("[1, 26]"));
  CHECK(RecallDistance({'A', '1', 'b'}) == 0);            // too short for a query and an answer
  CHECK(RecallDistance({'A', '1', 'b', 'C', '2'}) == 0);  // the query never came before
}

TEST_CASE("recall scoring reads the logits at the query, by distance", "[recall]") {
  // Two samples at distance 4, one at 6; the query is each sample's second-to-last token.
  const Samples samples = {{'K', '3', 'a', 'b', 'c', 'K', '3'},
                           {'K', '5', 'a', 'b', 'c', 'K', '5'},
                           {'Q', '7', 'a', 'b', 'c', 'd', 'e', 'Q', '7'}};
  REQUIRE(RecallDistance(samples[0]) == 4);
  REQUIRE(RecallDistance(samples[2]) == 6);
  const int64_t T = 9, V = 128;
  torch::Tensor logits = torch::zeros({3, T, V});
  // Sample 0 answers right at its query (position 5); sample 1 wrong there ('4') but
  // "right" one position late, which a scorer off by one would count; sample 2 right.
  logits[0][5]['3'] = 1;
  logits[1][5]['4'] = 1;
  logits[1][6]['5'] = 1;
  logits[2][7]['7'] = 1;
  std::vector<RecallScore> scores;
  AddRecallScores(logits, samples, {0, 1, 2}, scores);
  REQUIRE(scores.size() == 2);
  CHECK(scores[0].distance == 4);
  CHECK(scores[0].correct == 1);
  CHECK(scores[0].total == 2);
  CHECK(scores[0].accuracy() == 0.5);
  CHECK(scores[1].distance == 6);
  CHECK(scores[1].correct == 1);
  CHECK(scores[1].total == 1);
  // A second batch adds into the same rows, its logits in the order of `indices`: sample 2
  // first (right), then sample 1 (wrong at its query).
  AddRecallScores(torch::stack({logits[2], logits[1]}), samples, {2, 1}, scores);
  CHECK(scores[0].total == 3);
  CHECK(scores[0].correct == 1);
  CHECK(scores[1].total == 2);
  CHECK(scores[1].correct == 2);
  // A sample that is not a recall sample (distance 0) is left out; one longer than the
  // logits is refused rather than read past their end.
  const Samples other = {{'a', 'b', 'c', 'd'}};
  AddRecallScores(torch::zeros({1, 4, V}), other, {0}, scores);
  CHECK(scores.size() == 2);
  CHECK_THROWS_WITH(AddRecallScores(torch::zeros({1, 5, V}), samples, {2}, scores),
                    Catch::Contains("longer than the logits"));
}

TEST_CASE("recall data and suites: the options must make a sample", "[recall]") {
  DataOptions data;
  data.corpus = "recall";
  data.recall.distances = {16, 40};
  data.max_length = 40;  // the longest sample is 2·4 − 1 + 40 + 2 = 49
  data.synthetic_samples = 50;
  data.validation_samples = 10;
  CHECK_THROWS_WITH(LoadTrainingData(data, 1), Catch::Contains("49"));
  data.max_length = 49;
  const TrainingData loaded = LoadTrainingData(data, 1);
  CHECK(loaded.train.size() == 40);
  for (const auto& sample : loaded.validation) CHECK(RecallDistance(sample) >= 16);

  const std::string good = R"(name = "r"
description = "recall"
[data]
corpus = "recall"
recall_distances = [8, 32]
recall_pairs = 2
max_length = 40
[model]
width = 32
[train]
variant = "fused"
steps = 10
[[pipelines]]
name = "rnn"
[[pipelines]]
name = "deeper"
model = { layers = 3 }
)";
  const TrainingSuite suite = ParseTrainingSuite(good, "r.toml");
  CHECK(suite.data.recall.distances == std::vector<int64_t>{8, 32});
  CHECK(suite.data.recall.pairs == 2);
  CHECK(suite.pipelines[0].config.model.num_layers == 2);
  CHECK(suite.pipelines[1].config.model.num_layers == 3);
  CHECK(suite.pipelines[1].config.model.width == 32);  // the rest from [model]
  CHECK(suite.pipelines[0].Describe().find("L=") == std::string::npos);
  CHECK_THAT(suite.pipelines[1].Describe(), Catch::Contains("D=32 L=3 H=4"));

  const auto error_of = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    try {
      ParseTrainingSuite(text.replace(at, from.size(), to), "r.toml");
    } catch (const SuiteError& error) {
      return std::to_string(error.line()) + ": " + error.message();
    }
    return std::string("no error");
  };
  // The longest sample is 2·2 − 1 + 32 + 2 = 37 tokens.
  CHECK(error_of("max_length = 40", "max_length = 37") == "no error");
  CHECK_THAT(error_of("max_length = 40", "max_length = 36"),
             Catch::StartsWith("7: ") && Catch::Contains("37 tokens") &&
                 Catch::Contains("max_length is 36"));
  CHECK_THAT(error_of("[8, 32]", "[3, 32]"),
             Catch::StartsWith("5: ") && Catch::Contains("at least 2 x recall_pairs (4)"));
  CHECK_THAT(error_of("[8, 32]", "[8, 32, 8]"),
             Catch::StartsWith("5: ") && Catch::Contains("8 is given twice"));
  CHECK_THAT(error_of("[8, 32]", "[]"), Catch::StartsWith("5: ") && Catch::Contains("empty"));
  CHECK_THAT(error_of("recall_distances = [8, 32]\n", ""),
             Catch::Contains("needs recall_distances"));
  CHECK_THAT(error_of("corpus = \"recall\"", "corpus = \"synthetic\""),
             Catch::StartsWith("5: ") && Catch::Contains("need corpus = \"recall\""));
  CHECK_THAT(error_of("model = { layers = 3 }", "model = 3"),
             Catch::StartsWith("17: ") && Catch::Contains("must be a table"));
  CHECK_THAT(error_of("model = { layers = 3 }", "model = { depth = 3 }"),
             Catch::StartsWith("17: ") && Catch::Contains("unknown key 'depth'"));
  CHECK_THAT(error_of("model = { layers = 3 }", "model = { ffn = \"relu\" }"),
             Catch::StartsWith("17: ") && Catch::Contains("swiglu"));
}

}  // namespace
}  // namespace seqbench::training
