// ChildRun: the one protocol between seqbench and the seqbench processes it starts.
#include "harness/child_run.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/slurm_job.h"

namespace seqbench {
namespace {

// Every field set, each to a value unlike its default and unlike the others'. Written
// out by name rather than through the table, so that a field the table lacks is lost by
// ToArgv() and the round trip fails.
ChildRun EveryFieldSet() {
  ChildRun run;
  run.binary = "/opt/seq bench/seqbench";
  run.plugins = {"/p/one.so", "/p/two words.so"};
  run.suite_path = "suites/it's.toml";
  run.db_path = "/tmp/a.db";
  run.device = "cuda";
  run.filter = "^scan.*|x";
  run.check = "none";
  run.threads = 3;
  run.repetitions = 7;
  run.warmup = 0;  // given, though zero
  run.min_time = "10ms";
  run.max_noise = "2%";
  run.max_time = "30s";
  run.count = "instructions,cycles-estimate";
  run.count_steps = 5;
  run.in_process = true;
  run.nvtx = true;
  run.run_case = "scan|train|D=8";
  run.run_uuid = "1f0e-uuid";
  run.into_run = 12;
  run.position = 0;  // given, though zero
  run.count_out = "/tmp/count dir";
  run.lockstep = "/tmp/ab/new";
  run.shard = "2/4";
  run.group = "g-1";
  run.test_slowdown = 1.0 / 3.0 + 1;  // needs all 17 digits to read back
  run.test_slowdown_filter = "^scan";
  run.test_extra_head_passes = 2;
  run.user_flags = {"--label", "a 'b' $(c)", "--interleave"};
  return run;
}

// The fields of EveryFieldSet(), each on its own, back at its default.
std::vector<std::function<void(ChildRun&)>> EachFieldReset() {
  const ChildRun d;
  return {
      [d](ChildRun& r) { r.db_path = d.db_path; },
      [d](ChildRun& r) { r.device = d.device; },
      [d](ChildRun& r) { r.filter = d.filter; },
      [d](ChildRun& r) { r.check = d.check; },
      [d](ChildRun& r) { r.threads = d.threads; },
      [d](ChildRun& r) { r.repetitions = d.repetitions; },
      [d](ChildRun& r) { r.warmup = d.warmup; },
      [d](ChildRun& r) { r.min_time = d.min_time; },
      [d](ChildRun& r) { r.max_noise = d.max_noise; },
      [d](ChildRun& r) { r.max_time = d.max_time; },
      [d](ChildRun& r) { r.count = d.count; },
      [d](ChildRun& r) { r.count_steps = d.count_steps; },
      [d](ChildRun& r) { r.in_process = d.in_process; },
      [d](ChildRun& r) { r.nvtx = d.nvtx; },
      [d](ChildRun& r) { r.run_case = d.run_case; },
      [d](ChildRun& r) { r.run_uuid = d.run_uuid; },
      [d](ChildRun& r) { r.into_run = d.into_run; },
      [d](ChildRun& r) { r.position = d.position; },
      [d](ChildRun& r) { r.count_out = d.count_out; },
      [d](ChildRun& r) { r.lockstep = d.lockstep; },
      [d](ChildRun& r) { r.shard = d.shard; },
      [d](ChildRun& r) { r.group = d.group; },
      [d](ChildRun& r) { r.test_slowdown = d.test_slowdown; },
      [d](ChildRun& r) { r.test_slowdown_filter = d.test_slowdown_filter; },
      [d](ChildRun& r) { r.test_extra_head_passes = d.test_extra_head_passes; },
  };
}

TEST_CASE("every field of ChildRun survives ToArgv and FromArgv", "[child_run]") {
  const ChildRun all = EveryFieldSet();
  CHECK(ChildRun::FromArgv(all.ToArgv()) == all);
  // Each field alone at its default: still a round trip, and a different value, so that
  // equality reads that field.
  for (const auto& reset : EachFieldReset()) {
    ChildRun one = all;
    reset(one);
    CHECK(one != all);
    CHECK(ChildRun::FromArgv(one.ToArgv()) == one);
  }
  // A field at its default writes no flag: the child takes the suite's value, as when the
  // user leaves the flag out.
  const ChildRun bare;
  CHECK(bare.Arguments().empty());
  CHECK(ChildRun::FromArgv(bare.ToArgv()) == bare);
}

TEST_CASE("ChildRun writes each flag once, every value its own word", "[child_run]") {
  const std::vector<std::string> argv = EveryFieldSet().ToArgv();
  std::set<std::string> flags;
  for (const ChildRunFlag& flag : ChildRunFlags()) {
    CHECK(std::count(argv.begin(), argv.end(), "--" + flag.name) == 1);
    CHECK(flags.insert(flag.name).second);
  }
  CHECK(flags.size() == EachFieldReset().size());  // one row a field
  CHECK(argv[0] == "/opt/seq bench/seqbench");
  CHECK(std::vector<std::string>(argv.begin() + 1, argv.begin() + 6) ==
        std::vector<std::string>{"--plugin", "/p/one.so", "--plugin", "/p/two words.so", "run"});
  CHECK(argv[6] == "suites/it's.toml");
  CHECK(std::vector<std::string>(argv.end() - 3, argv.end()) == EveryFieldSet().user_flags);
}

TEST_CASE("ChildRun reads --flag=value and refuses a value of the wrong type", "[child_run]") {
  const ChildRun run = ChildRun::FromArgv(
      {"seqbench", "run", "s.toml", "--threads=4", "--position", "9", "--label", "x"});
  CHECK(run.threads == 4);
  CHECK(run.position == 9);
  CHECK(run.user_flags == std::vector<std::string>{"--label", "x"});
  CHECK_THROWS_WITH(ChildRun::FromArgv({"seqbench", "run", "s.toml", "--threads", "4x"}),
                    Catch::Contains("--threads takes an integer, got '4x'"));
  CHECK_THROWS_WITH(ChildRun::FromArgv({"seqbench", "run", "s.toml", "--test-slowdown", "fast"}),
                    Catch::Contains("--test-slowdown takes a number"));
  CHECK_THROWS_WITH(ChildRun::FromArgv({"seqbench", "run", "s.toml", "--into-run"}),
                    Catch::Contains("--into-run needs a value"));
  CHECK_THROWS_AS(ChildRun::Flag("no-such-flag"), std::invalid_argument);
  CHECK(ChildRun::Flag("shard") == "--shard");
}

TEST_CASE("a training rank's ChildRun passes the user's words as given", "[child_run]") {
  ChildRun rank;
  rank.binary = "seqbench";
  rank.plugins = {"/p/a.so"};
  rank.command = "train";
  rank.user_flags = {"suites/training.toml", "--threads", "2", "--db", "t.db"};
  const std::vector<std::string> argv = rank.ToArgv();
  CHECK(argv == std::vector<std::string>{"seqbench", "--plugin", "/p/a.so", "train",
                                         "suites/training.toml", "--threads", "2", "--db", "t.db"});
  CHECK(ChildRun::FromArgv(argv) == rank);
}

TEST_CASE("a Slurm task's run is the request's, with its shard, group and database",
          "[child_run]") {
  SlurmJobRequest request;
  request.task.binary = "/bin/seqbench";
  request.task.suite_path = "s.toml";
  request.task.repetitions = 3;
  request.shards = 4;
  request.group = "g";
  request.db_dir = "/d";
  const ChildRun third = ShardRun(request, 3);
  CHECK(third.shard == "3/4");
  CHECK(third.group == "g");
  CHECK(third.db_path == "/d/shard-3.db");
  CHECK(third.repetitions == 3);
  CHECK(ShardRun(request, 1).shard == "1/4");
  CHECK(PlanSlurmJob(request).shard_databases[2] == third.db_path);
}

}  // namespace
}  // namespace seqbench
