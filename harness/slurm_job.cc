#include "harness/slurm_job.h"

namespace seqbench {

std::string ShellQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string SlurmLiteral(const std::string& path) {
  std::string literal;
  for (char c : path) literal += c == '%' ? std::string("%%") : std::string(1, c);
  return literal;
}

namespace {

std::string Words(const std::vector<std::string>& words) {
  std::string line;
  for (const std::string& word : words) line += (line.empty() ? "" : " ") + ShellQuote(word);
  return line;
}

// `seqbench [--plugin P]...`: how both scripts start the binary.
std::vector<std::string> Seqbench(const SlurmJobRequest& request) {
  std::vector<std::string> argv = {request.task.binary};
  for (const std::string& plugin : request.task.plugins)
    argv.insert(argv.end(), {"--plugin", plugin});
  return argv;
}

std::string ShardDatabase(const SlurmJobRequest& request, const std::string& index) {
  return request.db_dir + "/shard-" + index + ".db";
}

std::vector<std::string> CommonOptions(const SlurmJobRequest& request, const std::string& name) {
  std::vector<std::string> options = {"--parsable", "--job-name", name};
  if (!request.partition.empty()) options.insert(options.end(), {"--partition", request.partition});
  if (!request.gres.empty()) options.insert(options.end(), {"--gres", request.gres});
  if (!request.time_limit.empty()) options.insert(options.end(), {"--time", request.time_limit});
  return options;
}

constexpr char kPrologue[] =
    "#!/bin/bash\n"
    "# Written by seqbench slurm; submitted with sbatch.\n"
    "set -euo pipefail\n";

// ShardRun's command, its shard and database from the task's environment.
std::string ArrayScript(const SlurmJobRequest& request) {
  const std::string task = "\"${SLURM_ARRAY_TASK_ID}\"";
  const std::string shard = task + ShellQuote("/" + std::to_string(request.shards));
  const std::string database = ShellQuote(request.db_dir + "/shard-") + task + ShellQuote(".db");
  ChildRun run = request.task;
  run.group = request.group;
  return std::string(kPrologue) +
         "# Task i of the array measures shard i; requeued, it resumes its shard's run.\n"
         "cd " +
         ShellQuote(request.workdir) + "\n" + "exec " + Words(run.ToArgv()) + " " +
         ChildRun::Flag("shard") + " " + shard + " " + ChildRun::Flag("db") + " " + database + "\n";
}

std::string GatherScript(const SlurmJobRequest& request, const SlurmJob& job) {
  const std::string seqbench = Words(Seqbench(request));
  const std::string group = ShellQuote(request.group);
  const std::string database = ShellQuote(job.group_database);
  // The shards that stored anything; report --group then names any shard missing or
  // unfinished, and fails the job.
  std::string script = std::string(kPrologue) +
                       "# After every shard ended: one database, the group reported and checked.\n";
  script += "cd " + ShellQuote(request.workdir) + "\n";
  script += "shards=()\nfor db in " + Words(job.shard_databases) + "; do\n";
  script += "  if [[ -s $db ]]; then shards+=(\"$db\"); fi\ndone\n";  // not sqlite3's empty file
  script += "if (( ${#shards[@]} == 0 )); then\n";
  script += "  echo " + ShellQuote("no shard stored a database in " + request.db_dir) + " >&2\n";
  script += "  exit 1\nfi\n";
  script += seqbench + " merge \"${shards[@]}\" --into " + database + "\n";
  script += seqbench + " report --group " + group + " --db " + database + " --out " +
            ShellQuote(job.report_path) + "\n";
  if (request.check) script += seqbench + " check --group " + group + " --db " + database + "\n";
  return script;
}

}  // namespace

SlurmJob PlanSlurmJob(const SlurmJobRequest& request) {
  SlurmJob job;
  for (int64_t i = 1; i <= request.shards; ++i)
    job.shard_databases.push_back(ShardDatabase(request, std::to_string(i)));
  // "group-": never a shard's name, whatever the id.
  job.group_database = request.db_dir + "/group-" + request.group + ".db";
  job.report_path = request.db_dir + "/group-" + request.group + ".md";
  job.array_script = ArrayScript(request);
  job.gather_script = GatherScript(request, job);
  const std::string logs = SlurmLiteral(request.db_dir) + "/slurm-%A_%a.out";
  job.array_options = CommonOptions(request, "seqbench-" + request.group);
  // Held until the gather job is accepted too, so that a refused gather job leaves no
  // array running without it.
  job.array_options.insert(
      job.array_options.end(),
      {"--array", "1-" + std::to_string(request.shards), "--requeue", "--hold", "--output", logs});
  SlurmJobRequest without_gpu = request;  // merging and reporting need no GPU
  without_gpu.gres.clear();
  job.gather_options = CommonOptions(without_gpu, "seqbench-" + request.group + "-gather");
  job.gather_options.insert(job.gather_options.end(),
                            {"--output", SlurmLiteral(request.db_dir) + "/slurm-%j-gather.out"});
  return job;
}

ChildRun ShardRun(const SlurmJobRequest& request, int64_t index) {
  ChildRun run = request.task;
  run.shard = std::to_string(index) + "/" + std::to_string(request.shards);
  run.group = request.group;
  run.db_path = ShardDatabase(request, std::to_string(index));
  return run;
}

std::vector<std::string> SlurmDependency(const std::string& array_job_id) {
  return {"--dependency", "afterany:" + array_job_id};
}

}  // namespace seqbench
