// The run driver (run_driver.h): a request's run, step by step, as `seqbench run` does it.
#include "harness/run_driver.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "base/text.h"
#include "harness/case_record.h"
#include "harness/cuda_probe.h"
#include "harness/environment.h"
#include "harness/instruction_count.h"
#include "harness/lockstep.h"
#include "harness/roofline.h"
#include "harness/run_header.h"
#include "results/run_group.h"
#include "results/store.h"
#include "variants/core/trace.h"

namespace seqbench {
namespace {

using Entries = std::vector<std::pair<std::string, std::string>>;

// The database opened to read for `command` ("run --resume"), its warnings told;
// RunRefused when there is none.
std::unique_ptr<Store> OpenToRead(const std::string& path, const std::string& command,
                                  RunObserver& observer) {
  if (!std::filesystem::exists(path))
    throw RunRefused(command + ": no results database at " + path +
                     " (run a suite first, or give --db)");
  auto store = std::make_unique<Store>(path, StoreAccess::kReadOnly);
  for (const std::string& warning : store->warnings()) observer.Warning(warning);
  return store;
}

// The run's record of how it counts (run --count), or nothing when it does not.
Entries CountingEnvironment(const Measurement& measure) {
  if (measure.count.empty()) return {};
  const bool natively = CountsNatively(measure.count);
  Entries entries = {
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

// The roofline's peaks at the conditions of this run's cases: from the newest of the
// database's last 20 runs measured on the same machine fingerprint, else measured now
// (about a second; measure_limits: always).
Entries MachineLimitsFor(const RunRequest& request, RunObserver& observer) {
  std::vector<RunRecord> earlier;
  if (!request.measure_limits && std::filesystem::exists(request.db_path)) {
    const Store store(request.db_path, StoreAccess::kReadOnly);
    const std::vector<RunRecord> listed = store.Runs();
    for (auto run = listed.rbegin(); run != listed.rend() && earlier.size() < 20; ++run)
      earlier.push_back(*store.FindRun(run->run_id));
  }
  const auto entries =
      LimitsFor(request.cases, CaptureEnvironment(), earlier, request.measure_limits);
  observer.LimitsKnown(entries.back().second);
  return entries;
}

// The test hooks' entries: how a test inflated the work on purpose.
Entries TestHookEntries(const ChildRun& hooks) {
  Entries entries;
  if (hooks.test_slowdown > 0) {  // given: 1 or more
    entries.emplace_back("test_slowdown", FormatSignificant(hooks.test_slowdown, 4) +
                                              "x on cases matching " + hooks.test_slowdown_filter);
  }
  if (hooks.test_extra_head_passes > 0) {
    entries.emplace_back("test_extra_work",
                         std::to_string(hooks.test_extra_head_passes) + " extra head passes");
  }
  return entries;
}

// The run's settings as stored with it: the measurement, the test-only inflation, counting,
// the timer and tracing, the machine's peaks (a new run's only), the isolation.
Entries RunEnvironmentEntries(const RunRequest& request, RunObserver& observer) {
  Entries entries;
  const std::string& filter = request.selection.filter;
  entries.emplace_back("case_filter", filter.empty() ? "none" : filter);
  entries.emplace_back("repetition_order",
                       request.interleave
                           ? "interleaved (seed " + std::to_string(request.suite.seed) + ")"
                           : "case after case");
  for (auto& entry : TestHookEntries(request.child)) entries.push_back(entry);
  for (auto& entry : CountingEnvironment(request.suite.measurement)) entries.push_back(entry);
  entries.emplace_back(
      "timer", cuda_probe::Compiled()
                   ? "CUDA events around the step on CUDA; steady_clock around the step on CPU"
                   : "steady_clock around the step (device synchronised)");
  for (const auto& entry : cuda_probe::Environment()) entries.push_back(entry);
  entries.emplace_back("nvtx", !TracingCompiledIn() ? "not compiled in"
                               : TracingEnabled()   ? "on"
                                                    : "off");
  // A resumed run keeps the limits it started with.
  if (request.resume == 0) {
    for (auto& entry : MachineLimitsFor(request, observer)) entries.push_back(entry);
  }
  const double timeout_s = request.case_timeout_s;
  entries.emplace_back(
      "isolation",
      !request.isolate ? "none: every case in one process"
      : timeout_s > 0
          ? "a child process per case, killed after " + FormatSignificant(timeout_s, 6) + " s"
          : "a child process per case, killed after max(600 s, 20 x the longest case)");
  return entries;
}

// The warnings a run inflated on purpose carries with it.
std::vector<std::string> TestHookWarnings(const ChildRun& hooks) {
  std::vector<std::string> warnings;
  if (hooks.test_extra_head_passes > 0) {
    warnings.push_back(
        "test-only --test-extra-head-passes: every variant's head computes its "
        "logits " +
        std::to_string(hooks.test_extra_head_passes) +
        " extra times on purpose; not a measurement of the code");
  }
  if (hooks.test_slowdown > 1) {
    warnings.push_back("test-only --test-slowdown: the step times of cases matching " +
                       hooks.test_slowdown_filter + " are inflated " +
                       FormatSignificant(hooks.test_slowdown, 4) +
                       "x on purpose (whole extra steps); not a measurement of the code");
  }
  return warnings;
}

// The run's record before it starts: what it measures, how, and the test-only warnings.
RunRecord DescribeRun(const RunRequest& request, RunObserver& observer) {
  const Suite& suite = request.suite;
  RunDescription description;
  description.kind = kRunKindBenchmark;
  description.suite_name = suite.name;
  description.suite_path = request.suite_path;
  description.suite_text = suite.text;
  description.command_line = request.command_line;
  const ShardSpec& shard = request.selection.shard;  // a group's shard 1/1 is still one
  description.shard = request.group.empty()
                          ? shard.Text()
                          : std::to_string(shard.index) + "/" + std::to_string(shard.count);
  description.seed = suite.seed;
  description.baseline = suite.baseline;
  description.settings = suite.measurement;
  description.settings.check_policy = CheckPolicyName(request.check);
  description.label = request.label;
  description.expectations = suite.expectations;
  description.extra_environment = RunEnvironmentEntries(request, observer);
  RunRecord requested = NewRunRecord(description);
  requested.group = request.group;
  requested.warnings = TestHookWarnings(request.child);
  // From the cases, not from what the process happens to be set to when the record is made
  // (after the roofline's measurements in a new run, LibTorch's default in a resumed one).
  // The whole suite's, so that resuming with another filter does not change it.
  requested.threads = 0;
  for (const CaseSpec& spec : suite.Expand()) {
    requested.threads =
        std::max(requested.threads, request.selection.threads.value_or(spec.workload.threads));
  }
  return requested;
}

// Refuses, on a read-only opening, a resume of run `run_id` measured otherwise (or, for a
// group's complete shard, a command that asks for another measurement than it holds): a
// refused resume creates, migrates or changes nothing.
void RefuseConflictingResume(const RunRequest& request, int64_t run_id, const RunRecord& requested,
                             RunObserver& observer) {
  const std::string& db = request.db_path;
  const auto stored = OpenToRead(db, "run --resume", observer);
  const auto run = stored->FindRun(run_id);
  if (!run)
    throw RunRefused("run: --resume " + std::to_string(run_id) + ": no such run in " + db +
                     " (seqbench show --db " + db + " lists them)");
  const std::vector<std::string> conflicts = ResumeConflicts(*run, requested);
  if (conflicts.empty()) return;
  std::string message = run->status == "complete"
                            ? "run: shard " + run->shard + " of group " + run->group +
                                  " is complete in " + db + " (run " + std::to_string(run_id) +
                                  "), measured otherwise; give a new --group (or --db):"
                            : "run: --resume " + std::to_string(run_id) +
                                  " would mix measurements taken differently:";
  for (const auto& conflict : conflicts) message += "\n  " + conflict;
  throw RunRefused(message);
}

// A shard of a group whose database already holds its run continues that run (Slurm
// requeues a task whose node died): `resume` is set to it. Returns the id of that run when
// it is complete, which leaves nothing to do once it is known to be measured as asked.
std::optional<int64_t> FindOwnShard(RunRequest& request, RunObserver& observer) {
  std::error_code error;
  // A new database, or an empty file (sqlite3 makes one by looking): nothing to resume.
  if (request.group.empty() || request.resume > 0 ||
      std::filesystem::file_size(request.db_path, error) == 0 || error)
    return std::nullopt;
  const ShardSpec& shard = request.selection.shard;
  const std::string text = std::to_string(shard.index) + "/" + std::to_string(shard.count);
  const auto store = OpenToRead(request.db_path, "run --group", observer);
  for (const RunRecord& run : GroupShards(*store, request.group)) {
    if (run.shard != text) continue;
    if (run.status == "complete") return run.run_id;
    request.resume = run.run_id;  // the newest unfinished one, should there be several
  }
  return std::nullopt;
}

// The run the cases go into: a new one, or the resumed one with its finished cases.
struct OpenedRun {
  int64_t id = 0;
  std::string uuid;  // the children store into this run only
  std::set<std::string> finished;
};
OpenedRun OpenRun(const RunRequest& request, Store& store, const RunRecord& requested,
                  RunObserver& observer) {
  OpenedRun run;
  run.uuid = requested.uuid;
  if (request.resume == 0) {
    run.id = store.CreateRun(requested);
    for (const auto& warning : requested.warnings) observer.Warning(warning);
    return run;
  }
  run.id = request.resume;
  run.uuid = store.FindRun(run.id)->uuid;
  if (request.retry_failed) {
    const int64_t removed = store.RemoveCases(run.id, {kStatusError, kStatusTimeout});
    observer.RetryingFailed(run.id, removed);
  }
  run.finished = store.CaseKeys(run.id);
  store.SetRunStatus(run.id, "running", "");
  return run;
}

// Isolation: each case in a child that stores it into this run.
Isolation IsolationFor(const RunRequest& request, const OpenedRun& run) {
  Isolation isolation;
  isolation.case_timeout_s = request.case_timeout_s;
  isolation.command = [&request, id = run.id, uuid = run.uuid](const CaseSpec& spec,
                                                               int64_t case_position) {
    ChildRun child = request.child;
    child.suite_path = request.suite_path;
    child.db_path = request.db_path;
    child.check = CheckPolicyName(request.check);
    child.run_case = spec.Key();
    child.into_run = id;
    child.run_uuid = uuid;
    child.position = case_position;
    child.nvtx = TracingEnabled();
    return child.ToArgv();
  };
  return isolation;
}

// Counting: the counting child's command, in its own folder with a copy of the suite.
Counting CountingFor(const RunRequest& request) {
  const Measurement& measure = request.suite.measurement;
  Counting counting;
  counting.steps = measure.count_steps;
  counting.kinds = measure.count;
  counting.command = [&request, kinds = JoinCountKinds(measure.count), steps = measure.count_steps](
                         const std::vector<CaseSpec>&, const std::string& out_dir) {
    // A copy in the child's folder: the suite's own path would move its counts.
    const std::string suite_copy = out_dir + "/suite.toml";
    std::filesystem::copy_file(request.suite_path, suite_copy);
    ChildRun child = request.child;
    child.suite_path = suite_copy;
    child.count_out = out_dir;
    child.count = kinds;
    child.count_steps = steps;
    return child.ToArgv();
  };
  return counting;
}

// The pending cases run as the request says: as seqbench ab's lockstep worker,
// interleaved, or case after case (isolated or not).
RunSummary RunPending(const RunRequest& request, Store& store, const OpenedRun& run,
                      const std::function<bool(int64_t)>& should_stop, RunObserver& observer) {
  const Suite& suite = request.suite;
  const auto progress = [&observer](const CaseProgress& p) { observer.Progress(p); };
  if (!request.lockstep.empty()) {
    LineChannel channel = LineChannel::Worker(request.lockstep);
    return RunLockstep(suite, request.cases, request.check, store, run.id, channel, progress);
  }
  std::optional<Counting> counting;
  if (!suite.measurement.count.empty()) counting = CountingFor(request);
  if (request.interleave) {
    observer.Interleaving(suite.seed);
    return RunInterleaved(suite, request.cases, run.finished, request.check, store, run.id,
                          suite.seed, should_stop, progress, counting);
  }
  std::optional<Isolation> isolation;
  if (request.isolate) isolation = IsolationFor(request, run);
  return RunCases(suite, request.cases, run.finished, request.check, store, run.id, should_stop,
                  progress, isolation, counting);
}

// Runs whose cases took longer measure the machine's limits again after the last case
// (a second or so): a short run's start and end are close together, and CI's many short
// runs would pay it for nothing.
constexpr std::chrono::seconds kLimitsAgainAfter{60};

// Keeps the higher of the limits measured now and at the run's start (KeepHigherLimits).
void MeasureLimitsAgain(Store& store, int64_t run_id, const std::vector<CaseSpec>& cases,
                        RunObserver& observer) {
  observer.MeasuringLimitsAgain();
  const auto stored = store.FindRun(run_id);
  if (!stored) return;
  const auto raised = KeepHigherLimits(*stored, MeasureLimitsFor(cases));
  if (!raised.empty()) store.AddRunEnvironment(run_id, raised, {});
  observer.LimitsAgain(raised.empty() ? "" : raised.back().second);
}

}  // namespace

RunOutcome DriveRun(RunRequest request, RunObserver& observer,
                    const std::function<bool()>& should_stop) {
  const bool resume_given = request.resume > 0;
  const std::optional<int64_t> complete_shard = FindOwnShard(request, observer);
  const RunRecord requested = DescribeRun(request, observer);
  RunOutcome outcome;
  if (complete_shard) {
    RefuseConflictingResume(request, *complete_shard, requested, observer);
    observer.ShardComplete(*complete_shard, requested);
    outcome.run_id = *complete_shard;
    outcome.already_complete = true;
    return outcome;
  }
  if (request.resume > 0) RefuseConflictingResume(request, request.resume, requested, observer);
  if (request.resume > 0 && !resume_given) observer.ResumingShard(request.resume, requested);
  Store store(request.db_path);
  const OpenedRun run = OpenRun(request, store, requested, observer);
  observer.Started(run.id, request.cases.size(), run.finished.size());
  const auto stop = [&](int64_t cases_run) {
    return should_stop() || (request.stop_after > 0 && cases_run >= request.stop_after);
  };
  const auto began = std::chrono::steady_clock::now();
  outcome.run_id = run.id;
  outcome.summary = RunPending(request, store, run, stop, observer);
  if (!outcome.summary.interrupted && request.lockstep.empty() &&
      std::chrono::steady_clock::now() - began > kLimitsAgainAfter) {
    MeasureLimitsAgain(store, run.id, request.cases, observer);
  }
  RecordRunEnd(store, run.id);
  const bool interrupted = outcome.summary.interrupted;
  store.SetRunStatus(run.id, interrupted ? "interrupted" : "complete", interrupted ? "" : UtcNow());
  return outcome;
}

int ExitStatusOf(const RunOutcome& outcome) {
  if (outcome.summary.interrupted) return 1;
  for (const char* failed : {kStatusMismatch, kStatusError, kStatusTimeout}) {
    const auto found = outcome.summary.status_counts.find(failed);
    if (found != outcome.summary.status_counts.end() && found->second > 0) return 1;
  }
  return 0;
}

void RunIsolatedCase(const Suite& suite, const std::vector<CaseSpec>& cases, const ChildRun& role,
                     CheckPolicy check, const std::string& db_path) {
  const auto spec = std::find_if(cases.begin(), cases.end(), [&](const CaseSpec& candidate) {
    return candidate.Key() == role.run_case;
  });
  if (spec == cases.end())
    throw RunRefused("run --run-case: no case '" + role.run_case + "' in the suite");
  if (role.into_run < 1 || role.position < 0 || role.run_uuid.empty())
    throw RunRefused("run --run-case needs --into-run, --run-uuid and --position");
  // Only into the run that started it: not into a new database where the file was deleted,
  // nor into another database's run of the same id where it was replaced.
  if (!std::filesystem::is_regular_file(db_path))
    throw StoreError(db_path + ": the run's database is gone");
  Store store(db_path);
  const std::optional<RunRecord> run = store.FindRun(role.into_run);
  if (!run || run->uuid != role.run_uuid)
    throw StoreError(db_path + ": run " + std::to_string(role.into_run) +
                     " is not the run that started this case (the database was replaced)");
  CaseRunner runner(suite, check);
  store.AddCase(role.into_run, ToRecord(runner.Run(*spec), role.position));
  // Stored: nothing that could still go wrong at shutdown (a thread pool that hangs, a
  // destructor that crashes) may cost the case its timeout or its record.
  std::fflush(nullptr);
  std::_Exit(0);
}

void RunCountingChild(const Suite& suite, const std::vector<CaseSpec>& cases,
                      const std::string& out_dir) {
  try {
    CountCasesInThisProcess(suite, CasesToCount(cases, out_dir), suite.measurement.count_steps,
                            out_dir, CountsNatively(suite.measurement.count));
  } catch (const std::exception& error) {
    // The parent reads the child's standard error into the run's message.
    std::cerr << "seqbench: counting child: " << error.what() << "\n";
    std::fflush(nullptr);
    std::_Exit(3);
  }
  std::fflush(nullptr);
  std::_Exit(0);
}

std::string JoinCountKinds(const std::vector<std::string>& kinds) {
  std::string text;
  for (const std::string& kind : kinds) text += (text.empty() ? "" : ",") + kind;
  return text;
}

}  // namespace seqbench
