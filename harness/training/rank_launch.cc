// The launch of a training world (rank_launch.h).
#include "harness/training/rank_launch.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "harness/training/distributed.h"

namespace seqbench::training {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// "OMP_NUM_THREADS=1" and "OPENBLAS_NUM_THREADS=1", for those the user has not set.
std::vector<std::string> OneThreadEach() {
  std::vector<std::string> threads;
  for (const char* name : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"}) {
    if (std::getenv(name) == nullptr) threads.push_back(std::string(name) + "=1");
  }
  return threads;
}

}  // namespace

std::vector<ChildOutcome> LaunchRanks(const RankLaunch& launch) {
  const std::vector<std::string> argv = launch.rank.ToArgv();
  const int64_t port = launch.port > 0 ? launch.port : FreeLocalPort();
  const std::vector<std::string> threads = OneThreadEach();
  std::vector<ChildOutcome> outcomes(launch.ranks);
  std::atomic<bool> failed{false};
  std::atomic<int64_t> failed_at_ms{0};
  const auto grace_ms = static_cast<int64_t>(launch.grace_s * 1000);
  std::vector<std::thread> supervisors;
  for (int64_t rank = 0; rank < launch.ranks; ++rank) {
    ChildSpec spec;
    spec.argv = argv;
    spec.environment = WorldEnvironmentFor(rank, launch.ranks, port);
    spec.environment.insert(spec.environment.end(), threads.begin(), threads.end());
    spec.should_stop = [&] {
      return (launch.should_stop && launch.should_stop()) ||
             (failed && NowMs() - failed_at_ms > grace_ms);
    };
    supervisors.emplace_back([&, rank, spec] {
      outcomes[rank] = RunChild(spec);
      // A rank that exits, even with 1 (a pipeline failed), has finished; one killed by a
      // signal may leave peers waiting for it, which fail within --dist-timeout or are
      // killed after the grace period.
      const bool died = outcomes[rank].end != ChildOutcome::End::kExited;
      if (died && !failed.exchange(true)) failed_at_ms = NowMs();
    });
  }
  for (auto& supervisor : supervisors) supervisor.join();
  return outcomes;
}

std::string DescribeRankEnd(const ChildOutcome& outcome) {
  switch (outcome.end) {
    case ChildOutcome::End::kExited:
      return "exited with status " + std::to_string(outcome.exit_code);
    case ChildOutcome::End::kSignaled:
      return "was killed by signal " + std::to_string(outcome.signal) + " (" +
             strsignal(outcome.signal) + ")";
    case ChildOutcome::End::kInterrupted:
      return "was stopped (a peer had failed, or the launcher was interrupted)";
    default:
      return outcome.Describe();
  }
}

int LaunchExitStatus(const std::vector<ChildOutcome>& outcomes) {
  for (const ChildOutcome& outcome : outcomes) {
    if (outcome.end == ChildOutcome::End::kExited && outcome.exit_code == 0) continue;
    return outcome.end == ChildOutcome::End::kExited ? outcome.exit_code : 1;
  }
  return 0;
}

}  // namespace seqbench::training
