#include "results/store.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <variant>

#include "results/run_columns.h"
#include "results/store_internal.h"

namespace seqbench {
namespace {

constexpr int kBusyTimeoutMs = 30000;

// `where` filters as stored: "field=value" pairs separated by spaces. Workload values are
// integers or fixed choices, so neither holds a space or '='.
std::string EncodeFilters(const std::map<std::string, std::string>& filters) {
  std::string text;
  for (const auto& [field, value] : filters)
    text += (text.empty() ? "" : " ") + field + "=" + value;
  return text;
}

std::map<std::string, std::string> DecodeFilters(const std::string& text) {
  std::map<std::string, std::string> filters;
  std::istringstream pairs(text);
  std::string pair;
  while (pairs >> pair) {
    const size_t equals = pair.find('=');
    if (equals != std::string::npos) filters[pair.substr(0, equals)] = pair.substr(equals + 1);
  }
  return filters;
}

}  // namespace

namespace {

// A file: URI that opens `path` as immutable: SQLite then reads it without the -shm file
// that a WAL database otherwise needs (and cannot create on read-only storage).
std::string ImmutableUri(const std::string& path) {
  std::string uri = "file:";
  for (const char c : std::filesystem::absolute(path).string()) {
    if (c == '%' || c == '?' || c == '#') {
      char escaped[4];
      std::snprintf(escaped, sizeof(escaped), "%%%02X", static_cast<unsigned char>(c));
      uri += escaped;
    } else {
      uri += c;
    }
  }
  return uri + "?immutable=1";
}

// Whether no connection has the database open in WAL mode now: none of the -wal and -shm
// files that such a connection keeps beside it.
bool NoWalFiles(const std::string& path) {
  std::error_code error;
  return !std::filesystem::exists(path + "-wal", error) &&
         !std::filesystem::exists(path + "-shm", error);
}

}  // namespace

Store::Store(const std::string& path, StoreAccess access)
    : path_(path.empty() ? ":memory:" : path) {
  const bool in_memory = path_ == ":memory:";
  try {
    if (access == StoreAccess::kReadOnly) {
      if (in_memory || !std::filesystem::is_regular_file(path_)) {
        throw UnusableDatabase(path_ + ": no results database there");
      }
      // Reading a WAL database creates its -wal and -shm files, and only a connection that
      // may write deletes them when it closes. Where none were there (no other connection),
      // the reader opens read-write under query_only (below: it writes nothing; an empty
      // log's checkpoint at close copies nothing), so that it leaves nothing behind. Where
      // they were, it opens read-only and leaves them as it found them.
      Open(path_, NoWalFiles(path_) ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY);
      int64_t version = 0;
      try {
        version = ReadSchemaVersion();
      } catch (const UnusableDatabase&) {
        throw;
      } catch (const StoreError&) {
        // Only where the file cannot be opened as it is (a WAL database whose -shm cannot
        // be created on read-only storage): immutable=1 ignores locks and the WAL, so a busy
        // or otherwise failing database must not be read that way.
        const int code = sqlite3_errcode(db_) & 0xff;
        if (code != SQLITE_CANTOPEN && code != SQLITE_READONLY) throw;
        Close();
        Open(ImmutableUri(path_), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
        version = ReadSchemaVersion();
        WarnOfUnreadLog();
      }
      if (version == 0) {
        RefuseForeignTables();
        throw UnusableDatabase(path_ + ": not a seqbench results database (an empty SQLite file)");
      }
      if (version < kSchemaVersion) {
        CopyIntoMemory();
        EnsureSchema();
      }
      Execute("PRAGMA query_only = ON");  // the in-memory copy refuses writes too
    } else {
      Open(path_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
      // Refuses a newer schema, another program's file and a damaged one before anything
      // (the WAL switch included) is written.
      const int64_t version = ReadSchemaVersion();
      if (version == 0) {
        RefuseForeignTables();
      } else {
        QuickCheck();
      }
      EnsureSchema();
      if (!in_memory) Execute("PRAGMA journal_mode = WAL");
    }
    // After the migrations: rebuilding a parent table (v6) drops it, which with foreign
    // keys on would delete every child row. EnsureSchema checks them instead.
    Execute("PRAGMA foreign_keys = ON");
    if (!in_memory) {
      struct stat info {};
      if (::stat(path_.c_str(), &info) == 0) {
        device_ = static_cast<uint64_t>(info.st_dev);
        inode_ = static_cast<uint64_t>(info.st_ino);
      }
    }
  } catch (...) {
    Close();
    throw;
  }
}

Store::~Store() { Close(); }

void Store::Open(const std::string& target, int flags) {
  const int rc = sqlite3_open_v2(target.c_str(), &db_, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    const std::string message = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    Close();
    throw StoreError(path_ + ": cannot open the results database: " + message);
  }
  Check(sqlite3_busy_timeout(db_, kBusyTimeoutMs), "busy_timeout");
}

void Store::Close() {
  if (db_ != nullptr) sqlite3_close(db_);
  db_ = nullptr;
}

UnusableDatabase Store::DamagedDatabase(const std::string& finding) const {
  return UnusableDatabase(path_ + ": the results database is damaged (" + finding +
                          "); restore it from a copy, or give another --db");
}

void Store::WarnOfUnreadLog() {
  std::error_code error;
  const auto bytes = std::filesystem::file_size(path_ + "-wal", error);
  if (error || bytes == 0) return;
  warnings_.push_back(path_ +
                      ": read as of its last checkpoint: on storage this process cannot "
                      "write, the " +
                      std::to_string(bytes) +
                      " bytes of its -wal file (the "
                      "latest writes, whole runs perhaps) cannot be read; copy the database "
                      "with its -wal and -shm files to writable storage to see them");
}

void Store::RefuseForeignTables() const {
  std::string names;
  Statement select(*this,
                   "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                   "'sqlite_%' ORDER BY name");
  while (select.Step()) names += (names.empty() ? "" : ", ") + select.Text(0);
  if (names.empty()) return;
  throw UnusableDatabase(path_ + ": not a seqbench results database (an SQLite file with other " +
                         "tables: " + names + "); give seqbench's --db file or a new path");
}

void Store::QuickCheck() const {
  // Linear in the file's size (a page walk, without quick_check's index comparisons):
  // what refuses a page-damaged file before a run's results go into it.
  std::string finding;
  try {
    Statement check(*this, "PRAGMA quick_check(1)");
    if (check.Step()) finding = check.Text(0);
  } catch (const StoreError& error) {
    finding = error.what();
  }
  if (finding != "ok") {
    throw DamagedDatabase("SQLite's quick_check: " + finding);
  }
}

void Store::CopyIntoMemory() {
  sqlite3* memory = nullptr;
  if (sqlite3_open_v2(":memory:", &memory, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) !=
      SQLITE_OK) {
    sqlite3_close(memory);
    throw StoreError(path_ + ": cannot open an in-memory copy to migrate");
  }
  sqlite3_backup* backup = sqlite3_backup_init(memory, "main", db_, "main");
  const int rc = backup == nullptr ? sqlite3_errcode(memory) : sqlite3_backup_step(backup, -1);
  sqlite3_backup_finish(backup);
  if (rc != SQLITE_DONE) {
    const std::string message = sqlite3_errmsg(memory);
    sqlite3_close(memory);
    throw StoreError(path_ + ": cannot copy the database into memory to migrate it: " + message);
  }
  Close();
  db_ = memory;
}

void Store::CheckFileIsStillThere() const {
  if (inode_ == 0) return;
  struct stat info {};
  if (::stat(path_.c_str(), &info) != 0 || static_cast<uint64_t>(info.st_dev) != device_ ||
      static_cast<uint64_t>(info.st_ino) != inode_) {
    throw StoreError(path_ +
                     ": the database file was deleted or replaced while this process was "
                     "writing to it; nothing more is stored. Run again into a new --db");
  }
}

void Store::Check(int rc, const char* what) const {
  if (rc == SQLITE_OK || rc == SQLITE_ROW || rc == SQLITE_DONE) return;
  throw StoreError(path_ + ": SQLite error " + std::to_string(rc) + " (" + sqlite3_errmsg(db_) +
                   ") in: " + what);
}

void Store::Execute(const std::string& sql) const {
  char* error = nullptr;
  const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
  if (rc != SQLITE_OK) {
    const std::string message = error != nullptr ? error : sqlite3_errstr(rc);
    sqlite3_free(error);
    throw StoreError(path_ + ": SQLite error " + std::to_string(rc) + " (" + message +
                     ") in: " + sql.substr(0, 80));
  }
}

void Store::BindRunRow(Statement& insert, const RunRecord& run) {
  int index = 0;
  for (const RunColumn& column : RunColumns()) {
    ++index;
    std::visit(
        [&](const auto& member) {
          const auto& value = member.get(run);
          using T = std::decay_t<decltype(value)>;
          if constexpr (std::is_same_v<T, std::string>) {
            if (column.null_if_empty)
              insert.BindNullIfEmpty(index, value);
            else
              insert.Bind(index, value);
          } else if constexpr (std::is_same_v<T, uint64_t>) {
            insert.Bind(index, static_cast<int64_t>(value));
          } else {
            insert.Bind(index, value);
          }
        },
        column.member);
  }
}

int64_t Store::CreateRun(const RunRecord& run) {
  Transaction transaction(*this);
  std::string sql = "INSERT INTO runs (" + RunColumnList() + ") VALUES (";
  for (size_t i = 1; i <= RunColumns().size(); ++i)
    sql += (i > 1 ? ", ?" : "?") + std::to_string(i);
  Statement insert(*this, (sql + ")").c_str());
  BindRunRow(insert, run);
  insert.Run();
  const int64_t run_id = sqlite3_last_insert_rowid(db_);
  AddExpectations(run_id, run.expectations);
  Statement environment(*this, "INSERT INTO environment (run_id, key, value) VALUES (?1, ?2, ?3)");
  for (const auto& [key, value] : run.environment)
    environment.Bind(1, run_id).Bind(2, key).Bind(3, value).Run();
  Statement warning(*this, "INSERT INTO warnings (run_id, message) VALUES (?1, ?2)");
  for (const auto& message : run.warnings) warning.Bind(1, run_id).Bind(2, message).Run();
  transaction.Commit();
  return run_id;
}

void Store::AddCase(int64_t run_id, const CaseRecord& record) {
  Transaction transaction(*this);
  InsertCase(run_id, record);
  transaction.Commit();
}

void Store::ReplaceCase(int64_t run_id, const CaseRecord& record) {
  Transaction transaction(*this);
  Statement remove(*this, "DELETE FROM cases WHERE run_id = ?1 AND case_key = ?2");
  remove.Bind(1, run_id).Bind(2, record.identity.Key()).Run();
  InsertCase(run_id, record);
  transaction.Commit();
}

void Store::InsertCase(int64_t run_id, const CaseRecord& record) {
  const std::vector<WorkloadField>& fields = WorkloadFields();
  std::string sql =
      "INSERT INTO cases (run_id, case_key, position, variant_name, variant_key, options, "
      "status, message, reference, iterations, tokens_per_step, wall_s, category, description, " +
      internal::WorkloadColumns() +
      ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14";
  constexpr int kFirstWorkloadColumn = 15;
  for (size_t i = 0; i < fields.size(); ++i) {
    sql += ", ?" + std::to_string(kFirstWorkloadColumn + i);
  }
  sql += ")";
  Statement insert(*this, sql.c_str());
  const CaseIdentity& id = record.identity;
  insert.Bind(1, run_id).Bind(2, id.Key()).Bind(3, record.position);
  insert.Bind(4, id.variant_name).Bind(5, id.variant_key).Bind(6, id.options);
  insert.Bind(7, record.status).Bind(8, record.message).Bind(9, record.reference);
  insert.Bind(10, record.iterations).Bind(11, record.tokens_per_step).Bind(12, record.wall_s);
  insert.Bind(13, record.category).Bind(14, record.description);
  for (size_t i = 0; i < fields.size(); ++i) {
    const int index = kFirstWorkloadColumn + static_cast<int>(i);
    if (fields[i].integer != nullptr) {
      insert.Bind(index, id.workload.*fields[i].integer);
    } else {
      insert.Bind(index, id.workload.*fields[i].text);
    }
  }
  insert.Run();
  const int64_t case_id = sqlite3_last_insert_rowid(db_);
  Statement sample(*this, "INSERT INTO samples (case_id, repetition, seconds) VALUES (?1, ?2, ?3)");
  for (size_t i = 0; i < record.samples_s.size(); ++i) {
    sample.Bind(1, case_id).Bind(2, static_cast<int64_t>(i)).Bind(3, record.samples_s[i]).Run();
  }
  Statement metric(*this,
                   "INSERT INTO metrics (case_id, name, position, value, unit) "
                   "VALUES (?1, ?2, ?3, ?4, ?5)");
  for (size_t i = 0; i < record.metrics.size(); ++i) {
    const Metric& m = record.metrics[i];
    metric.Bind(1, case_id).Bind(2, m.name).Bind(3, static_cast<int64_t>(i));
    metric.Bind(4, m.value).Bind(5, m.unit).Run();
  }
  Statement function(
      *this, "INSERT INTO case_functions (case_id, function, instructions) VALUES (?1, ?2, ?3)");
  for (const FunctionCost& f : record.functions)
    function.Bind(1, case_id).Bind(2, f.function).Bind(3, f.instructions).Run();
}

void Store::SetRunStatus(int64_t run_id, const std::string& status,
                         const std::string& finished_at) {
  Transaction transaction(*this);
  Statement update(*this, "UPDATE runs SET status = ?1, finished_at = ?2 WHERE run_id = ?3");
  update.Bind(1, status).BindNullIfEmpty(2, finished_at).Bind(3, run_id).Run();
  if (sqlite3_changes(db_) != 1) throw StoreError(path_ + ": no run " + std::to_string(run_id));
  transaction.Commit();
}

void Store::AddRunEnvironment(int64_t run_id,
                              const std::vector<std::pair<std::string, std::string>>& entries,
                              const std::vector<std::string>& warnings) {
  Transaction transaction(*this);
  // A stored entry of the same key is replaced: a resumed run's end is its last part's.
  Statement remove(*this, "DELETE FROM environment WHERE run_id = ?1 AND key = ?2");
  Statement environment(*this, "INSERT INTO environment (run_id, key, value) VALUES (?1, ?2, ?3)");
  for (const auto& [key, value] : entries) {
    remove.Bind(1, run_id).Bind(2, key).Run();
    environment.Bind(1, run_id).Bind(2, key).Bind(3, value).Run();
  }
  // A warning of the run's end is replaced with the end: drop those of an earlier part.
  Statement stale(*this,
                  "DELETE FROM warnings WHERE run_id = ?1 AND message LIKE 'at the run''s end%'");
  stale.Bind(1, run_id).Run();
  Statement warning(*this,
                    "INSERT INTO warnings (run_id, message) SELECT ?1, ?2 WHERE NOT EXISTS "
                    "(SELECT 1 FROM warnings WHERE run_id = ?1 AND message = ?2)");
  for (const auto& message : warnings) warning.Bind(1, run_id).Bind(2, message).Run();
  transaction.Commit();
}

int64_t Store::RemoveCases(int64_t run_id, const std::vector<std::string>& statuses) {
  Transaction transaction(*this);
  Statement remove(*this, "DELETE FROM cases WHERE run_id = ?1 AND status = ?2");
  int64_t removed = 0;
  for (const std::string& status : statuses) {
    remove.Bind(1, run_id).Bind(2, status).Run();
    removed += sqlite3_changes(db_);
  }
  transaction.Commit();
  return removed;
}

void Store::RemoveCase(int64_t run_id, const std::string& case_key) {
  Transaction transaction(*this);
  Statement remove(*this, "DELETE FROM cases WHERE run_id = ?1 AND case_key = ?2");
  remove.Bind(1, run_id).Bind(2, case_key).Run();
  // Its steps go with it (ON DELETE CASCADE).
  Statement pipeline(*this, "DELETE FROM training_pipelines WHERE run_id = ?1 AND case_key = ?2");
  pipeline.Bind(1, run_id).Bind(2, case_key).Run();
  transaction.Commit();
}

int64_t Store::RemoveRuns(const std::vector<int64_t>& run_ids) {
  Transaction transaction(*this);
  Statement count(*this, "SELECT COUNT(*) FROM cases WHERE run_id = ?1");
  Statement remove(*this, "DELETE FROM runs WHERE run_id = ?1");
  int64_t cases = 0;
  for (const int64_t run_id : run_ids) {
    if (count.Bind(1, run_id).Step()) cases += count.Integer(0);
    count.Run();                   // to its end, re-armed
    remove.Bind(1, run_id).Run();  // the other tables follow by ON DELETE CASCADE
  }
  transaction.Commit();
  return cases;
}

void Store::Vacuum() {
  Execute("VACUUM");
  // In WAL mode the compacted pages sit in the log until a checkpoint writes them back:
  // without one the file keeps its old size (what rm then reports) until the last
  // connection closes. A reader elsewhere only delays it (the busy result is not an error).
  Execute("PRAGMA wal_checkpoint(TRUNCATE)");
}

namespace {
// "SELECT run_id, <RunColumns()> FROM runs": what ReadRunRow reads.
std::string SelectRuns() { return "SELECT run_id, " + RunColumnList() + " FROM runs"; }
}  // namespace

RunRecord Store::ReadRunRow(const Statement& row) {
  RunRecord run;
  run.run_id = row.Integer(0);
  int index = 0;
  for (const RunColumn& column : RunColumns()) {
    ++index;
    std::visit(
        [&](const auto& member) {
          auto& value = member.set(run);
          using T = std::decay_t<decltype(value)>;
          if constexpr (std::is_same_v<T, std::string>) {
            value = row.Text(index);
          } else if constexpr (std::is_same_v<T, double>) {
            value = row.Real(index);
          } else {
            value = static_cast<T>(row.Integer(index));
          }
        },
        column.member);
  }
  return run;
}

std::optional<RunRecord> Store::FindRun(int64_t run_id) const {
  const std::string sql = SelectRuns() + " WHERE run_id = ?1";
  Statement select(*this, sql.c_str());
  select.Bind(1, run_id);
  if (!select.Step()) return std::nullopt;
  RunRecord run = ReadRunRow(select);
  Statement environment(*this,
                        "SELECT key, value FROM environment WHERE run_id = ?1 ORDER BY rowid");
  environment.Bind(1, run_id);
  while (environment.Step()) run.environment.emplace_back(environment.Text(0), environment.Text(1));
  Statement warnings(*this, "SELECT message FROM warnings WHERE run_id = ?1 ORDER BY rowid");
  warnings.Bind(1, run_id);
  while (warnings.Step()) run.warnings.push_back(warnings.Text(0));
  Statement expectations(*this,
                         "SELECT what, variant, over, at_least, at_most, filters, line FROM "
                         "expectations WHERE run_id = ?1 ORDER BY position");
  expectations.Bind(1, run_id);
  while (expectations.Step()) {
    Expectation e;
    e.what = expectations.Text(0);
    e.variant = expectations.Text(1);
    e.over = expectations.Text(2);
    e.at_least = expectations.OptionalReal(3);
    e.at_most = expectations.OptionalReal(4);
    e.where = DecodeFilters(expectations.Text(5));
    e.line = expectations.Integer(6);
    run.expectations.push_back(std::move(e));
  }
  return run;
}

std::vector<RunRecord> Store::Runs() const {
  const std::string sql = SelectRuns() + " ORDER BY run_id";
  Statement select(*this, sql.c_str());
  std::vector<RunRecord> runs;
  while (select.Step()) runs.push_back(ReadRunRow(select));
  return runs;
}

std::vector<CaseRecord> Store::Cases(int64_t run_id) const { return ReadCases(run_id, nullptr); }

std::optional<CaseRecord> Store::FindCase(int64_t run_id, const std::string& case_key) const {
  std::vector<CaseRecord> found = ReadCases(run_id, &case_key);
  if (found.empty()) return std::nullopt;
  return std::move(found.front());
}

std::vector<CaseRecord> Store::ReadCases(int64_t run_id, const std::string* case_key,
                                         int schema_version) const {
  const std::vector<WorkloadField>& fields = WorkloadFields();
  const std::string sql =
      "SELECT case_id, position, variant_name, variant_key, options, status, message, "
      "reference, iterations, tokens_per_step, wall_s, category, description, " +
      internal::WorkloadColumns(schema_version) + " FROM cases WHERE run_id = ?1" +
      (case_key != nullptr ? " AND case_key = ?2" : "") + " ORDER BY position, case_id";
  constexpr int kFirstWorkloadColumn = 13;
  Statement select(*this, sql.c_str());
  select.Bind(1, run_id);
  if (case_key != nullptr) select.Bind(2, *case_key);
  Statement samples(*this, "SELECT seconds FROM samples WHERE case_id = ?1 ORDER BY repetition");
  // v12 on: a metric's place is a column (before, its rowid; BackfillV5 reads v4 tables).
  Statement metrics(*this, schema_version >= 12
                               ? "SELECT name, value, unit FROM metrics WHERE case_id = ?1 "
                                 "ORDER BY position"
                               : "SELECT name, value, unit FROM metrics WHERE case_id = ?1 "
                                 "ORDER BY rowid");
  // v11 on: the counted case's functions (BackfillV5 reads cases before the table exists).
  std::optional<Statement> functions;
  if (schema_version >= 11)
    functions.emplace(*this,
                      "SELECT function, instructions FROM case_functions WHERE case_id = ?1 "
                      "ORDER BY instructions DESC, function");
  std::vector<CaseRecord> cases;
  while (select.Step()) {
    CaseRecord record;
    const int64_t case_id = select.Integer(0);
    record.position = select.Integer(1);
    record.identity.variant_name = select.Text(2);
    record.identity.variant_key = select.Text(3);
    record.identity.options = select.Text(4);
    record.status = select.Text(5);
    record.message = select.Text(6);
    record.reference = select.Text(7);
    record.iterations = select.Integer(8);
    record.tokens_per_step = select.Integer(9);
    record.wall_s = select.Real(10);
    record.category = select.Text(11);
    record.description = select.Text(12);
    for (size_t i = 0; i < fields.size(); ++i) {
      const int column = kFirstWorkloadColumn + static_cast<int>(i);
      if (fields[i].integer != nullptr) {
        record.identity.workload.*fields[i].integer = select.Integer(column);
      } else {
        record.identity.workload.*fields[i].text = select.Text(column);
      }
    }
    samples.Bind(1, case_id);
    while (samples.Step()) record.samples_s.push_back(samples.Real(0));
    samples.Run();
    metrics.Bind(1, case_id);
    while (metrics.Step())
      record.metrics.push_back(
          {metrics.Text(0), metrics.OptionalReal(1).value_or(std::nan("")), metrics.Text(2)});
    metrics.Run();
    if (functions) {
      functions->Bind(1, case_id);
      while (functions->Step())
        record.functions.push_back({functions->Text(0), functions->Real(1)});
      functions->Run();
    }
    cases.push_back(std::move(record));
  }
  return cases;
}

std::set<std::string> Store::CaseKeys(int64_t run_id) const {
  Statement select(*this, "SELECT case_key FROM cases WHERE run_id = ?1");
  select.Bind(1, run_id);
  std::set<std::string> keys;
  while (select.Step()) keys.insert(select.Text(0));
  return keys;
}

void Store::AddTrainingSteps(int64_t run_id, const std::string& case_key,
                             const std::vector<TrainingStepRecord>& steps) {
  Transaction transaction(*this);
  Statement pipeline(*this,
                     "INSERT OR IGNORE INTO training_pipelines (run_id, case_key) VALUES (?1, ?2)");
  pipeline.Bind(1, run_id).Bind(2, case_key).Run();
  Statement find(*this,
                 "SELECT pipeline_id FROM training_pipelines WHERE run_id = ?1 AND case_key = ?2");
  find.Bind(1, run_id).Bind(2, case_key);
  if (!find.Step()) throw std::logic_error("training_pipelines: the row just written is absent");
  const int64_t pipeline_id = find.Integer(0);
  Statement insert(*this,
                   "INSERT INTO pipeline_steps (pipeline_id, step, loss, validation_loss, "
                   "learning_rate, grad_norm, loss_scale, skipped, tokens, elapsed_s, "
                   "padded_tokens) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)");
  for (const TrainingStepRecord& step : steps) {
    insert.Bind(1, pipeline_id).Bind(2, step.step).Bind(3, step.loss);
    insert.Bind(4, step.validation_loss).Bind(5, step.learning_rate);
    insert.Bind(6, std::optional<double>(step.grad_norm)).Bind(7, step.loss_scale);
    insert.Bind(8, int64_t{step.skipped}).Bind(9, step.tokens).Bind(10, step.elapsed_s);
    insert.Bind(11, step.padded_tokens).Run();
  }
  transaction.Commit();
}

std::vector<TrainingStepRecord> Store::TrainingSteps(int64_t run_id,
                                                     const std::string& case_key) const {
  Statement select(*this,
                   "SELECT step, loss, validation_loss, learning_rate, grad_norm, loss_scale, "
                   "skipped, tokens, elapsed_s, padded_tokens FROM training_steps WHERE "
                   "run_id = ?1 AND "
                   "case_key = ?2 ORDER BY step");
  select.Bind(1, run_id).Bind(2, case_key);
  std::vector<TrainingStepRecord> steps;
  while (select.Step()) {
    TrainingStepRecord step;
    step.step = select.Integer(0);
    step.loss = select.OptionalReal(1).value_or(std::nan(""));
    step.validation_loss = select.OptionalReal(2);
    step.learning_rate = select.Real(3);
    step.grad_norm = select.OptionalReal(4).value_or(std::nan(""));
    step.loss_scale = select.Real(5);
    step.skipped = select.Integer(6) != 0;
    step.tokens = select.Integer(7);
    step.elapsed_s = select.Real(8);
    step.padded_tokens = select.Integer(9);
    steps.push_back(step);
  }
  return steps;
}

int64_t Store::RemoveTrainingStepsAfter(int64_t run_id, const std::string& case_key, int64_t step) {
  Transaction transaction(*this);
  Statement remove(*this,
                   "DELETE FROM pipeline_steps WHERE pipeline_id = (SELECT pipeline_id FROM "
                   "training_pipelines WHERE run_id = ?1 AND case_key = ?2) AND step > ?3");
  remove.Bind(1, run_id).Bind(2, case_key).Bind(3, step).Run();
  const int64_t removed = sqlite3_changes(db_);
  transaction.Commit();
  return removed;
}

std::optional<RunRecord> Store::FindRunByUuid(const std::string& uuid) const {
  int64_t run_id = 0;
  {
    Statement find(*this, "SELECT run_id FROM runs WHERE uuid = ?1");
    find.Bind(1, uuid);
    if (!find.Step()) return std::nullopt;
    run_id = find.Integer(0);
  }
  return FindRun(run_id);
}

namespace {

// The same measurement: a copy of one stored case (a merge copies every field as stored).
bool SameMeasurement(const CaseRecord& a, const CaseRecord& b) {
  const auto same_metrics = [](const std::vector<Metric>& x, const std::vector<Metric>& y) {
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i) {
      const bool both_nan = std::isnan(x[i].value) && std::isnan(y[i].value);
      if (x[i].name != y[i].name || (!both_nan && x[i].value != y[i].value)) return false;
    }
    return true;
  };
  return a.status == b.status && a.message == b.message && a.reference == b.reference &&
         a.iterations == b.iterations && a.samples_s == b.samples_s &&
         same_metrics(a.metrics, b.metrics);
}

bool Failed(const CaseRecord& record) {
  return record.status == kStatusError || record.status == kStatusTimeout;
}

}  // namespace

std::map<std::string, std::set<std::string>> Store::CasesToReplace(const Store& other) const {
  std::map<std::string, std::set<std::string>> replace;  // run uuid -> case keys
  std::vector<std::string> conflicts;
  for (const RunRecord& summary : other.Runs()) {
    const std::optional<RunRecord> target = FindRunByUuid(summary.uuid);
    if (!target) continue;
    for (const CaseRecord& record : other.Cases(summary.run_id)) {
      const std::optional<CaseRecord> mine = FindCase(target->run_id, record.key());
      if (!mine || SameMeasurement(*mine, record)) continue;
      if (Failed(*mine)) {
        replace[summary.uuid].insert(record.key());
      } else {
        conflicts.push_back("run " + summary.uuid + " (" + summary.suite_name + "): case " +
                            record.key() + ": " + mine->status + " here, " + record.status +
                            " in the source, measured apart");
      }
    }
  }
  if (!conflicts.empty()) {
    std::string message = std::to_string(conflicts.size()) +
                          " case(s) differ between the databases and the target's is not a "
                          "failed case a retry replaces; nothing merged:";
    for (const std::string& conflict : conflicts) message += "\n  " + conflict;
    throw MergeConflict(message);
  }
  return replace;
}

std::vector<MergeCounts> Store::MergeFromEach(
    const std::vector<const Store*>& sources,
    const std::function<void(size_t done, size_t total)>& on_source) {
  std::vector<MergeCounts> counts;
  Transaction transaction(*this);  // each MergeFrom's own is a savepoint inside it
  for (size_t i = 0; i < sources.size(); ++i) {
    try {
      counts.push_back(MergeFrom(*sources[i]));
    } catch (const MergeConflict& conflict) {
      throw MergeConflict(conflict.what(), i);
    }
    if (on_source) on_source(i + 1, sources.size());
  }
  transaction.Commit();
  return counts;
}

MergeCounts Store::MergeFrom(const Store& other) {
  MergeCounts counts;
  const std::map<std::string, std::set<std::string>> replace = CasesToReplace(other);
  for (const RunRecord& summary : other.Runs()) {
    Transaction transaction(*this);
    int64_t target_id = 0;
    {
      Statement find(*this, "SELECT run_id FROM runs WHERE uuid = ?1");
      find.Bind(1, summary.uuid);
      if (find.Step()) target_id = find.Integer(0);
    }
    if (target_id == 0) {
      target_id = CreateRun(*other.FindRun(summary.run_id));
      ++counts.runs_added;
    }
    const std::set<std::string> present = CaseKeys(target_id);
    const auto replaced = replace.find(summary.uuid);
    for (const CaseRecord& record : other.Cases(summary.run_id)) {
      const bool update = replaced != replace.end() && replaced->second.count(record.key()) > 0;
      if (present.count(record.key()) && !update) {
        ++counts.cases_already_present;
        continue;
      }
      if (update) {
        RemoveCase(target_id, record.key());
        ++counts.cases_updated;
        counts.updated.push_back("run " + summary.uuid + ": case " + record.key());
      }
      AddCase(target_id, record);
      const auto steps = other.TrainingSteps(summary.run_id, record.key());
      if (!steps.empty()) AddTrainingSteps(target_id, record.key(), steps);
      if (!update) ++counts.cases_added;
    }
    // A run finished in the source (e.g. resumed there) is finished here too.
    const RunRecord target = *FindRun(target_id);
    if (target.status != "complete" && summary.status == "complete") {
      // With what was measured at its end (load, busy processes) and the warnings then.
      const RunRecord source = *other.FindRun(summary.run_id);
      std::vector<std::pair<std::string, std::string>> missing;
      for (const auto& entry : source.environment) {
        if (target.Environment(entry.first).empty()) missing.push_back(entry);
      }
      AddRunEnvironment(target_id, missing, source.warnings);
      SetRunStatus(target_id, summary.status, summary.finished_at);
    }
    transaction.Commit();
  }
  return counts;
}

void Store::AddExpectations(int64_t run_id, const std::vector<Expectation>& expectations) {
  Statement insert(*this,
                   "INSERT INTO expectations (run_id, position, what, variant, over, at_least, "
                   "at_most, filters, line) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
  for (size_t i = 0; i < expectations.size(); ++i) {
    const Expectation& e = expectations[i];
    insert.Bind(1, run_id).Bind(2, static_cast<int64_t>(i)).Bind(3, e.what).Bind(4, e.variant);
    insert.Bind(5, e.over).Bind(6, e.at_least).Bind(7, e.at_most);
    insert.Bind(8, EncodeFilters(e.where)).Bind(9, e.line).Run();
  }
}

}  // namespace seqbench
