// A suite as a Slurm job: the scripts and sbatch arguments of `seqbench slurm`. One job
// array whose task i runs shard i/N of the suite into its own database under the run
// group's id (a requeued task resumes its shard: run --group), and one job that starts
// when every task has ended (afterany), merges the shard databases, writes the group's
// report and checks its expectations. Slurm schedules, requeues and runs; nothing here
// launches or waits.
//
// afterany, not afterok: a task that was cancelled and then requeued (scontrol requeue)
// leaves afterok unsatisfiable for good, and Slurm cancels the dependent job although the
// requeued task then succeeds (measured, Slurm 22.05). The gather job judges the shards
// itself instead: report --group refuses a group with a shard missing or unfinished,
// naming it, and the job fails with that message in its log.
//
// Everything user-written (paths, the group id, extra run flags) reaches the scripts
// shell-quoted, and the sbatch options travel as argv, never through a shell.
//
// Thread-safety: pure functions over values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/child_run.h"

namespace seqbench {

struct SlurmJobRequest {
  // Every task's `seqbench run`: the binary (an absolute path), its --plugin libraries
  // (absolute), the suite as `run` takes it, and the user's run flags; no shard, group or
  // database, which are each task's (ShardRun).
  ChildRun task;
  std::string workdir;  // where the tasks start (the suite's relative paths hold there)
  int64_t shards = 1;
  std::string group;   // IsGroupId
  std::string db_dir;  // absolute, no backslash: shard-<i>.db, group-<id>.db and .md, logs
  bool check = true;   // the suite has [[expect]] entries: gather checks them
  // sbatch options for both jobs; "" leaves Slurm's default.
  std::string partition, gres, time_limit;
};

struct SlurmJob {
  std::string array_script, gather_script;  // bash scripts, to be written to files
  // sbatch's arguments before the script's path; the gather job's dependency is added by
  // the submitter once the array's job id is known (SlurmDependency).
  // The array is submitted held (--hold): `scontrol release` it once the gather job is in.
  std::vector<std::string> array_options, gather_options;
  std::vector<std::string> shard_databases;  // where shard i stores: [i - 1]
  std::string group_database, report_path;   // the gather job's: group-<id>.db and .md
};

SlurmJob PlanSlurmJob(const SlurmJobRequest& request);

// Array task `index`'s run (1-based): `request.task` with its shard, group and database,
// as the array script runs it.
ChildRun ShardRun(const SlurmJobRequest& request, int64_t index);

// The sbatch options that start a job once every task of job `array_job_id` has ended.
std::vector<std::string> SlurmDependency(const std::string& array_job_id);

// `text` as one shell word: single-quoted, a ' written as '\''.
std::string ShellQuote(const std::string& text);

// A Slurm file name pattern (sbatch --output) that means `path` literally: % doubled.
std::string SlurmLiteral(const std::string& path);

}  // namespace seqbench
