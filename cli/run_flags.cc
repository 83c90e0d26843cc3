// `seqbench run`'s flags (run_flags.h): the parser, the --help text, and the checks.
#include "cli/run_flags.h"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/command.h"
#include "harness/instruction_count.h"
#include "harness/key_pattern.h"
#include "results/run_group.h"
#include "variants/core/trace.h"

namespace po = boost::program_options;

namespace seqbench::cli {
namespace {

// --count's list: known kinds, comma-separated, that one run can count together.
std::vector<std::string> ParseCountKinds(const std::string& text) {
  std::vector<std::string> kinds;
  std::stringstream list(text);
  for (std::string kind; std::getline(list, kind, ',');) {
    if (!FindCountKind(kind))
      throw UsageError("run: --count takes " + CountKindNames() +
                       " (comma-separated) or none, got '" + kind + "'");
    if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) kinds.push_back(kind);
  }
  if (kinds.empty()) throw UsageError("run: --count takes " + CountKindNames() + " or none");
  if (const std::string conflict = CountKindsConflict(kinds); !conflict.empty())
    throw UsageError("run: --count " + text + ": " + conflict);
  return kinds;
}

// The flags `run --help` does not list: the suite's path, the tests' --stop-after, and
// ChildRun's hidden ones (the roles of the children run starts itself, and the test
// hooks), declared from its table and read back through it (ReadRole).
void DeclareHiddenRunFlags(po::options_description& hidden, RunFlags& f) {
  hidden.add_options()("suite", po::value(&f.suite_path))(
      "stop-after", po::value(&f.stop_after), "stop after K cases, as if interrupted (tests)");
  for (const ChildRunFlag& flag : ChildRunFlags()) {
    if (!flag.hidden) continue;
    if (flag.is_switch) {
      hidden.add_options()(flag.name.c_str(), "");
    } else {
      hidden.add_options()(flag.name.c_str(), po::value<std::string>());
    }
  }
}

// The hidden flags' values into f.role, typed by ChildRun; and a check that `run` knows
// every flag ChildRun writes (a flag renamed on one side only fails every run, not only
// the child that meets it).
void ReadRole(const po::options_description& options, RunFlags& f) {
  for (const ChildRunFlag& flag : ChildRunFlags()) {
    if (!flag.hidden) {
      if (options.find_nothrow(flag.name, false) == nullptr)
        throw std::logic_error("run: ChildRun writes --" + flag.name + ", which run lacks");
      continue;
    }
    if (!f.Given(flag.name.c_str())) continue;
    try {
      f.role.Set(flag.name, flag.is_switch ? "" : f.values[flag.name].as<std::string>());
    } catch (const std::invalid_argument& error) {
      throw UsageError(std::string("run: ") + error.what());
    }
  }
}

}  // namespace

