// Internal to results/: the SQLite statement wrapper and transaction that the store's
// files share (store.cc maps records, store_schema.cc creates and migrates the schema),
// and the cases table's workload columns. Nothing outside results/ includes this.
//
// Thread-safety: as the Store they belong to: one thread at a time.
#pragma once

#include <sqlite3.h>

#include <cmath>
#include <optional>
#include <string>

#include "results/store.h"

namespace seqbench {

// A prepared statement; binds by 1-based index, reads columns by 0-based index.
class Store::Statement {
 public:
  // Keeps its own copy of `sql` for its errors: callers pass a temporary's c_str().
  Statement(const Store& store, const char* sql) : store_(store), sql_(sql) {
    store_.Check(sqlite3_prepare_v2(store_.db_, sql, -1, &statement_, nullptr), sql);
  }
  ~Statement() { sqlite3_finalize(statement_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& Bind(int index, const std::string& value) {
    store_.Check(sqlite3_bind_text(statement_, index, value.c_str(), static_cast<int>(value.size()),
                                   SQLITE_TRANSIENT),
                 sql_.c_str());
    return *this;
  }
  Statement& Bind(int index, int64_t value) {
    store_.Check(sqlite3_bind_int64(statement_, index, value), sql_.c_str());
    return *this;
  }
  // NaN is stored as NULL (SQLite's own conversion), so only nullable columns take it;
  // infinities are stored as they are.
  Statement& Bind(int index, double value) {
    store_.Check(sqlite3_bind_double(statement_, index, value), sql_.c_str());
    return *this;
  }
  Statement& Bind(int index, const std::optional<double>& value) {
    // NaN too: SQLite would store it as NULL anyway.
    if (!value || std::isnan(*value)) {
      store_.Check(sqlite3_bind_null(statement_, index), sql_.c_str());
      return *this;
    }
    return Bind(index, *value);
  }
  Statement& BindNullIfEmpty(int index, const std::string& value) {
    if (value.empty()) {
      store_.Check(sqlite3_bind_null(statement_, index), sql_.c_str());
      return *this;
    }
    return Bind(index, value);
  }

  // Advances; true while a row is available.
  bool Step() {
    const int rc = sqlite3_step(statement_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    store_.Check(rc, sql_.c_str());
    return false;
  }
  // For statements that return nothing; re-arms the statement for the next bindings.
  void Run() {
    while (Step()) {
    }
    store_.Check(sqlite3_reset(statement_), sql_.c_str());
    store_.Check(sqlite3_clear_bindings(statement_), sql_.c_str());
  }

  std::string Text(int column) const {
    const auto* text = sqlite3_column_text(statement_, column);
    return text == nullptr ? "" : reinterpret_cast<const char*>(text);
  }
  int64_t Integer(int column) const { return sqlite3_column_int64(statement_, column); }
  double Real(int column) const { return sqlite3_column_double(statement_, column); }
  std::optional<double> OptionalReal(int column) const {
    if (sqlite3_column_type(statement_, column) == SQLITE_NULL) return std::nullopt;
    return Real(column);
  }

 private:
  const Store& store_;
  std::string sql_;
  sqlite3_stmt* statement_ = nullptr;
};

// BEGIN IMMEDIATE ... COMMIT; rolled back if not committed (an exception unwinds it).
// Inside another transaction on the same Store, a savepoint: released on Commit(), rolled
// back to on failure, and written only when the outermost one commits.
class Store::Transaction {
 public:
  explicit Transaction(const Store& store)
      : store_(store), savepoint_("s" + std::to_string(store.transaction_depth_)) {
    store_.Execute(store_.transaction_depth_ == 0 ? "BEGIN IMMEDIATE" : "SAVEPOINT " + savepoint_);
    ++store_.transaction_depth_;
  }
  ~Transaction() {
    if (committed_) return;
    --store_.transaction_depth_;
    const std::string undo = store_.transaction_depth_ == 0
                                 ? "ROLLBACK"
                                 : "ROLLBACK TO " + savepoint_ + "; RELEASE " + savepoint_;
    sqlite3_exec(store_.db_, undo.c_str(), nullptr, nullptr, nullptr);
  }
  // Every write commits here: first the check that the file is still the one opened.
  void Commit() {
    if (store_.transaction_depth_ == 1) {
      store_.CheckFileIsStillThere();
      store_.Execute("COMMIT");
    } else {
      store_.Execute("RELEASE " + savepoint_);
    }
    --store_.transaction_depth_;
    committed_ = true;
  }

 private:
  const Store& store_;
  const std::string savepoint_;
  bool committed_ = false;
};
namespace internal {
// The cases table's workload columns, in WorkloadFields() order: "mode, layers, ...". A
// field the schema `version` does not have yet reads as its default, which a later field
// always has (WorkloadField::omit_in_key), so that old rows keep their keys.
std::string WorkloadColumns(int version = kSchemaVersion);
// The case_results view's CREATE statement: one row per case with its run's facts, the
// commit and machine from its environment, every workload field (WorkloadFields()) and
// every fixed CSV metric (CaseMetrics()) as columns, NULL where a case lacks one.
std::string CaseResultsView();
}  // namespace internal

}  // namespace seqbench
