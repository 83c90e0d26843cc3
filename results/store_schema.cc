// The store's schema: the tables a new database is created with, each migration from one
// version to the next, and the v5 backfill of older runs' typed facts.
#include <sqlite3.h>

#include <cstdlib>
#include <stdexcept>

#include "results/legacy_facts.h"
#include "results/metrics.h"
#include "results/store.h"
#include "results/store_internal.h"

namespace seqbench {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE runs (
  run_id       INTEGER PRIMARY KEY,
  uuid         TEXT NOT NULL UNIQUE,
  suite_name   TEXT NOT NULL,
  suite_path   TEXT NOT NULL,
  suite_text   TEXT NOT NULL,
  suite_hash   TEXT NOT NULL,
  command_line TEXT NOT NULL,
  shard        TEXT NOT NULL,
  seed         INTEGER NOT NULL,
  status       TEXT NOT NULL CHECK (status IN ('running', 'complete', 'interrupted')),
  started_at   TEXT NOT NULL,
  finished_at  TEXT
);
CREATE TABLE environment (
  run_id INTEGER NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  key    TEXT NOT NULL,
  value  TEXT NOT NULL,
  PRIMARY KEY (run_id, key)
);
CREATE TABLE warnings (
  run_id  INTEGER NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  message TEXT NOT NULL
);
CREATE TABLE cases (
  case_id         INTEGER PRIMARY KEY,
  run_id          INTEGER NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  case_key        TEXT NOT NULL,
  position        INTEGER NOT NULL,
  variant_name    TEXT NOT NULL,
  variant_key     TEXT NOT NULL,
  options         TEXT NOT NULL,
  mode            TEXT NOT NULL,
  dtype           TEXT NOT NULL,
  device          TEXT NOT NULL,
  batch           INTEGER NOT NULL,
  seq_len         INTEGER NOT NULL,
  min_len         INTEGER NOT NULL,
  generate_tokens INTEGER NOT NULL,
  status          TEXT NOT NULL CHECK (status IN ('ok', 'mismatch', 'error', 'skipped')),
  message         TEXT NOT NULL,
  reference       TEXT NOT NULL,
  iterations      INTEGER NOT NULL,
  tokens_per_step INTEGER NOT NULL,
  wall_s          REAL NOT NULL,
  UNIQUE (run_id, case_key)
);
CREATE TABLE samples (
  case_id    INTEGER NOT NULL REFERENCES cases(case_id) ON DELETE CASCADE,
  repetition INTEGER NOT NULL,
  seconds    REAL NOT NULL,
  PRIMARY KEY (case_id, repetition)
);
CREATE TABLE metrics (
  case_id INTEGER NOT NULL REFERENCES cases(case_id) ON DELETE CASCADE,
  name    TEXT NOT NULL,
  value   REAL NOT NULL,
  unit    TEXT NOT NULL,
  PRIMARY KEY (case_id, name)
);
)sql";