// Parses `args` into `f`; false when --help was answered.
bool ParseRunFlags(const std::vector<std::string>& args, RunFlags& f) {
  po::options_description options(
      "Usage: seqbench run SUITE.toml [OPTIONS]\n\n"
      "Runs every case of a suite: checks it against the suite's baseline, times it with\n"
      "Google Benchmark, measures its peak memory, and stores all of it with the run's\n"
      "environment. Exits 0 when every case is ok or skipped, 1 when any mismatched or\n"
      "failed (all are stored either way), 2 on bad input.\n\nOptions");
  options.add_options()("help,h", "show this help")(
      "db", po::value(&f.db_path)->default_value(kDefaultDatabasePath), "results database")(
      "device", po::value(&f.device), "run every case on this device (cpu or cuda)")(
      "threads", po::value(&f.threads),
      "run every case with N LibTorch and OpenBLAS threads (default: the suite's `threads`, "
      "else this machine's physical cores)")("filter", po::value(&f.filter),
                                             "only cases whose key matches this regex")(
      "repetitions", po::value(&f.repetitions),
      "timed samples per case (the suite's [measure] repetitions; with --max-noise, the "
      "first batch and each further one)")("warmup", po::value(&f.warmup),
                                           "untimed steps before them ([measure] warmup)")(
      "min-time", po::value(&f.min_time_text),
      "each sample repeats the step until this long, e.g. 10ms ([measure] min_time_ms)")(
      "max-noise", po::value(&f.max_noise_text),
      "adaptive stopping: repeat until the median's 95% interval is within this, e.g. 2% "
      "([measure] max_noise)")(
      "max-time", po::value(&f.max_time_text),
      "with --max-noise: timing budget per case, e.g. 30s ([measure] max_time_s; default 30s)")(
      "interleave",
      "take the cases' repetitions in a random interleaved order (seeded by the suite's "
      "seed), so that slow drifts of the machine reach every case alike; one process, all "
      "pending cases in memory at once")(
      "label", po::value(&f.label),
      "a free label stored with the run, for selecting it later (--label on show, report, "
      "check, plot, compare)")("resume", po::value(&f.resume),
                               "complete run RUN_ID: skip its finished cases")(
      "shard", po::value(&f.shard_text), "run shard i of n (i/n, 1-based): a deterministic subset")(
      "group", po::value(&f.group),
      "with --shard: the run group (one logical run) this shard belongs to, read whole by "
      "report/check/compare/plot/show --group ID; a shard whose --db already holds its run "
      "of the group resumes it, or stops at once when it is complete (a requeued Slurm task)")(
      "nvtx", "emit NVTX ranges per case and step phase (for Nsight Systems)")(
      "measure-limits",
      "measure this machine's GEMM rate and memory bandwidth (the roofline's peaks) again, "
      "instead of taking them from an earlier run in the database on the same machine (a run "
      "whose cases take over a minute measures them once more after its last case, keeping "
      "the higher)")(
      "check", po::value(&f.check_text)->default_value("full"),
      "full: check every case against the baseline; sample: one case per variant, mode, "
      "device and shape; none: timing only (recorded with the run)")(
      "isolate",
      "run each case in a child process: a crash, abort, exit() or hang is that case's "
      "error or timeout, and the run goes on (the default with --plugin or when CI is set)")(
      "in-process", "run every case in this process, even where --isolate is the default")(
      "case-timeout", po::value(&f.case_timeout_s),
      "seconds before an isolated case is killed and stored as timeout (implies --isolate; "
      "default: the suite's [measure] case_timeout_s, else max(600, 20 x the longest case "
      "so far))")("retry-failed", "with --resume: run the cases stored as error or timeout again")(
      "count", po::value(&f.count_kind),
      "after timing each CPU case, count the instructions of a few of its steps under "
      "valgrind's callgrind, in a child at 1 thread with ATen, OpenBLAS and glibc pinned to "
      "AVX2 (machine-independent, for compare --gate counts): instructions ([measure] count); "
      "cycles-estimate (instructions and a cycle estimate from a simulated cache); "
      "hw-instructions (the CPU's own counter, natively, where the kernel offers it); "
      "comma-separated; or none to skip the suite's counting")(
      "count-steps", po::value(&f.count_steps),
      "with --count: steps counted a case, after its warmup ([measure] count_steps; default 3)")(
      "lockstep", po::value(&f.lockstep),
      "seqbench ab's worker (harness/lockstep.h): set every case up, then take one sample "
      "when told, over the pipes PREFIX.in and PREFIX.out");
  po::options_description hidden;
  DeclareHiddenRunFlags(hidden, f);
  po::positional_options_description positional;
  positional.add("suite", 1);
  auto values = ParseArguments(args, options, hidden, positional, "run");
  if (!values) return false;
  f.values = std::move(*values);
  ReadRole(options, f);
  if (f.suite_path.empty()) throw UsageError("run: no suite file given (see seqbench run --help)");
  return true;
}

