// The launch of a training world on this machine (`train --nproc N`): N ranks of one
// command, each a child seqbench with torchrun's environment, supervised until all end.
// A rank killed by a signal gives the others `grace_s` to notice (c10d raises in them once
// a peer is gone) before they are killed; an interruption kills every rank. Prints
// nothing: the caller tells the user how each rank ended.
//
// Thread-safety: LaunchRanks starts one supervising thread per rank and joins them all
// before it returns; `should_stop` is called from those threads.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/process.h"
#include "harness/child_run.h"

namespace seqbench::training {

struct RankLaunch {
  ChildRun rank;       // the command every rank runs (command "train", no --nproc)
  int64_t ranks = 1;   // the world's size
  double grace_s = 0;  // how long peers of a dead rank may take to fail on their own
  // Asked while the ranks run (from the supervising threads): true kills every rank.
  std::function<bool()> should_stop;
  int64_t port = 0;  // the c10d store's port on 127.0.0.1; 0: a free one (FreeLocalPort)
};

// Each rank's end, by rank. OMP_NUM_THREADS and OPENBLAS_NUM_THREADS are 1 in the ranks
// unless set already (as torchrun: ranks sharing the cores would each start a thread per
// core).
std::vector<ChildOutcome> LaunchRanks(const RankLaunch& launch);

// "exited with status 3", "was killed by signal 9 (Killed)", ...: how a rank ended.
std::string DescribeRankEnd(const ChildOutcome& outcome);

// 0 when every rank exited 0, else the first failing rank's exit code (1 for a signal).
int LaunchExitStatus(const std::vector<ChildOutcome>& outcomes);

}  // namespace seqbench::training
