// The results store: what goes in comes out, in memory and on disk, typed run facts and
// expectations included; a case is all or nothing; case keys stay within their run; merge
// adds nothing twice; a newer schema is refused; older ones migrate with their facts.
#include "results/store.h"

#include <sqlite3.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace seqbench {
namespace {

RunRecord SampleRun(const std::string& uuid) {
  RunRecord run;
  run.uuid = uuid;
  run.suite_name = "tiny";
  run.suite_path = "suites/tiny.toml";
  run.suite_text = "name = \"tiny\"\n";
  run.suite_hash = "0123456789abcdef";
  run.command_line = "seqbench run suites/tiny.toml";
  run.shard = "1/2";
  run.seed = 42;
  run.status = "running";
  run.started_at = "2026-11-21T10:00:00Z";
  run.environment = {{"torch_version", "1.13.0"}, {"cpu_model", "test cpu"}};
  run.warnings = {"debug build"};
  run.baseline = "baseline";
  run.settings.repetitions = 7;
  run.settings.warmup = 3;
  run.settings.min_time_s = 0.25;
  run.threads = 2;
  run.settings.check_policy = "full";
  run.label = "nightly";
  run.group = "nightly-7";
  run.settings.max_noise = 0.02;
  run.settings.max_time_s = 12.5;
  Expectation speedup{"speedup", "fused", "baseline", 1.5, std::nullopt, {{"batch", "4"}}, 31};
  Expectation correct{"all_correct", "", "", std::nullopt, std::nullopt, {}, 40};
  run.expectations = {speedup, correct};
  return run;
}

// A case whose variant name is `name` (so that names tell cases apart).
CaseRecord SampleCase(const std::string& name, int64_t position) {
  CaseRecord c;
  c.position = position;
  c.identity.variant_name = name;
  c.identity.variant_key = "fused";
  c.identity.options = "chunk_size=8";
  c.category = "GEMM fusion";
  c.description = "one GEMM";
  Workload& w = c.identity.workload;
  w.mode = "train";
  w.batch = 4;
  w.seq_len = 32;
  w.min_len = 8;
  w.layers = 3;
  w.width = 48;
  w.heads = 6;
  w.vocab_size = 99;
  c.status = "ok";
  c.message = "";
  c.reference = "baseline float64";
  c.iterations = 3;
  c.tokens_per_step = 100;
  c.wall_s = 1.5;
  c.samples_s = {0.1, 0.2, 0.3};
  c.metrics = {{"runtime_mean_s", 0.2, "s"}, {"peak_bytes", 1024, "bytes"}};
  return c;
}

void CheckRoundTrip(Store& store) {
  const int64_t run_id = store.CreateRun(SampleRun("uuid-a"));
  store.AddCase(run_id, SampleCase("b", 1));
  store.AddCase(run_id, SampleCase("a", 0));
  store.SetRunStatus(run_id, "complete", "2026-11-21T10:05:00Z");

  const auto run = store.FindRun(run_id);
  REQUIRE(run);
  const RunRecord expected = SampleRun("uuid-a");
  CHECK(run->uuid == expected.uuid);
  CHECK(run->suite_text == expected.suite_text);
  CHECK(run->shard == "1/2");
  CHECK(run->seed == 42);
  CHECK(run->status == "complete");
  CHECK(run->finished_at == "2026-11-21T10:05:00Z");
  CHECK(run->environment == expected.environment);
  CHECK(run->warnings == expected.warnings);
  CHECK(run->kind == kRunKindBenchmark);
  CHECK(run->baseline == "baseline");
  CHECK(run->settings.repetitions == 7);
  CHECK(run->settings.warmup == 3);
  CHECK(run->settings.min_time_s == 0.25);
  CHECK(run->threads == 2);
  CHECK(run->label == "nightly");
  CHECK(run->settings.max_noise == 0.02);
  CHECK(run->settings.max_time_s == 12.5);
  CHECK(store.Runs().front().label == "nightly");  // the list has it too (run selection)
  CHECK(run->group == "nightly-7");
  CHECK(store.Runs().front().group == "nightly-7");
  REQUIRE(run->expectations.size() == 2);
  CHECK(run->expectations[0].what == "speedup");
  CHECK(run->expectations[0].at_least == 1.5);
  CHECK_FALSE(run->expectations[0].at_most);
  CHECK(run->expectations[0].where == std::map<std::string, std::string>{{"batch", "4"}});
  CHECK(run->expectations[0].line == 31);
  CHECK(run->expectations[1].what == "all_correct");

  const auto cases = store.Cases(run_id);
  REQUIRE(cases.size() == 2);
  CHECK(cases[0].name() == "a");  // suite order, not insertion order
  const CaseRecord& c = cases[1];
  const CaseRecord e = SampleCase("b", 1);
  CHECK(c.identity.options == e.identity.options);
  CHECK(c.identity.variant_key == "fused");
  CHECK(c.workload().Key() == e.workload().Key());  // every field, model sizes included
  CHECK(c.key() == e.key());
  CHECK(c.reference == e.reference);
  CHECK(c.category == e.category);
  CHECK(c.description == e.description);
  CHECK(c.samples_s == e.samples_s);
  CHECK(c.MetricValue("runtime_mean_s") == 0.2);
  CHECK(c.MetricValue("peak_bytes") == 1024);
  CHECK_FALSE(c.MetricValue("nope"));
  CHECK(store.CaseKeys(run_id) ==
        std::set<std::string>{SampleCase("a", 0).key(), SampleCase("b", 1).key()});
  CHECK_FALSE(store.FindRun(run_id + 1));
}

TEST_CASE("facts measured at a run's end join its environment; a resume replaces them", "[store]") {
  Store store(":memory:");
  const int64_t run_id = store.CreateRun(SampleRun("uuid-end"));
  store.AddRunEnvironment(run_id, {{"load_avg_end", "1.00 0.50 0.25"}}, {"busy: make"});
  store.AddRunEnvironment(run_id, {{"load_avg_end", "2.00 1.00 0.50"}}, {"busy: make"});
  const RunRecord run = *store.FindRun(run_id);
  CHECK(run.Environment("load_avg_end") == "2.00 1.00 0.50");
  CHECK(run.Environment("torch_version") == "1.13.0");  // the start's stay
  CHECK(std::count(run.environment.begin(), run.environment.end(),
                   std::pair<std::string, std::string>{"load_avg_end", "2.00 1.00 0.50"}) == 1);
  CHECK(run.warnings == std::vector<std::string>{"debug build", "busy: make"});
  // The end of an earlier part does not outlive a resume's end.
  store.AddRunEnvironment(run_id, {}, {"at the run's end, 1 other process(es) used a CPU: x"});
  store.AddRunEnvironment(run_id, {{"busy_processes_end", "none"}}, {});
  CHECK(store.FindRun(run_id)->warnings == std::vector<std::string>{"debug build", "busy: make"});
}

TEST_CASE("store round trip in memory", "[store]") {
  Store store(":memory:");
  CheckRoundTrip(store);
}

TEST_CASE("store round trip on a file, reopened", "[store]") {
  const std::string path = std::filesystem::temp_directory_path() / "seqbench_store_test.db";
  std::filesystem::remove(path);
  {
    Store store(path);
    CheckRoundTrip(store);
  }
  Store reopened(path);
  REQUIRE(reopened.Runs().size() == 1);
  CHECK(reopened.Cases(1).size() == 2);
  // A second connection writes the same file while the first is open (WAL, busy timeout).
  Store other(path);
  const int64_t second = other.CreateRun(SampleRun("uuid-b"));
  reopened.AddCase(second, SampleCase("c", 0));
  CHECK(other.Cases(second).size() == 1);
}

TEST_CASE("a case is stored whole or not at all", "[store]") {
  Store store(":memory:");
  const int64_t run_id = store.CreateRun(SampleRun("uuid-a"));
  store.AddCase(run_id, SampleCase("a", 0));
  CaseRecord duplicate = SampleCase("a", 5);
  duplicate.samples_s = {9, 9, 9, 9};
  CHECK_THROWS_AS(store.AddCase(run_id, duplicate), StoreError);
  // This one fails on its last insert, after its case row and samples were written.
  CaseRecord late_failure = SampleCase("b", 1);
  late_failure.metrics.push_back({"peak_bytes", 2048, "bytes"});  // duplicate metric name
  CHECK_THROWS_AS(store.AddCase(run_id, late_failure), StoreError);
  CHECK(store.CaseKeys(run_id) == std::set<std::string>{SampleCase("a", 0).key()});
  const auto cases = store.Cases(run_id);
  REQUIRE(cases.size() == 1);
  CHECK(cases[0].samples_s.size() == 3);  // the duplicate's samples were rolled back
}

TEST_CASE("case keys and cases stay within their run", "[store]") {
  // Resume skips the keys its run already has; another run's cases must not count.
  Store store(":memory:");
  const int64_t first = store.CreateRun(SampleRun("uuid-a"));
  const int64_t second = store.CreateRun(SampleRun("uuid-b"));
  store.AddCase(first, SampleCase("x", 0));
  store.AddCase(first, SampleCase("y", 1));
  store.AddCase(second, SampleCase("x", 0));  // the same case in another run is allowed
  CHECK(store.CaseKeys(first) ==
        std::set<std::string>{SampleCase("x", 0).key(), SampleCase("y", 1).key()});
  CHECK(store.CaseKeys(second) == std::set<std::string>{SampleCase("x", 0).key()});
  CHECK(store.Cases(second).size() == 1);
  CHECK(store.FindRun(second)->expectations.size() == 2);  // its own, not both runs'
}

TEST_CASE("merge copies runs and cases once", "[store]") {
  Store shard1(":memory:"), shard2(":memory:"), merged(":memory:");
  const int64_t a = shard1.CreateRun(SampleRun("uuid-a"));
  shard1.AddCase(a, SampleCase("x", 0));
  const int64_t b = shard2.CreateRun(SampleRun("uuid-b"));
  shard2.AddCase(b, SampleCase("y", 0));
  shard2.AddCase(b, SampleCase("z", 1));
  CHECK(merged.MergeFrom(shard1).cases_added == 1);
  CHECK(merged.MergeFrom(shard2).cases_added == 2);
  const MergeCounts again = merged.MergeFrom(shard2);
  CHECK(again.runs_added == 0);
  CHECK(again.cases_added == 0);
  CHECK(again.cases_already_present == 2);
  CHECK(merged.Runs().size() == 2);
  // A run that gained a case in its source since the last merge gets just that case.
  shard1.AddCase(a, SampleCase("w", 1));
  CHECK(merged.MergeFrom(shard1).cases_added == 1);
  CHECK(merged.Cases(merged.Runs()[0].run_id).size() == 2);
}

TEST_CASE("merge replaces a failed case the source ran again, and refuses to guess", "[store]") {
  // The adversarial try of issue 63: a shard's case timed out, the shard was merged, then
  // retried (run --resume --retry-failed) and merged again.
  Store shard(":memory:"), merged(":memory:");
  const int64_t run = shard.CreateRun(SampleRun("uuid-a"));
  CaseRecord timed_out = SampleCase("x", 0);
  timed_out.status = "timeout";
  timed_out.message = "killed after 8 s";
  timed_out.samples_s.clear();
  timed_out.metrics.clear();
  shard.AddCase(run, timed_out);
  shard.AddCase(run, SampleCase("y", 1));
  CHECK(merged.MergeFrom(shard).cases_added == 2);
  shard.RemoveCases(run, {"timeout"});
  shard.AddCase(run, SampleCase("x", 0));  // the retry measured it
  const MergeCounts retried = merged.MergeFrom(shard);
  CHECK(retried.cases_added == 0);
  CHECK(retried.cases_updated == 1);
  CHECK(retried.cases_already_present == 1);
  REQUIRE(retried.updated.size() == 1);
  CHECK_THAT(retried.updated[0], Catch::Contains(SampleCase("x", 0).key()));
  const int64_t gathered = merged.Runs().at(0).run_id;
  const auto replaced = merged.FindCase(gathered, SampleCase("x", 0).key());
  REQUIRE(replaced);
  CHECK(replaced->status == "ok");
  CHECK(replaced->samples_s == SampleCase("x", 0).samples_s);
  CHECK(merged.Cases(gathered).size() == 2);
  // Merged again: the same measurement, nothing to do.
  const MergeCounts again = merged.MergeFrom(shard);
  CHECK(again.cases_updated == 0);
  CHECK(again.cases_already_present == 2);

  // A good case measured differently in the source (and a new run beside it): refused,
  // naming the case, and nothing of either run written.
  CaseRecord remeasured = SampleCase("y", 1);
  remeasured.samples_s = {0.4, 0.5, 0.6};
  Store other(":memory:");
  const int64_t same_run = other.CreateRun(SampleRun("uuid-a"));
  other.AddCase(same_run, remeasured);
  const int64_t new_run = other.CreateRun(SampleRun("uuid-b"));
  other.AddCase(new_run, SampleCase("z", 0));
  CHECK_THROWS_AS(merged.MergeFrom(other), MergeConflict);
  CHECK_THROWS_WITH(merged.MergeFrom(other),
                    Catch::Contains(remeasured.key()) && Catch::Contains("nothing merged"));
  CHECK(merged.Runs().size() == 1);
  CHECK(merged.FindCase(gathered, remeasured.key())->samples_s == SampleCase("y", 1).samples_s);
  // The other way round, a failure in the source where the target holds a result: the
  // target's stays; a stale failure never replaces a measurement.
  Store stale(":memory:");
  const int64_t stale_run = stale.CreateRun(SampleRun("uuid-a"));
  stale.AddCase(stale_run, timed_out);
  CHECK_THROWS_AS(merged.MergeFrom(stale), MergeConflict);
  CHECK(merged.FindCase(gathered, SampleCase("x", 0).key())->status == "ok");
}

TEST_CASE("merging several sources is all or nothing, conflicts between sources included",
          "[store]") {
  // Two shards that disagree about a case the target has never held: the second's conflict
  // is with the first's copy, so it shows only once the first is in; nothing may stay.
  Store first(":memory:"), second(":memory:"), unrelated(":memory:"), merged(":memory:");
  first.AddCase(first.CreateRun(SampleRun("uuid-a")), SampleCase("x", 0));
  CaseRecord disagreeing = SampleCase("x", 0);
  disagreeing.samples_s = {0.7, 0.8, 0.9};
  second.AddCase(second.CreateRun(SampleRun("uuid-a")), disagreeing);
  unrelated.AddCase(unrelated.CreateRun(SampleRun("uuid-b")), SampleCase("y", 0));
  try {
    merged.MergeFromEach({&unrelated, &first, &second});
    FAIL("merged sources that disagree");
  } catch (const MergeConflict& conflict) {
    CHECK(conflict.source() == 2);
    CHECK_THAT(conflict.what(), Catch::Contains(disagreeing.key()));
  }
  CHECK(merged.Runs().empty());  // not even the unrelated source, merged first
  const std::vector<MergeCounts> counts = merged.MergeFromEach({&unrelated, &first});
  REQUIRE(counts.size() == 2);
  CHECK(counts[0].cases_added == 1);
  CHECK(counts[1].cases_added == 1);
  CHECK(merged.Runs().size() == 2);
}

TEST_CASE("a database from a newer schema is refused", "[store]") {
  const std::string path = std::filesystem::temp_directory_path() / "seqbench_store_newer.db";
  std::filesystem::remove(path);
  { Store store(path); }
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db, "UPDATE schema_version SET version = 99", nullptr, nullptr, nullptr) ==
          SQLITE_OK);
  sqlite3_close(db);
  CHECK_THROWS_WITH(Store(path), Catch::Contains("schema version 99 is newer"));
}

}  // namespace
}  // namespace seqbench