namespace {

// The flags that choose how cases run (isolation, tracing, device, order): contradictions
// refused before anything is read.
void CheckModeFlags(const RunFlags& f) {
  if (f.Given("case-timeout") &&
      (!(f.case_timeout_s > 0) || !OutOfBound(kCaseTimeoutBound, f.case_timeout_s).empty())) {
    throw UsageError("run: --case-timeout must be a number of seconds above 0 and at most " +
                     FormatBound(kCaseTimeoutBound.max));
  }
  if (f.Given("in-process") && (f.Given("isolate") || f.Given("case-timeout"))) {
    throw UsageError(
        "run: --in-process contradicts --isolate and --case-timeout (which isolates); keep one");
  }
  if (f.Given("retry-failed") && !f.Given("resume")) {
    throw UsageError("run: --retry-failed goes with --resume RUN_ID");
  }
  if (f.Given("nvtx")) {
    if (!TracingCompiledIn()) {
      throw UsageError(
          "run: --nvtx: this seqbench was built without NVTX3 (no nvtx3/nvToolsExt.h found "
          "at configure time; install the CUDA Toolkit and reconfigure)");
    }
    SetTracing(true);
  }
  if (f.Given("device") && f.device != "cpu" && f.device != "cuda") {
    throw UsageError("run: --device must be cpu or cuda, got '" + f.device + "'");
  }
  if (f.Given("lockstep")) {
    for (const char* other : {"isolate", "case-timeout", "interleave", "max-noise", "resume",
                              "count-out", "run-case", "count-steps", "stop-after"}) {
      if (f.Given(other))
        throw UsageError(std::string("run: --lockstep (seqbench ab's worker) contradicts --") +
                         other);
    }
    // ab times only: a suite that counts is run with --count none.
    if (f.Given("count") && f.count_kind != "none")
      throw UsageError("run: --lockstep (seqbench ab's worker) times only; drop --count");
  }
  if (f.Given("interleave")) {
    if (f.Given("isolate") || f.Given("case-timeout"))
      throw UsageError(
          "run: --interleave takes every case's samples in one process; it contradicts "
          "--isolate and --case-timeout");
    if (f.Given("max-noise"))
      throw UsageError(
          "run: --interleave takes a fixed number of repetitions; drop --max-noise or "
          "--interleave");
  }
  if (f.label.find_first_of("\n\r") != std::string::npos)
    throw UsageError("run: --label must be one line");
  if (f.Given("group") && !IsGroupId(f.group))
    throw UsageError("run: --group '" + f.group +
                     "' must be 1 to 64 of A-Z a-z 0-9 . _ - (not starting with . or -)");
  if (f.Given("group") && !f.Given("shard"))
    throw UsageError("run: --group names the shards of one run; give this one's --shard i/n");
  if (f.Given("resume") && f.resume < 1) {
    throw UsageError("run: --resume takes the id of a stored run (1 or more), got " +
                     std::to_string(f.resume) + " (seqbench show --db " + f.db_path +
                     " lists them)");
  }
}

// The [measure] flags, each within its suite key's bounds (harness/suite.h).
void CheckMeasureFlags(const RunFlags& f, CheckedFlags& checked) {
  const auto bounded = [&](const char* flag, const MeasureBound& bound, double value,
                           const char* unit) {
    if (!f.Given(flag)) return;
    if (const std::string problem = OutOfBound(bound, value, unit); !problem.empty())
      throw UsageError("run: " + problem);
  };
  bounded("repetitions", kRepetitionsBound, static_cast<double>(f.repetitions), "");
  bounded("warmup", kWarmupBound, static_cast<double>(f.warmup), "");
  if (f.Given("min-time")) {
    checked.min_time_s = ParseDuration(f.min_time_text, "run: --min-time");
    bounded("min-time", kMinTimeBound, *checked.min_time_s * 1e3, " ms");
  }
  if (f.Given("max-time")) {
    checked.max_time_s = ParseDuration(f.max_time_text, "run: --max-time");
    if (!(*checked.max_time_s > 0)) throw UsageError("run: --max-time must be above 0, e.g. 30s");
    bounded("max-time", kMaxTimeBound, *checked.max_time_s, " s");
  }
  if (f.Given("max-noise")) {
    checked.max_noise = ParseFraction(f.max_noise_text);
    if (!checked.max_noise || !(*checked.max_noise > 0 && *checked.max_noise < 1))
      throw UsageError(
          "run: --max-noise must be a percentage like 2% or a fraction like 0.02, got '" +
          f.max_noise_text + "'");
  }
  if (f.Given("count") && f.count_kind != "none")
    checked.count_kinds = ParseCountKinds(f.count_kind);
  bounded("count-steps", kCountStepsBound, static_cast<double>(f.count_steps), "");
}

// The test-only flags, which inflate work on purpose to measure the gates.
void CheckTestFlags(const RunFlags& f) {
  if (f.Given("test-slowdown-filter") && !f.Given("test-slowdown"))
    throw UsageError("run: --test-slowdown-filter goes with --test-slowdown");
  if (f.Given("test-extra-head-passes") &&
      !(f.role.test_extra_head_passes >= 1 && f.role.test_extra_head_passes <= 100))
    throw UsageError("run: --test-extra-head-passes must be between 1 and 100");
  if (f.Given("test-slowdown") && !(f.role.test_slowdown >= 1 && f.role.test_slowdown <= 10))
    throw UsageError("run: --test-slowdown must be a factor between 1 and 10, e.g. 1.3");
  if (f.Given("test-slowdown-filter")) {
    try {
      KeyPattern{f.role.test_slowdown_filter};
    } catch (const std::invalid_argument& error) {
      throw UsageError("run: --test-slowdown-filter " + std::string(error.what()));
    }
  }
}

// --check, --filter, --device, --threads and --shard as a selection of the suite's cases.
void CheckSelectionFlags(const RunFlags& f, CheckedFlags& checked) {
  const std::optional<CheckPolicy> check = ParseCheckPolicy(f.check_text);
  if (!check) {
    throw UsageError("run: --check must be full, sample or none, got '" + f.check_text + "'");
  }
  checked.check = *check;
  CaseSelection& selection = checked.selection;
  if (f.Given("filter")) CheckFilterFlag("run", f.filter);
  selection.filter = f.filter;
  if (f.Given("device")) selection.device = f.device;
  if (f.Given("threads")) {
    CheckThreadsFlag("run", f.threads);
    selection.threads = f.threads;
  }
  if (!f.shard_text.empty()) {
    const auto shard = ParseShard(f.shard_text);
    if (!shard) {
      throw UsageError("run: --shard must be i/n with 1 <= i <= n, e.g. 2/4; got '" + f.shard_text +
                       "'");
    }
    selection.shard = *shard;
  }
}

}  // namespace

