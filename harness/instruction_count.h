// Counted work: the instructions a case's steps execute, counted by callgrind in a child
// process, as a machine-independent measure that a CI gate can compare across separate
// jobs (wall time on a shared VM moves 50-90% between runs; these counts move < 0.1%).
//
// The parent (CountInChild) starts `valgrind --tool=callgrind` on a seqbench child with
// instrumentation off at start, and with ATen's CPU capability, OpenBLAS's core, glibc's
// string-function choice and cache-size thresholds pinned (CountPinning), at one thread,
// so that any x86-64-v3 machine runs the same code. The child sets the case up and warms
// it up uninstrumented, then calls CountStepsUnderCallgrind, which collects exactly the
// counted steps (callgrind's client requests, as torch.utils.benchmark and codspeed-cpp
// use them) and dumps one profile per step; the parent reads each dump's total.
//
// Beside callgrind's instructions, `cycles-estimate` adds a cycle estimate from a simulated,
// pinned cache hierarchy, and `hw-instructions` reads the CPU's own user-space instruction
// counter (perf_event_open) in a native child, where the kernel offers one.
//
// What counts cannot see: memory-bound stalls, cache and TLB misses, threading and lock
// contention, the allocator's page faults, syscalls' kernel time, and anything on a GPU.
//
// Thread-safety: CountInChild blocks its thread until the child is gone; the child-side
// functions are called from the one thread that runs the cases.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "results/records.h"