namespace seqbench {
namespace {

void ExecuteAll(const std::string& path, const std::vector<std::string>& statements) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  for (const std::string& sql : statements) {
    INFO(sql);
    REQUIRE(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
  }
  sqlite3_close(db);
}

// v13's pipelines and their steps as v12's one table again.
std::vector<std::string> UndoPipelineTables() {
  return {
      "CREATE TABLE training_steps_v12 (run_id INTEGER NOT NULL REFERENCES runs(run_id) "
      "ON DELETE CASCADE, case_key TEXT NOT NULL, step INTEGER NOT NULL, loss REAL, "
      "validation_loss REAL, learning_rate REAL NOT NULL, grad_norm REAL, loss_scale "
      "REAL NOT NULL, skipped INTEGER NOT NULL, tokens INTEGER NOT NULL, elapsed_s REAL "
      "NOT NULL, padded_tokens INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (run_id, "
      "case_key, step)) WITHOUT ROWID",
      "INSERT INTO training_steps_v12 SELECT * FROM training_steps",
      "DROP VIEW training_steps",
      "DROP TABLE pipeline_steps",
      "DROP TABLE training_pipelines",
      "ALTER TABLE training_steps_v12 RENAME TO training_steps"};
}

// v12's clustered tables as rowid tables again, a case's metrics in rowid order (its
// view dropped first: it names `metrics`, and a writer recreates it).
std::vector<std::string> UndoClusteredTables() {
  std::vector<std::string> unclustered = {"DROP VIEW IF EXISTS case_results"};
  const std::pair<const char*, const char*> tables[] = {
      {"metrics",
       "(case_id INTEGER NOT NULL REFERENCES cases(case_id) ON DELETE CASCADE, name TEXT NOT "
       "NULL, value REAL, unit TEXT NOT NULL, PRIMARY KEY (case_id, name))"},
      {"samples",
       "(case_id INTEGER NOT NULL REFERENCES cases(case_id) ON DELETE CASCADE, repetition "
       "INTEGER NOT NULL, seconds REAL NOT NULL, PRIMARY KEY (case_id, repetition))"},
      {"case_functions",
       "(case_id INTEGER NOT NULL REFERENCES cases(case_id) ON DELETE CASCADE, function TEXT "
       "NOT NULL, instructions REAL NOT NULL, PRIMARY KEY (case_id, function))"},
      {"training_steps",
       "(run_id INTEGER NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE, case_key TEXT NOT "
       "NULL, step INTEGER NOT NULL, loss REAL, validation_loss REAL, learning_rate REAL NOT "
       "NULL, grad_norm REAL, loss_scale REAL NOT NULL, skipped INTEGER NOT NULL, tokens "
       "INTEGER NOT NULL, elapsed_s REAL NOT NULL, padded_tokens INTEGER NOT NULL DEFAULT 0, "
       "PRIMARY KEY (run_id, case_key, step))"}};
  for (const auto& [table, columns] : tables) {
    const std::string name = table, old_name = name + "_v11";
    const std::string copied =
        name == "metrics" ? "case_id, name, value, unit FROM metrics ORDER BY case_id, position"
                          : "* FROM " + name;
    unclustered.push_back("CREATE TABLE " + old_name + " " + columns);
    unclustered.push_back("INSERT INTO " + old_name + " SELECT " + copied);
    unclustered.push_back("DROP TABLE " + name);
    unclustered.push_back("ALTER TABLE " + old_name + " RENAME TO " + name);
  }
  return unclustered;
}

// v6's nullable metric values and losses as v5's NOT NULL ones (its `cases` CHECK keeps
// v6's statuses: no test depends on it).
std::vector<std::string> UndoNullableValues() {
  return {
      "CREATE TABLE metrics_v5 (case_id INTEGER NOT NULL REFERENCES cases(case_id) ON DELETE "
      "CASCADE, name TEXT NOT NULL, value REAL NOT NULL, unit TEXT NOT NULL, PRIMARY KEY "
      "(case_id, name))",
      "INSERT INTO metrics_v5 (rowid, case_id, name, value, unit) SELECT rowid, case_id, name, "
      "value, unit FROM metrics",
      "DROP TABLE metrics",
      "ALTER TABLE metrics_v5 RENAME TO metrics",
      "CREATE TABLE training_steps_v5 (run_id INTEGER NOT NULL REFERENCES runs(run_id) ON "
      "DELETE CASCADE, case_key TEXT NOT NULL, step INTEGER NOT NULL, loss REAL NOT NULL, "
      "validation_loss REAL, learning_rate REAL NOT NULL, grad_norm REAL, loss_scale REAL NOT "
      "NULL, skipped INTEGER NOT NULL, tokens INTEGER NOT NULL, elapsed_s REAL NOT NULL, "
      "PRIMARY KEY (run_id, case_key, step))",
      "INSERT INTO training_steps_v5 SELECT run_id, case_key, step, loss, validation_loss, "
      "learning_rate, grad_norm, loss_scale, skipped, tokens, elapsed_s FROM training_steps",
      "DROP TABLE training_steps",
      "ALTER TABLE training_steps_v5 RENAME TO training_steps"};
}

// Turns a database this seqbench wrote back into what `version` (1, 4 to 7, 9 to 12)
// wrote: without the columns and tables later versions added, and with v5's NOT NULL
// metric values and losses. Each step undoes what the versions after its own added, newest
// first; a target takes every step down to its own.
void Downgrade(const std::string& path, int version) {
  const std::pair<int, std::vector<std::string>> steps[] = {
      {12, UndoPipelineTables()},
      {11, UndoClusteredTables()},
      // v11's case functions, v10's run group, v9's view, v8's feed-forward activation,
      // then v7's run facts (label, adaptive stopping): every older schema lacks them.
      {10, {"DROP TABLE case_functions"}},
      {9, {"ALTER TABLE runs DROP COLUMN run_group"}},
      {7, {"ALTER TABLE cases DROP COLUMN ffn"}},
      {6,
       {"ALTER TABLE runs DROP COLUMN label", "ALTER TABLE runs DROP COLUMN max_noise",
        "ALTER TABLE runs DROP COLUMN max_time_s"}},
      {5, UndoNullableValues()},
      {4,
       {"ALTER TABLE cases DROP COLUMN heads", "ALTER TABLE cases DROP COLUMN vocab_size",
        "ALTER TABLE cases DROP COLUMN threads", "ALTER TABLE runs DROP COLUMN kind",
        "ALTER TABLE runs DROP COLUMN baseline", "ALTER TABLE runs DROP COLUMN repetitions",
        "ALTER TABLE runs DROP COLUMN warmup", "ALTER TABLE runs DROP COLUMN min_time_s",
        "ALTER TABLE runs DROP COLUMN threads", "ALTER TABLE runs DROP COLUMN check_policy",
        "DROP TABLE expectations"}},
      {3,
       {"ALTER TABLE cases DROP COLUMN category", "ALTER TABLE cases DROP COLUMN description",
        "ALTER TABLE cases DROP COLUMN layers", "ALTER TABLE cases DROP COLUMN width",
        "DROP TABLE training_steps"}},
  };
  for (const auto& [gives, statements] : steps) {
    if (gives < version) break;
    ExecuteAll(path, statements);
  }
  ExecuteAll(path, {"UPDATE schema_version SET version = " + std::to_string(version)});
}

// The single integer a query of the database at `path` answers.
int64_t ViewRows(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* select = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &select, nullptr) == SQLITE_OK);
  const int64_t value = sqlite3_step(select) == SQLITE_ROW ? sqlite3_column_int64(select, 0) : -1;
  sqlite3_finalize(select);
  sqlite3_close(db);
  return value;
}

