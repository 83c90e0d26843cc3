// A benchmark run as library code: which cases a command line selects (filter, shard,
// device), whether a stored run may be resumed with it, and the loop that runs the
// pending cases, storing each one as it finishes. The command line only parses flags
// and prints what the callbacks report.
//
// Thread-safety: RunCases() drives one CaseRunner and one Store from the calling thread;
// `should_stop` may read a flag set by a signal handler.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "harness/case_record.h"
#include "harness/instruction_count.h"
#include "harness/lockstep.h"
#include "harness/suite.h"
#include "results/run_group.h"
#include "results/store.h"

namespace seqbench {

// What a run's command line asks of a suite.
struct CaseSelection {
  std::string filter;                 // ECMAScript regex over case keys; "" selects all
  std::optional<std::string> device;  // every case on this device
  std::optional<int64_t> threads;     // every case with this many threads
  ShardSpec shard;
};

// The suite's cases the selection picks, in expansion order. Throws std::invalid_argument
// for a filter that is not a valid regex.
std::vector<CaseSpec> SelectCases(const Suite& suite, const CaseSelection& selection);

// The cases of `cases` whose keys are not in `finished`, in order.
std::vector<CaseSpec> PendingCases(const std::vector<CaseSpec>& cases,
                                   const std::set<std::string>& finished);

struct CaseProgress {
  int64_t done = 0, total = 0;  // cases finished in this process, and to run
  // The case just stored; nullptr for a progress report of interleaved timing, which
  // stores nothing until every sample is taken (then `samples_*` count the samples).
  const CaseRecord* record = nullptr;
  double eta_s = 0;
  int64_t samples_done = 0, samples_total = 0;
  // > 0: the timed cases are being counted under callgrind, this many of them; `counted`
  // of them are done (0 as the counting begins; eta_s from those done, once there are).
  int64_t counting = 0;
  int64_t counted = 0;
};

// run --isolate: each case in a child process that stores its own result, so that a
// crash, abort, exit() or hang costs that case only. The child is this seqbench again,
// started with `command(spec, position)`; it must store the case under the same run and
// key (run --run-case does).
struct Isolation {
  std::function<std::vector<std::string>(const CaseSpec& spec, int64_t position)> command;
  // Seconds before a case is killed and stored as `timeout`; 0 picks the default,
  // DefaultCaseTimeout().
  double case_timeout_s = 0;
};

// The limit when none is given: 10 minutes, or 20 times the longest case of this run so
// far if that is longer, so that a slow but healthy suite is not cut short.
double DefaultCaseTimeout(double longest_case_s);

// run --count instructions: once the cases are timed, `steps` steps of each timed CPU case
// are counted in one child under callgrind (harness/instruction_count.h), in the run's
// order. The child is this seqbench again, started with `command(specs, out_dir)` (run
// --count-out does it), which must call CountCasesInThisProcess with
// CasesToCount(its cases, out_dir): the keys are in out_dir/cases, one a line. The counts are
// stored as each case's metrics (the case is stored again); a case that cannot be counted keeps its
// timing, with the reason in its message ("not counted: ..."), and the run goes on. An
// interruption before the counting leaves the run's cases uncounted.
struct Counting {
  std::function<std::vector<std::string>(const std::vector<CaseSpec>& specs,
                                         const std::string& out_dir)>
      command;
  int64_t steps = 3;
  double timeout_s = 0;                                   // 0: 600 s, plus 120 s a case
  std::vector<std::string> kinds = {kCountInstructions};  // CountKind names
};

// The child's side of Counting, in the process valgrind runs: sets each of `specs` up in
// turn at one thread, unchecked, warms it up as the suite says, counts `steps` steps (with
// a test slowdown, each counted sample is the fewest steps that carry its extra steps
// exactly) and writes its CaseCountFile in `out_dir`; a case that fails says why there and
// the next goes on. Then writes the code it ran on (CodePathFacts) to out_dir/facts.
// `natively`: count with the hardware counter (hw-instructions) instead of callgrind.
void CountCasesInThisProcess(const Suite& suite, const std::vector<CaseSpec>& specs, int64_t steps,
                             const std::string& out_dir, bool natively);

// The cases of `cases` listed in out_dir/cases, in that order. Throws std::runtime_error
// for a missing list or an unknown key.
std::vector<CaseSpec> CasesToCount(const std::vector<CaseSpec>& cases, const std::string& out_dir);

struct RunSummary {
  std::map<std::string, int64_t> status_counts;  // by case status
  bool interrupted = false;
};

// Runs every case of `cases` not in `finished`, checked as `check` says, and stores each in run
// `run_id` as it finishes (its position is its index in `cases`). Before each case, `should_stop`
// is asked; true ends the loop with `interrupted` set (under isolation it is also polled while
// a case runs, whose child is then killed and whose case is left for --resume). With
// `isolation`, cases run in child processes; a child that ends without storing its case gets
// an `error` (or `timeout`) record saying how it ended. The run's status is the caller's.
RunSummary RunCases(const Suite& suite, const std::vector<CaseSpec>& cases,
                    const std::set<std::string>& finished, CheckPolicy check, Store& store,
                    int64_t run_id, const std::function<bool(int64_t cases_run)>& should_stop,
                    const std::function<void(const CaseProgress&)>& on_case,
                    const std::optional<Isolation>& isolation = std::nullopt,
                    const std::optional<Counting>& counting = std::nullopt);

// The order in which RunInterleaved takes the samples: each of `cases` indices `repetitions`
// times, shuffled by std::mt19937_64(seed) (Fisher–Yates, indices by modulo: the same order
// on every machine).
std::vector<size_t> InterleavedOrder(size_t cases, int64_t repetitions, uint64_t seed);

// RunCases in one process with the repetitions of the pending cases interleaved (run
// --interleave, google/benchmark's random interleaving): every case is prepared (set up,
// checked, warmed up) first, then its samples are taken one at a time in InterleavedOrder,
// each after one untimed step, so that a slow drift of the machine reaches every case
// alike; then each is finished and stored. `on_case` hears of every tenth of the samples
// (record nullptr) and of every stored case. All pending cases are alive at once (memory),
// and an interruption stores none of them (--resume runs them again). Adaptive stopping
// does not apply.
RunSummary RunInterleaved(const Suite& suite, const std::vector<CaseSpec>& cases,
                          const std::set<std::string>& finished, CheckPolicy check, Store& store,
                          int64_t run_id, uint64_t seed,
                          const std::function<bool(int64_t cases_run)>& should_stop,
                          const std::function<void(const CaseProgress&)>& on_case,
                          const std::optional<Counting>& counting = std::nullopt);

// A worker of seqbench ab's lockstep sampling (harness/lockstep.h; run --lockstep): sets
// every case of `cases` up, checks it and warms it up, says which are ready on `channel`,
// then takes one sample (one untimed step, one timed) of the case each "time KEY" names,
// until "end"; then finishes and stores every case in run `run_id`. Throws
// std::runtime_error when the controller goes away or asks for a case that is not ready,
// before any case is stored (the run's own record exists already). Counts nothing: the
// controller passes --count none.
RunSummary RunLockstep(const Suite& suite, const std::vector<CaseSpec>& cases, CheckPolicy check,
                       Store& store, int64_t run_id, LineChannel& channel,
                       const std::function<void(const CaseProgress&)>& on_case);

}  // namespace seqbench
