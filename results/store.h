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

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "results/records.h"

struct sqlite3;

namespace seqbench {

class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The file given is not a database this seqbench can use (missing where it must exist,
// not SQLite, or from a newer seqbench): the user's input, not a failure of the store. It
// is thrown before anything is written.
class UnusableDatabase : public StoreError {
 public:
  using StoreError::StoreError;
};

inline constexpr int kSchemaVersion = 13;

struct MergeCounts {
  int64_t runs_added = 0, cases_added = 0, cases_already_present = 0;
  // Failed cases (error, timeout) of the target that the source ran again: replaced.
  int64_t cases_updated = 0;
  std::vector<std::string> updated;  // "run UUID: case KEY", for the message
};

// A merge that would keep a stale result or drop a good one: a case both databases hold,
// measured differently, where the target's is not a failure that a retry replaces. The
// message names every such case; nothing was written.
class MergeConflict : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  MergeConflict(const std::string& what, size_t source)
      : std::runtime_error(what), source_(source) {}
  // Which of MergeFromEach's sources it is with (0 for MergeFrom's one).
  size_t source() const { return source_; }

 private:
  size_t source_ = 0;
};

// How a Store opens its file.
enum class StoreAccess {
  // Creates the file if needed, migrates its schema, switches it to WAL: for commands
  // that store runs (run, train, merge's target).
  kReadWrite,
  // Never writes, creates or converts anything: for the commands that only read (show,
  // report, check, compare, plot, readme, merge's sources), so that they work on read-only
  // storage and cannot damage what they read. An older schema is migrated in a private
  // in-memory copy; writes throw StoreError. The -wal and -shm files that reading a WAL
  // database creates are removed at close when no other connection had them open.
  kReadOnly,
};

class Store {
 public:
  // Opens the database ("" or ":memory:" for an in-memory one, read-write only) and
  // brings its schema to kSchemaVersion. Throws UnusableDatabase, having changed nothing,
  // for a file from a newer seqbench, one that is not SQLite, an SQLite file with another
  // program's tables, (read-write) one that PRAGMA quick_check finds damaged, or
  // (read-only) none at all.
  explicit Store(const std::string& path, StoreAccess access = StoreAccess::kReadWrite);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Inserts the run with its environment and warnings; returns its run_id.
  int64_t CreateRun(const RunRecord& run);
  // Stores one finished case with its samples and metrics, atomically. Throws if the run
  // already has a case with this key.
  void AddCase(int64_t run_id, const CaseRecord& record);
  void SetRunStatus(int64_t run_id, const std::string& status, const std::string& finished_at);
  // Stores environment entries measured after the run's start (its end: load, busy
  // processes) and the warnings they raise; an entry of the same key, and the warnings
  // "at the run's end ..." already stored, are replaced, so that a resumed run records the
  // end of its last part.
  void AddRunEnvironment(int64_t run_id,
                         const std::vector<std::pair<std::string, std::string>>& entries,
                         const std::vector<std::string>& warnings);
  // Removes the run's cases with these statuses (their samples and metrics too), so that a
  // resume can run them again (run --resume --retry-failed); returns how many.
  int64_t RemoveCases(int64_t run_id, const std::vector<std::string>& statuses);
  // Removes one case with its samples, metrics, functions and training steps.
  void RemoveCase(int64_t run_id, const std::string& case_key);
  // Stores `record` in place of the run's case with the same key (samples and metrics too;
  // a training pipeline's steps stay), atomically: a training run extended to more steps
  // writes its pipeline's record again, and keeps the old one if it does not finish.
  void ReplaceCase(int64_t run_id, const CaseRecord& record);

  std::optional<RunRecord> FindRun(int64_t run_id) const;
  std::vector<RunRecord> Runs() const;  // oldest first, without environment and warnings
  std::vector<CaseRecord> Cases(int64_t run_id) const;  // in suite order
  std::set<std::string> CaseKeys(int64_t run_id) const;
  // The case of run `run_id` whose key is `case_key`, if stored.
  std::optional<CaseRecord> FindCase(int64_t run_id, const std::string& case_key) const;

  // Appends a pipeline's steps (one transaction). Throws on a step already stored.
  void AddTrainingSteps(int64_t run_id, const std::string& case_key,
                        const std::vector<TrainingStepRecord>& steps);
  std::vector<TrainingStepRecord> TrainingSteps(int64_t run_id, const std::string& case_key) const;
  // Removes a pipeline's steps after `step`: those logged after the checkpoint a resume
  // starts from, which it will take again. Returns how many.
  int64_t RemoveTrainingStepsAfter(int64_t run_id, const std::string& case_key, int64_t step);
  std::optional<RunRecord> FindRunByUuid(const std::string& uuid) const;