// The names of the automatic indexes SQLite keeps beside rowid tables with another key.
std::vector<std::string> AutomaticIndexes(const std::string& path) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* select = nullptr;
  REQUIRE(sqlite3_prepare_v2(db,
                             "SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE "
                             "'sqlite_autoindex_%' ORDER BY name",
                             -1, &select, nullptr) == SQLITE_OK);
  std::vector<std::string> names;
  while (sqlite3_step(select) == SQLITE_ROW) {
    names.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(select, 0)));
  }
  sqlite3_finalize(select);
  sqlite3_close(db);
  return names;
}

TEST_CASE("a version-11 database keeps its metrics' order and loses four automatic indexes",
          "[store]") {
  const std::string path = std::filesystem::temp_directory_path() / "seqbench_store_v11.db";
  std::filesystem::remove(path);
  CaseRecord record = SampleCase("a", 0);
  // Not in the key's order: only the stored place can give this order back.
  record.metrics = {{"zeta", 1, "count"}, {"alpha", 2, "count"}, {"mid", 3, "count"}};
  record.samples_s = {0.3, 0.1, 0.2};
  TrainingStepRecord step;
  step.step = 1;
  step.loss = 2.5;
  {
    Store store(path);
    const int64_t run = store.CreateRun(SampleRun("uuid-v11"));
    store.AddCase(run, record);
    store.AddTrainingSteps(run, "pipeline", {step});
  }
  Downgrade(path, 11);
  const auto indexes_before = AutomaticIndexes(path);
  for (const char* table : {"metrics", "samples", "case_functions", "training_steps"}) {
    INFO(table);
    CHECK(std::count(indexes_before.begin(), indexes_before.end(),
                     std::string("sqlite_autoindex_") + table + "_1") == 1);
  }
  const auto names = [](const CaseRecord& c) {
    std::vector<std::string> list;
    for (const Metric& m : c.metrics) list.push_back(m.name);
    return list;
  };
  const std::vector<std::string> order = {"zeta", "alpha", "mid"};
  {
    const Store read_only(path, StoreAccess::kReadOnly);  // migrated in memory only
    REQUIRE(read_only.Cases(1).size() == 1);
    CHECK(names(read_only.Cases(1)[0]) == order);
  }
  {
    Store migrated(path);
    REQUIRE(migrated.Cases(1).size() == 1);
    CHECK(names(migrated.Cases(1)[0]) == order);
    CHECK(migrated.Cases(1)[0].samples_s == record.samples_s);
    REQUIRE(migrated.TrainingSteps(1, "pipeline").size() == 1);
    CHECK(migrated.TrainingSteps(1, "pipeline")[0].loss == 2.5);
    // A case stored after the migration keeps its order too.
    record.identity.variant_name = record.identity.variant_key = "other";
    migrated.AddCase(1, record);
    CHECK(names(migrated.Cases(1)[1]) == order);
  }
  CHECK(
      AutomaticIndexes(path) ==
      std::vector<std::string>{"sqlite_autoindex_cases_1", "sqlite_autoindex_environment_1",
                               "sqlite_autoindex_expectations_1", "sqlite_autoindex_runs_1",
                               "sqlite_autoindex_training_pipelines_1"});  // v13: a row a pipeline
  std::filesystem::remove(path);
}

