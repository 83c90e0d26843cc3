// The launch of a training world (harness/training/rank_launch.h), with a shell script in
// the ranks' place: each rank's environment, its end, and the grace a dead rank's peers get.
#include "harness/training/rank_launch.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/files.h"
#include "base/process.h"
#include "tests/scratch_folder.h"

namespace seqbench::training {
namespace {

// A folder holding `rank.sh`, a stand-in for seqbench: its body is `script`.
struct RankFolder {
  testing::ScratchFolder folder{"rank-launch"};
  explicit RankFolder(const std::string& script) {
    WriteFileAtomically(Script(), "#!/bin/sh\n" + script + "\n");
    REQUIRE(chmod(Script().c_str(), 0755) == 0);
  }
  std::string Script() const { return folder.path() + "/rank.sh"; }
  std::string Read(const std::string& name) const {
    std::ifstream in(folder.path() + "/" + name);
    std::string line;
    std::getline(in, line);
    return line;
  }
};

// What a rank sees of `name`: the user's value, else the launch's 1.
std::string ThreadsSeen(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "1";
}

RankLaunch LaunchOf(const RankFolder& folder, int64_t ranks) {
  RankLaunch launch;
  launch.rank.binary = folder.Script();
  launch.rank.command = "train";
  launch.rank.user_flags = {"--steps", "3"};
  launch.ranks = ranks;
  launch.grace_s = 0.2;
  launch.port = 29512;
  return launch;
}

}  // namespace

TEST_CASE("rank launch: each rank gets its world, one thread and the command", "[rank_launch]") {
  RankFolder folder(
      "echo \"$RANK $WORLD_SIZE $MASTER_ADDR:$MASTER_PORT $OMP_NUM_THREADS "
      "$OPENBLAS_NUM_THREADS $*\" > \"$(dirname \"$0\")/rank.$RANK\"\n"
      "exit $RANK");
  const std::vector<ChildOutcome> outcomes = LaunchRanks(LaunchOf(folder, 3));
  REQUIRE(outcomes.size() == 3);
  for (int rank = 0; rank < 3; ++rank) {
    CHECK(outcomes[rank].end == ChildOutcome::End::kExited);
    CHECK(outcomes[rank].exit_code == rank);
    CHECK(folder.Read("rank." + std::to_string(rank)) ==
          std::to_string(rank) + " 3 127.0.0.1:29512 " + ThreadsSeen("OMP_NUM_THREADS") + " " +
              ThreadsSeen("OPENBLAS_NUM_THREADS") + " train --steps 3");
  }
  // The first failing rank's status: rank 1's 1, not rank 2's 2.
  CHECK(LaunchExitStatus(outcomes) == 1);
  CHECK(DescribeRankEnd(outcomes[2]) == "exited with status 2");
}

TEST_CASE("rank launch: a rank killed by a signal ends its waiting peers after the grace",
          "[rank_launch]") {
  RankFolder folder("if [ \"$RANK\" = 1 ]; then kill -9 $$; fi\nexec sleep 30");
  const std::vector<ChildOutcome> outcomes = LaunchRanks(LaunchOf(folder, 3));
  REQUIRE(outcomes.size() == 3);
  CHECK(outcomes[1].end == ChildOutcome::End::kSignaled);
  CHECK(outcomes[1].signal == 9);
  for (int rank : {0, 2}) {
    CHECK(outcomes[rank].end == ChildOutcome::End::kInterrupted);
    CHECK(outcomes[rank].wall_s < 20);  // killed, not left to sleep out its 30 s
  }
  CHECK(LaunchExitStatus(outcomes) == 1);
  CHECK(DescribeRankEnd(outcomes[1]).rfind("was killed by signal 9", 0) == 0);
}

TEST_CASE("rank launch: every rank exiting 0 is 0, and a stop kills them all", "[rank_launch]") {
  RankFolder ok("exit 0");
  CHECK(LaunchExitStatus(LaunchRanks(LaunchOf(ok, 2))) == 0);
  RankFolder sleepy("exec sleep 30");
  RankLaunch launch = LaunchOf(sleepy, 2);
  launch.should_stop = [] { return true; };
  for (const ChildOutcome& outcome : LaunchRanks(launch))
    CHECK(outcome.end == ChildOutcome::End::kInterrupted);
}

}  // namespace seqbench::training
