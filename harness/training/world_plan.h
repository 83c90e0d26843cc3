// The world of ranks a training command runs in, and its pipelines fitted to it: the world
// comes from torchrun's (or Slurm's) environment or from the ranks the command is to start
// itself; each pipeline then gets its ranks and its collectives' timeout, and is refused
// where it cannot run in that world (gradients to compress or optimizer state to shard on
// one rank, a rank past the world's last, a distilling pipeline whose teacher does not
// train before it on each of its ranks). These are the user's to fix: WorldRefused, which
// the command line answers with exit 2. Nothing here starts a rank or prints.
//
// Thread-safety: plain functions over values; ReadWorldEnvironment reads the process's
// environment.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <vector>

#include "harness/training/distributed.h"
#include "harness/training/training_suite.h"

namespace seqbench::training {

// A world or pipeline the user asked for that cannot be: the message says what to change.
class WorldRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The world this process belongs to, and its size.
struct WorldPlan {
  std::optional<WorldEnvironment> environment;  // torchrun's or Slurm's; nullopt: none
  int64_t size = 1;
};

// What the command asks of the world: the ranks to start itself (`--nproc`, unset: none)
// and the collectives' timeout.
struct WorldRequest {
  std::optional<int64_t> nproc;
  int64_t timeout_s = 60;
};

// The world `request` and the environment describe. Refuses a malformed environment,
// --nproc under torchrun or outside 1..1024, a timeout outside 1..86400 s, and a world of
// more than one rank in a build without data parallelism.
WorldPlan PlanWorld(const WorldRequest& request);

// Sets each pipeline's ranks (a pipeline that takes them from the world gets its size) and
// timeout, in place. Refuses compression or ZeRO on one rank, and a pipeline whose ranks
// reach past the world's last.
void FitPipelinesToWorld(int64_t world_size, std::chrono::seconds timeout,
                         std::vector<PipelineSpec>& pipelines);

// Each distilling pipeline's teacher trains in this command, before it, on every rank the
// student trains on: a rank keeps only the teacher it trained itself, and a rank without
// one would leave its peers waiting in the student's first collective. Refuses otherwise.
void CheckTeachers(const std::vector<PipelineSpec>& pipelines);

}  // namespace seqbench::training