TEST_CASE("a version-12 database stores each pipeline's key once, its steps unchanged", "[store]") {
  const std::string path = std::filesystem::temp_directory_path() / "seqbench_store_v12.db";
  std::filesystem::remove(path);
  std::vector<TrainingStepRecord> steps(3);
  for (size_t i = 0; i < steps.size(); ++i) {
    steps[i].step = static_cast<int64_t>(i) + 1;
    steps[i].loss = 3.0 - static_cast<double>(i);
    steps[i].tokens = 100;
  }
  steps[1].validation_loss = 2.25;
  {
    Store store(path);
    const int64_t first = store.CreateRun(SampleRun("uuid-v12-a"));
    const int64_t second = store.CreateRun(SampleRun("uuid-v12-b"));
    store.AddTrainingSteps(first, "pipeline a", steps);
    store.AddTrainingSteps(first, "pipeline b", {steps[0]});
    store.AddTrainingSteps(second, "pipeline a", {steps[2]});  // the same key, another run
  }
  Downgrade(path, 12);
  Store migrated(path);
  const auto a = migrated.TrainingSteps(1, "pipeline a");
  REQUIRE(a.size() == 3);
  CHECK(a[1].validation_loss == 2.25);
  CHECK(a[2].loss == 1.0);
  CHECK(migrated.TrainingSteps(1, "pipeline b").size() == 1);
  REQUIRE(migrated.TrainingSteps(2, "pipeline a").size() == 1);
  CHECK(migrated.TrainingSteps(2, "pipeline a")[0].step == 3);
  // Written after the migration: appended to its pipeline; a resume's cut removes steps.
  TrainingStepRecord fourth = steps[2];
  fourth.step = 4;
  migrated.AddTrainingSteps(1, "pipeline a", {fourth});
  CHECK(migrated.TrainingSteps(1, "pipeline a").size() == 4);
  CHECK(migrated.RemoveTrainingStepsAfter(1, "pipeline a", 2) == 2);
  CHECK(migrated.TrainingSteps(1, "pipeline a").size() == 2);
  CHECK(migrated.TrainingSteps(2, "pipeline a").size() == 1);  // another run's: untouched
  // The key is stored once a pipeline, and the old columns still read through the view.
  CHECK(ViewRows(path, "SELECT count(*) FROM training_pipelines") == 3);
  CHECK(ViewRows(path, "SELECT count(*) FROM training_steps WHERE case_key = 'pipeline a'") == 3);
  migrated.RemoveRuns({2});  // its pipeline and steps go with it
  CHECK(ViewRows(path, "SELECT count(*) FROM training_pipelines") == 2);
  CHECK(ViewRows(path, "SELECT count(*) FROM pipeline_steps") == 3);
  std::filesystem::remove(path);
}

