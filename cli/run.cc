// `seqbench run SUITE.toml`: runs a suite's cases and stores every result, one
// transaction per finished case, with the run's environment and provenance.
#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "base/process.h"
#include "cli/command.h"
#include "harness/benchmark_run.h"
#include "harness/case_record.h"
#include "harness/child_run.h"
#include "harness/cuda_probe.h"
#include "harness/environment.h"
#include "harness/instruction_count.h"
#include "harness/key_pattern.h"
#include "harness/lockstep.h"
#include "harness/roofline.h"
#include "harness/run_header.h"
#include "harness/runner.h"
#include "harness/suite.h"
#include "reports/escape/terminal.h"
#include "reports/format.h"
#include "results/store.h"
#include "variants/core/test_hooks.h"
#include "variants/core/trace.h"

namespace po = boost::program_options;

namespace seqbench::cli {
namespace {

std::string ProgressLine(const CaseRecord& record) {
  std::string line = record.name() + " " + record.workload().Label() + "  ";
  const auto median = record.MetricValue("runtime_median_s");
  const auto iqr = record.MetricValue("runtime_iqr_s");
  if (median)
    line += FormatDuration(*median) + (iqr ? " (IQR " + FormatDuration(*iqr) + ")" : "") + "  ";
  if (record.status == kStatusOk) return line + "✓";
  if (record.status == kStatusMismatch) return line + "✗ mismatch: " + record.message;
  return line + record.status + ": " + record.message;
}

// The child of --isolate: one case, stored by this process, nothing printed. A failing
// case is a stored status and exit 0; only a crash, exit() or kill leaves it unstored.
int RunIsolatedCase(const Suite& suite, const std::vector<CaseSpec>& cases, const std::string& key,
                    int64_t run_id, const std::string& run_uuid, int64_t position,
                    CheckPolicy check, const std::string& db_path) {
  const auto spec = std::find_if(cases.begin(), cases.end(),
                                 [&](const CaseSpec& candidate) { return candidate.Key() == key; });
  if (spec == cases.end()) throw UsageError("run --run-case: no case '" + key + "' in the suite");
  if (run_id < 1 || position < 0 || run_uuid.empty())
    throw UsageError("run --run-case needs --into-run, --run-uuid and --position");
  // Only into the run that started it: not into a new database where the file was deleted,
  // nor into another database's run of the same id where it was replaced.
  if (!std::filesystem::is_regular_file(db_path))
    throw StoreError(db_path + ": the run's database is gone");
  Store store(db_path);
  const std::optional<RunRecord> run = store.FindRun(run_id);
  if (!run || run->uuid != run_uuid)
    throw StoreError(db_path + ": run " + std::to_string(run_id) +
                     " is not the run that started "
                     "this case (the database was replaced)");
  CaseRunner runner(suite, check);
  store.AddCase(run_id, ToRecord(runner.Run(*spec), position));
  // Stored: nothing that could still go wrong at shutdown (a thread pool that hangs, a
  // destructor that crashes) may cost the case its timeout or its record.
  std::fflush(nullptr);
  std::_Exit(0);
}

// The child of --count, run by valgrind: the cases listed in OUT_DIR/cases counted, each
// one's account and the facts written there, nothing stored or printed.
int RunCountingChild(const Suite& suite, const std::vector<CaseSpec>& cases, int64_t steps,
                     const std::string& out_dir) {
  try {
    CountCasesInThisProcess(suite, CasesToCount(cases, out_dir), steps, out_dir,
                            CountsNatively(suite.measurement.count));
  } catch (const std::exception& error) {
    std::cerr << "seqbench: counting child: " << error.what() << "\n";
    std::fflush(nullptr);
    std::_Exit(3);
  }
  std::fflush(nullptr);
  std::_Exit(0);
}

// "instructions,cycles-estimate": the kinds as --count takes them.
std::string JoinCountKinds(const std::vector<std::string>& kinds) {
  std::string text;
  for (const std::string& kind : kinds) text += (text.empty() ? "" : ",") + kind;
  return text;
}

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

// The run's record of how it counts (run --count), or nothing when it does not.
std::vector<std::pair<std::string, std::string>> CountingEnvironment(const Measurement& measure) {
  if (measure.count.empty()) return {};
  const bool natively = CountsNatively(measure.count);
  std::vector<std::pair<std::string, std::string>> entries = {
      {"count", JoinCountKinds(measure.count) + ": " + std::to_string(measure.count_steps) +
                    " steps a case after " + std::to_string(measure.warmup) +
                    " warmup and 1 uncounted step, 1 thread, " +
                    (natively ? "natively (perf_event_open)" : "callgrind") +
                    " in one child process for the run"},
      {"count_tool",
       natively ? "perf_event_open instructions:u" : ValgrindVersion().value_or("not installed")},
      {"count_pinning", CountPinningText()}};
  if (SimulatesCaches(measure.count)) entries.emplace_back("count_cache", CountCacheText());
  return entries;
}

}  // namespace

namespace {

// Every flag of `seqbench run` as given; `values` says which were.
struct RunFlags {
  std::string suite_path, db_path, device, filter, shard_text, check_text;
  int64_t repetitions = 0, resume = 0, stop_after = 0, threads = 0;
  double case_timeout_s = 0;
  std::string label, min_time_text, max_noise_text, max_time_text;
  std::string group;  // --group: the run group this shard belongs to
  int64_t warmup = 0, count_steps = 0;
  std::string count_kind;
  std::string lockstep;  // run --lockstep PREFIX: a worker of seqbench ab
  // The hidden flags: this process's role when seqbench started it (the --isolate or
  // --count child), and the test hooks. Test-only (run --test-slowdown): each timed step
  // of the cases whose key matches `test_slowdown_filter` does test_slowdown times its
  // work, by running whole extra steps (never a sleep), so that the gate's power can be
  // measured against a known factor. 0: off.
  ChildRun role;
  po::variables_map values;
  bool Given(const char* flag) const { return values.count(flag) > 0; }
};

// What the flags mean once checked.
struct CheckedFlags {
  std::optional<double> min_time_s, max_noise, max_time_s;
  std::vector<std::string> count_kinds;
  CheckPolicy check = CheckPolicy::kFull;
  CaseSelection selection;
};

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

}  // namespace

void CheckThreadsFlag(const std::string& command, int64_t threads) {
  const WorkloadField& field = *FindWorkloadField("threads");
  if (threads < field.min || threads > field.max) {
    throw UsageError(command + ": --threads must be between " + std::to_string(field.min) +
                     " and " + std::to_string(field.max) + ", got " + std::to_string(threads));
  }
}

namespace {
volatile std::sig_atomic_t stop_requested = 0;
void RequestStop(int) { stop_requested = 1; }
}  // namespace

void InstallStopHandlers() {
  std::signal(SIGINT, RequestStop);
  std::signal(SIGTERM, RequestStop);
}

bool StopRequested() { return stop_requested != 0; }

Suite LoadSuiteOrUsageError(const std::string& path) {
  try {
    return LoadSuiteFile(path);
  } catch (const SuiteError& error) {
    throw UsageError(error.what());
  }
}

void CheckFilterFlag(const std::string& command, const std::string& filter) {
  try {
    KeyPattern{filter};
  } catch (const std::invalid_argument& error) {
    throw UsageError(command + ": --filter " + error.what());
  }
}

namespace {

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

// The roofline's peaks at the conditions of this run's cases: from the newest of the
// database's last 20 runs measured on the same machine fingerprint, else measured now
// (about a second; --measure-limits: always).
std::vector<std::pair<std::string, std::string>> MachineLimitsFor(
    const RunFlags& f, const std::vector<CaseSpec>& cases) {
  std::vector<RunRecord> earlier;
  if (!f.Given("measure-limits") && std::filesystem::exists(f.db_path)) {
    const Store store(f.db_path, StoreAccess::kReadOnly);
    const std::vector<RunRecord> listed = store.Runs();
    for (auto run = listed.rbegin(); run != listed.rend() && earlier.size() < 20; ++run)
      earlier.push_back(*store.FindRun(run->run_id));
  }
  const auto entries = LimitsFor(cases, CaptureEnvironment(), earlier, f.Given("measure-limits"));
  std::printf("this machine's GEMM rate and memory bandwidth: %s\n",
              escape::TerminalText(entries.back().second).c_str());
  std::fflush(stdout);
  return entries;
}

// The run's settings as stored with it: the measurement, the test-only inflation, counting,
// the timer and tracing, the machine's peaks (a new run's only), the isolation.
std::vector<std::pair<std::string, std::string>> RunEnvironmentEntries(
    const RunFlags& f, const Suite& suite, const std::vector<CaseSpec>& cases, bool isolate,
    double case_timeout_s) {
  std::vector<std::pair<std::string, std::string>> entries;
  entries.emplace_back("case_filter", f.filter.empty() ? "none" : f.filter);
  entries.emplace_back("repetition_order",
                       f.Given("interleave")
                           ? "interleaved (seed " + std::to_string(suite.seed) + ")"
                           : "case after case");
  if (f.Given("test-slowdown")) {
    entries.emplace_back("test_slowdown", FormatSignificant(f.role.test_slowdown, 4) +
                                              "x on cases matching " + f.role.test_slowdown_filter);
  }
  if (f.role.test_extra_head_passes > 0) {
    entries.emplace_back("test_extra_work",
                         std::to_string(f.role.test_extra_head_passes) + " extra head passes");
  }
  for (auto& entry : CountingEnvironment(suite.measurement)) entries.push_back(entry);
  entries.emplace_back(
      "timer", cuda_probe::Compiled()
                   ? "CUDA events around the step on CUDA; steady_clock around the step on CPU"
                   : "steady_clock around the step (device synchronised)");
  for (const auto& entry : cuda_probe::Environment()) entries.push_back(entry);
  entries.emplace_back("nvtx", !TracingCompiledIn() ? "not compiled in"
                               : TracingEnabled()   ? "on"
                                                    : "off");
  // A resumed run keeps the limits it started with.
  if (f.resume == 0) {
    for (auto& entry : MachineLimitsFor(f, cases)) entries.push_back(entry);
  }
  entries.emplace_back(
      "isolation",
      !isolate ? "none: every case in one process"
      : case_timeout_s > 0
          ? "a child process per case, killed after " + FormatSignificant(case_timeout_s, 6) + " s"
          : "a child process per case, killed after max(600 s, 20 x the longest case)");
  return entries;
}

// The run's record before it starts: what it measures, how, and the test-only warnings.
RunRecord DescribeRun(const RunFlags& f, const Suite& suite, const std::vector<CaseSpec>& cases,
                      const CheckedFlags& checked, bool isolate, double case_timeout_s) {
  RunDescription description;
  description.kind = kRunKindBenchmark;
  description.suite_name = suite.name;
  description.suite_path = f.suite_path;
  description.suite_text = suite.text;
  description.command_line = CommandLine();
  const ShardSpec& shard = checked.selection.shard;  // a group's shard 1/1 is still one
  description.shard = f.group.empty()
                          ? shard.Text()
                          : std::to_string(shard.index) + "/" + std::to_string(shard.count);
  description.seed = suite.seed;
  description.baseline = suite.baseline;
  description.settings = suite.measurement;
  description.settings.check_policy = CheckPolicyName(checked.check);
  description.label = f.label;
  description.expectations = suite.expectations;
  description.extra_environment = RunEnvironmentEntries(f, suite, cases, isolate, case_timeout_s);
  RunRecord requested = NewRunRecord(description);
  requested.group = f.group;
  if (f.role.test_extra_head_passes > 0) {
    requested.warnings.push_back(
        "test-only --test-extra-head-passes: every variant's head computes its logits " +
        std::to_string(f.role.test_extra_head_passes) +
        " extra times on purpose; not a measurement of the code");
  }
  if (f.role.test_slowdown > 1) {
    requested.warnings.push_back("test-only --test-slowdown: the step times of cases matching " +
                                 f.role.test_slowdown_filter + " are inflated " +
                                 FormatSignificant(f.role.test_slowdown, 4) +
                                 "x on purpose (whole extra steps); not a measurement of the code");
  }
  // From the cases, not from what the process happens to be set to when the record is made
  // (after the roofline's measurements in a new run, LibTorch's default in a resumed one).
  // The whole suite's, so that resuming with another --filter does not change it.
  requested.threads = 0;
  for (const CaseSpec& spec : suite.Expand()) {
    requested.threads =
        std::max(requested.threads, checked.selection.threads.value_or(spec.workload.threads));
  }
  return requested;
}

// Refuses, on a read-only opening, a resume of run `run_id` measured otherwise (or, for a
// group's complete shard, a command that asks for another measurement than it holds): a
// refused resume creates, migrates or changes nothing.
void RefuseConflictingResume(const RunFlags& f, int64_t run_id, const RunRecord& requested) {
  const auto stored = OpenExistingStore(f.db_path, "run --resume");
  const auto run = stored->FindRun(run_id);
  if (!run)
    throw UsageError("run: --resume " + std::to_string(run_id) + ": no such run in " + f.db_path +
                     " (seqbench show --db " + f.db_path + " lists them)");
  const std::vector<std::string> conflicts = ResumeConflicts(*run, requested);
  if (conflicts.empty()) return;
  std::string message = run->status == "complete"
                            ? "run: shard " + run->shard + " of group " + run->group +
                                  " is complete in " + f.db_path + " (run " +
                                  std::to_string(run_id) +
                                  "), measured otherwise; give a new --group (or --db):"
                            : "run: --resume " + std::to_string(run_id) +
                                  " would mix measurements taken differently:";
  for (const auto& conflict : conflicts) message += "\n  " + conflict;
  throw UsageError(message);
}

// A shard of group --group whose --db already holds its run continues that run (Slurm
// requeues a task whose node died): --resume is set to it. Returns the id of that run when
// it is complete, which leaves nothing to do once it is known to be measured as asked.
std::optional<int64_t> FindOwnShard(RunFlags& f) {
  const auto shard = ParseShard(f.shard_text);
  std::error_code error;
  // A new database, or an empty file (sqlite3 makes one by looking): nothing to resume.
  if (f.group.empty() || f.Given("resume") || !shard ||
      std::filesystem::file_size(f.db_path, error) == 0 || error)
    return std::nullopt;
  const std::string text = std::to_string(shard->index) + "/" + std::to_string(shard->count);
  const auto store = OpenExistingStore(f.db_path, "run --group");
  for (const RunRecord& run : GroupShards(*store, f.group)) {
    if (run.shard != text) continue;
    if (run.status == "complete") return run.run_id;
    f.resume = run.run_id;  // the newest unfinished one, should there be several
  }
  return std::nullopt;
}

// The run the cases go into: a new one, or the resumed one with its finished cases.
struct OpenedRun {
  int64_t id = 0;
  std::string uuid;  // the children store into this run only
  std::set<std::string> finished;
};
OpenedRun OpenRun(const RunFlags& f, Store& store, const RunRecord& requested) {
  OpenedRun run;
  run.uuid = requested.uuid;
  if (f.resume == 0) {
    run.id = store.CreateRun(requested);
    for (const auto& warning : requested.warnings)
      std::cerr << "seqbench: warning: " << escape::TerminalText(warning, false) << "\n";
    return run;
  }
  run.id = f.resume;
  run.uuid = store.FindRun(run.id)->uuid;
  if (f.Given("retry-failed")) {
    const int64_t removed = store.RemoveCases(run.id, {kStatusError, kStatusTimeout});
    std::printf("run %lld: %lld failed case(s) to run again\n", (long long)run.id,
                (long long)removed);
  }
  run.finished = store.CaseKeys(run.id);
  store.SetRunStatus(run.id, "running", "");
  return run;
}

// A child seqbench that selects and measures the cases of `suite_file` as this process does.
ChildRun ChildOf(const RunFlags& f, const std::string& suite_file) {
  ChildRun child;
  child.binary = SelfExecutable();
  for (const std::string& plugin : LoadedPluginPaths())  // the counting child runs elsewhere
    child.plugins.push_back(std::filesystem::absolute(plugin).string());
  child.suite_path = suite_file;
  if (f.Given("device")) child.device = f.device;
  if (f.Given("threads")) child.threads = f.threads;
  if (f.Given("repetitions")) child.repetitions = f.repetitions;
  if (f.Given("warmup")) child.warmup = f.warmup;
  if (f.Given("min-time")) child.min_time = f.min_time_text;
  if (f.Given("max-noise")) child.max_noise = f.max_noise_text;
  if (f.Given("max-time")) child.max_time = f.max_time_text;
  child.test_slowdown = f.role.test_slowdown;
  child.test_slowdown_filter = f.role.test_slowdown_filter;
  child.test_extra_head_passes = f.role.test_extra_head_passes;
  return child;
}

// --isolate: each case in a child that stores it into this run.
Isolation IsolationFor(const RunFlags& f, const OpenedRun& run, double case_timeout_s) {
  Isolation isolation;
  isolation.case_timeout_s = case_timeout_s;
  isolation.command = [&f, id = run.id, uuid = run.uuid](const CaseSpec& spec,
                                                         int64_t case_position) {
    ChildRun child = ChildOf(f, f.suite_path);
    child.db_path = f.db_path;
    child.check = f.check_text;
    child.run_case = spec.Key();
    child.into_run = id;
    child.run_uuid = uuid;
    child.position = case_position;
    child.nvtx = TracingEnabled();
    return child.ToArgv();
  };
  return isolation;
}

// --count: the counting child's command, in its own folder with a copy of the suite.
Counting CountingFor(const RunFlags& f, const Measurement& measure) {
  Counting counting;
  counting.steps = measure.count_steps;
  counting.kinds = measure.count;
  counting.command = [&f, kinds = JoinCountKinds(measure.count), steps = measure.count_steps](
                         const std::vector<CaseSpec>&, const std::string& out_dir) {
    // A copy in the child's folder: the suite's own path would move its counts.
    const std::string suite_copy = out_dir + "/suite.toml";
    std::filesystem::copy_file(f.suite_path, suite_copy);
    ChildRun child = ChildOf(f, suite_copy);
    child.count_out = out_dir;
    child.count = kinds;
    child.count_steps = steps;
    return child.ToArgv();
  };
  return counting;
}

// One line per finished case (or interleaved batch, or the counting's start).
void PrintProgress(const CaseProgress& progress) {
  if (progress.counting > 0 && progress.counted > 0) {
    std::printf("counted %lld of %lld case(s)  ETA %s\n", (long long)progress.counted,
                (long long)progress.counting, FormatEta(progress.eta_s).c_str());
  } else if (progress.counting > 0) {
    std::printf("counting the instructions of %lld case(s), in one child...\n",
                (long long)progress.counting);
  } else if (progress.record == nullptr) {
    std::printf("interleaved: %lld of %lld samples timed  ETA %s\n",
                (long long)progress.samples_done, (long long)progress.samples_total,
                FormatEta(progress.eta_s).c_str());
  } else {
    std::printf("[%lld/%lld] %s  ETA %s\n", (long long)progress.done, (long long)progress.total,
                escape::TerminalText(ProgressLine(*progress.record), false).c_str(),
                FormatEta(progress.eta_s).c_str());
  }
  std::fflush(stdout);
}

// Runs whose cases took longer measure the machine's limits again after the last case
// (a second or so): a short run's start and end are close together, and CI's many short
// runs would pay it for nothing.
constexpr std::chrono::seconds kLimitsAgainAfter{60};

// Keeps the higher of the limits measured now and at the run's start (KeepHigherLimits).
void MeasureLimitsAgain(Store& store, int64_t run_id, const std::vector<CaseSpec>& cases) {
  std::printf("measuring this machine's GEMM rate and memory bandwidth again...\n");
  std::fflush(stdout);
  const auto stored = store.FindRun(run_id);
  if (!stored) return;
  const auto raised = KeepHigherLimits(*stored, MeasureLimitsFor(cases));
  if (!raised.empty()) store.AddRunEnvironment(run_id, raised, {});
  std::printf("  %s\n", raised.empty() ? "the start's were as high: kept"
                                       : escape::TerminalText(raised.back().second).c_str());
}

// Marks the run complete or interrupted, says how its cases ended, and gives the exit
// status: 1 when interrupted or when any case mismatched, failed or timed out.
int FinishRun(Store& store, int64_t run_id, const RunSummary& summary) {
  const bool interrupted = summary.interrupted;
  const auto count = [&](const char* status) {
    const auto found = summary.status_counts.find(status);
    return found == summary.status_counts.end() ? int64_t{0} : found->second;
  };
  RecordRunEnd(store, run_id);
  store.SetRunStatus(run_id, interrupted ? "interrupted" : "complete", interrupted ? "" : UtcNow());
  std::printf("run %lld %s: %lld ok, %lld mismatch, %lld error, %lld timeout, %lld skipped\n",
              (long long)run_id, interrupted ? "interrupted (finish it with --resume)" : "complete",
              (long long)count(kStatusOk), (long long)count(kStatusMismatch),
              (long long)count(kStatusError), (long long)count(kStatusTimeout),
              (long long)count(kStatusSkipped));
  if (interrupted) return 1;
  return count(kStatusMismatch) + count(kStatusError) + count(kStatusTimeout) > 0 ? 1 : 0;
}

// The pending cases run as the flags say: as seqbench ab's lockstep worker, interleaved,
// or case after case (isolated or not).
RunSummary RunPending(const RunFlags& f, const Suite& suite, const std::vector<CaseSpec>& cases,
                      CheckPolicy check, Store& store, const OpenedRun& run,
                      const std::function<bool(int64_t)>& should_stop,
                      const std::optional<Isolation>& isolation,
                      const std::optional<Counting>& counting) {
  if (f.Given("lockstep")) {
    LineChannel channel = LineChannel::Worker(f.lockstep);
    return RunLockstep(suite, cases, check, store, run.id, channel, PrintProgress);
  }
  if (f.Given("interleave")) {
    std::printf("interleaving the repetitions of the pending cases (seed %llu)...\n",
                (unsigned long long)suite.seed);
    std::fflush(stdout);
    return RunInterleaved(suite, cases, run.finished, check, store, run.id, suite.seed, should_stop,
                          PrintProgress, counting);
  }
  return RunCases(suite, cases, run.finished, check, store, run.id, should_stop, PrintProgress,
                  isolation, counting);
}

}  // namespace

namespace {

// Whether each case runs in a child of its own; refuses --check sample there.
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

}  // namespace

void CheckRunCommand(const std::vector<std::string>& args) {
  RunFlags f;
  if (!ParseRunFlags(args, f)) throw UsageError("run: --help asks for the help, not a run");
  CheckedFlags checked;
  CheckModeFlags(f);
  CheckMeasureFlags(f, checked);
  CheckTestFlags(f);
  CheckSelectionFlags(f, checked);
  const Suite suite = SuiteFor(f, checked);
  if (SelectCases(suite, checked.selection).empty())
    throw UsageError("run: no case of " + f.suite_path + " matches --filter/--shard");
  IsolatesCases(f, checked);
}

int RunRun(const std::vector<std::string>& args) {
  RunFlags f;
  if (!ParseRunFlags(args, f)) return 0;
  CheckedFlags checked;
  CheckModeFlags(f);
  const std::optional<int64_t> complete_shard = FindOwnShard(f);
  CheckMeasureFlags(f, checked);
  CheckTestFlags(f);
  CheckSelectionFlags(f, checked);
  // Everything the user gave is checked before the database is touched.
  const Suite suite = SuiteFor(f, checked);
  if (f.role.test_extra_head_passes > 0) SetTestExtraHeadPasses(f.role.test_extra_head_passes);
  const std::vector<CaseSpec> cases = SelectCases(suite, checked.selection);  // filter checked
  if (cases.empty())
    throw UsageError("run: no case of " + f.suite_path + " matches --filter/--shard");
  if (f.Given("count-out"))
    return RunCountingChild(suite, cases, suite.measurement.count_steps, f.role.count_out);
  if (f.Given("run-case"))
    return RunIsolatedCase(suite, cases, f.role.run_case, f.role.into_run, f.role.run_uuid,
                           f.role.position, checked.check, f.db_path);

  const bool isolate = IsolatesCases(f, checked);
  const double case_timeout_s =
      f.Given("case-timeout") ? f.case_timeout_s : suite.measurement.case_timeout_s;
  const RunRecord requested = DescribeRun(f, suite, cases, checked, isolate, case_timeout_s);
  if (complete_shard) {
    RefuseConflictingResume(f, *complete_shard, requested);
    std::printf("run %lld: shard %s of group %s is complete in %s; nothing to do\n",
                (long long)*complete_shard, requested.shard.c_str(),
                escape::TerminalText(f.group, false).c_str(),
                escape::TerminalText(f.db_path).c_str());
    return 0;
  }
  if (f.resume > 0) RefuseConflictingResume(f, f.resume, requested);
  if (f.resume > 0 && !f.Given("resume"))  // FindOwnShard's: after the check, which may refuse
    std::printf("run %lld: resuming shard %s of group %s\n", (long long)f.resume,
                requested.shard.c_str(), escape::TerminalText(f.group, false).c_str());
  Store store(f.db_path);
  const OpenedRun run = OpenRun(f, store, requested);
  std::optional<Isolation> isolation;
  if (isolate) isolation = IsolationFor(f, run, case_timeout_s);
  std::optional<Counting> counting;
  if (!suite.measurement.count.empty()) counting = CountingFor(f, suite.measurement);

  InstallStopHandlers();
  std::printf("run %lld: suite %s, %zu cases%s -> %s\n", (long long)run.id,
              escape::TerminalText(suite.name, false).c_str(), cases.size(),
              run.finished.empty()
                  ? ""
                  : (" (" + std::to_string(run.finished.size()) + " already done)").c_str(),
              escape::TerminalText(f.db_path, false).c_str());
  std::fflush(stdout);
  const auto should_stop = [&](int64_t cases_run) {
    return StopRequested() || (f.stop_after > 0 && cases_run >= f.stop_after);
  };
  const auto began = std::chrono::steady_clock::now();
  const RunSummary summary =
      RunPending(f, suite, cases, checked.check, store, run, should_stop, isolation, counting);
  if (!summary.interrupted && !f.Given("lockstep") &&
      std::chrono::steady_clock::now() - began > kLimitsAgainAfter) {
    MeasureLimitsAgain(store, run.id, cases);
  }
  return FinishRun(store, run.id, summary);
}

}  // namespace seqbench::cli
