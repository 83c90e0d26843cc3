// Data parallelism on c10d: the ranks' shares of an epoch, torchrun's environment, and
// ranks run as threads of this process (each with its own store connection and Gloo
// group on the loopback interface), which must follow the one-process trajectory.
#include "harness/training/distributed.h"

#include <catch2/catch.hpp>
#include <functional>
#include <future>
#include <map>
#include <set>
#include <thread>

#include "harness/text_data.h"
#include "harness/training/trainer.h"
#include "tests/test_support.h"

namespace seqbench::training {
namespace {

TEST_CASE("the ranks' shares of every batch make up exactly that batch", "[distributed]") {
  const Samples samples = testing::RandomSamples(193, 1);  // 193 = 12·16 + 1: a last batch of one
  const auto lengths = Lengths(samples);
  for (const auto policy : {BatchingPolicy::kFixed, BatchingPolicy::kTokenBudget}) {
    BatchingOptions options;
    options.policy = policy;
    options.batch_size = 16;
    options.token_budget = 512;
    const BatchPlan plan = PlanEpoch(lengths, options, 3, 0);
    for (const int64_t ranks : {1, 2, 3, 7}) {
      INFO(BatchingPolicyName(policy) << ", " << ranks << " ranks");
      std::vector<BatchPlan> shares;
      for (int64_t rank = 0; rank < ranks; ++rank) {
        shares.push_back(ShardPlan(plan, lengths, rank, ranks));
      }
      // Every rank takes the same number of steps, none with an empty share.
      for (const auto& share : shares) {
        REQUIRE(share.size() == shares.front().size());
        for (const auto& batch : share) CHECK_FALSE(batch.empty());
      }
      // Step by step, the union is the plan's batch (or batches merged into one).
      size_t next = 0;
      for (size_t step = 0; step < shares.front().size(); ++step) {
        std::multiset<int64_t> united;
        int64_t least = INT64_MAX, most = 0;
        for (const auto& share : shares) {
          united.insert(share[step].begin(), share[step].end());
          int64_t tokens = 0;
          for (const int64_t index : share[step]) tokens += lengths[index];
          least = std::min(least, tokens);
          most = std::max(most, tokens);
        }
        std::multiset<int64_t> expected;
        while (expected.size() < united.size() && next < plan.size()) {
          expected.insert(plan[next].begin(), plan[next].end());
          ++next;
        }
        CHECK(united == expected);
        // Longest first to the lightest rank: no rank ends more than a sample ahead.
        CHECK(most - least <= 64);
      }
      CHECK(next == plan.size());
    }
  }
  CHECK_THROWS_AS(ShardPlan({{0, 1}}, {5, 5}, 0, 3), std::invalid_argument);
}

TEST_CASE("torchrun's environment is read, and bad values are refused by name", "[distributed]") {
  const auto from = [](std::map<std::string, std::string> variables) {
    return [variables = std::move(variables)](const char* name) -> const char* {
      const auto it = variables.find(name);
      return it == variables.end() ? nullptr : it->second.c_str();
    };
  };
  CHECK_FALSE(ReadWorldEnvironment(from({})).has_value());
  const auto world = ReadWorldEnvironment(from(
      {{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "1234"}}));
  REQUIRE(world.has_value());
  CHECK(world->rank == 2);
  CHECK(world->local_rank == 2);
  CHECK(world->world_size == 4);
  CHECK(world->master_address == "10.0.0.1");
  CHECK(world->master_port == 1234);
  CHECK_THROWS_WITH(ReadWorldEnvironment(from({{"WORLD_SIZE", "2"}})), Catch::Contains("RANK"));
  CHECK_THROWS_WITH(ReadWorldEnvironment(from({{"WORLD_SIZE", "2"}, {"RANK", "2"}})),
                    Catch::Contains("outside 0..1"));
  CHECK_THROWS_WITH(ReadWorldEnvironment(from({{"WORLD_SIZE", "two"}, {"RANK", "0"}})),
                    Catch::Contains("WORLD_SIZE='two'"));
  CHECK_THROWS_WITH(
      ReadWorldEnvironment(from({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"MASTER_PORT", "70000"}})),
      Catch::Contains("MASTER_PORT"));
  // What a launcher hands rank 1 reads back as rank 1.
  std::map<std::string, std::string> launched;
  for (const std::string& entry : WorldEnvironmentFor(1, 3, 4321)) {
    launched[entry.substr(0, entry.find('='))] = entry.substr(entry.find('=') + 1);
  }
  const auto child = ReadWorldEnvironment(from(launched));
  REQUIRE(child.has_value());
  CHECK((child->rank == 1 && child->world_size == 3 && child->master_port == 4321));
}

// A build without c10d data parallelism skips these tests, saying why.
bool SkippedWithoutDistributed() {
  if (DistributedAvailable()) return false;
  WARN("skipped: " << DistributedUnavailableReason());
  return true;
}

struct RankTrace {
  std::vector<double> losses, validation;
  std::vector<int64_t> tokens;
  int64_t skipped = 0;  // steps the loss scaler skipped
  CommunicationStats last_communication;
  std::map<std::string, torch::Tensor> weights;
  int64_t optimizer_state_bytes = 0;
};

// Trains `steps` steps on the world ranks `members` of a world of `world_size` ranks, one
// thread each, and returns every world rank's trace (empty for a rank outside the group).
// `after_step` (rank, step) may throw to stop a rank, as a dying process would.
std::vector<RankTrace> TrainOnMembers(const TrainingConfig& base,
                                      const std::vector<int64_t>& members, int64_t world_size,
                                      int steps, const Samples& train, const Samples& validation,
                                      std::function<void(int64_t, int)> after_step = nullptr) {
  const int64_t port = FreeLocalPort();
  std::vector<std::future<RankTrace>> futures;
  for (int64_t rank = 0; rank < world_size; ++rank) {
    futures.push_back(std::async(std::launch::async, [=, &train, &validation] {
      WorldEnvironment environment;
      environment.rank = rank;
      environment.world_size = world_size;
      environment.master_port = port;
      World world(environment, std::chrono::seconds(20));
      TrainingConfig config = base;
      config.data_parallel.ranks = static_cast<int64_t>(members.size());
      config.data_parallel.members = members;
      config.data_parallel.timeout = std::chrono::seconds(20);
      RankTrace trace;
      const auto group = world.Group("test", members, config.data_parallel.timeout);
      if (group == nullptr) return trace;
      {
        Trainer trainer(config, train, validation, group);
        for (int step = 0; step < steps; ++step) {
          const StepResult result = trainer.Step();
          trace.losses.push_back(result.loss);
          trace.tokens.push_back(result.tokens);
          trace.skipped += result.skipped ? 1 : 0;
          trace.last_communication = result.communication;
          if (after_step) after_step(rank, step);
        }
        trace.validation.push_back(trainer.Evaluate());
        trace.optimizer_state_bytes = trainer.optimizer_state_bytes();
        for (const auto& item : trainer.variant().parameters()) {
          trace.weights[item.key()] = item.value().detach().clone();
        }
      }
      return trace;
    }));
  }
  std::vector<RankTrace> traces;
  for (auto& future : futures) traces.push_back(future.get());
  return traces;
}

// The world's first `ranks` ranks, as `seqbench train --nproc` gives a pipeline.
std::vector<RankTrace> TrainOnRanks(const TrainingConfig& base, int64_t ranks, int steps,
                                    const Samples& train, const Samples& validation,
                                    std::function<void(int64_t, int)> after_step = nullptr) {
  std::vector<int64_t> members(static_cast<size_t>(ranks));
  for (int64_t rank = 0; rank < ranks; ++rank) members[rank] = rank;
  return TrainOnMembers(base, members, ranks, steps, train, validation, std::move(after_step));
}

void CheckSameTrajectory(const RankTrace& single, const RankTrace& parallel, double tolerance) {
  REQUIRE(single.losses.size() == parallel.losses.size());
  for (size_t step = 0; step < single.losses.size(); ++step) {
    INFO("step " << step + 1);
    CHECK(std::abs(single.losses[step] - parallel.losses[step]) <= tolerance);
    CHECK(single.tokens[step] == parallel.tokens[step]);
  }
  CHECK(std::abs(single.validation.front() - parallel.validation.front()) <= tolerance);
  for (const auto& [name, weight] : single.weights) {
    INFO(name);
    CHECK(torch::allclose(parallel.weights.at(name), weight, 1e-4, 1e-5));
  }
}

// ZeRO-1 against data parallelism: every rank of `sharded` follows `plain`'s trajectory
// and ends with the same weights as rank 0 (the owners' broadcasts reached it).
void CheckShardedFollowsPlain(const RankTrace& plain, const std::vector<RankTrace>& sharded) {
  for (size_t rank = 0; rank < sharded.size(); ++rank) {
    INFO("rank " << rank);
    CheckSameTrajectory(plain, sharded[rank], 1e-5);
    for (const auto& [name, weight] : sharded[0].weights) {
      INFO(name);
      CHECK(torch::equal(sharded[rank].weights.at(name), weight));
    }
  }
}

TEST_CASE("two ranks with half the batch each follow one rank with the whole batch",
          "[distributed]") {
  if (SkippedWithoutDistributed()) return;
  const Samples train = testing::RandomSamples(70, 11), validation = testing::RandomSamples(20, 12);
  SECTION("fixed batches, gradients accumulated over two micro-batches") {
    TrainingConfig config = testing::SmallTrainingConfig();
    config.accumulation = 2;
    const RankTrace single = TrainOnRanks(config, 1, 12, train, validation).front();
    const auto parallel = TrainOnRanks(config, 2, 12, train, validation);
    CheckSameTrajectory(single, parallel[0], 1e-5);
    CheckSameTrajectory(single, parallel[1], 1e-5);
    CHECK(parallel[0].last_communication.buckets >= 1);
    // Every gradient travels once a step: the parameters' bytes, in float32.
    int64_t parameter_bytes = 0;
    for (const auto& [name, weight] : single.weights) parameter_bytes += weight.numel() * 4;
    CHECK(parallel[0].last_communication.bytes == parameter_bytes);
  }
  SECTION("token budgets: shares of unequal size still give the batch's mean loss") {
    TrainingConfig config = testing::SmallTrainingConfig();
    config.batching.policy = BatchingPolicy::kTokenBudget;
    config.batching.token_budget = 256;
    const RankTrace single = TrainOnRanks(config, 1, 10, train, validation).front();
    const auto parallel = TrainOnRanks(config, 3, 10, train, validation);
    for (const auto& rank : parallel) CheckSameTrajectory(single, rank, 1e-5);
  }
  SECTION("odd batches: shares of 2 and 1 samples are weighed by their targets") {
    TrainingConfig config = testing::SmallTrainingConfig();
    config.batching.batch_size = 3;  // shares of 2 and 1 samples
    const RankTrace single = TrainOnRanks(config, 1, 3, train, validation).front();
    const auto parallel = TrainOnRanks(config, 2, 3, train, validation);
    CheckSameTrajectory(single, parallel[0], 1e-5);
  }
  SECTION("fp16 buckets: half the bytes, the trajectory within fp16 rounding") {
    TrainingConfig config = testing::SmallTrainingConfig();
    const RankTrace single = TrainOnRanks(config, 1, 6, train, validation).front();
    config.data_parallel.compression = "fp16";
    const auto parallel = TrainOnRanks(config, 2, 6, train, validation);
    int64_t parameter_bytes = 0;
    for (const auto& [name, weight] : single.weights) parameter_bytes += weight.numel() * 4;
    CHECK(parallel[0].last_communication.bytes == parameter_bytes / 2);
    for (size_t step = 0; step < single.losses.size(); ++step) {
      CHECK(parallel[0].losses[step] == Approx(single.losses[step]).epsilon(1e-3));
    }
  }
}

TEST_CASE("ZeRO-1's partition: whole tensors, largest first to the least loaded rank",
          "[distributed]") {
  // 40 -> rank 0, 30 -> 1, 20 -> 1 (30 < 40), 10 -> 0 (40 < 50): 50 elements each.
  CHECK(ShardOwners({10, 40, 30, 20}, 2) == std::vector<int64_t>{0, 0, 1, 1});
  CHECK(ShardOwners({5, 5, 5}, 2) == std::vector<int64_t>{0, 1, 0});  // ties: the lower rank
  CHECK(ShardOwners({7, 3}, 1) == std::vector<int64_t>{0, 0});
  CHECK(ShardOwners({7, 3}, 4) == std::vector<int64_t>{0, 1});  // ranks 2 and 3 own nothing
  CHECK(ShardOwners({}, 2).empty());
  CHECK_THROWS_AS(ShardOwners({1}, 0), std::invalid_argument);
}

TEST_CASE("ZeRO-1 follows data parallelism, each rank holding its share of the state",
          "[distributed]") {
  if (SkippedWithoutDistributed()) return;
  const Samples train = testing::RandomSamples(70, 11), validation = testing::RandomSamples(20, 12);
  for (const OptimizerKind kind : {OptimizerKind::kAdamW, OptimizerKind::kLamb}) {
    for (const int64_t ranks : {2, 3}) {
      INFO(OptimizerKindName(kind) << " on " << ranks << " ranks");
      TrainingConfig config = testing::SmallTrainingConfig();
      config.optimizer = kind;
      config.accumulation = 2;
      const auto plain = TrainOnRanks(config, ranks, 8, train, validation);
      config.data_parallel.zero_stage = 1;
      const auto sharded = TrainOnRanks(config, ranks, 8, train, validation);
      int64_t state_bytes = 0, parameter_bytes = 0;
      for (const auto& [name, weight] : plain[0].weights) parameter_bytes += weight.numel() * 4;
      CheckShardedFollowsPlain(plain[0], sharded);
      for (int64_t rank = 0; rank < ranks; ++rank) {
        CHECK(sharded[rank].optimizer_state_bytes < plain[rank].optimizer_state_bytes);
        CHECK(sharded[rank].last_communication.broadcast_bytes == parameter_bytes);
        state_bytes += sharded[rank].optimizer_state_bytes;
      }
      // The shares make up the whole state, each tensor's state held once.
      CHECK(state_bytes == plain[0].optimizer_state_bytes);
      CHECK(plain[0].last_communication.broadcast_bytes == 0);
    }
  }
}

TEST_CASE("ZeRO-1 with a skipped step, pruning, 8-bit AdamW or offload follows DP",
          "[distributed]") {
  if (SkippedWithoutDistributed()) return;
  const Samples train = testing::RandomSamples(70, 11), validation = testing::RandomSamples(20, 12);
  TrainingConfig config = testing::SmallTrainingConfig();
  const std::string combination =
      GENERATE(as<std::string>{}, "loss scaling", "pruning", "adamw8bit", "offload");
  INFO(combination);
  if (combination == "loss scaling") {
    // A scale past float32's range (inf in the backward): the first step is skipped on
    // every rank alike, or a rank would step its share while the others did not; then 1e5.
    config.loss_scaling = true;
    config.scaler.initial_scale = 1e300;
    config.scaler.backoff = 1e-295;
  } else if (combination == "pruning") {
    config.pruning = {0.5, 2, 6, 2};  // masks set from every rank's broadcast weights
  } else if (combination == "adamw8bit") {
    config.optimizer = OptimizerKind::kAdamW8bit;
  } else {
    config.offload_optimizer = true;
  }
  const auto plain = TrainOnRanks(config, 2, 8, train, validation);
  config.data_parallel.zero_stage = 1;
  const auto sharded = TrainOnRanks(config, 2, 8, train, validation);
  CheckShardedFollowsPlain(plain[0], sharded);
  for (int64_t rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    CHECK(sharded[rank].skipped == plain[0].skipped);
    for (const auto& [name, weight] : plain[0].weights) {
      INFO(name);
      CHECK(torch::equal(sharded[rank].weights.at(name) == 0, weight == 0));  // one mask
    }
  }
  if (combination == "loss scaling") CHECK(plain[0].skipped == 1);
  if (combination == "pruning") {
    int64_t zeros = 0;
    for (const auto& [name, weight] : sharded[0].weights)
      zeros += (weight == 0).sum().item<int64_t>();
    CHECK(zeros > 0);
  }
}

TEST_CASE("ZeRO-1 refuses one rank, and the stages not built", "[distributed]") {
  const Samples train = testing::RandomSamples(10, 11), validation = testing::RandomSamples(4, 12);
  TrainingConfig config = testing::SmallTrainingConfig();
  config.data_parallel.zero_stage = 1;
  CHECK_THROWS_WITH(Trainer(config, train, validation), Catch::Contains("ranks > 1"));
  config.data_parallel.zero_stage = 2;
  CHECK_THROWS_WITH(Trainer(config, train, validation), Catch::Contains("0 or 1"));
}

TEST_CASE("a group of world ranks 0 and 2 trains as ranks 0 and 1 would, rank 1 idle",
          "[distributed]") {
  if (SkippedWithoutDistributed()) return;
  const Samples train = testing::RandomSamples(70, 11), validation = testing::RandomSamples(20, 12);
  const TrainingConfig config = testing::SmallTrainingConfig();
  const RankTrace single = TrainOnRanks(config, 1, 4, train, validation).front();
  const auto traces = TrainOnMembers(config, {0, 2}, 3, 4, train, validation);
  CHECK(traces[1].losses.empty());  // not a member: never trained
  CheckSameTrajectory(single, traces[0], 1e-5);
  CheckSameTrajectory(single, traces[2], 1e-5);
  // Besides the gradient buckets, a step all-reduces its target count and its loss.
  CHECK(traces[0].last_communication.count_allreduces == 2);
  CHECK(traces[0].last_communication.count_allreduce_seconds > 0);
}

TEST_CASE("members must start at rank 0, ascend and lie in the world", "[distributed]") {
  if (SkippedWithoutDistributed()) return;
  WorldEnvironment environment;
  environment.master_port = FreeLocalPort();
  World world(environment, std::chrono::seconds(5));  // a world of one rank
  const std::chrono::seconds timeout(5);
  CHECK_THROWS_WITH(world.Group("a", {1}, timeout), Catch::Contains("start at world rank 0"));
  CHECK_THROWS_WITH(world.Group("b", {0, 1}, timeout), Catch::Contains("below 1"));
}

TEST_CASE("a rank that dies makes its peers fail with c10d's error, not hang", "[distributed]") {
  if (SkippedWithoutDistributed()) return;
  const Samples train = testing::RandomSamples(70, 13), validation = testing::RandomSamples(20, 14);
  TrainingConfig config = testing::SmallTrainingConfig();
  const auto started = std::chrono::steady_clock::now();
  // Rank 1 leaves after its second step, closing its Gloo connections as a killed process
  // would; rank 0's third step must throw (and the test fails if it hangs).
  CHECK_THROWS(TrainOnRanks(config, 2, 6, train, validation, [](int64_t rank, int step) {
    if (rank == 1 && step == 1) throw std::runtime_error("rank 1 leaves");
  }));
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(20));
}

}  // namespace
}  // namespace seqbench::training
