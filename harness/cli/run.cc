// `seqbench run SUITE.toml`: runs a suite's cases and stores every result, one
// transaction per finished case, with the run's environment and provenance.
#include <boost/program_options.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "harness/benchmark_run.h"
#include "harness/cli/command.h"
#include "harness/cuda_probe.h"
#include "harness/roofline.h"
#include "harness/run_header.h"
#include "reports/format.h"
#include "results/store.h"
#include "variants/core/trace.h"

namespace po = boost::program_options;

namespace seqbench::cli {
namespace {

volatile std::sig_atomic_t stop_requested = 0;
void RequestStop(int) { stop_requested = 1; }

std::string ProgressLine(const CaseResult& result, const CaseRecord& record) {
  std::string line = record.name() + " " + record.workload().Label() + "  ";
  const auto median = record.MetricValue("runtime_median_s");
  const auto iqr = record.MetricValue("runtime_iqr_s");
  if (median)
    line += FormatDuration(*median) + (iqr ? " (IQR " + FormatDuration(*iqr) + ")" : "") + "  ";
  if (result.status == kStatusOk) return line + "✓";
  if (result.status == kStatusMismatch) return line + "✗ mismatch: " + result.message;
  return line + result.status + ": " + result.message;
}

}  // namespace

int RunRun(const std::vector<std::string>& args) {
  std::string suite_path, db_path, device, filter, shard_text, check_text;
  int64_t repetitions = 0, resume = 0, stop_after = 0, threads = 0;
  po::options_description options(
      "Usage: seqbench run SUITE.toml [OPTIONS]\n\n"
      "Runs every case of a suite: checks it against the suite's baseline, times it with\n"
      "Google Benchmark, measures its peak memory, and stores all of it with the run's\n"
      "environment. Exits 0 when every case is ok or skipped, 1 when any mismatched or\n"
      "failed (all are stored either way), 2 on bad input.\n\nOptions");
  options.add_options()("help,h", "show this help")(
      "db", po::value(&db_path)->default_value("results/seqbench.db"), "results database")(
      "device", po::value(&device), "run every case on this device (cpu or cuda)")(
      "threads", po::value(&threads),
      "run every case with N LibTorch and OpenBLAS threads (default: the suite's `threads`, "
      "else this machine's physical cores)")("filter", po::value(&filter),
                                             "only cases whose key matches this regex")(
      "repetitions", po::value(&repetitions), "override the suite's repetitions")(
      "resume", po::value(&resume), "complete run RUN_ID: skip its finished cases")(
      "shard", po::value(&shard_text), "run shard i of n (i/n, 1-based): a deterministic subset")(
      "nvtx", "emit NVTX ranges per case and step phase (for Nsight Systems)")(
      "check", po::value(&check_text)->default_value("full"),
      "full: check every case against the baseline; sample: one case per variant, mode, "
      "device and shape; none: timing only (recorded with the run)");
  po::options_description hidden;
  hidden.add_options()("suite", po::value(&suite_path))(
      "stop-after", po::value(&stop_after), "stop after K cases, as if interrupted (tests)");
  po::positional_options_description positional;
  positional.add("suite", 1);
  const auto values = ParseArguments(args, options, hidden, positional, "run");
  if (!values) return 0;
  if (suite_path.empty()) throw UsageError("run: no suite file given (see seqbench run --help)");
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
  if (values->count("repetitions") && repetitions < 1) {
    throw UsageError("run: --repetitions must be at least 1");
  }
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
  std::vector<CaseSpec> cases;
  try {
    cases = SelectCases(suite, selection);
  } catch (const std::invalid_argument& error) {
    throw UsageError(std::string("run: --filter ") + error.what());
  }
  if (cases.empty())
    throw UsageError("run: no case of " + suite_path + " matches --filter/--shard");

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
  description.check_policy = CheckPolicyName(*check);
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
  const RunRecord requested = NewRunRecord(description);

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
  std::set<std::string> finished;
  if (resume > 0) {
    run_id = resume;
    finished = store.CaseKeys(run_id);
    store.SetRunStatus(run_id, "running", "");
  } else {
    run_id = store.CreateRun(requested);
    for (const auto& warning : requested.warnings)
      std::cerr << "seqbench: warning: " << warning << "\n";
  }

  std::signal(SIGINT, RequestStop);
  std::signal(SIGTERM, RequestStop);
  std::printf(
      "run %lld: suite %s, %zu cases%s -> %s\n", (long long)run_id, suite.name.c_str(),
      cases.size(),
      finished.empty() ? "" : (" (" + std::to_string(finished.size()) + " already done)").c_str(),
      db_path.c_str());
  std::fflush(stdout);

  const RunSummary summary = RunCases(
      suite, cases, finished, *check, store, run_id,
      [&](int64_t cases_run) {
        return stop_requested || (stop_after > 0 && cases_run >= stop_after);
      },
      [](const CaseProgress& progress) {
        std::printf("[%lld/%lld] %s  ETA %s\n", (long long)progress.done, (long long)progress.total,
                    ProgressLine(*progress.result, *progress.record).c_str(),
                    FormatEta(progress.eta_s).c_str());
        std::fflush(stdout);
      });
  const bool interrupted = summary.interrupted;
  const auto count = [&](const char* status) {
    const auto found = summary.status_counts.find(status);
    return found == summary.status_counts.end() ? int64_t{0} : found->second;
  };
  store.SetRunStatus(run_id, interrupted ? "interrupted" : "complete", interrupted ? "" : UtcNow());
  std::printf("run %lld %s: %lld ok, %lld mismatch, %lld error, %lld skipped\n", (long long)run_id,
              interrupted ? "interrupted (finish it with --resume)" : "complete",
              (long long)count(kStatusOk), (long long)count(kStatusMismatch),
              (long long)count(kStatusError), (long long)count(kStatusSkipped));
  if (interrupted) return 1;
  return count(kStatusMismatch) + count(kStatusError) > 0 ? 1 : 0;
}

}  // namespace seqbench::cli
