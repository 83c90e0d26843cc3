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

#include "cli/command.h"
#include "harness/benchmark_run.h"
#include "harness/case_record.h"
#include "harness/child_process.h"
#include "harness/cuda_probe.h"
#include "harness/instruction_count.h"
#include "harness/key_pattern.h"
#include "harness/roofline.h"
#include "harness/run_header.h"
#include "harness/runner.h"
#include "harness/suite.h"
#include "reports/format.h"
#include "results/store.h"
#include "variants/core/test_hooks.h"
#include "variants/core/trace.h"

namespace po = boost::program_options;

namespace seqbench::cli {
namespace {

volatile std::sig_atomic_t stop_requested = 0;
void RequestStop(int) { stop_requested = 1; }

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

int RunRun(const std::vector<std::string>& args) {
  std::string suite_path, db_path, device, filter, shard_text, check_text;
  int64_t repetitions = 0, resume = 0, stop_after = 0, threads = 0, into_run = 0, position = -1;
  double case_timeout_s = 0;
  std::string run_case, run_uuid, label, min_time_text, max_noise_text, max_time_text;
  int64_t warmup = 0, count_steps = 0, test_extra_head_passes = 0;
  std::string count_kind, count_out;
  double test_slowdown = 0;
  std::string test_slowdown_filter = ".*";
  po::options_description options(
      "Usage: seqbench run SUITE.toml [OPTIONS]\n\n"
      "Runs every case of a suite: checks it against the suite's baseline, times it with\n"
      "Google Benchmark, measures its peak memory, and stores all of it with the run's\n"
      "environment. Exits 0 when every case is ok or skipped, 1 when any mismatched or\n"
      "failed (all are stored either way), 2 on bad input.\n\nOptions");
  options.add_options()("help,h", "show this help")(
      "db", po::value(&db_path)->default_value(kDefaultDatabasePath), "results database")(
      "device", po::value(&device), "run every case on this device (cpu or cuda)")(
      "threads", po::value(&threads),
      "run every case with N LibTorch and OpenBLAS threads (default: the suite's `threads`, "
      "else this machine's physical cores)")("filter", po::value(&filter),
                                             "only cases whose key matches this regex")(
      "repetitions", po::value(&repetitions),
      "timed samples per case (the suite's [measure] repetitions; with --max-noise, the "
      "first batch and each further one)")("warmup", po::value(&warmup),
                                           "untimed steps before them ([measure] warmup)")(
      "min-time", po::value(&min_time_text),
      "each sample repeats the step until this long, e.g. 10ms ([measure] min_time_ms)")(
      "max-noise", po::value(&max_noise_text),
      "adaptive stopping: repeat until the median's 95% interval is within this, e.g. 2% "
      "([measure] max_noise)")(
      "max-time", po::value(&max_time_text),
      "with --max-noise: timing budget per case, e.g. 30s ([measure] max_time_s; default 30s)")(
      "interleave",
      "take the cases' repetitions in a random interleaved order (seeded by the suite's "
      "seed), so that slow drifts of the machine reach every case alike; one process, all "
      "pending cases in memory at once")(
      "label", po::value(&label),
      "a free label stored with the run, for selecting it later (--label on show, report, "
      "check, plot, compare)")("resume", po::value(&resume),
                               "complete run RUN_ID: skip its finished cases")(
      "shard", po::value(&shard_text), "run shard i of n (i/n, 1-based): a deterministic subset")(
      "nvtx", "emit NVTX ranges per case and step phase (for Nsight Systems)")(
      "check", po::value(&check_text)->default_value("full"),
      "full: check every case against the baseline; sample: one case per variant, mode, "
      "device and shape; none: timing only (recorded with the run)")(
      "isolate",
      "run each case in a child process: a crash, abort, exit() or hang is that case's "
      "error or timeout, and the run goes on (the default with --plugin or when CI is set)")(
      "in-process", "run every case in this process, even where --isolate is the default")(
      "case-timeout", po::value(&case_timeout_s),
      "seconds before an isolated case is killed and stored as timeout (implies --isolate; "
      "default: the suite's [measure] case_timeout_s, else max(600, 20 x the longest case "
      "so far))")("retry-failed", "with --resume: run the cases stored as error or timeout again")(
      "count", po::value(&count_kind),
      "after timing each CPU case, count the instructions of a few of its steps under "
      "valgrind's callgrind, in a child at 1 thread with ATen, OpenBLAS and glibc pinned to "
      "AVX2 (machine-independent, for compare --gate counts): instructions ([measure] count); "
      "cycles-estimate (instructions and a cycle estimate from a simulated cache); "
      "hw-instructions (the CPU's own counter, natively, where the kernel offers it); "
      "comma-separated; or none to skip the suite's counting")(
      "count-steps", po::value(&count_steps),
      "with --count: steps counted a case, after its warmup ([measure] count_steps; default 3)");
  po::options_description hidden;
  hidden.add_options()("suite", po::value(&suite_path))(
      "stop-after", po::value(&stop_after), "stop after K cases, as if interrupted (tests)")(
      // The child of --isolate: run the case with this key, store it into run --into-run
      // at --position, print nothing, exit 0 (a failing case is a stored status).
      "run-case", po::value(&run_case))("into-run", po::value(&into_run))(
      "run-uuid", po::value(&run_uuid))("position", po::value(&position))(
      // Test-only: inflate the matching cases' step times by a known factor with whole
      // extra steps, to measure what the gate catches (reports/README.md). Recorded with
      // the run, and a warning wherever it is shown.
      "test-slowdown", po::value(&test_slowdown))("test-slowdown-filter",
                                                  po::value(&test_slowdown_filter))(
      // Test-only: the head every variant shares computes its logits N extra times.
      "test-extra-head-passes", po::value(&test_extra_head_passes))(
      // The child of --count, under valgrind: count the cases OUT_DIR/cases lists.
      "count-out", po::value(&count_out));
  po::positional_options_description positional;
  positional.add("suite", 1);
  const auto values = ParseArguments(args, options, hidden, positional, "run");
  if (!values) return 0;
  if (suite_path.empty()) throw UsageError("run: no suite file given (see seqbench run --help)");
  if (values->count("case-timeout") &&
      (!(case_timeout_s > 0) || !OutOfBound(kCaseTimeoutBound, case_timeout_s).empty())) {
    throw UsageError("run: --case-timeout must be a number of seconds above 0 and at most " +
                     FormatBound(kCaseTimeoutBound.max));
  }
  if (values->count("in-process") && (values->count("isolate") || values->count("case-timeout"))) {
    throw UsageError(
        "run: --in-process contradicts --isolate and --case-timeout (which isolates); keep one");
  }
  if (values->count("retry-failed") && !values->count("resume")) {
    throw UsageError("run: --retry-failed goes with --resume RUN_ID");
  }
  if (values->count("nvtx")) {
    if (!TracingCompiledIn()) {
      throw UsageError(
          "run: --nvtx: this seqbench was built without NVTX3 (no nvtx3/nvToolsExt.h found "
          "at configure time; install the CUDA Toolkit and reconfigure)");
    }
    SetTracing(true);
  }
  if (values->count("device") && device != "cpu" && device != "cuda") {
    throw UsageError("run: --device must be cpu or cuda, got '" + device + "'");
  }
  // The [measure] flags take their suite keys' bounds (harness/suite.h).
  const auto bounded = [&](const char* flag, const MeasureBound& bound, double value,
                           const char* unit) {
    if (!values->count(flag)) return;
    if (const std::string problem = OutOfBound(bound, value, unit); !problem.empty())
      throw UsageError("run: " + problem);
  };
  bounded("repetitions", kRepetitionsBound, static_cast<double>(repetitions), "");
  bounded("warmup", kWarmupBound, static_cast<double>(warmup), "");
  if (values->count("test-slowdown-filter") && !values->count("test-slowdown"))
    throw UsageError("run: --test-slowdown-filter goes with --test-slowdown");
  std::optional<double> min_time_s, max_noise, max_time_s;
  if (values->count("min-time")) {
    min_time_s = ParseDuration(min_time_text, "run: --min-time");
    bounded("min-time", kMinTimeBound, *min_time_s * 1e3, " ms");
  }
  if (values->count("max-time")) {
    max_time_s = ParseDuration(max_time_text, "run: --max-time");
    if (!(*max_time_s > 0)) throw UsageError("run: --max-time must be above 0, e.g. 30s");
    bounded("max-time", kMaxTimeBound, *max_time_s, " s");
  }
  if (values->count("max-noise")) {
    max_noise = ParseFraction(max_noise_text);
    if (!max_noise || !(*max_noise > 0 && *max_noise < 1))
      throw UsageError(
          "run: --max-noise must be a percentage like 2% or a fraction like 0.02, got '" +
          max_noise_text + "'");
  }
  if (values->count("interleave")) {
    if (values->count("isolate") || values->count("case-timeout"))
      throw UsageError(
          "run: --interleave takes every case's samples in one process; it contradicts "
          "--isolate and --case-timeout");
    if (values->count("max-noise"))
      throw UsageError(
          "run: --interleave takes a fixed number of repetitions; drop --max-noise or "
          "--interleave");
  }
  std::vector<std::string> count_kinds;
  if (values->count("count") && count_kind != "none") count_kinds = ParseCountKinds(count_kind);
  bounded("count-steps", kCountStepsBound, static_cast<double>(count_steps), "");
  if (values->count("test-extra-head-passes") &&
      !(test_extra_head_passes >= 1 && test_extra_head_passes <= 100))
    throw UsageError("run: --test-extra-head-passes must be between 1 and 100");
  if (values->count("test-slowdown") && !(test_slowdown >= 1 && test_slowdown <= 10))
    throw UsageError("run: --test-slowdown must be a factor between 1 and 10, e.g. 1.3");
  if (values->count("test-slowdown-filter")) {
    try {
      KeyPattern{test_slowdown_filter};
    } catch (const std::invalid_argument& error) {
      throw UsageError("run: --test-slowdown-filter " + std::string(error.what()));
    }
  }
  if (label.find_first_of("\n\r") != std::string::npos)
    throw UsageError("run: --label must be one line");
  if (values->count("resume") && resume < 1) {
    throw UsageError("run: --resume takes the id of a stored run (1 or more), got " +
                     std::to_string(resume) + " (seqbench show --db " + db_path + " lists them)");
  }
  const std::optional<CheckPolicy> check = ParseCheckPolicy(check_text);
  if (!check) {
    throw UsageError("run: --check must be full, sample or none, got '" + check_text + "'");
  }
  CaseSelection selection;
  selection.filter = filter;
  if (values->count("device")) selection.device = device;
  if (values->count("threads")) {
    const WorkloadField& field = *FindWorkloadField("threads");
    if (threads < field.min || threads > field.max) {
      throw UsageError("run: --threads must be between " + std::to_string(field.min) + " and " +
                       std::to_string(field.max) + ", got " + std::to_string(threads));
    }
    selection.threads = threads;
  }
  if (!shard_text.empty()) {
    const auto shard = ParseShard(shard_text);
    if (!shard) {
      throw UsageError("run: --shard must be i/n with 1 <= i <= n, e.g. 2/4; got '" + shard_text +
                       "'");
    }
    selection.shard = *shard;
  }

  // Everything the user gave is checked before the database is touched.
  Suite suite;
  try {
    suite = LoadSuiteFile(suite_path);
  } catch (const SuiteError& error) {
    throw UsageError(error.what());
  }
  if (values->count("repetitions")) suite.measurement.repetitions = repetitions;
  if (values->count("warmup")) suite.measurement.warmup = warmup;
  if (min_time_s) suite.measurement.min_time_s = *min_time_s;
  if (max_noise) suite.measurement.max_noise = *max_noise;
  if (max_time_s) suite.measurement.max_time_s = *max_time_s;
  if (max_time_s && !(suite.measurement.max_noise > 0)) {
    throw UsageError(
        "run: --max-time is the budget of adaptive stopping; give --max-noise (or the suite's "
        "[measure] max_noise) too");
  }
  if (values->count("test-slowdown")) {
    suite.measurement.test_slowdown = test_slowdown;
    suite.measurement.test_slowdown_filter = test_slowdown_filter;
  }
  if (values->count("count")) {
    suite.measurement.count.clear();
    suite.measurement.count = count_kinds;
  }
  if (values->count("count-steps")) {
    if (suite.measurement.count.empty())
      throw UsageError("run: --count-steps goes with --count (or [measure] count)");
    suite.measurement.count_steps = count_steps;
  }
  // A case's count depends on the cases counted before it in the run's one child: a resumed
  // run would count its last cases in another context.
  if (!suite.measurement.count.empty() && resume > 0)
    throw UsageError(
        "run: a counted run cannot be resumed (a case's count depends on the cases counted "
        "before it in one child); start a new run, or resume with --count none");
  if (test_extra_head_passes > 0) SetTestExtraHeadPasses(test_extra_head_passes);
  std::vector<CaseSpec> cases;
  try {
    cases = SelectCases(suite, selection);
  } catch (const std::invalid_argument& error) {
    throw UsageError(std::string("run: --filter ") + error.what());
  }
  if (cases.empty())
    throw UsageError("run: no case of " + suite_path + " matches --filter/--shard");
  if (values->count("count-out"))
    return RunCountingChild(suite, cases, suite.measurement.count_steps, count_out);
  if (values->count("run-case"))
    return RunIsolatedCase(suite, cases, run_case, into_run, run_uuid, position, *check, db_path);

  const bool isolate = !values->count("in-process") && !values->count("interleave") &&
                       (values->count("isolate") || values->count("case-timeout") ||
                        !LoadedPluginPaths().empty() || std::getenv("CI") != nullptr);
  if (isolate && *check == CheckPolicy::kSample) {
    throw UsageError(
        "run: --check sample decides across cases in one process; with --isolate (the default "
        "with --plugin or under CI) use --check full or none, or add --in-process");
  }
  if (!values->count("case-timeout")) case_timeout_s = suite.measurement.case_timeout_s;

  RunDescription description;
  description.kind = kRunKindBenchmark;
  description.suite_name = suite.name;
  description.suite_path = suite_path;
  description.suite_text = suite.text;
  description.command_line = CommandLine();
  description.shard = selection.shard.Text();
  description.seed = suite.seed;
  description.baseline = suite.baseline;
  description.repetitions = suite.measurement.repetitions;
  description.warmup = suite.measurement.warmup;
  description.min_time_s = suite.measurement.min_time_s;
  description.max_noise = suite.measurement.max_noise;
  description.max_time_s = suite.measurement.max_noise > 0 ? suite.measurement.max_time_s : 0;
  description.check_policy = CheckPolicyName(*check);
  description.label = label;
  description.extra_environment.emplace_back("case_filter", filter.empty() ? "none" : filter);
  description.extra_environment.emplace_back(
      "repetition_order", values->count("interleave")
                              ? "interleaved (seed " + std::to_string(suite.seed) + ")"
                              : "case after case");
  if (values->count("test-slowdown")) {
    const std::string slowdown =
        FormatSignificant(test_slowdown, 4) + "x on cases matching " + test_slowdown_filter;
    description.extra_environment.emplace_back("test_slowdown", slowdown);
  }
  if (test_extra_head_passes > 0) {
    description.extra_environment.emplace_back(
        "test_extra_work", std::to_string(test_extra_head_passes) + " extra head passes");
  }
  for (auto& entry : CountingEnvironment(suite.measurement))
    description.extra_environment.push_back(entry);
  description.expectations = suite.expectations;
  description.extra_environment.emplace_back(
      "timer", cuda_probe::Compiled()
                   ? "CUDA events around the step on CUDA; steady_clock around the step on CPU"
                   : "steady_clock around the step (device synchronised)");
  for (const auto& entry : cuda_probe::Environment()) {
    description.extra_environment.push_back(entry);
  }
  description.extra_environment.emplace_back("nvtx", !TracingCompiledIn() ? "not compiled in"
                                                     : TracingEnabled()   ? "on"
                                                                          : "off");
  if (resume == 0) {
    // The roofline's peaks, at the conditions of this run's cases; a resumed run keeps
    // the ones it started with.
    std::printf("measuring this machine's GEMM rate and memory bandwidth...\n");
    std::fflush(stdout);
    for (auto& entry : MeasureLimitsFor(cases)) description.extra_environment.push_back(entry);
  }
  description.extra_environment.emplace_back(
      "isolation",
      !isolate ? "none: every case in one process"
      : case_timeout_s > 0
          ? "a child process per case, killed after " + FormatSignificant(case_timeout_s, 6) + " s"
          : "a child process per case, killed after max(600 s, 20 x the longest case)");
  RunRecord requested = NewRunRecord(description);
  if (test_extra_head_passes > 0) {
    requested.warnings.push_back(
        "test-only --test-extra-head-passes: every variant's head computes its logits " +
        std::to_string(test_extra_head_passes) +
        " extra times on purpose; not a measurement of the code");
  }
  if (test_slowdown > 1) {
    requested.warnings.push_back("test-only --test-slowdown: the step times of cases matching " +
                                 test_slowdown_filter + " are inflated " +
                                 FormatSignificant(test_slowdown, 4) +
                                 "x on purpose (whole extra steps); not a measurement of the code");
  }
  // From the cases, not from what the process happens to be set to when the record is made
  // (after the roofline's measurements in a new run, LibTorch's default in a resumed one).
  // The whole suite's, so that resuming with another --filter does not change it.
  requested.threads = 0;
  for (const CaseSpec& spec : suite.Expand()) {
    requested.threads =
        std::max(requested.threads, selection.threads.value_or(spec.workload.threads));
  }

  if (resume > 0) {
    // Judged on a read-only opening: a refused resume creates, migrates or changes nothing.
    const auto stored = OpenExistingStore(db_path, "run --resume");
    const auto run = stored->FindRun(resume);
    if (!run)
      throw UsageError("run: --resume " + std::to_string(resume) + ": no such run in " + db_path +
                       " (seqbench show --db " + db_path + " lists them)");
    const std::vector<std::string> conflicts = ResumeConflicts(*run, requested);
    if (!conflicts.empty()) {
      std::string message =
          "run: --resume " + std::to_string(resume) + " would mix measurements taken differently:";
      for (const auto& conflict : conflicts) message += "\n  " + conflict;
      throw UsageError(message);
    }
  }
  Store store(db_path);
  int64_t run_id = 0;
  std::string run_uuid_of_run = requested.uuid;  // the children store into this run only
  std::set<std::string> finished;
  if (resume > 0) {
    run_id = resume;
    run_uuid_of_run = store.FindRun(run_id)->uuid;
    if (values->count("retry-failed")) {
      const int64_t removed = store.RemoveCases(run_id, {kStatusError, kStatusTimeout});
      std::printf("run %lld: %lld failed case(s) to run again\n", (long long)run_id,
                  (long long)removed);
    }
    finished = store.CaseKeys(run_id);
    store.SetRunStatus(run_id, "running", "");
  } else {
    run_id = store.CreateRun(requested);
    for (const auto& warning : requested.warnings)
      std::cerr << "seqbench: warning: " << warning << "\n";
  }

  // A child seqbench that selects and measures the cases as this process does.
  const auto ChildCommand = [&](const std::string& suite_file) {
    std::vector<std::string> argv = {SelfExecutable()};
    for (const std::string& plugin : LoadedPluginPaths()) {  // the counting child runs elsewhere
      argv.insert(argv.end(), {"--plugin", std::filesystem::absolute(plugin).string()});
    }
    argv.insert(argv.end(), {"run", suite_file});
    if (values->count("device")) argv.insert(argv.end(), {"--device", device});
    if (values->count("threads")) argv.insert(argv.end(), {"--threads", std::to_string(threads)});
    if (values->count("test-slowdown")) {
      argv.insert(argv.end(), {"--test-slowdown", FormatSignificant(test_slowdown, 17),
                               "--test-slowdown-filter", test_slowdown_filter});
    }
    if (test_extra_head_passes > 0) {
      argv.insert(argv.end(), {"--test-extra-head-passes", std::to_string(test_extra_head_passes)});
    }
    for (const char* flag : {"repetitions", "warmup", "min-time", "max-noise", "max-time"}) {
      if (values->count(flag)) {
        const std::string text = std::string(flag) == "repetitions" ? std::to_string(repetitions)
                                 : std::string(flag) == "warmup"    ? std::to_string(warmup)
                                 : std::string(flag) == "min-time"  ? min_time_text
                                 : std::string(flag) == "max-noise" ? max_noise_text
                                                                    : max_time_text;
        argv.insert(argv.end(), {std::string("--") + flag, text});
      }
    }
    return argv;
  };
  std::optional<Isolation> isolation;
  if (isolate) {
    isolation.emplace();
    isolation->case_timeout_s = case_timeout_s;
    isolation->command = [&, run_id](const CaseSpec& spec, int64_t case_position) {
      std::vector<std::string> argv = ChildCommand(suite_path);
      argv.insert(argv.end(), {"--db", db_path, "--check", check_text, "--run-case", spec.Key(),
                               "--into-run", std::to_string(run_id), "--run-uuid", run_uuid_of_run,
                               "--position", std::to_string(case_position)});
      if (TracingEnabled()) argv.push_back("--nvtx");
      return argv;
    };
  }
  std::optional<Counting> counting;
  if (!suite.measurement.count.empty()) {
    counting.emplace();
    counting->steps = suite.measurement.count_steps;
    counting->kinds = suite.measurement.count;
    counting->command = [&](const std::vector<CaseSpec>&, const std::string& out_dir) {
      // A copy in the child's folder: the suite's own path would move its counts.
      const std::string suite_copy = out_dir + "/suite.toml";
      std::filesystem::copy_file(suite_path, suite_copy);
      std::vector<std::string> argv = ChildCommand(suite_copy);
      argv.insert(argv.end(), {"--count-out", out_dir});
      argv.insert(argv.end(), {"--count", JoinCountKinds(suite.measurement.count), "--count-steps",
                               std::to_string(suite.measurement.count_steps)});
      return argv;
    };
  }

  std::signal(SIGINT, RequestStop);
  std::signal(SIGTERM, RequestStop);
  std::printf(
      "run %lld: suite %s, %zu cases%s -> %s\n", (long long)run_id, suite.name.c_str(),
      cases.size(),
      finished.empty() ? "" : (" (" + std::to_string(finished.size()) + " already done)").c_str(),
      db_path.c_str());
  std::fflush(stdout);

  const auto should_stop = [&](int64_t cases_run) {
    return stop_requested || (stop_after > 0 && cases_run >= stop_after);
  };
  const auto print_progress = [](const CaseProgress& progress) {
    if (progress.counting > 0) {
      std::printf("counting the instructions of %lld case(s) under callgrind, in one child...\n",
                  (long long)progress.counting);
      std::fflush(stdout);
      return;
    }
    if (progress.record == nullptr) {
      std::printf("interleaved: %lld of %lld samples timed  ETA %s\n",
                  (long long)progress.samples_done, (long long)progress.samples_total,
                  FormatEta(progress.eta_s).c_str());
      std::fflush(stdout);
      return;
    }
    std::printf("[%lld/%lld] %s  ETA %s\n", (long long)progress.done, (long long)progress.total,
                ProgressLine(*progress.record).c_str(), FormatEta(progress.eta_s).c_str());
    std::fflush(stdout);
  };
  if (values->count("interleave")) {
    std::printf("interleaving the repetitions of the pending cases (seed %llu)...\n",
                (unsigned long long)suite.seed);
    std::fflush(stdout);
  }
  const RunSummary summary = values->count("interleave")
                                 ? RunInterleaved(suite, cases, finished, *check, store, run_id,
                                                  suite.seed, should_stop, print_progress, counting)
                                 : RunCases(suite, cases, finished, *check, store, run_id,
                                            should_stop, print_progress, isolation, counting);
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

}  // namespace seqbench::cli
