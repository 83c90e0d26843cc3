// What seqbench stores, as plain values: a run (RunRecord) with its expectations, a case
// (CaseRecord) with its samples, metrics and counted functions, a training step. The
// store (results/store.h) reads and writes them; the reports, the harness and the command
// line pass them around without touching SQLite, and include this header alone.
//
// Thread-safety: plain values; a const record may be read from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "results/case_identity.h"
#include "results/run_settings.h"

namespace seqbench {

// A ratio a run's suite expects, evaluated by `seqbench check` on the stored run alone
// (suites/README.md): stored with the run, so that a run stays checkable whatever the
// suite file or the variant registry say today.
struct Expectation {
  std::string what;     // speedup | memory_ratio | recompute_ratio | time_per_doubling |
                        // gemm_floor | all_correct; training: throughput | memory_ratio |
                        // optimizer_state_ratio | loss_match | validation_loss_ratio |
                        // all_correct
  std::string variant;  // the variant (or pipeline) name the ratio is about; for
                        // time_per_doubling "" means every variant
  std::string over;     // the name it is compared with, on the same workload; for
                        // time_per_doubling the workload field that doubles; "" for
                        // gemm_floor
  std::optional<double> at_least, at_most;
  std::map<std::string, std::string> where;  // workload fields that select the cases
  int64_t line = 0;                          // in the suite file, for messages
};

inline constexpr char kRunKindBenchmark[] = "benchmark";  // seqbench run
inline constexpr char kRunKindTraining[] = "training";    // seqbench train

// Run statuses: "running" until the last case is stored; "complete" then; "interrupted"
// when stopped early (resume with --resume).
struct RunRecord {
  int64_t run_id = 0;
  std::string uuid;  // identifies the run across databases (merge)
  std::string kind = kRunKindBenchmark;
  std::string suite_name, suite_path, suite_hash;
  // The suite file's text, for provenance only: reports read the typed facts below and
  // never parse it.
  std::string suite_text;
  std::string command_line;
  std::string shard;  // "i/n", or "" for the whole suite
  // run --group: the logical run this shard belongs to (results/run_group.h), "" for none
  // (schema v10).
  std::string group;
  uint64_t seed = 0;
  std::string status;
  std::string started_at, finished_at;  // ISO 8601 UTC; finished_at empty while running
  // Typed facts of how the run measured (schema v5; label, max noise and time v7).
  std::string baseline;  // the correctness and speedup reference (training: the reference
                         // pipeline)
  RunSettings settings;  // as stored (RunSettings::AsStored)
  int64_t threads = 0;   // the most threads any case runs with (training: LibTorch's)
  std::string label;     // free text from `run --label`, for selecting runs
  std::vector<Expectation> expectations;
  std::vector<std::pair<std::string, std::string>> environment;
  std::vector<std::string> warnings;

  // An environment entry's value, or "".
  std::string Environment(const std::string& key) const;
};

// Environment keys of the machine limits a benchmark run measures before its first case
// (harness/roofline.h), one per device, dtype and thread count of its cases:
// "peak_gemm_gflops.cpu.float32.t1" (GFLOP/s) and "peak_stream_gbs.cpu.t1" (GB/s).
std::string PeakGemmKey(const std::string& device, const std::string& dtype, int64_t threads);
std::string PeakStreamKey(const std::string& device, int64_t threads);

struct Metric {
  std::string name;
  double value;      // NaN (stored NULL) when the measurement was not a number
  std::string unit;  // "s", "ratio", "tokens/s", "bytes", "count"
};

// One function's own share of a counted case (run --count instructions): callgrind's self
// instructions (its callees' left out) per step, the mean over the counted steps (schema
// v11), so that a comparison can say which functions moved.
struct FunctionCost {
  std::string function;  // demangled, as callgrind names it
  double instructions = 0;
};
// How many functions a counted case keeps, the costliest: enough for the functions behind
// any change worth a gate's notice, few enough that a database stays small. A case with
// fewer stored every function its steps ran.
inline constexpr size_t kStoredFunctions = 100;

// What `reference` says of a case timed without a correctness check (run --check
// sample|none): "not checked (--check sample)".
inline constexpr char kNotCheckedReference[] = "not checked";

// A benchmark case's phases, in order, each stored as the metric phase_<name>_s: setup
// (the variant built, its weights and batch made), check (the reference and the variant's
// checked step), warmup, timed (Google Benchmark's loop around the samples), memory (the
// probed step), teardown (the case's tensors freed).
inline constexpr const char* kCasePhases[] = {"setup", "check",  "warmup",
                                              "timed", "memory", "teardown"};

// Case statuses, as stored (the cases table's CHECK constraint lists the same).
inline constexpr char kStatusOk[] = "ok";              // correct (or unchecked), timed
inline constexpr char kStatusMismatch[] = "mismatch";  // timed, but outside its tolerance or
                                                       // not finite
inline constexpr char kStatusError[] = "error";        // threw or crashed; message says what
inline constexpr char kStatusSkipped[] = "skipped";    // not runnable here (e.g. no CUDA)
inline constexpr char kStatusTimeout[] = "timeout";    // killed past run --case-timeout
inline constexpr char kStatusDiverged[] = "diverged";  // training: a non-finite loss

struct CaseRecord {
  CaseIdentity identity;              // its Key() is the stored case_key
  int64_t position = 0;               // order in the suite's expansion
  std::string category, description;  // the variant's improvement category and summary
  std::string status;                 // one of the kStatus* above
  std::string message;
  std::string reference;   // what correctness compared with
  int64_t iterations = 0;  // steps per repetition
  int64_t tokens_per_step = 0;
  double wall_s = 0;
  std::vector<double> samples_s;  // seconds per step, one per repetition
  std::vector<Metric> metrics;
  // Counted cases: the costliest functions by self instructions per step, most first
  // (harness/callgrind_functions.h); empty when not counted under callgrind.
  std::vector<FunctionCost> functions;

  std::string key() const { return identity.Key(); }
  // Timed but not compared with the baseline (neither correct nor wrong).
  bool unchecked() const { return reference.rfind(kNotCheckedReference, 0) == 0; }
  const std::string& name() const { return identity.variant_name; }
  const Workload& workload() const { return identity.workload; }
  std::optional<double> MetricValue(const std::string& name) const;
};

// One optimizer step of a `seqbench train` pipeline (schema v4). The pipeline's case row
// (its throughput and final losses) is written when it finishes; its steps are written
// as it goes, so that a long training can be followed and an interrupted one still shows.
struct TrainingStepRecord {
  int64_t step = 0;  // 1-based
  double loss = 0;   // mean next-token loss of the step's batch (nats/token); NaN stored NULL
  std::optional<double> validation_loss;  // at evaluation steps only
  double learning_rate = 0;
  double grad_norm = 0;  // before clipping; NaN (stored NULL) for a skipped step
  double loss_scale = 1;
  bool skipped = false;
  int64_t tokens = 0;         // non-padding tokens of the step
  int64_t padded_tokens = 0;  // batch × padded length, summed over micro-batches (v6; 0 before)
  double elapsed_s = 0;       // wall time from the pipeline's start to the end of this step
};

}  // namespace seqbench