// Each step from version N-1 to N; a new database is created at version 1 and brought up.
struct Migration {
  int version;
  const char* sql;
};
constexpr Migration kMigrations[] = {
    {2,
     "ALTER TABLE cases ADD COLUMN category TEXT NOT NULL DEFAULT '';"
     "ALTER TABLE cases ADD COLUMN description TEXT NOT NULL DEFAULT '';"},
    {3,
     "ALTER TABLE cases ADD COLUMN layers INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE cases ADD COLUMN width INTEGER NOT NULL DEFAULT 0;"},
    {4,
     "CREATE TABLE training_steps ("
     "  run_id          INTEGER NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,"
     "  case_key        TEXT NOT NULL,"
     "  step            INTEGER NOT NULL,"
     "  loss            REAL NOT NULL,"
     "  validation_loss REAL,"
     "  learning_rate   REAL NOT NULL,"
     "  grad_norm       REAL,"
     "  loss_scale      REAL NOT NULL,"
     "  skipped         INTEGER NOT NULL,"
     "  tokens          INTEGER NOT NULL,"
     "  elapsed_s       REAL NOT NULL,"
     "  PRIMARY KEY (run_id, case_key, step));"},
    // v5: the run's measurement facts as typed columns and its expectations as rows, so
    // that reports never parse the stored suite text; every case carries its whole model.
    // BackfillV5() fills them for runs stored before.
    {5,
     "ALTER TABLE runs ADD COLUMN kind TEXT NOT NULL DEFAULT 'benchmark' "
     "  CHECK (kind IN ('benchmark', 'training'));"
     "ALTER TABLE runs ADD COLUMN baseline TEXT NOT NULL DEFAULT '';"
     "ALTER TABLE runs ADD COLUMN repetitions INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE runs ADD COLUMN warmup INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE runs ADD COLUMN min_time_s REAL NOT NULL DEFAULT 0;"
     "ALTER TABLE runs ADD COLUMN threads INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE runs ADD COLUMN check_policy TEXT NOT NULL DEFAULT 'full';"
     "ALTER TABLE cases ADD COLUMN heads INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE cases ADD COLUMN vocab_size INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE cases ADD COLUMN threads INTEGER NOT NULL DEFAULT 1;"
     "CREATE TABLE expectations ("
     "  run_id   INTEGER NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,"
     "  position INTEGER NOT NULL,"
     "  what     TEXT NOT NULL,"
     "  variant  TEXT NOT NULL,"
     "  over     TEXT NOT NULL,"
     "  at_least REAL,"
     "  at_most  REAL,"
     "  filters  TEXT NOT NULL,"
     "  line     INTEGER NOT NULL,"
     "  PRIMARY KEY (run_id, position));"},
    // v6: NaN is a result, not a constraint violation. SQLite stores a NaN REAL as NULL, so
    // a metric's value and a step's loss become nullable (NULL reads back as NaN); a case
    // may also have timed out (run --case-timeout) or, as a training pipeline, diverged; a
    // step keeps its padded tokens, so that a resumed pipeline's metrics cover all its steps.
    // SQLite cannot relax a column's constraint in place: each table is rebuilt and
    // renamed (https://sqlite.org/lang_altertable.html, "other kinds of table schema
    // changes"), with foreign keys off while the old table is dropped (Store::Store), and
    // rowids kept, since they order a case's metrics.
    {6,
     "CREATE TABLE cases_v6 ("
     "  case_id         INTEGER PRIMARY KEY,"
     "  run_id          INTEGER NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,"
     "  case_key        TEXT NOT NULL,"
     "  position        INTEGER NOT NULL,"
     "  variant_name    TEXT NOT NULL,"
     "  variant_key     TEXT NOT NULL,"
     "  options         TEXT NOT NULL,"
     "  mode            TEXT NOT NULL,"
     "  dtype           TEXT NOT NULL,"
     "  device          TEXT NOT NULL,"
     "  batch           INTEGER NOT NULL,"
     "  seq_len         INTEGER NOT NULL,"
     "  min_len         INTEGER NOT NULL,"
     "  generate_tokens INTEGER NOT NULL,"
     "  status          TEXT NOT NULL CHECK (status IN ('ok', 'mismatch', 'error', 'skipped',"
     "                                                  'timeout', 'diverged')),"
     "  message         TEXT NOT NULL,"
     "  reference       TEXT NOT NULL,"
     "  iterations      INTEGER NOT NULL,"
     "  tokens_per_step INTEGER NOT NULL,"
     "  wall_s          REAL NOT NULL,"
     "  category        TEXT NOT NULL DEFAULT '',"
     "  description     TEXT NOT NULL DEFAULT '',"
     "  layers          INTEGER NOT NULL DEFAULT 0,"
     "  width           INTEGER NOT NULL DEFAULT 0,"
     "  heads           INTEGER NOT NULL DEFAULT 0,"
     "  vocab_size      INTEGER NOT NULL DEFAULT 0,"
     "  threads         INTEGER NOT NULL DEFAULT 1,"
     "  UNIQUE (run_id, case_key));"
     "INSERT INTO cases_v6 SELECT case_id, run_id, case_key, position, variant_name, variant_key,"
     "  options, mode, dtype, device, batch, seq_len, min_len, generate_tokens, status, message,"
     "  reference, iterations, tokens_per_step, wall_s, category, description, layers, width,"
     "  heads, vocab_size, threads FROM cases;"
     "DROP TABLE cases;"
     "ALTER TABLE cases_v6 RENAME TO cases;"
     "CREATE TABLE metrics_v6 ("
     "  case_id INTEGER NOT NULL REFERENCES cases(case_id) ON DELETE CASCADE,"
     "  name    TEXT NOT NULL,"
     "  value   REAL,"
     "  unit    TEXT NOT NULL,"
     "  PRIMARY KEY (case_id, name));"
     "INSERT INTO metrics_v6 (rowid, case_id, name, value, unit)"
     "  SELECT rowid, case_id, name, value, unit FROM metrics;"
     "DROP TABLE metrics;"
     "ALTER TABLE metrics_v6 RENAME TO metrics;"
     "CREATE TABLE training_steps_v6 ("
     "  run_id          INTEGER NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,"
     "  case_key        TEXT NOT NULL,"
     "  step            INTEGER NOT NULL,"
     "  loss            REAL,"
     "  validation_loss REAL,"
     "  learning_rate   REAL NOT NULL,"
     "  grad_norm       REAL,"
     "  loss_scale      REAL NOT NULL,"
     "  skipped         INTEGER NOT NULL,"
     "  tokens          INTEGER NOT NULL,"
     "  elapsed_s       REAL NOT NULL,"
     "  padded_tokens   INTEGER NOT NULL DEFAULT 0,"
     "  PRIMARY KEY (run_id, case_key, step));"
     "INSERT INTO training_steps_v6 (run_id, case_key, step, loss, validation_loss,"
     "  learning_rate, grad_norm, loss_scale, skipped, tokens, elapsed_s)"
     "  SELECT run_id, case_key, step, loss, validation_loss, learning_rate, grad_norm,"
     "  loss_scale, skipped, tokens, elapsed_s FROM training_steps;"
     "DROP TABLE training_steps;"
     "ALTER TABLE training_steps_v6 RENAME TO training_steps;"},
    // A free label given at `run --label`, so that a CI can pick its base run by name;
    // adaptive stopping's target and budget (run --max-noise, --max-time).
    {7,
     "ALTER TABLE runs ADD COLUMN label TEXT NOT NULL DEFAULT '';"
     "ALTER TABLE runs ADD COLUMN max_noise REAL NOT NULL DEFAULT 0;"
     "ALTER TABLE runs ADD COLUMN max_time_s REAL NOT NULL DEFAULT 0;"},
    // The attention family's feed-forward activation, a model field of every case; the
    // cases stored before had none, which reads as the default (and keeps their keys).
    {8, "ALTER TABLE cases ADD COLUMN ffn TEXT NOT NULL DEFAULT 'gelu';"},
    // The case_results view (CaseResultsView) for SQL and pandas; EnsureSchema keeps it in
    // step with the workload fields and metrics from then on.
    {9, "DROP VIEW IF EXISTS case_results;"},
    // v10: the run group a shard belongs to (run --group), which gathers shards into one
    // logical run.
    {10, "ALTER TABLE runs ADD COLUMN run_group TEXT NOT NULL DEFAULT '';"},
    // v11: a counted case's costliest functions by self instructions per step, so that
    // `compare` can say which functions moved between two counted runs.
    {11,
     "CREATE TABLE case_functions ("
     "  case_id      INTEGER NOT NULL REFERENCES cases(case_id) ON DELETE CASCADE,"
     "  function     TEXT NOT NULL,"
     "  instructions REAL NOT NULL,"
     "  PRIMARY KEY (case_id, function));"},
    // v12: the per-case and per-step tables clustered on their keys (WITHOUT ROWID), so
    // that SQLite keeps no second copy of each key in an automatic index: that copy was a
    // third of the published stores (training_steps' case keys above all). A case's
    // metrics kept their insertion order in the rowid; it is a column now, `position`.
    {12,
     "CREATE TABLE metrics_v12 ("
     "  case_id  INTEGER NOT NULL REFERENCES cases(case_id) ON DELETE CASCADE,"
     "  name     TEXT NOT NULL,"
     "  position INTEGER NOT NULL,"
     "  value    REAL,"
     "  unit     TEXT NOT NULL,"
     "  PRIMARY KEY (case_id, name)) WITHOUT ROWID;"
     "INSERT INTO metrics_v12 (case_id, name, position, value, unit)"
     "  SELECT case_id, name, row_number() OVER (PARTITION BY case_id ORDER BY rowid) - 1,"
     "  value, unit FROM metrics;"
     "DROP TABLE metrics;"
     "ALTER TABLE metrics_v12 RENAME TO metrics;"
     "CREATE TABLE samples_v12 ("
     "  case_id    INTEGER NOT NULL REFERENCES cases(case_id) ON DELETE CASCADE,"
     "  repetition INTEGER NOT NULL,"
     "  seconds    REAL NOT NULL,"
     "  PRIMARY KEY (case_id, repetition)) WITHOUT ROWID;"
     "INSERT INTO samples_v12 SELECT case_id, repetition, seconds FROM samples;"
     "DROP TABLE samples;"
     "ALTER TABLE samples_v12 RENAME TO samples;"
     "CREATE TABLE case_functions_v12 ("
     "  case_id      INTEGER NOT NULL REFERENCES cases(case_id) ON DELETE CASCADE,"
     "  function     TEXT NOT NULL,"
     "  instructions REAL NOT NULL,"
     "  PRIMARY KEY (case_id, function)) WITHOUT ROWID;"
     "INSERT INTO case_functions_v12 SELECT case_id, function, instructions FROM case_functions;"
     "DROP TABLE case_functions;"
     "ALTER TABLE case_functions_v12 RENAME TO case_functions;"
     "CREATE TABLE training_steps_v12 ("
     "  run_id          INTEGER NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,"
     "  case_key        TEXT NOT NULL,"
     "  step            INTEGER NOT NULL,"
     "  loss            REAL,"
     "  validation_loss REAL,"
     "  learning_rate   REAL NOT NULL,"
     "  grad_norm       REAL,"
     "  loss_scale      REAL NOT NULL,"
     "  skipped         INTEGER NOT NULL,"
     "  tokens          INTEGER NOT NULL,"
     "  elapsed_s       REAL NOT NULL,"
     "  padded_tokens   INTEGER NOT NULL DEFAULT 0,"
     "  PRIMARY KEY (run_id, case_key, step)) WITHOUT ROWID;"
     "INSERT INTO training_steps_v12 SELECT run_id, case_key, step, loss, validation_loss,"
     "  learning_rate, grad_norm, loss_scale, skipped, tokens, elapsed_s, padded_tokens"
     "  FROM training_steps;"
     "DROP TABLE training_steps;"
     "ALTER TABLE training_steps_v12 RENAME TO training_steps;"},
    // v13: a pipeline's key once, not on each of its steps (152 bytes a row, 3.7 of
    // cpu.db's 8.3 MB): steps are stored by pipeline id, and `training_steps` is a view
    // with the columns it had, for SQL and pandas.
    {13,
     "CREATE TABLE training_pipelines ("
     "  pipeline_id INTEGER PRIMARY KEY,"
     "  run_id      INTEGER NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,"
     "  case_key    TEXT NOT NULL,"
     "  UNIQUE (run_id, case_key));"
     "CREATE TABLE pipeline_steps ("
     "  pipeline_id     INTEGER NOT NULL REFERENCES training_pipelines(pipeline_id)"
     "                  ON DELETE CASCADE,"
     "  step            INTEGER NOT NULL,"
     "  loss            REAL,"
     "  validation_loss REAL,"
     "  learning_rate   REAL NOT NULL,"
     "  grad_norm       REAL,"
     "  loss_scale      REAL NOT NULL,"
     "  skipped         INTEGER NOT NULL,"
     "  tokens          INTEGER NOT NULL,"
     "  elapsed_s       REAL NOT NULL,"
     "  padded_tokens   INTEGER NOT NULL DEFAULT 0,"
     "  PRIMARY KEY (pipeline_id, step)) WITHOUT ROWID;"
     "INSERT INTO training_pipelines (run_id, case_key)"
     "  SELECT DISTINCT run_id, case_key FROM training_steps ORDER BY run_id, case_key;"
     "INSERT INTO pipeline_steps SELECT p.pipeline_id, s.step, s.loss, s.validation_loss,"
     "  s.learning_rate, s.grad_norm, s.loss_scale, s.skipped, s.tokens, s.elapsed_s,"
     "  s.padded_tokens FROM training_steps s JOIN training_pipelines p"
     "  ON p.run_id = s.run_id AND p.case_key = s.case_key;"
     "DROP TABLE training_steps;"
     "CREATE VIEW training_steps AS SELECT p.run_id, p.case_key, s.step, s.loss,"
     "  s.validation_loss, s.learning_rate, s.grad_norm, s.loss_scale, s.skipped, s.tokens,"
     "  s.elapsed_s, s.padded_tokens FROM pipeline_steps s"
     "  JOIN training_pipelines p ON p.pipeline_id = s.pipeline_id;"},
};

}  // namespace

