#include "harness/training/training_run.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <string>

#include "harness/cuda_probe.h"
#include "harness/run_header.h"

namespace seqbench::training {

RunRecord DescribeTrainingRun(const TrainingRunRequest& request, const TrainingSuite& suite,
                              const TrainingData& data, const World* world) {
  RunDescription description;
  description.kind = kRunKindTraining;
  description.suite_name = suite.name;
  description.suite_path = request.suite_path.empty() ? "(command line)" : request.suite_path;
  description.suite_text = suite.text;
  description.command_line = request.command_line;
  description.seed = suite.data_seed;
  description.baseline = suite.reference;
  description.expectations = suite.expectations;
  description.label = request.label;
  description.extra_environment = {{"timer",
                                    "steady_clock around each optimizer step, loader waits "
                                    "included (the loss is read back every step)"},
                                   {"data", data.description}};
  if (world) {
    description.extra_environment.push_back({"world_size", std::to_string(world->size())});
    description.extra_environment.push_back({"distributed_backend", "gloo (c10d)"});
  }
  // The GPU's facts and library settings, as `run` records them.
  for (const auto& entry : cuda_probe::Environment()) {
    description.extra_environment.push_back(entry);
  }
  return NewRunRecord(description);
}

namespace {
// Whether run `run_id` holds case `key` with the error status.
bool FailedCase(const Store& store, int64_t run_id, const std::string& key) {
  for (const CaseRecord& record : store.Cases(run_id)) {
    if (record.key() == key) return record.status == kStatusError;
  }
  return false;
}
}  // namespace

TrainingRun OpenTrainingRun(const TrainingRunRequest& request, Store& store, const RunRecord& run,
                            const TrainingSuite& suite, const std::vector<PipelineSpec>& pipelines,
                            const TrainingData& data, const CheckpointOrigin& origin) {
  TrainingRun opened;
  opened.uuid = run.uuid;
  // A resume continues the checkpoint's run where this database holds it, unfinished and
  // on the same suite and data: one run, one log, and final metrics over all of its steps.
  if (!origin.run_uuid.empty()) {
    const std::optional<RunRecord> stored = store.FindRunByUuid(origin.run_uuid);
    const std::string key = PipelineIdentity(suite, pipelines.front()).Key();
    std::string why_not;
    if (!stored) {
      why_not = "its run is not in " + request.db_path;
    } else if (stored->kind != kRunKindTraining || stored->suite_name != run.suite_name ||
               stored->Environment("data") != data.description) {
      // The training options themselves are the checkpoint's fingerprint, checked above;
      // the suite text is not compared, since from flags it holds the command line.
      why_not = "run " + std::to_string(stored->run_id) + " trained another suite or data";
    } else if (stored->status != "complete" && FailedCase(store, stored->run_id, key)) {
      // A pipeline that failed in an unfinished run (a data-parallel rank lost) is taken
      // again from the checkpoint; its record replaces the error case at the end.
      opened.extending = true;
    } else if (stored->status == "complete" || store.CaseKeys(stored->run_id).count(key)) {
      // Finished at fewer steps than asked for now, from a checkpoint at its last step:
      // the run is extended, and its pipeline's record replaced when the longer run ends.
      const auto logged = store.TrainingSteps(stored->run_id, key);
      const int64_t last_logged = logged.empty() ? 0 : logged.back().step;
      if (pipelines.front().steps > last_logged && origin.step == last_logged) {
        opened.note = "extending run " + std::to_string(stored->run_id) + " from " +
                      std::to_string(last_logged) + " to " +
                      std::to_string(pipelines.front().steps) + " steps";
        opened.extending = true;
      } else {
        why_not =
            "run " + std::to_string(stored->run_id) + " already finished this pipeline (" +
            std::to_string(last_logged) + " steps" +
            (origin.step == last_logged ? "; ask for more with --steps to extend it)"
                                        : "; only a checkpoint of its last step, not of step " +
                                              std::to_string(origin.step) + ", extends it)");
      }
    }
    if (stored && why_not.empty()) {
      opened.id = stored->run_id;
      opened.uuid = stored->uuid;
      store.SetRunStatus(opened.id, "running", "");
    }
    if (opened.id == 0) opened.note = "a new run, since " + why_not;
  }
  if (opened.id == 0) opened.id = store.CreateRun(run);
  return opened;
}

namespace {

// Drops the kept models that no pipeline after `position` distils from, so that their
// weights do not sit in the memory of the pipelines that follow.
void ForgetTaughtTeachers(const std::vector<PipelineSpec>& pipelines, size_t position,
                          std::map<std::string, CheckpointModel>& teachers) {
  for (auto teacher = teachers.begin(); teacher != teachers.end();) {
    const bool needed = std::any_of(pipelines.begin() + position + 1, pipelines.end(),
                                    [&](const PipelineSpec& later) {
                                      return later.config.distillation.teacher == teacher->first;
                                    });
    teacher = needed ? std::next(teacher) : teachers.erase(teacher);
  }
}

}  // namespace

TrainingOutcome TrainPipelines(const TrainingRunRequest& request, const TrainingSuite& suite,
                               const std::vector<PipelineSpec>& pipelines, const TrainingData& data,
                               Store& store, const TrainingRun& run, World* world,
                               const TrainingRunHooks& hooks) {
  TrainingOutcome result;
  std::map<std::string, CheckpointModel> teachers;  // the kept models, by pipeline name
  for (size_t position = 0; position < pipelines.size(); ++position) {
    const PipelineSpec& spec = pipelines[position];
    if (world) {  // trained by its members only
      const std::vector<int64_t> members = spec.config.data_parallel.Members();
      if (std::find(members.begin(), members.end(), world->rank()) == members.end()) continue;
    }
    PipelineFiles files = request.files;
    files.run_uuid = run.uuid;
    if (const auto teacher = teachers.find(spec.config.distillation.teacher);
        spec.config.distillation.enabled() && teacher != teachers.end()) {
      files.teacher = &teacher->second;
    }
    PipelineOutcome outcome =
        RunPipeline(suite, spec, data, store, run.id, static_cast<int64_t>(position), files,
                    hooks.start_pipeline(position, spec), world);
    if (outcome.interrupted) {  // its steps are stored; its case is not: it did not finish
      result.interrupted = true;
      break;
    }
    if (run.extending) {
      store.ReplaceCase(run.id, outcome.record);
    } else {
      store.AddCase(run.id, outcome.record);
    }
    if (outcome.model) teachers.emplace(spec.name, std::move(*outcome.model));
    ForgetTaughtTeachers(pipelines, position, teachers);
    const std::string status = outcome.record.status;
    result.failed = result.failed || (status != kStatusOk && status != kStatusSkipped);
    result.records.push_back(std::move(outcome.record));
    if (spec.config.data_parallel.ranks > 1 && status == kStatusError) {
      result.interrupted = true;
      world->Abandon();
      hooks.on_stop("data-parallel pipeline " + spec.name +
                    " failed; the run stops here (resume it with --resume CHECKPOINT and the "
                    "same number of ranks)");
      break;
    }
  }
  return result;
}

void CloseTrainingRun(Store& store, int64_t run_id, bool interrupted) {
  RecordRunEnd(store, run_id);
  store.SetRunStatus(run_id, interrupted ? "interrupted" : "complete", interrupted ? "" : UtcNow());
}

}  // namespace seqbench::training
