// Suite files: a good one parses and expands as documented; every malformed one fails
// with the file, the line and a message that says what was expected.
#include "harness/suite.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "base/text.h"
#include "harness/training/training_suite.h"
#include "tests/test_support.h"

namespace seqbench {
namespace {

const char* const kGoodSuite = R"toml(name = "tiny"
description = "a test suite"
family = "simple_rnn"
baseline = "baseline"
seed = 3

[model]
vocab_size = 32
width = 16
layers = 1
heads = 2

[measure]
repetitions = 3
warmup = 0
min_time_ms = 0.5

[[variants]]
key = "baseline"
[[variants]]
key = "checkpointed"
name = "checkpointed_k4"
options = { checkpoint_every = 4 }

[grid]
mode = ["train", "forward"]
batch = [1, 2]
seq_len = 8
min_len = [0, 3]

[[cases]]
variant = "baseline"
mode = "generate"
seq_len = 4
generate_tokens = 2

[[expect]]
what = "speedup"
variant = "checkpointed_k4"
over = "baseline"
at_least = 1.1
where = { batch = 1, mode = "train" }
)toml";

// `base` (the good suite) with one line replaced (1-based) by `replacement`.
std::string WithLine(int line, const std::string& replacement,
                     const std::string& base = kGoodSuite) {
  std::istringstream in(base);
  std::string result, current;
  for (int n = 1; std::getline(in, current); ++n)
    result += (n == line ? replacement : current) + "\n";
  return result;
}

// The good suite with its [[expect]] (lines 37-42) a time_per_doubling over seq_len.
std::string DoublingSuite() {
  return WithLine(40, "over = \"seq_len\"", WithLine(38, "what = \"time_per_doubling\""));
}

TEST_CASE("a good suite parses with every field", "[suite]") {
  const Suite suite = ParseSuite(kGoodSuite, "good.toml");
  CHECK(suite.name == "tiny");
  CHECK(suite.seed == 3);
  CHECK(suite.model.width == 16);
  CHECK(suite.model.num_heads == 2);
  CHECK(suite.measurement.repetitions == 3);
  CHECK(suite.measurement.min_time_s == Approx(0.0005));
  CHECK(suite.measurement.max_noise == 0);  // off unless asked for
  // A noise target as a percentage or a fraction, as on the command line.
  for (const char* spelling : {"\"3%\"", "0.03"}) {
    const std::string text = std::regex_replace(
        kGoodSuite, std::regex("repetitions = 3"),
        std::string("repetitions = 3\nmax_noise = ") + spelling + "\nmax_time_s = 7");
    const Suite noisy = ParseSuite(text, "noisy.toml");
    CHECK(noisy.measurement.max_noise == Approx(0.03));
    CHECK(noisy.measurement.max_time_s == 7);
  }
  REQUIRE(suite.variants.size() == 2);
  CHECK(suite.variants[1].name == "checkpointed_k4");
  CHECK(suite.variants[1].options.at("checkpoint_every") == 4);
  REQUIRE(suite.expectations.size() == 1);
  CHECK(suite.expectations[0].at_least == 1.1);
  CHECK(suite.expectations[0].where.at("mode") == "train");
  CHECK(suite.expectations[0].line == 37);
  // time_per_doubling: `over` is the field that doubles, `variant` optional (every variant).
  const std::string every_variant =
      std::regex_replace(DoublingSuite(), std::regex("variant = \"checkpointed_k4\"\n"), "");
  const Suite doubling = ParseSuite(every_variant, "doubling.toml");
  REQUIRE(doubling.expectations.size() == 1);
  CHECK(doubling.expectations[0].what == "time_per_doubling");
  CHECK(doubling.expectations[0].over == "seq_len");
  CHECK(doubling.expectations[0].variant.empty());
  // 2 modes x 2 batches x 2 min_len = 8 grid points, x 2 variants, + 1 extra case.
  CHECK(suite.grid.size() == 8);
  const auto cases = suite.Expand();
  CHECK(cases.size() == 17);
  std::set<std::string> keys;
  for (const auto& c : cases) keys.insert(c.Key());
  CHECK(keys.size() == cases.size());
  CHECK(cases.back().workload.mode == "generate");
  CHECK(ContentHash(suite.text) == ContentHash(kGoodSuite));
  CHECK(ContentHash(suite.text) != ContentHash(std::string(kGoodSuite) + " "));
}

struct Malformed {
  const char* what;
  std::string text;
  int64_t line;
  std::string message;
};

// "batch = [1, 2, ..., count]": a short line whose product with the grid's other lists
// used to expand, and deduplicate pairwise, for minutes.
std::string LongBatchList(int count) {
  std::string line = "batch = [1";
  for (int batch = 2; batch <= count; ++batch) line += ", " + std::to_string(batch);
  return line + "]";
}

TEST_CASE("malformed suites fail with the line and what was expected", "[suite]") {
  const std::vector<Malformed> cases = {
      {"TOML syntax", WithLine(9, "width = = 16"), 9, "invalid TOML"},
      {"unknown top-level key", WithLine(5, "sed = 3"), 5, "unknown key 'sed' in the suite"},
      {"unknown [measure] key", WithLine(14, "repetition = 3"), 14,
       "expected one of: case_timeout_s, count, count_steps, max_noise, max_time_s, min_time_ms, "
       "repetitions, warmup"},
      {"count of an unknown kind", WithLine(14, "count = [\"cycles\"]"), 14,
       "'count' knows instructions, cycles-estimate, hw-instructions, got 'cycles'"},
      {"count of kinds one run cannot count together",
       WithLine(14, "count = [\"instructions\", \"hw-instructions\"]"), 14,
       "cannot be combined with callgrind's kinds"},
      {"count not a list", WithLine(14, "count = \"instructions\""), 14, "'count' must be a list"},
      {"wrong type", WithLine(14, "repetitions = \"three\""), 14,
       "'repetitions' must be an integer, got a string"},
      {"out of range", WithLine(14, "repetitions = 0"), 14, "'repetitions' must be between 1 and"},
      {"noise of 200%", WithLine(14, "max_noise = 2"), 14,
       "'max_noise' must be a fraction in (0, 1)"},
      {"noise in words", WithLine(14, "max_noise = \"low\""), 14, "or a percentage, e.g. 0.03"},
      {"no time budget", WithLine(14, "max_time_s = 0"), 14, "'max_time_s' must be above 0"},
      {"unknown variant", WithLine(19, "key = \"basline\""), 19,
       // The registry's list of keys, so that the user sees the one they meant (that it is
       // sorted is registry_test's).
       "unknown variant 'basline'; known variants: " + GlobalVariants().JoinedKeys()},
      {"unknown option", WithLine(23, "options = { chunk = 4 }"), 23,
       "has no option 'chunk'; it reads: checkpoint_every"},
      {"unknown family", WithLine(3, "family = \"lstmm\""), 3, "unknown model family 'lstmm'"},
      {"baseline not in variants", WithLine(4, "baseline = \"fused\""), 4,
       "baseline 'fused' is not one of the suite's [[variants]]"},
      {"bad mode", WithLine(26, "mode = [\"train\", \"infer\"]"), 26,
       "'mode' must be one of train, forward, generate, got 'infer'"},
      {"bad dtype in grid", WithLine(29, "dtype = \"float16\""), 29,
       "'dtype' must be one of float32, float64"},
      {"empty array", WithLine(27, "batch = []"), 27, "'batch' must not be an empty array"},
      {"min_len above seq_len", WithLine(29, "min_len = 9"), 25,
       "min_len (9) must not exceed seq_len (8)"},
      {"heads do not divide width", WithLine(11, "heads = 3"), 7, "must be divisible by heads (3)"},
      {"case names unknown variant", WithLine(32, "variant = \"scan\""), 32,
       "[[cases]] variant 'scan' is not one of"},
      {"generate without tokens", WithLine(35, "generate_tokens = 0"), 35,
       "'generate_tokens' must be between 1 and"},
      {"expect without bound", WithLine(41, ""), 37, "needs 'at_least' or 'at_most'"},
      {"expect with unknown what", WithLine(38, "what = \"faster\""), 38,
       "'what' must be one of speedup, memory_ratio, recompute_ratio, instructions_ratio, "
       "time_per_doubling, gemm_floor, all_correct"},
      {"doubling over a variant", WithLine(38, "what = \"time_per_doubling\""), 40,
       "over 'baseline' is not an integer workload field; it names the field that doubles"},
      {"doubling over a field that is not an integer",
       WithLine(40, "over = \"mode\"", DoublingSuite()), 40,
       "over 'mode' is not an integer workload field"},
      {"doubling along no field", WithLine(40, "", DoublingSuite()), 37,
       "missing required key 'over' in [[expect]] of what = \"time_per_doubling\""},
      {"doubling of an unknown variant", WithLine(39, "variant = \"nosuch\"", DoublingSuite()), 39,
       "[[expect]] variant 'nosuch' is not one of the suite's [[variants]]"},

      {"duplicate variant name", WithLine(22, "name = \"baseline\""), 20,
       "duplicate variant name 'baseline'"},
      {"newline in the suite name", WithLine(1, "name = \"a\\nsystem 'id'\""), 1,
       "'name' must not contain control characters"},
      {"tab in a variant name", WithLine(22, "name = \"x\\ty\""), 22,
       "'name' must not contain control characters"},
      {"infinite case timeout", WithLine(14, "case_timeout_s = inf"), 14,
       "'case_timeout_s' must be a finite number"},
      {"zero case timeout", WithLine(14, "case_timeout_s = 0"), 14,
       "'case_timeout_s' must be above 0"},
      {"NaN minimum time", WithLine(16, "min_time_ms = nan"), 16,
       "'min_time_ms' must be a finite number"},
      {"grid that multiplies out to hours of parsing", WithLine(27, LongBatchList(3000)), 25,
       "[grid] multiplies out to more than 10000 points"},
  };
  REQUIRE(cases.size() >= 15);
  for (const Malformed& c : cases) {
    DYNAMIC_SECTION(c.what) {
      try {
        ParseSuite(c.text, "bad.toml");
        FAIL("accepted: " << c.what);
      } catch (const SuiteError& error) {
        INFO(error.what());
        CHECK(error.path() == "bad.toml");
        CHECK(error.line() == c.line);
        CHECK(error.column() >= 1);
        CHECK_THAT(error.message(), Catch::Contains(c.message));
        CHECK_THAT(std::string(error.what()),
                   Catch::StartsWith("bad.toml:" + std::to_string(c.line) + ":"));
      }
    }
  }
}

TEST_CASE("a missing suite file is an error naming the file", "[suite]") {
  CHECK_THROWS_WITH(LoadSuiteFile("/nonexistent/suite.toml"),
                    Catch::Contains("/nonexistent/suite.toml") && Catch::Contains("cannot open"));
}

TEST_CASE("shards are disjoint and together cover every case", "[suite]") {
  const auto cases = ParseSuite(kGoodSuite, "good.toml").Expand();
  for (const int64_t count : {1, 2, 3, 5, 17, 40}) {
    DYNAMIC_SECTION(count << " shards") {
      std::multiset<std::string> seen;
      for (int64_t index = 1; index <= count; ++index) {
        const auto shard = Shard(cases, index, count);
        const auto again = Shard(cases, index, count);
        REQUIRE(shard.size() == again.size());  // deterministic
        for (size_t i = 0; i < shard.size(); ++i) CHECK(shard[i].Key() == again[i].Key());
        for (const auto& c : shard) seen.insert(c.Key());
      }
      CHECK(seen.size() == cases.size());  // union is everything, nothing twice
      for (const auto& c : cases) CHECK(seen.count(c.Key()) == 1);
    }
  }
  CHECK_THROWS(Shard(cases, 0, 2));
  CHECK_THROWS(Shard(cases, 3, 2));
}

TEST_CASE("every shipped suite parses as its kind", "[suite]") {
  size_t benchmark_suites = 0, training_suites = 0;
  for (const auto& file :
       std::filesystem::directory_iterator(std::string(SEQBENCH_SOURCE_DIR) + "/suites")) {
    if (file.path().extension() != ".toml") continue;
    const std::string path = file.path().string();
    const std::string name = file.path().stem().string();
    {
      INFO(path);
      std::ifstream stream(path);
      std::ostringstream text;
      text << stream.rdbuf();
      if (training::IsTrainingSuiteText(text.str())) {
        ++training_suites;
        const auto suite = training::ParseTrainingSuite(text.str(), path);
        CHECK(suite.name == name);
        // A training suite is no benchmark suite, and says where it belongs.
        CHECK_THROWS_WITH(ParseSuite(text.str(), path), Catch::Contains("seqbench train"));
      } else {
        ++benchmark_suites;
        const Suite suite = ParseSuite(text.str(), path);
        CHECK(suite.name == name);
        CHECK_FALSE(suite.Expand().empty());
      }
    }
  }
  CHECK(benchmark_suites >= 7);
  CHECK(training_suites >= 2);
}

}  // namespace
}  // namespace seqbench