TEST_CASE("a version-10 database gains v11's case functions, none for its cases", "[store]") {
  const std::string path = std::filesystem::temp_directory_path() / "seqbench_store_v10.db";
  std::filesystem::remove(path);
  CaseRecord counted;
  counted.identity.variant_name = counted.identity.variant_key = "fused";
  counted.status = kStatusOk;
  {
    Store store(path);
    const int64_t run = store.CreateRun(SampleRun("uuid-v10"));
    store.AddCase(run, counted);
  }
  Downgrade(path, 10);
  const Store read_only(path, StoreAccess::kReadOnly);  // migrated in memory only
  REQUIRE(read_only.Cases(1).size() == 1);
  CHECK(read_only.Cases(1)[0].functions.empty());
  Store migrated(path);
  counted.identity.variant_name = counted.identity.variant_key = "batched";
  counted.functions = {{"at::native::addmm", 1234.5}};
  migrated.AddCase(1, counted);
  const std::vector<CaseRecord> cases = migrated.Cases(1);
  REQUIRE(cases.size() == 2);
  CHECK(cases[0].functions.empty());
  REQUIRE(cases[1].functions.size() == 1);
  CHECK(cases[1].functions[0].function == "at::native::addmm");
  CHECK(cases[1].functions[0].instructions == 1234.5);
  std::filesystem::remove(path);
}

TEST_CASE("a version-9 database gains v10's run group, empty for its runs", "[store]") {
  const std::string path = std::filesystem::temp_directory_path() / "seqbench_store_v9.db";
  std::filesystem::remove(path);
  {
    Store store(path);
    store.CreateRun(SampleRun("uuid-v9"));
  }
  Downgrade(path, 9);
  const Store read_only(path, StoreAccess::kReadOnly);  // migrated in memory only
  CHECK(read_only.FindRun(1)->group.empty());
  Store migrated(path);
  CHECK(migrated.FindRun(1)->group.empty());
  CHECK(migrated.FindRun(1)->shard == "1/2");
  std::filesystem::remove(path);
}

TEST_CASE("a version-7 database gains v8's feed-forward activation, its keys unchanged",
          "[store]") {
  const std::string path = std::filesystem::temp_directory_path() / "seqbench_store_v7.db";
  std::filesystem::remove(path);
  std::string stored_key;
  {
    Store store(path);
    const int64_t run_id = store.CreateRun(SampleRun("uuid-v7"));
    const CaseRecord c = SampleCase("a", 0);
    stored_key = c.identity.Key();
    store.AddCase(run_id, c);
  }
  Downgrade(path, 7);
  Store migrated(path);
  const std::vector<CaseRecord> cases = migrated.Cases(1);
  REQUIRE(cases.size() == 1);
  CHECK(cases[0].identity.workload.ffn == "gelu");
  CHECK(cases[0].identity.Key() == stored_key);
  CHECK(stored_key.find("ffn") == std::string::npos);
  // A case with another activation is another case, and says so in its key.
  CaseRecord swiglu = SampleCase("a", 1);
  swiglu.identity.workload.ffn = "swiglu";
  CHECK(swiglu.identity.Key() != stored_key);
  CHECK(swiglu.identity.Key().find("ffn=swiglu") != std::string::npos);
  migrated.AddCase(1, swiglu);
  CHECK(migrated.Cases(1).back().identity.workload.ffn == "swiglu");
  std::filesystem::remove(path);
}

// A column of `path`'s case_results view for its first case, as text ("" for NULL), or
// "no such column".
std::string ViewValue(const std::string& path, const std::string& column) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* select = nullptr;
  const std::string sql = "SELECT " + column + " FROM case_results ORDER BY case_id LIMIT 1";
  std::string value = "no such column";
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &select, nullptr) == SQLITE_OK) {
    value = sqlite3_step(select) == SQLITE_ROW && sqlite3_column_text(select, 0) != nullptr
                ? reinterpret_cast<const char*>(sqlite3_column_text(select, 0))
                : "";
  }
  sqlite3_finalize(select);
  sqlite3_close(db);
  return value;
}

TEST_CASE("case_results: a v8 database gains the view; a stale one is rebuilt", "[store]") {
  const std::string path = std::filesystem::temp_directory_path() / "seqbench_store_view.db";
  std::filesystem::remove(path);
  {
    Store store(path);
    CaseRecord record = SampleCase("fast", 0);
    record.metrics.push_back({"runtime_median_s", 0.125, "s"});
    store.AddCase(store.CreateRun(SampleRun("uuid-view")), record);
  }
  // As v8 wrote it: no view. A writer's migration creates it.
  Downgrade(path, 11);  // v12's tables as v11 had them, the view dropped
  ExecuteAll(path, {"DROP TABLE case_functions", "ALTER TABLE runs DROP COLUMN run_group",
                    "UPDATE schema_version SET version = 8"});
  CHECK(ViewValue(path, "variant_name") == "no such column");
  { Store migrated(path); }
  CHECK(ViewValue(path, "variant_name") == "fast");
  CHECK(ViewValue(path, "runtime_median_s") == "0.125");
  CHECK(ViewValue(path, "batch") == "4");
  CHECK(ViewValue(path, "label") == "nightly");
  CHECK(ViewValue(path, "run_group").empty());  // v10: a run of before groups has none
  CHECK(ViewValue(path, "cpu_model") == "test cpu");
  CHECK(ViewValue(path, "tokens_per_s").empty());  // a metric the case lacks: NULL
  // A view out of step with the tables (an older binary's, or a hand edit) is rebuilt
  // when a writer opens the file.
  ExecuteAll(path, {"DROP VIEW case_results", "CREATE VIEW case_results AS SELECT 1 AS one"});
  { Store reopened(path); }
  CHECK(ViewValue(path, "runtime_median_s") == "0.125");
  std::filesystem::remove(path);
}

