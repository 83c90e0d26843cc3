// A training run as library code, beside harness/benchmark_run.h: the run's record, the
// run its pipelines go into (a resume continues the checkpoint's run where the database
// holds it), the loop that trains each pipeline and stores it as it ends, and the run's
// close. `seqbench train` only parses flags, joins the world and prints what these report.
//
// Thread-safety: call from one thread, with one Store; the hooks run on that thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "harness/training/pipeline.h"
#include "harness/training/trainer.h"
#include "harness/training/training_data.h"
#include "harness/training/training_suite.h"
#include "results/store.h"

namespace seqbench::training {

// What the command line asked of the run, beyond the suite.
struct TrainingRunRequest {
  std::string suite_path;  // "": a one-pipeline suite written from the flags
  std::string command_line;
  std::string label;    // free text for selecting the run later
  std::string db_path;  // named in the reasons OpenTrainingRun gives
  PipelineFiles files;  // checkpoint, save_every and resume; run_uuid is the opened run's
};

// The training run's record before it starts: the suite, the data, the world it trains
// in (null: this process alone), and the GPU's facts.
RunRecord DescribeTrainingRun(const TrainingRunRequest& request, const TrainingSuite& suite,
                              const TrainingData& data, const World* world);

// The run the pipelines go into.
struct TrainingRun {
  int64_t id = 0;
  std::string uuid;
  bool extending = false;  // the pipeline has a case in the run already: replace it
  // Why a resume continues a stored run or starts a new one ("extending run 3 from 40 to
  // 80 steps", "a new run, since ..."); "" for a run that resumes nothing.
  std::string note;
};

// A resume continues the checkpoint's run (`origin`) where this database holds it,
// unfinished and on the same suite and data, or one that finished this pipeline at fewer
// steps than now asked for: one run, one log, final metrics over all of its steps. Else
// `run` is stored as a new run.
TrainingRun OpenTrainingRun(const TrainingRunRequest& request, Store& store, const RunRecord& run,
                            const TrainingSuite& suite, const std::vector<PipelineSpec>& pipelines,
                            const TrainingData& data, const CheckpointOrigin& origin);

struct TrainingRunHooks {
  // Before each pipeline this process trains: its position and spec; returns the hooks
  // its steps report to.
  std::function<PipelineHooks(size_t position, const PipelineSpec& spec)> start_pipeline;
  // Why the run stops early although this process was not interrupted.
  std::function<void(const std::string& message)> on_stop;
};

// What training the pipelines came to.
struct TrainingOutcome {
  bool interrupted = false, failed = false;
  std::vector<CaseRecord> records;
};

// Trains each pipeline this process is a member of, in order, storing each as it ends. A
// data-parallel pipeline that failed may have lost a rank: the world cannot be trusted
// with the next pipeline, and the run stays unfinished, for --resume.
TrainingOutcome TrainPipelines(const TrainingRunRequest& request, const TrainingSuite& suite,
                               const std::vector<PipelineSpec>& pipelines, const TrainingData& data,
                               Store& store, const TrainingRun& run, World* world,
                               const TrainingRunHooks& hooks);

// Stores the machine's state at the run's end and marks it complete or interrupted.
void CloseTrainingRun(Store& store, int64_t run_id, bool interrupted);

}  // namespace seqbench::training
