// `seqbench slurm SUITE --shards N`: a suite as a Slurm job array of shards, gathered by a
// dependent job into one run group (harness/slurm_job.h). sbatch is run with argv, never
// through a shell; its refusal is the user's to fix (exit 2).
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <utility>

#include "base/files.h"
#include "base/process.h"
#include "cli/command.h"
#include "harness/child_run.h"
#include "harness/slurm_job.h"
#include "harness/suite.h"
#include "reports/escape/terminal.h"
#include "results/run_group.h"

namespace po = boost::program_options;

namespace seqbench::cli {
namespace {

struct SlurmFlags {
  std::string suite_path, group, db_dir;
  std::vector<std::string> run_flags;  // after `--`: every task's own run flags
  int64_t shards = 0;
  bool dry_run = false;
  SlurmJobRequest request;
};

constexpr char kSlurmUsage[] =
    "Usage: seqbench slurm SUITE.toml --shards N [--group ID] [--db-dir DIR]\n"
    "                      [--partition P] [--gres gpu:1] [--time 2:00:00] [--dry-run]\n"
    "                      [-- RUN_FLAGS...]\n\n"
    "Submits the suite to Slurm as one job array (sbatch --array=1-N --requeue, held until\n"
    "the second job is in too): task i\n"
    "runs `seqbench run SUITE --shard i/N --group ID --db DIR/shard-i.db RUN_FLAGS`, and a\n"
    "requeued task resumes its shard's run. A second job, started once every task\n"
    "ended (afterany), merges the shards into DIR/group-ID.db, writes DIR/group-ID.md (report\n"
    "--group ID, which refuses a group with a shard missing or unfinished, naming it) and\n"
    "checks the suite's expectations on the group. Prints the job ids and\n"
    "the commands that watch and collect them. Each task's run command is checked first,\n"
    "as the task would check it (exit 2 if any task would refuse it). --dry-run prints the\n"
    "scripts and sbatch commands instead of submitting.\n\nOptions";

// "ci-20261127T141502": a group id from the suite's name and the time, IsGroupId.
std::string DefaultGroupId(const std::string& suite_name) {
  std::string id;
  for (char c : suite_name.substr(0, 40))
    id += std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' ? c : '_';
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%S", std::gmtime(&now));
  while (!id.empty() && id.front() == '-') id.erase(0, 1);  // IsGroupId: not a flag
  return (id.empty() ? "suite" : id) + "-" + stamp;
}

// Refuses the run flags each task sets itself and those of the children seqbench starts,
// and any abbreviation of them (the option parser would take `--gro` for `--group`).
void CheckRunFlags(const std::vector<std::string>& run_flags) {
  for (const std::string& flag : run_flags) {
    if (flag.rfind("--", 0) != 0 || flag.size() == 2) continue;
    const std::string name = flag.substr(2, flag.find('=') - 2);
    for (const std::string own : {"shard", "group", "db", "resume"}) {
      if (!name.empty() && own.rfind(name, 0) == 0)
        throw UsageError("slurm: --" + own + " (here " + escape::TerminalText(flag) +
                         ") is set for each task by seqbench slurm; drop it after --");
    }
    // Flags of the children's roles (a test's hooks aside), which no task may be given.
    const auto childs = [](const ChildRunFlag& known) {
      return (known.hidden && known.name.rfind("test-", 0) != 0) || known.name == "lockstep";
    };
    const std::vector<ChildRunFlag> flags = ChildRunFlags();
    const bool another_flag = std::any_of(flags.begin(), flags.end(), [&](const auto& known) {
      return !childs(known) && known.name == name;  // --count is not short for --count-out
    });
    for (const ChildRunFlag& child : flags) {
      if (childs(child) && !another_flag && child.name.rfind(name, 0) == 0)
        throw UsageError("slurm: --" + child.name + " (here " + escape::TerminalText(flag) +
                         ") is seqbench's own, for the children it starts; drop it after --");
    }
  }
}

// Parses and checks the flags (exit 2 before anything is written); false after --help.
bool ParseSlurmFlags(const std::vector<std::string>& args, SlurmFlags& f) {
  const auto dashes = std::find(args.begin(), args.end(), "--");
  const std::vector<std::string> own(args.begin(), dashes);
  if (dashes != args.end()) f.run_flags.assign(dashes + 1, args.end());
  po::options_description options(kSlurmUsage);
  options.add_options()("help,h", "show this help")(
      "shards", po::value(&f.shards), "how many shards (array tasks): 1 to the suite's cases")(
      "group", po::value(&f.group), "the run group's id (default: SUITE-<UTC time>)")(
      "db-dir", po::value(&f.db_dir),
      "where the shard databases, the gathered one, the report and the job logs go "
      "(default results/slurm/ID)")("partition", po::value(&f.request.partition),
                                    "sbatch --partition")(
      "gres", po::value(&f.request.gres), "sbatch --gres for each task, e.g. gpu:1")(
      "time", po::value(&f.request.time_limit), "sbatch --time for each task, e.g. 2:00:00")(
      "dry-run", "print the scripts and sbatch commands; submit nothing");
  po::options_description hidden;
  hidden.add_options()("suite", po::value(&f.suite_path));
  po::positional_options_description positional;
  positional.add("suite", 1);
  const auto values = ParseArguments(own, options, hidden, positional, "slurm");
  if (!values) return false;
  f.dry_run = values->count("dry-run") > 0;
  if (f.suite_path.empty()) throw UsageError("slurm: give the suite file (seqbench slurm --help)");
  if (!values->count("shards")) throw UsageError("slurm: give --shards N (the array's tasks)");
  if (!f.group.empty() && !IsGroupId(f.group))
    throw UsageError("slurm: --group '" + f.group +
                     "' must be 1 to 64 of A-Z a-z 0-9 . _ - (not starting with . or -)");
  CheckRunFlags(f.run_flags);
  return true;
}

// The request from the checked flags and the suite.
void CompleteRequest(SlurmFlags& f) {
  const Suite suite = LoadSuiteOrUsageError(f.suite_path);
  const int64_t cases = static_cast<int64_t>(suite.Expand().size());
  if (f.shards < 1 || f.shards > cases)
    throw UsageError("slurm: --shards must be 1 to " + std::to_string(cases) + " (the cases of " +
                     f.suite_path + "), got " + std::to_string(f.shards));
  SlurmJobRequest& request = f.request;
  request.group = f.group.empty() ? DefaultGroupId(suite.name) : f.group;
  if (!IsGroupId(request.group))
    throw UsageError("slurm: the suite's name makes no group id; give --group ID");
  const std::string dir = f.db_dir.empty() ? "results/slurm/" + request.group : f.db_dir;
  request.db_dir = std::filesystem::absolute(dir).lexically_normal().string();
  if (request.db_dir.find('\\') != std::string::npos)
    throw UsageError(
        "slurm: --db-dir must not hold a backslash (Slurm's --output patterns "
        "read one as turning their %-fields off)");
  request.workdir = std::filesystem::current_path().string();
  ChildRun& task = request.task;
  task.binary = std::filesystem::read_symlink(SelfExecutable()).string();
  task.plugins = AbsolutePluginPaths();
  task.suite_path = f.suite_path;
  // As given, not read into fields: a value that is a field's default ("--repetitions 0")
  // would read as not given and vanish, where the task must refuse it (CheckTaskCommands).
  task.user_flags = f.run_flags;
  request.shards = f.shards;
  request.check = !suite.expectations.empty();
}

// Each task's `seqbench run` command, checked here as the task would check it: a flag it
// refuses (`--repetitions 0`, `--count instructions` on a shard, a --filter that leaves a
// shard empty) would otherwise fail every task of the array on the cluster.
void CheckTaskCommands(const SlurmFlags& f) {
  const SlurmJobRequest& request = f.request;
  for (int64_t i = 1; i <= request.shards; ++i) {
    try {
      CheckRunCommand(ShardRun(request, i).Arguments());
    } catch (const UsageError& error) {
      throw UsageError("slurm: task " + std::to_string(i) + " of " +
                       std::to_string(request.shards) +
                       " would refuse its command: " + error.what());
    }
  }
}

// `tool` (sbatch, scontrol, scancel) on PATH, or a UsageError (exit 2): nothing can be
// submitted without it.
std::string FindTool(const std::string& tool) {
  if (std::optional<std::string> found = FirstOnPath(tool)) return std::move(*found);
  throw UsageError("slurm: " + tool +
                   " is not on PATH: run on a Slurm login node (or install slurm-client), or "
                   "use --dry-run to see the scripts");
}

// A folder that already holds a shard's or the group's database belongs to another
// submission (or to this group id, reused): its shards would find their runs complete.
void RefuseUsedFolder(const SlurmJob& job) {
  std::vector<std::string> paths = job.shard_databases;
  paths.push_back(job.group_database);
  paths.push_back(std::filesystem::path(job.group_database).parent_path() / "array.sh");
  for (const std::string& path : paths) {
    if (std::filesystem::exists(path))
      throw UsageError("slurm: " + escape::TerminalText(path) +
                       " exists: another submission's; give a new --group or --db-dir");
  }
}

// Runs `argv` (a Slurm client) and returns what it printed, trailing blanks dropped. A
// failure is a UsageError with its words.
std::string RunTool(const std::vector<std::string>& argv) {
  // Captured in an anonymous file (base/process.h): nothing is written in the job's
  // folder, so no link another user left there can turn the output into a write elsewhere.
  ChildSpec spec;
  spec.argv = argv;
  spec.timeout_s = 120;
  spec.output = ChildSpec::Output::kCaptureBoth;
  spec.max_output = size_t{1} << 20;
  const ChildOutcome outcome = RunChild(spec);
  std::string text = outcome.output;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (outcome.end != ChildOutcome::End::kExited || outcome.exit_code != 0)
    throw UsageError("slurm: " + std::filesystem::path(argv[0]).filename().string() + " refused (" +
                     outcome.Describe() + "): " + escape::TerminalText(text));
  return text;
}

// Runs sbatch OPTIONS SCRIPT; its job id. A refusal is a UsageError with sbatch's words.
std::string Submit(const std::string& sbatch, std::vector<std::string> options,
                   const std::string& script) {
  std::vector<std::string> argv = {sbatch};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back(script);
  const std::string text = RunTool(argv);
  const std::string id = text.substr(0, text.find(';'));  // --parsable: "id[;cluster]"
  if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
    throw UsageError("slurm: sbatch answered '" + escape::TerminalText(text) + "', not a job id");
  return id;
}

// Submits the held array, then the gather job after it, then releases the array; a refused
// gather job cancels the array. The two job ids.
std::pair<std::string, std::string> SubmitBoth(const SlurmJob& job, const std::string& dir) {
  const std::string sbatch = FindTool("sbatch"), scontrol = FindTool("scontrol"),
                    scancel = FindTool("scancel");
  const std::string array_id = Submit(sbatch, job.array_options, dir + "/array.sh");
  std::vector<std::string> gather_options = job.gather_options;
  for (const std::string& option : SlurmDependency(array_id)) gather_options.push_back(option);
  std::string gather_id;
  try {
    gather_id = Submit(sbatch, gather_options, dir + "/gather.sh");
  } catch (const UsageError& error) {  // the held array must not stay queued alone
    std::string cancelled = "\n(array job " + array_id + " cancelled)";
    try {
      RunTool({scancel, array_id});
    } catch (const UsageError& failed) {
      cancelled = "\n(array job " + array_id + " is held; cancel it: scancel " + array_id + "; " +
                  failed.what() + ")";
    }
    throw UsageError(std::string(error.what()) + cancelled);
  }
  try {
    RunTool({scontrol, "release", array_id});
  } catch (const UsageError& failed) {
    throw UsageError(std::string(failed.what()) + "\n(jobs " + array_id + " and " + gather_id +
                     " are queued, the array held: scontrol release " + array_id +
                     " starts it, scancel " + array_id + " " + gather_id + " drops both)");
  }
  return {array_id, gather_id};
}

std::string CommandText(const std::string& program, const std::vector<std::string>& options,
                        const std::string& script) {
  std::string text = program;
  for (const std::string& option : options) text += " " + ShellQuote(option);
  return text + " " + ShellQuote(script);
}

void PrintDryRun(const SlurmJob& job, const std::string& array_path,
                 const std::string& gather_path) {
  std::vector<std::string> gather_options = job.gather_options;
  for (const std::string& option : SlurmDependency("ARRAY_JOB_ID"))
    gather_options.push_back(option);
  // Shown, not run: the scripts and paths hold user text (the suite's path, run flags).
  using escape::TerminalText;
  std::cout << "# " << TerminalText(array_path, false) << "\n"
            << TerminalText(job.array_script) << "\n# " << TerminalText(gather_path, false) << "\n"
            << TerminalText(job.gather_script) << "\n# submitted as\n"
            << TerminalText(CommandText("sbatch", job.array_options, array_path), false) << "\n"
            << TerminalText(CommandText("sbatch", gather_options, gather_path), false) << "\n";
}

}  // namespace

int RunSlurm(const std::vector<std::string>& args) {
  SlurmFlags f;
  if (!ParseSlurmFlags(args, f)) return 0;
  CompleteRequest(f);
  CheckTaskCommands(f);
  const SlurmJob job = PlanSlurmJob(f.request);
  const std::string dir = f.request.db_dir;
  if (f.dry_run) {
    PrintDryRun(job, dir + "/array.sh", dir + "/gather.sh");
    return 0;
  }
  for (const char* tool : {"sbatch", "scontrol", "scancel"}) FindTool(tool);  // before writing
  RefuseUsedFolder(job);
  std::filesystem::create_directories(dir);
  WriteFileAtomically(dir + "/array.sh", job.array_script);
  WriteFileAtomically(dir + "/gather.sh", job.gather_script);
  const auto [array_id, gather_id] = SubmitBoth(job, dir);
  const std::string shown_dir = escape::TerminalText(dir);
  std::cout << "group " << f.request.group << ": array job " << array_id << " (" << f.shards
            << " shards into " << shown_dir << "/shard-<i>.db), gather job " << gather_id
            << " after it\n"
            << "watch:    squeue -j " << array_id << "," << gather_id << "\n"
            << "collect:  " << escape::TerminalText(job.report_path) << " (the report), or\n"
            << "          seqbench report --group " << f.request.group << " --db "
            << escape::TerminalText(ShellQuote(job.group_database)) << "\n";
  return 0;
}

}  // namespace seqbench::cli