void CheckThreadsFlag(const std::string& command, int64_t threads) {
  const WorkloadField& field = *FindWorkloadField("threads");
  if (threads < field.min || threads > field.max) {
    throw UsageError(command + ": --threads must be between " + std::to_string(field.min) +
                     " and " + std::to_string(field.max) + ", got " + std::to_string(threads));
  }
}

void CheckFilterFlag(const std::string& command, const std::string& filter) {
  try {
    KeyPattern{filter};
  } catch (const std::invalid_argument& error) {
    throw UsageError(command + ": --filter " + error.what());
  }
}

Suite LoadSuiteOrUsageError(const std::string& path) {
  try {
    return LoadSuiteFile(path);
  } catch (const SuiteError& error) {
    throw UsageError(error.what());
  }
}

CheckedFlags CheckRunFlags(const RunFlags& f) {
  CheckedFlags checked;
  CheckModeFlags(f);
  CheckMeasureFlags(f, checked);
  CheckTestFlags(f);
  CheckSelectionFlags(f, checked);
  return checked;
}

// The suite file with the flags' overrides of its [measure] table.
Suite SuiteFor(const RunFlags& f, const CheckedFlags& checked) {
  Suite suite = LoadSuiteOrUsageError(f.suite_path);
  Measurement& measure = suite.measurement;
  if (f.Given("repetitions")) measure.repetitions = f.repetitions;
  if (f.Given("warmup")) measure.warmup = f.warmup;
  if (checked.min_time_s) measure.min_time_s = *checked.min_time_s;
  if (checked.max_noise) measure.max_noise = *checked.max_noise;
  if (checked.max_time_s) measure.max_time_s = *checked.max_time_s;
  if (checked.max_time_s && !(measure.max_noise > 0)) {
    throw UsageError(
        "run: --max-time is the budget of adaptive stopping; give --max-noise (or the suite's "
        "[measure] max_noise) too");
  }
  if (f.Given("test-slowdown")) {
    measure.test_slowdown = f.role.test_slowdown;
    measure.test_slowdown_filter = f.role.test_slowdown_filter;
  }
  if (f.Given("count")) measure.count = checked.count_kinds;
  if (f.Given("count-steps")) {
    if (measure.count.empty())
      throw UsageError("run: --count-steps goes with --count (or [measure] count)");
    measure.count_steps = f.count_steps;
  }
  // A case's count depends on the cases counted before it in the run's one child: a resumed
  // run would count its last cases in another context.
  if (!measure.count.empty() && !f.group.empty())
    throw UsageError(
        "run: a counted run cannot be a group's shard: a requeued shard must resume, and a "
        "case's count depends on the cases counted before it in one child; give --count none, "
        "or count the suite in a run of its own");
  if (!measure.count.empty() && f.resume > 0)
    throw UsageError(
        "run: a counted run cannot be resumed (a case's count depends on the cases counted "
        "before it in one child); start a new run, or resume with --count none");
  return suite;
}

bool IsolatesCases(const RunFlags& f, const CheckedFlags& checked) {
  const bool isolate = !f.Given("in-process") && !f.Given("interleave") && !f.Given("lockstep") &&
                       (f.Given("isolate") || f.Given("case-timeout") ||
                        !LoadedPluginPaths().empty() || std::getenv("CI") != nullptr);
  if (isolate && checked.check == CheckPolicy::kSample) {
    throw UsageError(
        "run: --check sample decides across cases in one process; with --isolate (the default "
        "with --plugin or under CI) use --check full or none, or add --in-process");
  }
  return isolate;
}

}  // namespace seqbench::cli