namespace internal {
namespace {
// The schema version that added a workload field's column to `cases`, for the fields added
// after v5 (whose backfill reads cases mid-migration).
int ColumnAddedIn(const WorkloadField& field) { return field.name == "ffn" ? 8 : 0; }

}  // namespace

std::string WorkloadColumns(int version) {
  std::string columns;
  for (const WorkloadField& field : WorkloadFields()) {
    columns += columns.empty() ? "" : ", ";
    if (ColumnAddedIn(field) > 5 && field.omit_in_key.empty()) {
      throw std::logic_error("workload field '" + std::string(field.name) +
                             "' was added after v5 without a default left out of keys");
    }
    columns += ColumnAddedIn(field) <= version
                   ? std::string(field.name)
                   : "'" + std::string(field.omit_in_key) + "' AS " + std::string(field.name);
  }
  return columns;
}

// Environment entries of a run that case_results carries as columns: the commit and
// what the machine was.
constexpr const char* kViewEnvironment[] = {"git_sha",   "git_dirty",     "cpu_model",
                                            "blas_core", "torch_version", "gpu_name"};

std::string CaseResultsView() {
  std::string sql =
      "CREATE VIEW case_results AS SELECT c.case_id, r.run_id, r.uuid AS run_uuid, "
      "r.suite_name, r.label, r.run_group, r.shard, r.kind, r.status AS run_status, r.started_at, "
      "r.baseline";
  for (const char* key : kViewEnvironment) {
    sql +=
        std::string(", (SELECT value FROM environment e WHERE e.run_id = r.run_id AND e.key = '") +
        key + "') AS " + key;
  }
  sql +=
      ", c.case_key, c.variant_name, c.variant_key, c.options, c.status, c.message, "
      "c.reference, c.iterations, c.tokens_per_step, c.wall_s";
  for (const WorkloadField& field : WorkloadFields()) sql += ", c." + std::string(field.name);
  for (const MetricSpec& metric : CaseMetrics()) {
    const std::string name = metric.name;
    if (!metric.csv_column || name.find('<') != std::string::npos) continue;
    sql += ", (SELECT value FROM metrics m WHERE m.case_id = c.case_id AND m.name = '" + name +
           "') AS " + name;
  }
  return sql + " FROM cases c JOIN runs r ON r.run_id = c.run_id";
}

}  // namespace internal