namespace seqbench {
namespace {

TEST_CASE("[grid] variants restricts the grid to some variants", "[suite]") {
  std::string text = kGoodSuite;
  text.replace(text.find("[grid]\n"), 7, "[grid]\nvariants = \"checkpointed_k4\"\n");
  const auto cases = ParseSuite(text, "good.toml").Expand();
  CHECK(cases.size() == 9);  // 8 grid points of one variant, + the extra case
  CHECK(cases.front().variant.name == "checkpointed_k4");
  const std::string restricted = "variants = \"checkpointed_k4\"";
  text.replace(text.find(restricted), restricted.size(), "variants = \"fused\"");
  CHECK_THROWS_WITH(ParseSuite(text, "good.toml"),
                    Catch::Contains("good.toml:26:") && Catch::Contains("'fused' is not one of"));
}

}  // namespace
}  // namespace seqbench

namespace seqbench {
namespace {

constexpr char kTwoFamilies[] = R"toml(name = "architecture_tiny"
description = "both families"
family = "simple_rnn"
baseline = "baseline"
[references]
attention = "naive"
[model]
vocab_size = 31
width = 16
layers = 1
heads = 2
[[variants]]
key = "baseline"
[[variants]]
key = "scan"
[[variants]]
key = "naive"
[[variants]]
key = "flash"
[[grid]]
variants = ["scan", "flash"]
mode = "train"
seq_len = [8, 16]
[[grid]]
variants = ["naive"]
mode = "forward"
seq_len = 32
)toml";

TEST_CASE("a suite runs two families, each checked against its own reference, over [[grid]]s",
          "[suite]") {
  const Suite suite = ParseSuite(kTwoFamilies, "two.toml");
  CHECK(suite.ReferenceOf("simple_rnn") == "baseline");
  CHECK(suite.ReferenceOf("attention") == "naive");
  CHECK_THROWS(suite.ReferenceOf("lstm"));
  CHECK(suite.Variant("flash").family == "attention");
  CHECK(suite.ModelFor(suite.DefaultWorkload(), "attention").family == "attention");
  CHECK(suite.ModelFor(suite.DefaultWorkload()).family == "simple_rnn");
  // Each grid's variants at each of its points, grid after grid.
  const std::vector<CaseSpec> cases = suite.Expand();
  REQUIRE(cases.size() == 5);
  CHECK(cases[0].variant.name == "scan");
  CHECK(cases[1].variant.name == "flash");
  CHECK(cases[1].workload.seq_len == 8);
  CHECK(cases[3].workload.seq_len == 16);
  CHECK(cases[4].variant.name == "naive");
  CHECK(cases[4].workload.mode == "forward");
}

TEST_CASE("a second family needs its reference, of that family, on the right line", "[suite]") {
  const auto fails_at = [](const std::string& text, int64_t line, const std::string& message) {
    try {
      ParseSuite(text, "two.toml");
      FAIL("accepted");
    } catch (const SuiteError& error) {
      INFO(error.what());
      CHECK(error.line() == line);
      CHECK_THAT(error.message(), Catch::Contains(message));
    }
  };
  // Without [references], an attention variant is refused where it is named.
  std::string text =
      std::regex_replace(kTwoFamilies, std::regex("\\[references\\]\nattention = \"naive\"\n"), "");
  fails_at(text, 15, "name its reference in [references]");
  fails_at(std::regex_replace(kTwoFamilies, std::regex("attention = \"naive\""),
                              "attention = \"flash2\""),
           5, "must name one of the suite's [[variants]] of family attention");
  fails_at(
      std::regex_replace(kTwoFamilies, std::regex("attention = \"naive\""), "attention = \"scan\""),
      5, "of family attention");
  fails_at(std::regex_replace(kTwoFamilies, std::regex("attention = \"naive\""),
                              "simple_rnn = \"scan\""),
           6, "is the suite's own family");
  fails_at(std::regex_replace(kTwoFamilies, std::regex("baseline = \"baseline\""),
                              "baseline = \"naive\""),
           4, "is of family 'attention', not the suite's 'simple_rnn'");
  // The model must suit both families: attention's head width must be even.
  fails_at(std::regex_replace(kTwoFamilies, std::regex("heads = 2"), "heads = 16"), 20,
           "(attention)");
}

TEST_CASE("a gemm_floor expectation names one variant and no other", "[suite]") {
  const std::string base = kTwoFamilies;
  const int64_t expect_line = std::count(base.begin(), base.end(), '\n') + 1;
  const std::string good =
      base + "[[expect]]\nwhat = \"gemm_floor\"\nvariant = \"scan\"\nat_most = 1.5\n";
  const Suite suite = ParseSuite(good, "two.toml");
  REQUIRE(suite.expectations.size() == 1);
  CHECK(suite.expectations[0].variant == "scan");
  CHECK(suite.expectations[0].over.empty());
  CHECK(suite.expectations[0].at_most == 1.5);
  const auto error_of = [](const std::string& text) {
    try {
      ParseSuite(text, "two.toml");
    } catch (const SuiteError& error) {
      return std::to_string(error.line()) + ": " + error.message();
    }
    return std::string("accepted");
  };
  CHECK_THAT(
      error_of(good + "over = \"baseline\"\n"),
      Catch::StartsWith(std::to_string(expect_line + 4) + ": ") && Catch::Contains("drop 'over'"));
  CHECK_THAT(error_of(std::regex_replace(good, std::regex("variant = \"scan\"\n"), "")),
             Catch::StartsWith(std::to_string(expect_line) + ": ") && Catch::Contains("'variant'"));
  CHECK_THAT(error_of(std::regex_replace(good, std::regex("at_most = 1.5\n"), "")),
             Catch::Contains("needs 'at_least' or 'at_most'"));
}

}  // namespace
}  // namespace seqbench
