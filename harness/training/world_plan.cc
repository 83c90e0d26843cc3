#include "harness/training/world_plan.h"

#include <algorithm>
#include <string>

namespace seqbench::training {

WorldPlan PlanWorld(const WorldRequest& request) {
  WorldPlan plan;
  try {
    plan.environment = ReadWorldEnvironment();
  } catch (const std::invalid_argument& error) {
    throw WorldRefused(std::string("torchrun environment: ") + error.what());
  }
  if (request.nproc) {
    if (plan.environment) {
      throw WorldRefused(
          "--nproc starts the ranks itself; under torchrun (WORLD_SIZE is set) leave it out");
    }
    if (*request.nproc < 1 || *request.nproc > 1024) throw WorldRefused("--nproc must be 1..1024");
  }
  if (request.timeout_s < 1 || request.timeout_s > 86400)
    throw WorldRefused("--dist-timeout must be between 1 and 86400 seconds, got " +
                       std::to_string(request.timeout_s));
  plan.size = plan.environment ? plan.environment->world_size
                               : std::max<int64_t>(1, request.nproc.value_or(1));
  if (plan.size > 1 && !DistributedAvailable()) throw WorldRefused(DistributedUnavailableReason());
  return plan;
}

namespace {

// What a pipeline that trains on one rank cannot do: compress or shard what ranks share.
void CheckSeveralRanks(const PipelineSpec& spec) {
  const auto& data_parallel = spec.config.data_parallel;
  if (data_parallel.ranks != 1) return;
  if (!data_parallel.compression.empty()) {
    throw WorldRefused("pipeline '" + spec.name +
                       "': compression applies to gradients sent between ranks; it trains on "
                       "one rank (start more with --nproc, or set ranks > 1)");
  }
  if (data_parallel.zero_stage > 0) {
    throw WorldRefused("pipeline '" + spec.name +
                       "': zero = 1 shards the optimizer state over ranks; it trains on one "
                       "rank (start more with --nproc, or set ranks > 1)");
  }
}

}  // namespace

void FitPipelinesToWorld(int64_t world_size, std::chrono::seconds timeout,
                         std::vector<PipelineSpec>& pipelines) {
  for (PipelineSpec& spec : pipelines) {
    auto& data_parallel = spec.config.data_parallel;
    if (spec.ranks_from_world) data_parallel.ranks = world_size;
    data_parallel.timeout = timeout;
    CheckSeveralRanks(spec);
    const int64_t needed = data_parallel.Members().back() + 1;  // world ranks 0..needed-1
    if (needed > world_size) {
      throw WorldRefused(
          "pipeline '" + spec.name + "' trains on " +
          (data_parallel.members.empty() ? std::to_string(data_parallel.ranks) + " ranks"
                                         : "world rank " + std::to_string(needed - 1)) +
          ", but " +
          (world_size == 1
               ? std::string("there is one; start with --nproc ") + std::to_string(needed)
               : "the world has " + std::to_string(world_size)));
    }
  }
}

void CheckTeachers(const std::vector<PipelineSpec>& pipelines) {
  for (auto student = pipelines.begin(); student != pipelines.end(); ++student) {
    const std::string& name = student->config.distillation.teacher;
    if (name.empty()) continue;
    const auto teacher = std::find_if(pipelines.begin(), student,
                                      [&](const PipelineSpec& p) { return p.name == name; });
    const std::string quoted_student = "'" + student->name + "'";
    const std::string quoted_teacher = "'" + name + "'";
    if (teacher == student) {
      throw WorldRefused("pipeline " + quoted_student + " distils from " + quoted_teacher +
                         ", which this command does not train; select both (--pipeline " + name +
                         " --pipeline " + student->name + ")");
    }
    const std::vector<int64_t> taught = student->config.data_parallel.Members(),
                               trained = teacher->config.data_parallel.Members();
    if (!std::includes(trained.begin(), trained.end(), taught.begin(), taught.end())) {
      throw WorldRefused("pipeline " + quoted_student + " trains on ranks its teacher " +
                         quoted_teacher + " does not; give the teacher the student's ranks");
    }
  }
}

}  // namespace seqbench::training
