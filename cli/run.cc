// `seqbench run SUITE.toml`: runs a suite's cases and stores every result, one
// transaction per finished case, with the run's environment and provenance. The flags are
// run_flags.h's, the run harness/run_driver.h's; this file joins them and prints.
#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "base/process.h"
#include "cli/command.h"
#include "cli/run_flags.h"
#include "harness/benchmark_run.h"
#include "harness/child_run.h"
#include "harness/run_driver.h"
#include "reports/escape/terminal.h"
#include "reports/format.h"
#include "results/records.h"
#include "variants/core/test_hooks.h"
#include "variants/core/trace.h"

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

// What the run driver says, as terminal lines (every name through TerminalText).
class PrintingObserver : public RunObserver {
 public:
  explicit PrintingObserver(const RunRequest& request) : request_(request) {}
  void Warning(const std::string& text) override {
    std::cerr << "seqbench: warning: " << escape::TerminalText(text, false) << "\n";
  }
  void LimitsKnown(const std::string& summary) override {
    Say("this machine's GEMM rate and memory bandwidth: " + escape::TerminalText(summary));
  }
  void ShardComplete(int64_t run_id, const RunRecord& requested) override {
    Say("run " + std::to_string(run_id) + ": shard " + requested.shard + " of group " +
        escape::TerminalText(request_.group, false) + " is complete in " +
        escape::TerminalText(request_.db_path) + "; nothing to do");
  }
  void ResumingShard(int64_t run_id, const RunRecord& requested) override {
    Say("run " + std::to_string(run_id) + ": resuming shard " + requested.shard + " of group " +
        escape::TerminalText(request_.group, false));
  }
  void RetryingFailed(int64_t run_id, int64_t removed) override {
    Say("run " + std::to_string(run_id) + ": " + std::to_string(removed) +
        " failed case(s) to run again");
  }
  // From here an interruption is the run's (stored as interrupted, resumable); before,
  // it ends the command with nothing made.
  void Started(int64_t run_id, size_t cases, size_t finished) override {
    InstallStopHandlers();
    Say("run " + std::to_string(run_id) + ": suite " +
        escape::TerminalText(request_.suite.name, false) + ", " + std::to_string(cases) + " cases" +
        (finished == 0 ? "" : " (" + std::to_string(finished) + " already done)") + " -> " +
        escape::TerminalText(request_.db_path, false));
  }
  void Interleaving(uint64_t seed) override {
    Say("interleaving the repetitions of the pending cases (seed " + std::to_string(seed) + ")...");
  }
  void Progress(const CaseProgress& progress) override;
  void MeasuringLimitsAgain() override {
    Say("measuring this machine's GEMM rate and memory bandwidth again...");
  }
  void LimitsAgain(const std::string& raised) override {
    Say("  " + (raised.empty() ? std::string("the start's were as high: kept")
                               : escape::TerminalText(raised)));
  }

