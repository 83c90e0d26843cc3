// The CaseRunner executes one case of a suite: the correctness check against the
// suite's baseline, warmup, timing through Google Benchmark, and a memory probe. It
// returns a CaseResult and never throws for a failing case: an exception (out of memory
// included) becomes status "error" with its message, so the run goes on.
//
// A case's mode, dtype and device are resolved once (Typed, harness/suite.h) when Prepare
// begins; every later step reads PreparedCase's typed values, never the workload's text.
//
// Thread-safety: one CaseRunner per process, used from one thread. Timing clears and
// fills Google Benchmark's process-wide registry, and each case sets LibTorch's
// process-wide thread counts, so two CaseRunners must never run at once; the runner also
// caches the suite's weights and the reference's outputs per workload.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "harness/equivalence.h"
#include "harness/key_pattern.h"
#include "harness/memory.h"
#include "harness/peer.h"
#include "harness/suite.h"
#include "harness/threads.h"
#include "results/records.h"  // the case statuses

namespace seqbench {

// What Google Benchmark measured; the statistics over the samples are computed by
// stats/statistics.h (one implementation for every report), not taken from its
// aggregates.
struct Timing {
  std::vector<double> samples_s;  // one per repetition: seconds per step
  int64_t iterations = 0;         // steps per repetition
};

struct CaseResult {
  CaseSpec spec;
  std::string status;
  std::string message;    // why: the error, the mismatch, the skip
  bool checked = false;   // false under --check sample/none for the cases left unchecked
  std::string reference;  // what the check compared with, e.g. "baseline float64"
  std::string category, description;  // the variant's, from its registration
  EquivalenceResult correctness;
  Timing timing;
  MemoryUsage memory;
  int64_t tokens_per_step = 0;  // non-padding tokens (generated tokens in generate mode)
  // The process's resident-set peak from the case's set-up to its memory pass (check and
  // reference included); -1 where it is not the case's own (interleaved cases overlap).
  int64_t peak_rss_bytes = -1;
  ThreadsInForce threads;  // what was in force while the case ran
  StepWork work;           // what one timed step evaluates, by the variant
  StepCost cost;           // of one timed step, by the family's formula (0: unknown)
  double wall_s = 0;       // the whole case, checks and warmup included
  // Where the case's wall time went, seconds by phase (results/store.h kCasePhases), for
  // the share a suite spends in its timed steps (report --phases).
  std::map<std::string, double> phases_s;
};

// Which cases the runner checks against the baseline before timing them.
enum class CheckPolicy {
  kFull,    // every case (the default, and CI's)
  kSample,  // the first case of each variant, mode, device and shape (dtype and threads
            // aside); the others are timed unchecked: for exploratory runs
  kNone,    // none: timing only
};
std::string CheckPolicyName(CheckPolicy policy);
std::optional<CheckPolicy> ParseCheckPolicy(const std::string& name);

// Runs a timed step and returns its duration in seconds. The runner calls it once per
// iteration, from inside a Google Benchmark manual-time loop.
using TimedStep = std::function<double()>;

// Waits for queued device work, so that a host clock read afterwards covers it (no-op on
// the CPU). The runner's timer and the roofline's peak measurements both use it.
void Synchronize(const torch::Device& device);

// Google Benchmark as the engine: one registered benchmark, manual time, `repetitions`
// of `iterations` steps each. Throws if a step throws.
Timing MeasureWithGoogleBenchmark(const std::string& name, const TimedStep& step,
                                  int64_t iterations, int64_t repetitions);

// A case between CaseRunner::Prepare and Finish: the variant alive, its batch, and the
// step the timer runs. Heap-allocated: the step's closures point into it, so it is never
// moved or copied.
struct PreparedCase {
  CaseResult result;
  bool ready = false;  // set up, checked, warmed up: may be timed; false: result is final
  std::unique_ptr<Variant> variant;   // null for a peer's case
  std::unique_ptr<PeerProcess> peer;  // a [[peers]] case's Python process; else null
  std::optional<Batch> batch;
  // The workload's mode, dtype and device, resolved once (Typed) when Prepare begins.
  Mode mode = Mode::kTrain;
  torch::ScalarType dtype = torch::kFloat32;
  torch::Device device = torch::kCPU;
  Tolerance tolerance;
  int64_t iterations = 1;
  std::function<void()> step;  // one step, untimed
  // One step as timed and counted: with the test slowdown's extra steps, untimed.
  std::function<void()> measured_step;
  TimedStep timed_step;         // one timed step (test slowdown included)
  int64_t extra_per_mille = 0;  // test slowdown: extra steps, in thousandths
  int64_t carried_per_mille = 0;
  double own_s = 0;  // the case's own wall time, however it is interleaved
  // The CaseRunner's count of resets of the RSS high-water mark when this case made its
  // own (-1: the kernel refused): its peak is its own if no case was prepared since.
  int64_t rss_epoch = -1;
  bool memory_measured = false;  // by the last warmup step
};

class CaseRunner {
 public:
  explicit CaseRunner(const Suite& suite, CheckPolicy check = CheckPolicy::kFull);
  ~CaseRunner();
  // The whole case: Prepare, TimeSamples (the suite's repetitions, and more under
  // max_noise), Finish.
  CaseResult Run(const CaseSpec& spec);

