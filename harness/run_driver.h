// The run driver: one `seqbench run` from a checked request to its finished record. It
// takes the machine's limits, describes the run, opens a new run or resumes one (a group's
// shard finds its own), runs the pending cases (case after case, each in a child, with
// the repetitions interleaved, or as seqbench ab's lockstep worker), measures the limits
// again after a long run, and marks the run's end. It reads no flag and prints nothing:
// the command line builds the RunRequest and hears of each step through a RunObserver.
//
// Also here: the two roles a child seqbench of a run takes (one isolated case; the
// counting child), since they store into, or count for, the run the driver started.
//
// Thread-safety: DriveRun runs on the calling thread and calls the observer there; one
// run per call. Everything else is a pure function or stated below.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "harness/benchmark_run.h"
#include "harness/child_run.h"
#include "harness/runner.h"
#include "harness/suite.h"
#include "results/records.h"

namespace seqbench {

// A run the database contradicts (a resume of a run that is not there, or was measured
// otherwise; a group's complete shard asked for another measurement): the user's to fix,
// so the command line exits 2. Nothing was created, migrated or changed.
class RunRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What one run is to do, every field checked by whoever made it (the command line).
struct RunRequest {
  std::string suite_path;       // as given: stored with the run
  std::string db_path;          // the results database (made when missing)
  Suite suite;                  // with the command line's [measure] overrides
  std::vector<CaseSpec> cases;  // the selected cases, in run order; not empty
  CheckPolicy check = CheckPolicy::kFull;
  CaseSelection selection;      // how `cases` were chosen: stored with the run
  std::string label, group;     // group: the run group this shard belongs to
  std::string command_line;     // stored with the run (provenance)
  int64_t resume = 0;           // the run to continue; 0: a new run
  bool retry_failed = false;    // with resume: its error and timeout cases run again
  bool interleave = false;      // RunInterleaved instead of RunCases
  std::string lockstep;         // non-empty: seqbench ab's worker on PREFIX.in/.out
  bool measure_limits = false;  // measure the machine's peaks even if a run has them
  bool isolate = false;         // each case in a child seqbench (Isolation)
  double case_timeout_s = 0;    // with isolate: 0 picks DefaultCaseTimeout
  int64_t stop_after = 0;       // tests: stop after this many cases, as if interrupted
  // The child seqbench every isolated case and the counting child start from: binary,
  // plugins and the measurement flags as given, and the test hooks (role.test_*).
  ChildRun child;
};

// What DriveRun says as it goes. Each is called on DriveRun's thread, at the step named;
// the defaults ignore it.
class RunObserver {
 public:
  virtual ~RunObserver() = default;
  // A warning of the database opened to read (a newer minor version) or of the run's
  // record (a test hook inflating work), before the cases run.
  virtual void Warning(const std::string& /*text*/) {}
  // A new run's machine limits were found or measured; `summary` is their one line.
  virtual void LimitsKnown(const std::string& /*summary*/) {}
  // This group's shard is already complete in the database (run `run_id`), measured as
  // asked: DriveRun returns at once with `already_complete`.
  virtual void ShardComplete(int64_t /*run_id*/, const RunRecord& /*requested*/) {}
  // This group's shard has an unfinished run (`run_id`) in the database: it continues it.
  virtual void ResumingShard(int64_t /*run_id*/, const RunRecord& /*requested*/) {}
  // With retry_failed: `removed` error and timeout cases of the resumed run will run again.
  virtual void RetryingFailed(int64_t /*run_id*/, int64_t /*removed*/) {}
  // The run is open and its pending cases are about to run; `finished` of `cases` were
  // done before (a resumed run).
  virtual void Started(int64_t /*run_id*/, size_t /*cases*/, size_t /*finished*/) {}
  // Interleaved: the pending cases' repetitions are about to be shuffled with `seed`.
  virtual void Interleaving(uint64_t /*seed*/) {}
  // A case finished, a tenth of the interleaved samples was taken, or the counting moved.
  virtual void Progress(const CaseProgress& /*progress*/) {}
  // A run of over a minute measures the limits again after its last case: before, then
  // after with the raised limits' line (empty: the start's were as high, kept).
  virtual void MeasuringLimitsAgain() {}
  virtual void LimitsAgain(const std::string& /*raised*/) {}
};

// How a run ended: its id, how its cases ended, and whether there was nothing to do.
struct RunOutcome {
  int64_t run_id = 0;
  RunSummary summary;
  bool already_complete = false;  // a group's shard complete before this command
};

// Runs `request` into its database. `should_stop` is asked between cases (and polled
// while an isolated case runs): true interrupts the run, which then stays resumable.
// Throws RunRefused before touching the database when it contradicts the request; the
// run's status is "complete" or "interrupted" when this returns.
RunOutcome DriveRun(RunRequest request, RunObserver& observer,
                    const std::function<bool()>& should_stop);

// The exit status of a run: 1 when interrupted or when any case mismatched, failed or
// timed out; else 0.
int ExitStatusOf(const RunOutcome& outcome);

// The child of an isolated case (run --run-case): the case `role.run_case` of `cases`,
// run and stored at `role.position` into run `role.into_run` of `db_path`, only while that
// run is still the one whose uuid is `role.run_uuid`. Never returns: exits 0 once the case
// is stored, whatever its status, so that nothing at shutdown can cost it its record.
// Throws RunRefused for an unknown case or a missing role; StoreError when the database
// is gone or replaced.
[[noreturn]] void RunIsolatedCase(const Suite& suite, const std::vector<CaseSpec>& cases,
                                  const ChildRun& role, CheckPolicy check,
                                  const std::string& db_path);

// The child of --count, run by valgrind (run --count-out DIR): the cases listed in DIR/cases
// counted, each one's account and the facts written there; nothing stored or printed but
// an error. Never returns: exits 0, or 3 when the counting failed.
[[noreturn]] void RunCountingChild(const Suite& suite, const std::vector<CaseSpec>& cases,
                                   const std::string& out_dir);

// "instructions,cycles-estimate": the kinds as --count takes them.
std::string JoinCountKinds(const std::vector<std::string>& kinds);

}  // namespace seqbench