TEST_CASE("a version-6 database gains v7's run facts: no label, fixed repetitions", "[store]") {
  const std::string path = std::filesystem::temp_directory_path() / "seqbench_store_v6.db";
  std::filesystem::remove(path);
  {
    Store store(path);
    store.CreateRun(SampleRun("uuid-v6"));
  }
  Downgrade(path, 6);
  Store migrated(path);
  const RunRecord run = *migrated.FindRun(1);
  CHECK(run.label.empty());
  CHECK(run.settings.max_noise == 0);
  CHECK(run.settings.repetitions == 7);  // what v6 stored stays
  RunRecord labelled = SampleRun("uuid-v7");
  CHECK(migrated.FindRun(migrated.CreateRun(labelled))->label == "nightly");
  std::filesystem::remove(path);
}

TEST_CASE("a version-1 database is migrated in place, its run facts read back once", "[store]") {
  const std::string path = std::filesystem::temp_directory_path() / "seqbench_store_v1.db";
  std::filesystem::remove(path);
  // What v1 kept: the suite text (with a variant no registry knows any more, and single
  // quotes, which a regex on the text would miss) and the --repetitions override in the
  // environment.
  RunRecord old_run = SampleRun("uuid-old");
  old_run.suite_text =
      "name = 'tiny'\nbaseline = 'renamed_reference'\n[model]\nwidth = 48\nlayers = 3\n"
      "heads = 6\nvocab_size = 99\n[measure]\nwarmup = 4\nmin_time_ms = 50\n"
      "[[variants]]\nkey = 'renamed_reference'\n[[expect]]\nwhat = 'speedup'\n"
      "variant = 'fused'\nover = 'renamed_reference'\nat_least = 2\nwhere = { batch = 4 "
      "}\n";
  old_run.environment = {{"repetitions", "5"}, {"torch_threads", "2"}};
  {
    Store store(path);
    const int64_t run = store.CreateRun(old_run);
    store.AddCase(run, SampleCase("a", 0));
  }
  Downgrade(path, 1);
  ExecuteAll(path, {"UPDATE cases SET case_key = 'a mode=train B=4 T=32'"});  // v1's key
  Store migrated(path);
  const RunRecord run = *migrated.FindRun(1);
  CHECK(run.kind == kRunKindBenchmark);
  CHECK(run.baseline == "renamed_reference");
  CHECK(run.settings.repetitions == 5);  // the override in force, not the suite's default
  CHECK(run.settings.warmup == 4);
  CHECK(run.settings.min_time_s == Approx(0.05));
  CHECK(run.threads == 2);
  REQUIRE(run.expectations.size() == 1);
  CHECK(run.expectations[0].over == "renamed_reference");
  CHECK(run.expectations[0].at_least == 2);
  CHECK(run.expectations[0].where == std::map<std::string, std::string>{{"batch", "4"}});
  const auto cases = migrated.Cases(1);
  REQUIRE(cases.size() == 1);
  CHECK(cases[0].category.empty());
  CHECK(cases[0].workload().layers == 3);  // from [model]: v1 stored no model sizes
  CHECK(cases[0].workload().heads == 6);
  CHECK(cases[0].workload().vocab_size == 99);
  CHECK(cases[0].workload().threads == 2);  // the LibTorch threads the run recorded
  // The stored key is now the canonical one.
  CHECK(migrated.CaseKeys(1) == std::set<std::string>{cases[0].key()});
  CaseRecord fresh = SampleCase("b", 1);
  fresh.category = "batching";
  migrated.AddCase(1, fresh);
  CHECK(migrated.Cases(1)[1].category == "batching");
}

TEST_CASE("a version-4 training run migrates: kind, reference, steps under the new key",
          "[store]") {
  const std::string path = std::filesystem::temp_directory_path() / "seqbench_store_v4.db";
  std::filesystem::remove(path);
  RunRecord old_run = SampleRun("uuid-train");
  old_run.suite_text =
      "name = 'tr'\nreference = 'second'\n[model]\nwidth = 64\n[[pipelines]]\nname = "
      "'first'\n[[pipelines]]\nname = 'second'\n";
  old_run.environment = {};
  CaseRecord pipeline = SampleCase("first", 0);
  pipeline.identity.options = "variant=batched batching=fixed";
  pipeline.description = "";
  {
    Store store(path);
    store.AddCase(store.CreateRun(old_run), pipeline);
  }
  Downgrade(path, 4);
  ExecuteAll(path, {"UPDATE cases SET case_key = 'first'",  // v4 keyed a pipeline by name
                    "INSERT INTO training_steps VALUES (1, 'first', 1, 2.5, NULL, 0.001, 1, 1, "
                    "0, 10, 0.1)"});
  Store migrated(path);
  const RunRecord run = *migrated.FindRun(1);
  CHECK(run.kind == kRunKindTraining);
  CHECK(run.baseline == "second");
  const auto cases = migrated.Cases(1);
  REQUIRE(cases.size() == 1);
  CHECK(cases[0].identity.options.empty());  // a pipeline's options are its description
  CHECK(cases[0].description == "variant=batched batching=fixed");
  CHECK(cases[0].workload().width == 48);  // stored layers/width win over [model]
  const auto steps = migrated.TrainingSteps(1, cases[0].key());
  REQUIRE(steps.size() == 1);
  CHECK(steps[0].loss == 2.5);
}

TEST_CASE("training steps round-trip, NaN and missing values as NULL", "[store]") {
  Store store(":memory:");
  const int64_t run = store.CreateRun(SampleRun("uuid-train"));
  std::vector<TrainingStepRecord> steps(3);
  for (int i = 0; i < 3; ++i) {
    steps[i].step = i + 1;
    steps[i].loss = 3.0 - i;
    steps[i].learning_rate = 1e-3 * (i + 1);
    steps[i].grad_norm = i == 1 ? std::nan("") : 0.5;
    steps[i].skipped = i == 1;
    steps[i].tokens = 100 + i;
    steps[i].elapsed_s = 0.1 * (i + 1);
  }
  steps[2].validation_loss = 1.75;
  store.AddTrainingSteps(run, "plain", steps);
  const auto read = store.TrainingSteps(run, "plain");
  REQUIRE(read.size() == 3);
  CHECK(read[0].loss == 3.0);
  CHECK_FALSE(read[0].validation_loss.has_value());
  CHECK(read[2].validation_loss == 1.75);
  CHECK(std::isnan(read[1].grad_norm));
  CHECK(read[1].skipped);
  CHECK(read[2].tokens == 102);
  CHECK(store.TrainingSteps(run, "other").empty());
  // A step stored twice is an error, and the failed batch leaves nothing behind.
  TrainingStepRecord fourth = steps[0];
  fourth.step = 4;
  CHECK_THROWS(store.AddTrainingSteps(run, "plain", {fourth, steps[0]}));
  CHECK(store.TrainingSteps(run, "plain").size() == 3);
}

// The bytes of a file, to show that opening it changed nothing.
std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