  // The three phases, for a scheduler that interleaves the cases' repetitions
  // (run --interleave): Prepare sets the case up, checks it and warms it up (a skip or a
  // failure leaves it not ready, its result final); TimeSamples takes `repetitions` more
  // samples after `warmup` untimed steps, with the case's threads in force; Finish
  // measures its memory, decides its status, frees it, and gives its result, whose wall_s
  // is the case's own time only.
  std::unique_ptr<PreparedCase> Prepare(const CaseSpec& spec);
  void TimeSamples(PreparedCase& prepared, int64_t repetitions, int64_t warmup);
  CaseResult Finish(std::unique_ptr<PreparedCase> prepared);

 private:
  // The outcome of `family`'s reference (Suite::ReferenceOf) for this workload in `dtype`,
  // computed once per family and workload; nullptr with `skipped_because` set when the
  // reference declines the workload (Variant::SkipReason, e.g. naive attention's budget).
  const StepOutcome* ReferenceFor(const PreparedCase& p, const std::string& family,
                                  torch::ScalarType dtype, std::string& skipped_because);

  // The check of a prepared case against its reference (ReferenceFor): `variant`'s step
  // on the whole batch, whose logits are compared on CheckRows(batch), and a fresh copy's
  // step on those rows alone, whose logits, loss and gradients are compared. Generate
  // mode compares every generated token. `variant` takes its step (train: moves by one
  // optimizer step).
  EquivalenceResult CheckCase(PreparedCase& p, const std::string& family,
                              const StepOutcome& reference);

  // What a case's check compares with: the family's reference, in float64 where it has
  // it (generate: the case's dtype); `run` false under the policy, or when the case is the
  // reference itself in that dtype.
  struct CheckPlan {
    const VariantSpec* baseline = nullptr;
    torch::ScalarType reference_dtype = torch::kFloat64;
    bool own_reference = false;
    bool run = false;
  };
  CheckPlan PlanCheck(const PreparedCase& p, const std::string& family);
  // The check of a set-up case under `plan`: result.correctness, checked and reference.
  void RunCheck(PreparedCase& p, const std::string& family, const CheckPlan& plan);
  // Prepare for a [[peers]] case: its Python process set up with the suite's weights and
  // batch, its float64 step on the check rows compared with the reference, its warmup.
  void PreparePeer(PreparedCase& p, const PeerEntry& entry);

  // Whether `spec` is checked under the policy (sample: records the shape it covers).
  bool ShouldCheck(const CaseSpec& spec);

  const Suite& suite_;
  CheckPolicy check_;
  std::set<std::string> sampled_;  // variant, mode, device and shape already checked
  int64_t rss_epoch_ = 0;          // resets of the RSS high-water mark (PreparedCase)
  // The test slowdown's case filter, compiled once for the suite (null when off).
  std::unique_ptr<KeyPattern> slowed_cases_;
  // The shared weights of a workload's model (float64 on CPU; each variant copies them in
  // Setup()), one set per family and distinct model fields.
  const ParameterSet& WeightsFor(const Workload& workload, const std::string& family);
  std::map<std::string, ParameterSet> weights_;
  std::map<std::string, StepOutcome> references_;
  std::map<std::string, std::string> reference_skips_;  // why a reference declined
};

}  // namespace seqbench
