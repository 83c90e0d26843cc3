// Gradual magnitude pruning (harness/training/pruning.h): the cubic schedule at its ends,
// exactly round(s·numel) zeros per matrix and the smallest magnitudes among them, masks
// that hold through optimizer steps and only grow, and a trainer that prunes, reports its
// sparsity and resumes with the same losses.
#include "harness/training/pruning.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "harness/training/trainer.h"
#include "tests/test_support.h"

namespace seqbench::training {
namespace {

PruningOptions Options(double sparsity, int64_t start, int64_t end, int64_t every) {
  PruningOptions options;
  options.sparsity = sparsity;
  options.start = start;
  options.end = end;
  options.every = every;
  return options;
}

int64_t Zeros(const torch::Tensor& t) { return t.eq(0).sum().item<int64_t>(); }

TEST_CASE("the pruning schedule: 0 before start, cubic between, final from end", "[pruning]") {
  const PruningOptions p = Options(0.8, 10, 20, 2);
  CHECK(SparsityAt(p, 0) == 0);
  CHECK(SparsityAt(p, 9) == 0);
  CHECK(SparsityAt(p, 10) == 0);  // (1 - 1^3) at the start
  CHECK(SparsityAt(p, 15) == Approx(0.8 * (1 - std::pow(0.5, 3))));
  CHECK(SparsityAt(p, 19) == Approx(0.8 * (1 - std::pow(0.1, 3))));
  CHECK(SparsityAt(p, 20) == Approx(0.8));
  CHECK(SparsityAt(p, 1000) == Approx(0.8));
  CHECK(SparsityAt(Options(0, 10, 20, 1), 15) == 0);  // off
  // Rising all the way: each step's target at least the last.
  for (int64_t t = 10; t < 20; ++t) CHECK(SparsityAt(p, t + 1) >= SparsityAt(p, t));
}

TEST_CASE("a pruner zeroes exactly the smallest entries, and they stay zero", "[pruning]") {
  torch::manual_seed(3);
  torch::Tensor a = torch::randn({12, 10}), b = torch::randn({7, 3, 5});
  const torch::Tensor a_before = a.clone();
  MagnitudePruner pruner(Options(0.5, 0, 4, 2), {a, b});
  pruner.AfterStep(1);  // not a pruning step (start 0, every 2): nothing yet
  CHECK(Zeros(a) == 0);
  pruner.AfterStep(2);  // s(2) = 0.5·(1 − 0.5³) = 0.4375
  CHECK(Zeros(a) == std::llround(0.4375 * 120));
  CHECK(Zeros(b) == std::llround(0.4375 * 105));
  // The zeros are the smallest magnitudes: every kept entry is at least every pruned one.
  const torch::Tensor pruned = a_before.abs().masked_select(a.eq(0));
  const torch::Tensor kept = a_before.abs().masked_select(a.ne(0));
  CHECK(pruned.max().item<float>() <= kept.min().item<float>());
  const torch::Tensor mask_at_2 = a.ne(0);
  // An optimizer step moves every entry; the mask puts the pruned ones back to zero.
  {
    torch::NoGradGuard no_grad;
    a.add_(0.01);
    b.add_(0.01);
  }
  pruner.AfterStep(3);
  CHECK(Zeros(a) == std::llround(0.4375 * 120));
  CHECK(torch::equal(a.ne(0), mask_at_2));
  // The end: the final sparsity, and the earlier mask inside the new one, even for an
  // entry the last optimizer step moved far from zero (pruned stays pruned).
  const int64_t first_pruned = mask_at_2.logical_not().flatten().nonzero()[0].item<int64_t>();
  {
    torch::NoGradGuard no_grad;
    a.view(-1)[first_pruned].add_(100);
  }
  pruner.AfterStep(4);
  CHECK(a.view(-1)[first_pruned].item<float>() == 0);
  CHECK(Zeros(a) == 60);
  CHECK(Zeros(b) == std::llround(0.5 * 105));
  CHECK((mask_at_2.logical_not() & a.ne(0)).sum().item<int64_t>() == 0);
  CHECK(pruner.Sparsity() == Approx((60.0 + std::llround(0.5 * 105)) / 225.0));
  // A checkpoint's zeros give the masks back: a moved entry is zeroed again.
  MagnitudePruner restored(Options(0.5, 0, 4, 2), {a, b});
  restored.RestoreMasks(4);
  {
    torch::NoGradGuard no_grad;
    a.add_(0.01);
  }
  restored.AfterStep(5);
  CHECK(Zeros(a) == 60);
}

TEST_CASE("entries pruned before stay pruned among exact zeros", "[pruning]") {
  // Half the entries are exactly zero before any pruning, at the start or at the end; then
  // all of them: magnitude alone cannot tell the earlier pruned ones from the rest.
  for (const bool at_end : {false, true}) {
    INFO("natural zeros at the " << (at_end ? "end" : "start"));
    torch::Tensor a = torch::arange(1, 121, torch::kFloat32).view({12, 10});
    const auto set = [&](const std::function<void()>& change) {
      torch::NoGradGuard no_grad;
      change();
    };
    set([&] { a.view(-1).slice(0, at_end ? 60 : 0, at_end ? 120 : 60).zero_(); });
    MagnitudePruner pruner(Options(0.4, 0, 2, 1), {a});
    pruner.AfterStep(1);  // s(1) = 0.4·(1 − 0.5³) = 0.35: 42 entries pruned
    REQUIRE(Zeros(a) == 60);
    set([&] { a.fill_(1); });
    pruner.AfterStep(1);  // masks first, then the same 42 again (the earlier ones rank first)
    const torch::Tensor first = a.eq(0).clone();
    REQUIRE(first.sum().item<int64_t>() == 42);
    set([&] { a.zero_(); });  // every entry ties at zero
    pruner.AfterStep(2);      // 0.4: 48 entries, the first 42 among them
    set([&] { a.fill_(1); });
    pruner.AfterStep(3);  // past the end: the masks alone
    CHECK(Zeros(a) == 48);
    CHECK((first & a.ne(0)).sum().item<int64_t>() == 0);
  }
}

TEST_CASE("pruning options are refused outside their ranges", "[pruning]") {
  const torch::Tensor a = torch::ones({2, 2});
  CHECK_THROWS_AS(MagnitudePruner(Options(1.0, 0, 4, 1), {a}), std::invalid_argument);
  CHECK_THROWS_AS(MagnitudePruner(Options(-0.1, 0, 4, 1), {a}), std::invalid_argument);
  CHECK_THROWS_AS(MagnitudePruner(Options(0.5, 4, 4, 1), {a}), std::invalid_argument);
  CHECK_THROWS_AS(MagnitudePruner(Options(0.5, 0, 4, 0), {a}), std::invalid_argument);
  CHECK_NOTHROW(MagnitudePruner(Options(0.0, 0, 0, 1), {a}));  // off: no schedule needed
}

TEST_CASE("a pruning trainer reaches its sparsity and resumes with the same losses",
          "[pruning][training]") {
  const Samples train = testing::RandomSamples(80, 7, 4, 40),
                validation = testing::RandomSamples(16, 8, 4, 40);
  TrainingConfig config = testing::SmallTrainingConfig();
  config.pruning = Options(0.6, 2, 10, 3);
  {
    Trainer trainer(config, train, validation);
    for (int i = 0; i < 10; ++i) trainer.Step();
    REQUIRE(trainer.weight_sparsity());
    // Every matrix at round(0.6·numel) zeros; the gains none.
    int64_t zeros = 0, entries = 0;
    for (const auto& item : trainer.variant().parameters()) {
      const torch::Tensor& value = item.value();
      INFO(item.key());
      if (value.dim() >= 2) {
        CHECK(Zeros(value) == std::llround(0.6 * static_cast<double>(value.numel())));
        zeros += Zeros(value);
        entries += value.numel();
      } else {
        CHECK(Zeros(value) == 0);
      }
    }
    CHECK(*trainer.weight_sparsity() == Approx(static_cast<double>(zeros) / entries));
    CHECK_THAT(config.Fingerprint(), Catch::Contains("prune=0.59999999999999998/2/10/3"));
  }
  TrainingConfig dense = testing::SmallTrainingConfig();
  CHECK_FALSE(Trainer(dense, train, validation).weight_sparsity());
  CHECK(dense.Fingerprint().find("prune") == std::string::npos);
  // Saved mid-schedule (step 6, between the prunings at 5 and 8): the masks come back from
  // the zeros.
  const std::string path =
      (std::filesystem::temp_directory_path() / "seqbench_pruning_test.pt").string();
  const auto losses = testing::StepAcrossResume(config, train, validation, path, 6, 12);
  CHECK(losses.resumed == losses.straight);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace seqbench::training