namespace seqbench {

// What `run --count` can count, one row each: the one table of count kinds.
inline constexpr char kCountInstructions[] = "instructions";
inline constexpr char kCountCyclesEstimate[] = "cycles-estimate";
inline constexpr char kCountHwInstructions[] = "hw-instructions";
struct CountKind {
  const char* name;    // as --count and [measure] count take it
  const char* metric;  // its metrics' prefix: <metric>_per_step, _spread, _step_<k>
  const char* unit;    // the stored metrics' unit
  const char* what;    // one line for --help and the run's record
};
const std::vector<CountKind>& CountKinds();
// The row named `name`, or nullptr.
const CountKind* FindCountKind(const std::string& name);
// "instructions, cycles-estimate, hw-instructions", for errors and --help.
std::string CountKindNames();
// Why `kinds` cannot be counted in one run, or "": hw-instructions counts natively, so it
// does not combine with callgrind's kinds (instructions, cycles-estimate).
std::string CountKindsConflict(const std::vector<std::string>& kinds);
// Whether `kinds` counts with hardware counters in a native child (else under callgrind).
bool CountsNatively(const std::vector<std::string>& kinds);
// Whether `kinds` asks callgrind to simulate caches (cycles-estimate), whose sizes are
// pinned (CountCacheText) so that the estimate does not follow the machine's caches.
bool SimulatesCaches(const std::vector<std::string>& kinds);
std::string CountCacheText();

// KCachegrind's "Cycle Estimation" without branch simulation, from one dump's events:
// Ir + 10 (I1mr + D1mr + D1mw) + 100 (ILmr + DLmr + DLmw). An estimate from a simulated
// cache, not a measurement; nullopt when the events lack a term (no --cache-sim).
std::optional<double> CycleEstimate(const std::map<std::string, double>& events);

// The environment every counted child runs in: (variable, value) pairs. One stated level
// (x86-64-v3: AVX2 and FMA, no AVX-512), whatever the machine offers natively.
const std::vector<std::pair<std::string, std::string>>& CountPinning();
// The pinning as one line, "ATEN_CPU_CAPABILITY=avx2 OPENBLAS_CORETYPE=Haswell ...",
// stored with a counted run as `count_pinning`.
std::string CountPinningText();

// Whether this seqbench was built with valgrind/callgrind.h (configure time).
bool CallgrindCompiledIn();
// Whether this process runs under valgrind.
bool RunningUnderValgrind();

// In a native child (hw-instructions): runs `step` once uncounted, then `steps` times, each
// alone counted by the user-space instructions counter (perf_event_open), and returns the
// counts in order. Throws std::runtime_error naming the syscall's error where the kernel
// offers no counter (a VM without a PMU, perf_event_paranoid too high).
std::vector<double> CountStepsWithPerf(const std::function<void()>& step, int64_t steps);
// "" when this process can open the user-space instructions counter, else why not.
std::string HardwareCountersUnavailable();

// In the child: runs `step` once uncollected, then `steps` times, each one alone collected
// and dumped with the description "case <index> step <k>" (k 1-based). Throws
// std::runtime_error when not under valgrind or built without callgrind.h, so that a child
// never reports counts it did not take.
void CountStepsUnderCallgrind(const std::function<void()>& step, int64_t steps, int64_t index);

// The counts of one case's steps, or why there are none.
struct StepCounts {
  // One value per counted step, in order, by CountKind::metric ("instructions",
  // "cycles_estimate", "hw_instructions").
  std::map<std::string, std::vector<double>> steps;
  // Under callgrind: the costliest functions by self instructions per step (the mean of
  // the counted steps), most first, at most kStoredFunctions.
  std::vector<FunctionCost> functions;
  std::string not_counted;  // why none were taken; "" when counted
};

// What one counting child counted: valgrind starts LibTorch in 13 s here, so one child
// counts every case of a run, in the run's order (the same order in every run, so the
// same counts; a case's count may depend on the cases counted before it).
struct CountBatch {
  std::vector<StepCounts> cases;  // one per case asked for, in order
  // What the child reported of the code it ran (blas_core, aten_cpu_capability,
  // glibc_version, ...: CodePathFacts under the pinning), for the run's fingerprint.
  std::vector<std::pair<std::string, std::string>> facts;
  double wall_s = 0;  // the child's whole life, valgrind's start included
};

struct CountRequest {
  // The child's command line (this seqbench, run --count-out ...), given the folder where
  // it must write its files (CaseCountFile, facts) and callgrind its dumps. Its argv[0]
  // is copied into that folder and run from there, and it gets a fixed environment
  // (PATH=/usr/bin:/bin, HOME=/, LC_ALL=C and the pinning): files it reads should be
  // copied there too, so that where the caller's files lie does not move its counts.
  std::function<std::vector<std::string>(const std::string& out_dir)> command;
  int64_t cases = 1;
  int64_t steps = 3;
  double timeout_s = 600;
  std::vector<std::string> kinds = {kCountInstructions};  // CountKind names
  // Progress for a wait of minutes: called on the waiting thread each time the child has
  // finished more cases (their CaseCountFile appeared), with how many it has. The child
  // prints nothing for it, so that its counts cannot move.
  std::function<void(int64_t counted)> on_counted;
};

// Runs the child under the first valgrind on PATH, callgrind (simulating pinned caches for
// cycles-estimate), with the pinning, and reads its per-step dumps; for hw-instructions,
// runs it natively with the same pinning and reads the counts it writes. Never throws for a child
// that fails: each case's reason lands in its StepCounts::not_counted.
CountBatch CountInChild(const CountRequest& request, const std::function<bool()>& should_stop);

// The child's account of case `index` in `out_dir`: "steps_per_sample=N" (each counted
// sample is N steps, a test slowdown's exact extra steps; the parent divides), in a native
// child "hw_step_<k>=count" for each step, or "error=why".
std::string CaseCountFile(const std::string& out_dir, int64_t index);

// "valgrind-3.19.0", or nullopt when valgrind cannot be run.
std::optional<std::string> ValgrindVersion();

// The total of one callgrind dump's text (its `summary:` or `totals:` line, first event),
// or nullopt if it has none.
std::optional<double> CallgrindTotal(const std::string& dump_text);
// Every event's total of one dump, named by its `events:` line ("Ir", "D1mr", ...); empty
// when either line is missing.
std::map<std::string, double> CallgrindEvents(const std::string& dump_text);

// The files the child writes: "key=value" lines.
void WriteFacts(const std::string& path,
                const std::vector<std::pair<std::string, std::string>>& facts);
std::vector<std::pair<std::string, std::string>> ReadFacts(const std::string& path);

// The metrics of a counted case, for each counted series P (CountKind::metric): P_per_step
// (the median of the steps), P_spread ((max - min) / median) and P_step_<k> for each
// step; none when it was not counted.
std::vector<Metric> CountMetrics(const StepCounts& counts);

}  // namespace seqbench