  // Copies every run of `other` (matched by uuid) and every case it lacks, with the
  // case's training steps: each run in one transaction, so that a merge that fails or is
  // killed leaves that run in this store as it was (absent, or with its earlier cases).
  // A case both hold is left when the two are the same measurement; replaced when this
  // store's is a failure (error, timeout) that `other` ran again (run --resume
  // --retry-failed); else the merge throws MergeConflict before writing anything.
  MergeCounts MergeFrom(const Store& other);
  // MergeFrom of each of `sources` in order, all in one transaction: every source, or (on
  // a MergeConflict with any of them, between a source and the target or between two
  // sources over a case the target lacked, or on any other failure) none. The conflict
  // names the source in MergeConflict::source().
  // `on_source`, if given, is called after each source is merged (inside the
  // transaction), with how many of the sources are done: the caller's progress line.
  std::vector<MergeCounts> MergeFromEach(
      const std::vector<const Store*>& sources,
      const std::function<void(size_t done, size_t total)>& on_source = {});

  // Removes the runs with everything stored under them (environment, warnings,
  // expectations, cases with their samples and metrics, training steps), all in one
  // transaction: a failure or a kill leaves every one of them as it was. Returns the cases
  // removed. Which runs may go is the caller's rule (results/run_removal.h).
  int64_t RemoveRuns(const std::vector<int64_t>& run_ids);
  // Rewrites the file without the pages that removed rows left free (SQLite's VACUUM),
  // and checkpoints the log so that the file on disk shrinks now.
  void Vacuum();

  const std::string& path() const { return path_; }
  // Throws UnusableDatabase, naming SQLite's first finding, unless PRAGMA quick_check
  // finds the file whole. Writers run it when they open a file; `merge` on its sources.
  void QuickCheck() const;
  // What a reader should know about what it reads (the writes it cannot see); printed by
  // the command that opened the store.
  const std::vector<std::string>& warnings() const { return warnings_; }

  // Throws StoreError if the file at path() is no longer the one this Store opened
  // (deleted, or replaced by another file): a run must not go on writing into an
  // unlinked file whose results nobody will ever see. No-op for ":memory:".
  void CheckFileIsStillThere() const;

 private:
  // Which cases of this store MergeFrom(other) replaces (run uuid -> case keys); throws
  // MergeConflict naming every case it may not decide.
  std::map<std::string, std::set<std::string>> CasesToReplace(const Store& other) const;
  // AddCase's inserts, inside the caller's transaction.
  void InsertCase(int64_t run_id, const CaseRecord& record);
  class Statement;
  class Transaction;
  void Execute(const std::string& sql) const;
  void Open(const std::string& target, int flags);
  void Close();
  // The stored schema version; throws UnusableDatabase for a newer one or a non-database.
  int64_t ReadSchemaVersion() const;
  void EnsureSchema();
  // Replaces the read-only connection with an in-memory copy of its database.
  void CopyIntoMemory();
  // Creates the case_results view, or recreates it where the stored one differs from
  // internal::CaseResultsView() (a workload field or CSV metric added since), inside
  // EnsureSchema's transaction.
  void RefreshCaseResultsView();
  // Fills v5's typed run facts and model columns of runs stored before v5.
  void BackfillV5();
  void AddExpectations(int64_t run_id, const std::vector<Expectation>& expectations);
  void Check(int rc, const char* what) const;
  // A run's RunColumns() bound to ?1.. of an INSERT, and read from columns 1.. of a
  // SELECT whose column 0 is run_id.
  static void BindRunRow(Statement& insert, const RunRecord& run);
  static RunRecord ReadRunRow(const Statement& row);
  // The run's cases in suite order; only the one with `case_key` when it is given.
  // Reads the columns `schema_version` has (BackfillV5 runs before later migrations).
  std::vector<CaseRecord> ReadCases(int64_t run_id, const std::string* case_key,
                                    int schema_version = kSchemaVersion) const;

  // Throws UnusableDatabase, naming them, where a file without seqbench's schema has
  // tables of its own (another program's SQLite file).
  void RefuseForeignTables() const;
  // The refusal of a damaged file, with SQLite's finding, for both places that find one.
  UnusableDatabase DamagedDatabase(const std::string& finding) const;
  // Where the read-only fallback ignores a -wal file with writes in it: a warning.
  void WarnOfUnreadLog();

  std::string path_;
  sqlite3* db_ = nullptr;
  // Transactions open on this connection: the outermost BEGINs and COMMITs, each inner one
  // is a savepoint, so that AddCase inside MergeFrom's per-run transaction still undoes
  // only itself on its own failure, and the whole run on the merge's.
  mutable int transaction_depth_ = 0;
  std::vector<std::string> warnings_;
  // The file's identity when opened, for CheckFileIsStillThere().
  uint64_t device_ = 0, inode_ = 0;
};

}  // namespace seqbench