int64_t StoredSchemaVersion(const std::string& path) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* select = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "SELECT version FROM schema_version", -1, &select, nullptr) ==
          SQLITE_OK);
  REQUIRE(sqlite3_step(select) == SQLITE_ROW);
  const int64_t version = sqlite3_column_int64(select, 0);
  sqlite3_finalize(select);
  sqlite3_close(db);
  return version;
}

// The runs table is bound and read through one column table (results/run_columns.h); a
// row naming the wrong member would round-trip unnoticed, so plain SQL reads each column
// by its name here.
TEST_CASE("each run column holds its own member, read back by name with plain SQL", "[store]") {
  const std::string path = std::filesystem::temp_directory_path() / "seqbench_store_columns.db";
  std::filesystem::remove(path);
  { Store(path).CreateRun(SampleRun("uuid-columns")); }
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* select = nullptr;
  REQUIRE(sqlite3_prepare_v2(db,
                             "SELECT repetitions, warmup, threads, seed, min_time_s, max_noise, "
                             "max_time_s, label, check_policy, shard, suite_path, baseline, "
                             "finished_at IS NULL FROM runs",
                             -1, &select, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(select) == SQLITE_ROW);
  const auto text = [&](int i) {
    return std::string(reinterpret_cast<const char*>(sqlite3_column_text(select, i)));
  };
  CHECK(sqlite3_column_int64(select, 0) == 7);
  CHECK(sqlite3_column_int64(select, 1) == 3);
  CHECK(sqlite3_column_int64(select, 2) == 2);
  CHECK(sqlite3_column_int64(select, 3) == 42);
  CHECK(sqlite3_column_double(select, 4) == 0.25);
  CHECK(sqlite3_column_double(select, 5) == 0.02);
  CHECK(sqlite3_column_double(select, 6) == 12.5);
  CHECK(text(7) == "nightly");
  CHECK(text(8) == "full");
  CHECK(text(9) == "1/2");
  CHECK(text(10) == "suites/tiny.toml");
  CHECK(text(11) == "baseline");
  CHECK(sqlite3_column_int64(select, 12) == 1);  // a running run's end is NULL, not ""
  sqlite3_finalize(select);
  sqlite3_close(db);
  std::filesystem::remove(path);
}

TEST_CASE("NaN and infinity are stored results: a metric, a loss, read back as they were",
          "[store][security]") {
  const std::string path = std::filesystem::temp_directory_path() / "seqbench_store_nan.db";
  std::filesystem::remove(path);
  // From a v5 database, whose NOT NULL columns made a NaN fail the whole case (error 19).
  {
    Store store(path);
    store.AddCase(store.CreateRun(SampleRun("uuid-nan")), SampleCase("old", 0));
  }
  Downgrade(path, 5);
  Store store(path);
  CaseRecord diverged = SampleCase("nan", 1);
  diverged.status = kStatusDiverged;
  diverged.metrics = {{"loss_max_abs", std::nan(""), "abs"},
                      {"grad_max_abs", std::numeric_limits<double>::infinity(), "abs"},
                      {"runtime_median_s", 0.5, "s"}};
  store.AddCase(1, diverged);
  CaseRecord timed_out = SampleCase("slow", 2);
  timed_out.status = kStatusTimeout;
  store.AddCase(1, timed_out);
  const auto cases = store.Cases(1);
  REQUIRE(cases.size() == 3);
  // Migrated intact, in the order stored (rowids kept).
  const auto names = [](const std::vector<Metric>& metrics) {
    std::vector<std::string> out;
    for (const Metric& m : metrics) out.push_back(m.name);
    return out;
  };
  REQUIRE(SampleCase("old", 0).metrics.size() >= 2);
  CHECK(names(cases[0].metrics) == names(SampleCase("old", 0).metrics));
  CHECK(cases[1].status == kStatusDiverged);
  CHECK(std::isnan(*cases[1].MetricValue("loss_max_abs")));
  CHECK(std::isinf(*cases[1].MetricValue("grad_max_abs")));
  CHECK(cases[1].metrics[2].name == "runtime_median_s");  // in the order stored
  CHECK(cases[2].status == kStatusTimeout);

  TrainingStepRecord step;
  step.step = 1;
  step.loss = std::nan("");
  step.validation_loss = std::numeric_limits<double>::infinity();
  step.learning_rate = 1e30;
  store.AddTrainingSteps(1, "nan", {step});
  const auto steps = store.TrainingSteps(1, "nan");
  REQUIRE(steps.size() == 1);
  CHECK(std::isnan(steps[0].loss));
  CHECK(std::isinf(*steps[0].validation_loss));
}

TEST_CASE("reading never writes: no file created, an older schema migrated only in memory",
          "[store][security]") {
  const std::string path = std::filesystem::temp_directory_path() / "seqbench_store_ro.db";
  std::filesystem::remove(path);
  CHECK_THROWS_AS(Store(path, StoreAccess::kReadOnly), UnusableDatabase);
  CHECK_FALSE(std::filesystem::exists(path));

  {
    Store store(path);
    store.AddCase(store.CreateRun(SampleRun("uuid-ro")), SampleCase("a", 0));
  }
  Downgrade(path, 4);
  const std::string before = FileBytes(path);
  {
    const Store reader(path, StoreAccess::kReadOnly);
    const auto cases = reader.Cases(1);
    REQUIRE(cases.size() == 1);
    CHECK(cases[0].workload().heads == 4);  // v5's backfill (the default), in the private copy
    CHECK(reader.FindRun(1)->kind == kRunKindBenchmark);
    CHECK_THROWS_AS(const_cast<Store&>(reader).AddCase(1, SampleCase("b", 1)), StoreError);
  }
  CHECK(StoredSchemaVersion(path) == 4);
  CHECK(FileBytes(path) == before);
  // A reader of a WAL database writes nothing in SQLite's -wal file (and removes the -wal
  // and -shm files its opening created: the next test case).
  CHECK(
      (!std::filesystem::exists(path + "-wal") || std::filesystem::file_size(path + "-wal") == 0));

  // A current database opened read-only refuses writes too.
  std::filesystem::remove(path);
  { Store(path).CreateRun(SampleRun("uuid-current")); }
  Store reader(path, StoreAccess::kReadOnly);
  CHECK(reader.Runs().size() == 1);
  CHECK_THROWS_AS(reader.CreateRun(SampleRun("uuid-more")), StoreError);
  CHECK(Store(path, StoreAccess::kReadOnly).Runs().size() == 1);
}

TEST_CASE("a reader leaves no -wal or -shm behind, and keeps a writer's", "[store]") {
  const std::string path = std::filesystem::temp_directory_path() / "seqbench_store_files.db";
  const auto beside = [&](const char* suffix) { return std::filesystem::exists(path + suffix); };
  std::filesystem::remove(path);
  { Store(path).CreateRun(SampleRun("uuid-files")); }
  REQUIRE_FALSE(beside("-wal"));  // the writer's own close removes them
  REQUIRE_FALSE(beside("-shm"));
  const std::string before = FileBytes(path);
  {
    const Store reader(path, StoreAccess::kReadOnly);
    CHECK(reader.Runs().size() == 1);
    CHECK_THROWS_AS(const_cast<Store&>(reader).CreateRun(SampleRun("uuid-no")), StoreError);
  }
  CHECK_FALSE(beside("-wal"));
  CHECK_FALSE(beside("-shm"));
  CHECK(FileBytes(path) == before);

  // A writer has the files open: a reader beside it neither removes them nor stops it.
  Store writer(path);
  const int64_t run = writer.CreateRun(SampleRun("uuid-writer"));
  { CHECK(Store(path, StoreAccess::kReadOnly).Runs().size() == 2); }
  CHECK(beside("-wal"));
  CHECK(beside("-shm"));
  writer.AddCase(run, SampleCase("after the reader", 0));
  CHECK(Store(path, StoreAccess::kReadOnly).Cases(run).size() == 1);
}

TEST_CASE("a refused database is left as it was: newer schema, not SQLite", "[store][security]") {
  const std::string path = std::filesystem::temp_directory_path() / "seqbench_store_refused.db";
  std::filesystem::remove(path);
  { Store store(path); }
  ExecuteAll(path, {"PRAGMA journal_mode = DELETE", "UPDATE schema_version SET version = 99"});
  const std::string before = FileBytes(path);
  for (const StoreAccess access : {StoreAccess::kReadWrite, StoreAccess::kReadOnly}) {
    CHECK_THROWS_AS(Store(path, access), UnusableDatabase);
    CHECK_THROWS_WITH(Store(path, access), Catch::Contains("schema version 99 is newer"));
  }
  CHECK(FileBytes(path) == before);  // still in rollback-journal mode: no WAL switch
  CHECK_FALSE(std::filesystem::exists(path + "-wal"));

  std::ofstream(path, std::ios::trunc) << "name = \"not a database\"\n";
  CHECK_THROWS_AS(Store(path), UnusableDatabase);
  CHECK(FileBytes(path) == "name = \"not a database\"\n");
}

TEST_CASE("a database deleted or replaced mid-run stops the writer", "[store][security]") {
  const std::string path = std::filesystem::temp_directory_path() / "seqbench_store_gone.db";
  const std::string other = path + ".other";
  for (const bool replace : {false, true}) {
    INFO((replace ? "replaced" : "deleted"));
    std::filesystem::remove(path);
    Store store(path);
    const int64_t run = store.CreateRun(SampleRun("uuid-gone"));
    store.AddCase(run, SampleCase("before", 0));
    if (replace) {
      std::filesystem::remove(other);
      { Store(other).CreateRun(SampleRun("uuid-other")); }
      std::filesystem::rename(other, path);
    } else {
      std::filesystem::remove(path);
    }
    CHECK_THROWS_WITH(store.AddCase(run, SampleCase("after", 1)),
                      Catch::Contains("deleted or replaced"));
    CHECK_THROWS_WITH(store.SetRunStatus(run, "complete", "now"),
                      Catch::Contains("deleted or replaced"));
  }
}

// Runs SQL on a file through SQLite alone, as another program would.
void RawSql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  INFO(sql);
  CHECK(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
}

TEST_CASE("another program's SQLite file is refused by readers and writers, unchanged",
          "[store][security]") {
  const std::string path = std::filesystem::temp_directory_path() / "seqbench_store_foreign.db";
  std::filesystem::remove(path);
  RawSql(path,
         "CREATE TABLE notes (body TEXT); CREATE TABLE tags (name TEXT);"
         "INSERT INTO notes VALUES ('keep me')");
  const std::string before = FileBytes(path);
  for (const StoreAccess access : {StoreAccess::kReadWrite, StoreAccess::kReadOnly}) {
    CHECK_THROWS_AS(Store(path, access), UnusableDatabase);
    CHECK_THROWS_WITH(Store(path, access), Catch::Contains("not a seqbench results database") &&
                                               Catch::Contains("notes, tags"));
  }
  CHECK(FileBytes(path) == before);  // no schema added, no WAL switch
  CHECK_FALSE(std::filesystem::exists(path + "-wal"));
  // An empty SQLite file (no tables) is a new database for a writer.
  std::filesystem::remove(path);
  RawSql(path, "PRAGMA user_version = 0");
  CHECK(Store(path).Runs().empty());
}

TEST_CASE("a damaged database is refused for writing before anything is written",
          "[store][security]") {
  const std::string path = std::filesystem::temp_directory_path() / "seqbench_store_damaged.db";
  std::filesystem::remove(path);
  {
    Store store(path);
    for (int r = 0; r < 8; ++r) {
      const int64_t run = store.CreateRun(SampleRun("uuid-" + std::to_string(r)));
      for (int c = 0; c < 8; ++c) store.AddCase(run, SampleCase("v" + std::to_string(c), c));
    }
  }
  RawSql(path, "PRAGMA journal_mode = DELETE");
  // The last page (cases' samples and metrics, not the schema) overwritten with junk.
  const std::string whole = FileBytes(path);
  const size_t page = 4096;
  REQUIRE(whole.size() >= 8 * page);
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(whole.size() - page + 100));
    file << std::string(page - 200, '\x5a');
  }
  const std::string damaged = FileBytes(path);
  CHECK_THROWS_AS(Store(path), UnusableDatabase);
  CHECK_THROWS_WITH(Store(path), Catch::Contains("damaged") && Catch::Contains("quick_check"));
  CHECK(FileBytes(path) == damaged);
  CHECK_FALSE(std::filesystem::exists(path + "-wal"));
}