int64_t Store::ReadSchemaVersion() const {
  int64_t version = 0;
  try {
    Statement exists(
        *this,
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'");
    if (!exists.Step() || exists.Integer(0) == 0) return 0;
    Statement select(*this, "SELECT version FROM schema_version");
    if (!select.Step()) throw UnusableDatabase(path_ + ": its schema_version table is empty");
    version = select.Integer(0);
  } catch (const UnusableDatabase&) {
    throw;
  } catch (const StoreError&) {
    // The first read of a file that is not SQLite fails with SQLITE_NOTADB.
    if ((sqlite3_errcode(db_) & 0xff) == SQLITE_NOTADB) {
      throw UnusableDatabase(path_ + ": not an SQLite database (give seqbench's --db file)");
    }
    // A page that its schema lives on is damaged.
    if ((sqlite3_errcode(db_) & 0xff) == SQLITE_CORRUPT) {
      throw DamagedDatabase(sqlite3_errmsg(db_));
    }
    throw;
  }
  if (version > kSchemaVersion) {
    throw UnusableDatabase(path_ + ": database schema version " + std::to_string(version) +
                           " is newer than this seqbench's (" + std::to_string(kSchemaVersion) +
                           "); use a newer seqbench or another --db");
  }
  return version;
}

void Store::EnsureSchema() {
  Transaction transaction(*this);
  int64_t version = ReadSchemaVersion();  // again, under the write lock
  bool migrated = false;
  if (version == 0) {
    Execute(kSchema);
    Execute("INSERT INTO schema_version (version) VALUES (1)");
    version = 1;
  }
  // A migration may rebuild a table the view reads (as v6 did), which SQLite refuses while
  // the view names it; RefreshCaseResultsView creates it again below.
  if (version < kSchemaVersion) Execute("DROP VIEW IF EXISTS case_results");
  for (const Migration& migration : kMigrations) {
    if (migration.version <= version) continue;
    Execute(migration.sql);
    if (migration.version == 5) BackfillV5();
    Statement update(*this, "UPDATE schema_version SET version = ?1");
    update.Bind(1, int64_t{migration.version}).Run();
    version = migration.version;
    migrated = true;
  }
  RefreshCaseResultsView();
  if (migrated) {
    Statement dangling(*this, "PRAGMA foreign_key_check");
    if (dangling.Step()) {
      throw StoreError(path_ + ": migration left a row of table " + dangling.Text(0) +
                       " without its parent in " + dangling.Text(2) +
                       "; the database is unchanged");
    }
  }
  transaction.Commit();
}

void Store::BackfillV5() {
  // Only the columns v5 has: later migrations add more, which Runs() would read.
  std::vector<RunRecord> runs;
  {
    Statement select(*this, "SELECT run_id, suite_text FROM runs ORDER BY run_id");
    while (select.Step()) {
      RunRecord run;
      run.run_id = select.Integer(0);
      run.suite_text = select.Text(1);
      runs.push_back(std::move(run));
    }
  }
  Statement environment(*this,
                        "SELECT key, value FROM environment WHERE run_id = ?1 ORDER BY rowid");
  for (RunRecord& run : runs) {
    environment.Bind(1, run.run_id);
    while (environment.Step())
      run.environment.emplace_back(environment.Text(0), environment.Text(1));
    environment.Run();
  }
  for (const RunRecord& run : runs) {
    const legacy::LegacyFacts facts = legacy::ReadLegacyFacts(run.suite_text, run.environment);
    int64_t threads = 0;
    if (const std::string value = run.Environment("torch_threads"); !value.empty()) {
      threads = std::atoll(value.c_str());
    }
    Statement update(*this,
                     "UPDATE runs SET kind = ?1, baseline = ?2, repetitions = ?3, warmup = ?4, "
                     "min_time_s = ?5, threads = ?6 WHERE run_id = ?7");
    update.Bind(1, facts.kind).Bind(2, facts.baseline).Bind(3, facts.repetitions);
    update.Bind(4, facts.warmup).Bind(5, facts.min_time_s).Bind(6, threads).Bind(7, run.run_id);
    update.Run();
    AddExpectations(run.run_id, facts.expectations);

    // Cases before v3 stored no model sizes, and none stored heads or vocabulary: they ran
    // the suite's [model] unless the workload overrode layers or width.
    Statement sizes(*this,
                    "UPDATE cases SET layers = CASE layers WHEN 0 THEN ?1 ELSE layers END, "
                    "width = CASE width WHEN 0 THEN ?2 ELSE width END, heads = ?3, "
                    "vocab_size = ?4, threads = ?5 WHERE run_id = ?6");
    sizes.Bind(1, facts.layers).Bind(2, facts.width).Bind(3, facts.heads);
    // The LibTorch threads of the run: all that older runs recorded (OpenBLAS's pool was
    // neither set nor recorded then).
    sizes.Bind(4, facts.vocab_size).Bind(5, std::max<int64_t>(threads, 1)).Bind(6, run.run_id);
    sizes.Run();
    if (facts.kind == kRunKindTraining) {
      // A pipeline's description of its options was kept in `options`, which is now the
      // variant's options (part of the case key): move it to `description`.
      Statement move(*this,
                     "UPDATE cases SET description = options, options = '' WHERE run_id = ?1");
      move.Bind(1, run.run_id).Run();
    }

    // Every stored key becomes the one canonical key of its case.
    Statement rekey_case(*this,
                         "UPDATE cases SET case_key = ?1 WHERE run_id = ?2 AND case_key = ?3");
    Statement rekey_steps(
        *this, "UPDATE training_steps SET case_key = ?1 WHERE run_id = ?2 AND case_key = ?3");
    // Same order as Cases(), so that the two lists pair up row by row.
    Statement old_keys(*this,
                       "SELECT case_key FROM cases WHERE run_id = ?1 ORDER BY position, case_id");
    old_keys.Bind(1, run.run_id);
    std::vector<std::string> stored_keys;
    while (old_keys.Step()) stored_keys.push_back(old_keys.Text(0));
    const std::vector<CaseRecord> cases = ReadCases(run.run_id, nullptr, /*schema_version=*/5);
    for (size_t i = 0; i < cases.size(); ++i) {
      const CaseRecord& record = cases[i];
      const std::string& old_key = stored_keys.at(i);
      if (old_key == record.key()) continue;
      rekey_case.Bind(1, record.key()).Bind(2, run.run_id).Bind(3, old_key).Run();
      rekey_steps.Bind(1, record.key()).Bind(2, run.run_id).Bind(3, old_key).Run();
    }
  }
}

void Store::RefreshCaseResultsView() {
  const std::string view = internal::CaseResultsView();
  Statement stored(*this,
                   "SELECT sql FROM sqlite_master WHERE type = 'view' AND name = 'case_results'");
  if (stored.Step() && stored.Text(0) == view) return;
  Execute("DROP VIEW IF EXISTS case_results");
  Execute(view);
}

}  // namespace seqbench
