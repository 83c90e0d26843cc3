// The results store: one SQLite database holding runs, their environment, and per case
// the correctness result, the raw timing samples and the metrics. Schema in
// results/README.md; its version is in the schema_version table.
//
// Every write is one transaction (a run's header, or one finished case), in WAL mode
// with a busy timeout, so two processes can write the same file at once and an
// interrupted run leaves only whole cases behind. Every SQLite return code is checked;
// failures throw StoreError naming the database and the statement.
//
// Thread-safety: a Store is one connection; use it from one thread at a time. Several
// Stores (in one or more processes) may share a file.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

struct sqlite3;

namespace seqbench {

class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr int kSchemaVersion = 4;

// Run statuses: "running" until the last case is stored; "complete" then; "interrupted"
// when stopped early (resume with --resume).
struct RunRecord {
  int64_t run_id = 0;
  std::string uuid;  // identifies the run across databases (merge)
  std::string suite_name, suite_path, suite_text, suite_hash;
  std::string command_line;
  std::string shard;  // "i/n", or "" for the whole suite
  uint64_t seed = 0;
  std::string status;
  std::string started_at, finished_at;  // ISO 8601 UTC; finished_at empty while running
  std::vector<std::pair<std::string, std::string>> environment;
  std::vector<std::string> warnings;
};

struct Metric {
  std::string name;
  double value;
  std::string unit;  // "s", "ratio", "tokens/s", "bytes", "count"
};

struct CaseRecord {
  std::string case_key;  // unique per run; what resume, merge and compare match on
  int64_t position = 0;  // order in the suite's expansion
  std::string variant_name, variant_key, options;  // options as "name=value,..."
  std::string category, description;               // the variant's improvement category and summary
  std::string mode, dtype, device;
  int64_t batch = 0, seq_len = 0, min_len = 0, generate_tokens = 0;
  int64_t layers = 0, width = 0;  // the model the case ran (0 in databases before v3)
  std::string status;             // ok | mismatch | error | skipped
  std::string message;
  std::string reference;   // what correctness compared with
  int64_t iterations = 0;  // steps per repetition
  int64_t tokens_per_step = 0;
  double wall_s = 0;
  std::vector<double> samples_s;  // seconds per step, one per repetition
  std::vector<Metric> metrics;

  std::optional<double> MetricValue(const std::string& name) const;
};

// One optimizer step of a `seqbench train` pipeline (schema v4). The pipeline's case row
// (its throughput and final losses) is written when it finishes; its steps are written
// as it goes, so that a long training can be followed and an interrupted one still shows.
struct TrainingStepRecord {
  int64_t step = 0;                       // 1-based
  double loss = 0;                        // mean next-token loss of the step's batch (nats/token)
  std::optional<double> validation_loss;  // at evaluation steps only
  double learning_rate = 0;
  double grad_norm = 0;  // before clipping; NaN (stored NULL) for a skipped step
  double loss_scale = 1;
  bool skipped = false;
  int64_t tokens = 0;    // non-padding tokens of the step
  double elapsed_s = 0;  // wall time from the pipeline's start to the end of this step
};

struct MergeCounts {
  int64_t runs_added = 0, cases_added = 0, cases_already_present = 0;
};

class Store {
 public:
  // Opens or creates the database ("" or ":memory:" for an in-memory one) and brings
  // its schema to kSchemaVersion. Refuses a database from a newer seqbench.
  explicit Store(const std::string& path);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Inserts the run with its environment and warnings; returns its run_id.
  int64_t CreateRun(const RunRecord& run);
  // Stores one finished case with its samples and metrics, atomically. Throws if the run
  // already has a case with this key.
  void AddCase(int64_t run_id, const CaseRecord& record);
  void SetRunStatus(int64_t run_id, const std::string& status, const std::string& finished_at);

  std::optional<RunRecord> FindRun(int64_t run_id) const;
  std::vector<RunRecord> Runs() const;  // oldest first, without environment and warnings
  std::vector<CaseRecord> Cases(int64_t run_id) const;  // in suite order
  std::set<std::string> CaseKeys(int64_t run_id) const;

  // Appends a pipeline's steps (one transaction). Throws on a step already stored.
  void AddTrainingSteps(int64_t run_id, const std::string& case_key,
                        const std::vector<TrainingStepRecord>& steps);
  std::vector<TrainingStepRecord> TrainingSteps(int64_t run_id, const std::string& case_key) const;

  // Copies every run of `other` (matched by uuid) and every case it lacks, with the
  // case's training steps.
  MergeCounts MergeFrom(const Store& other);

  const std::string& path() const { return path_; }

 private:
  class Statement;
  class Transaction;
  void Execute(const std::string& sql) const;
  void EnsureSchema();
  void Check(int rc, const char* what) const;
  static RunRecord ReadRunRow(const Statement& row);  // columns of kRunColumns

  std::string path_;
  sqlite3* db_ = nullptr;
};

}  // namespace seqbench
