// harness/training/world_plan.h: pipelines fitted to a world of ranks, and what is
// refused (the command line's exit 2; tests/cli/train_test.sh and distributed_test.sh
// see the messages end to end).
#include "harness/training/world_plan.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace seqbench::training {
namespace {

PipelineSpec Pipeline(const std::string& name, int64_t ranks, bool from_world = false) {
  PipelineSpec spec;
  spec.name = name;
  spec.ranks_from_world = from_world;
  spec.config.data_parallel.ranks = ranks;
  return spec;
}

TEST_CASE("pipelines take the world's ranks and timeout, or keep their own", "[world]") {
  std::vector<PipelineSpec> pipelines = {Pipeline("all", 1, true), Pipeline("two", 2),
                                         Pipeline("one", 1)};
  FitPipelinesToWorld(4, std::chrono::seconds(7), pipelines);
  CHECK(pipelines[0].config.data_parallel.ranks == 4);
  CHECK(pipelines[1].config.data_parallel.ranks == 2);
  CHECK(pipelines[2].config.data_parallel.ranks == 1);
  for (const PipelineSpec& spec : pipelines)
    CHECK(spec.config.data_parallel.timeout == std::chrono::seconds(7));
}

TEST_CASE("a pipeline the world cannot hold is refused, with what to change", "[world]") {
  const auto refusal = [](int64_t world, PipelineSpec spec) {
    std::vector<PipelineSpec> pipelines = {spec};
    try {
      FitPipelinesToWorld(world, std::chrono::seconds(60), pipelines);
    } catch (const WorldRefused& refused) {
      return std::string(refused.what());
    }
    return std::string();
  };
  CHECK_THAT(refusal(1, Pipeline("p", 3)), Catch::Contains("start with --nproc 3"));
  CHECK(refusal(3, Pipeline("p", 3)).empty());  // the last rank the world has: held
  CHECK_THAT(refusal(2, Pipeline("p", 3)), Catch::Contains("the world has 2"));
  PipelineSpec member = Pipeline("p", 2);
  member.config.data_parallel.members = {0, 5};
  CHECK_THAT(refusal(5, member), Catch::Contains("world rank 5"));
  CHECK(refusal(6, member).empty());
  PipelineSpec compressed = Pipeline("c", 1);
  compressed.config.data_parallel.compression = "fp16";
  CHECK_THAT(refusal(4, compressed), Catch::Contains("compression applies"));
  compressed.config.data_parallel.ranks = 2;
  CHECK(refusal(4, compressed).empty());
  PipelineSpec sharded = Pipeline("z", 1, true);
  sharded.config.data_parallel.zero_stage = 1;
  CHECK_THAT(refusal(1, sharded), Catch::Contains("zero = 1 shards"));
  CHECK(refusal(2, sharded).empty());  // the world's 2 ranks
}

TEST_CASE("a student's teacher trains first, on every rank of the student's", "[world]") {
  PipelineSpec teacher = Pipeline("teacher", 2), student = Pipeline("student", 2);
  student.config.distillation.teacher = "teacher";
  CHECK_NOTHROW(CheckTeachers({teacher, student}));
  CHECK_THROWS_WITH(CheckTeachers({student, teacher}),
                    Catch::Contains("distils from 'teacher', which this command does not train"));
  CHECK_THROWS_WITH(CheckTeachers({student}), Catch::Contains("--pipeline teacher"));
  teacher.config.data_parallel.ranks = 1;
  CHECK_THROWS_WITH(CheckTeachers({teacher, student}),
                    Catch::Contains("trains on ranks its teacher 'teacher' does not"));
}

// Outside torchrun and Slurm (as ctest runs), with one rank: no c10d needed.
TEST_CASE("the world's timeout is held to 1..86400 seconds, --nproc to 1..1024", "[world]") {
  for (const int64_t bad : {int64_t{0}, int64_t{86401}}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(PlanWorld({std::nullopt, bad}), WorldRefused);
  }
  for (const int64_t held : {int64_t{1}, int64_t{86400}}) CHECK_NOTHROW(PlanWorld({1, held}));
  CHECK_THROWS_WITH(PlanWorld({0, 60}), Catch::Contains("--nproc must be 1..1024"));
  CHECK_THROWS_WITH(PlanWorld({1025, 60}), Catch::Contains("--nproc must be 1..1024"));
}

}  // namespace
}  // namespace seqbench::training