 private:
  static void Say(const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
  const RunRequest& request_;
};

// One line per finished case (or interleaved batch, or the counting's start).
void PrintingObserver::Progress(const CaseProgress& progress) {
  if (progress.counting > 0 && progress.counted > 0) {
    Say("counted " + std::to_string(progress.counted) + " of " + std::to_string(progress.counting) +
        " case(s)  ETA " + FormatEta(progress.eta_s));
  } else if (progress.counting > 0) {
    Say("counting the instructions of " + std::to_string(progress.counting) +
        " case(s), in one child...");
  } else if (progress.record == nullptr) {
    Say("interleaved: " + std::to_string(progress.samples_done) + " of " +
        std::to_string(progress.samples_total) + " samples timed  ETA " +
        FormatEta(progress.eta_s));
  } else {
    Say("[" + std::to_string(progress.done) + "/" + std::to_string(progress.total) + "] " +
        escape::TerminalText(ProgressLine(*progress.record), false) + "  ETA " +
        FormatEta(progress.eta_s));
  }
}

// "run 3 complete: 4 ok, 0 mismatch, ...": how the run's cases ended.
void PrintEnd(const RunOutcome& outcome) {
  const auto count = [&](const char* status) {
    const auto found = outcome.summary.status_counts.find(status);
    return found == outcome.summary.status_counts.end() ? int64_t{0} : found->second;
  };
  std::printf("run %lld %s: %lld ok, %lld mismatch, %lld error, %lld timeout, %lld skipped\n",
              (long long)outcome.run_id,
              outcome.summary.interrupted ? "interrupted (finish it with --resume)" : "complete",
              (long long)count(kStatusOk), (long long)count(kStatusMismatch),
              (long long)count(kStatusError), (long long)count(kStatusTimeout),
              (long long)count(kStatusSkipped));
}

// The child seqbench that selects and measures cases as this process does (its suite and
// role are the driver's to set).
ChildRun ChildOf(const RunFlags& f) {
  ChildRun child;
  child.binary = SelfExecutable();
  child.plugins = AbsolutePluginPaths();  // the counting child runs elsewhere
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

// The run the checked flags ask for.
RunRequest RequestFor(const RunFlags& f, const CheckedFlags& checked, Suite suite,
                      std::vector<CaseSpec> cases) {
  RunRequest request;
  request.suite_path = f.suite_path;
  request.db_path = f.db_path;
  request.case_timeout_s =
      f.Given("case-timeout") ? f.case_timeout_s : suite.measurement.case_timeout_s;
  request.suite = std::move(suite);
  request.cases = std::move(cases);
  request.check = checked.check;
  request.selection = checked.selection;
  request.label = f.label;
  request.group = f.group;
  request.command_line = CommandLine();
  request.resume = f.resume;
  request.retry_failed = f.Given("retry-failed");
  request.interleave = f.Given("interleave");
  request.lockstep = f.lockstep;
  request.measure_limits = f.Given("measure-limits");
  request.isolate = IsolatesCases(f, checked);
  request.stop_after = f.stop_after;
  request.child = ChildOf(f);
  return request;
}

// The suite's cases the flags select; UsageError when none.
std::vector<CaseSpec> SelectedCases(const RunFlags& f, const Suite& suite,
                                    const CheckedFlags& checked) {
  std::vector<CaseSpec> cases = SelectCases(suite, checked.selection);  // filter checked
  if (cases.empty())
    throw UsageError("run: no case of " + f.suite_path + " matches --filter/--shard");
  return cases;
}

}  // namespace

void InstallStopHandlers() {
  std::signal(SIGINT, RequestStop);
  std::signal(SIGTERM, RequestStop);
}

bool StopRequested() { return stop_requested != 0; }

void CheckRunCommand(const std::vector<std::string>& args) {
  RunFlags f;
  if (!ParseRunFlags(args, f)) throw UsageError("run: --help asks for the help, not a run");
  const CheckedFlags checked = CheckRunFlags(f);
  const Suite suite = SuiteFor(f, checked);
  SelectedCases(f, suite, checked);
  IsolatesCases(f, checked);
}

int RunRun(const std::vector<std::string>& args) {
  RunFlags f;
  if (!ParseRunFlags(args, f)) return 0;
  const CheckedFlags checked = CheckRunFlags(f);
  // Everything the user gave is checked before the database is touched.
  Suite suite = SuiteFor(f, checked);
  if (f.role.test_extra_head_passes > 0) SetTestExtraHeadPasses(f.role.test_extra_head_passes);
  std::vector<CaseSpec> cases = SelectedCases(f, suite, checked);
  if (f.Given("count-out")) RunCountingChild(suite, cases, f.role.count_out);
  if (f.Given("run-case")) RunIsolatedCase(suite, cases, f.role, checked.check, f.db_path);
  const RunRequest request = RequestFor(f, checked, std::move(suite), std::move(cases));
  PrintingObserver observer(request);
  const RunOutcome outcome = DriveRun(request, observer, StopRequested);
  if (outcome.already_complete) return 0;
  PrintEnd(outcome);
  return ExitStatusOf(outcome);
}

}  // namespace seqbench::cli