TEST_CASE("merge adds a run with all its cases or not at all", "[store][security]") {
  // The target refuses its third case row (a trigger, as a full disk or a kill would stop
  // the copy part way): the run is not left there, `complete` with two of its four cases.
  const std::string path = std::filesystem::temp_directory_path() / "seqbench_store_merge.db";
  std::filesystem::remove(path);
  { Store target(path); }
  RawSql(path,
         "CREATE TRIGGER planted AFTER INSERT ON cases WHEN (SELECT count(*) FROM cases) >= 3 "
         "BEGIN SELECT RAISE(ABORT, 'planted failure'); END");
  Store source(":memory:");
  const int64_t run = source.CreateRun(SampleRun("uuid-m"));
  for (int c = 0; c < 4; ++c) source.AddCase(run, SampleCase("v" + std::to_string(c), c));
  source.SetRunStatus(run, "complete", "2026-11-26T00:00:00Z");
  {
    Store target(path);
    CHECK_THROWS_WITH(target.MergeFrom(source), Catch::Contains("planted failure"));
    CHECK(target.Runs().empty());
    // The connection goes on: a later write is not inside a transaction left open.
    CHECK(target.CreateRun(SampleRun("uuid-other")) > 0);
  }
  RawSql(path, "DROP TRIGGER planted");
  Store target(path);
  CHECK(target.MergeFrom(source).cases_added == 4);
  const auto merged = target.FindRunByUuid("uuid-m");
  REQUIRE(merged);
  CHECK(merged->status == "complete");
  CHECK(target.Cases(merged->run_id).size() == 4);
}

}  // namespace
}  // namespace seqbench
