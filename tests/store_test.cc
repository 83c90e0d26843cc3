// The results store: what goes in comes out, in memory and on disk; a case is all or
// nothing; merge adds nothing twice; a newer schema is refused.
#include "results/store.h"

#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>

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
  return run;
}

CaseRecord SampleCase(const std::string& key, int64_t position) {
  CaseRecord c;
  c.case_key = key;
  c.position = position;
  c.variant_name = "fused";
  c.variant_key = "fused";
  c.options = "chunk_size=8";
  c.category = "GEMM fusion";
  c.description = "one GEMM";
  c.mode = "train";
  c.dtype = "float32";
  c.device = "cpu";
  c.batch = 4;
  c.seq_len = 32;
  c.min_len = 8;
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

  const auto cases = store.Cases(run_id);
  REQUIRE(cases.size() == 2);
  CHECK(cases[0].case_key == "a");  // suite order, not insertion order
  const CaseRecord& c = cases[1];
  const CaseRecord e = SampleCase("b", 1);
  CHECK(c.options == e.options);
  CHECK(c.reference == e.reference);
  CHECK(c.category == e.category);
  CHECK(c.description == e.description);
  CHECK(c.samples_s == e.samples_s);
  CHECK(c.MetricValue("runtime_mean_s") == 0.2);
  CHECK(c.MetricValue("peak_bytes") == 1024);
  CHECK_FALSE(c.MetricValue("nope"));
  CHECK(store.CaseKeys(run_id) == std::set<std::string>{"a", "b"});
  CHECK_FALSE(store.FindRun(run_id + 1));
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
  CHECK(store.CaseKeys(run_id) == std::set<std::string>{"a"});
  const auto cases = store.Cases(run_id);
  REQUIRE(cases.size() == 1);
  CHECK(cases[0].samples_s.size() == 3);  // the duplicate's samples were rolled back
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

TEST_CASE("a version-1 database is migrated in place", "[store]") {
  const std::string path = std::filesystem::temp_directory_path() / "seqbench_store_v1.db";
  std::filesystem::remove(path);
  {
    Store store(path);
    store.AddCase(store.CreateRun(SampleRun("uuid-old")), SampleCase("a", 0));
  }
  // Turn it back into what version 1 wrote: no columns added by later versions.
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  for (const char* column : {"category", "description", "layers", "width"}) {
    const std::string drop = std::string("ALTER TABLE cases DROP COLUMN ") + column;
    REQUIRE(sqlite3_exec(db, drop.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
  }
  REQUIRE(sqlite3_exec(db, "DROP TABLE training_steps", nullptr, nullptr, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db, "UPDATE schema_version SET version = 1", nullptr, nullptr, nullptr) ==
          SQLITE_OK);
  sqlite3_close(db);
  Store migrated(path);
  const auto cases = migrated.Cases(1);
  REQUIRE(cases.size() == 1);
  CHECK(cases[0].category.empty());
  CaseRecord fresh = SampleCase("b", 1);
  fresh.category = "batching";
  migrated.AddCase(1, fresh);
  CHECK(migrated.Cases(1)[1].category == "batching");
  CHECK(cases[0].layers == 0);  // what the migration fills in for old rows
  TrainingStepRecord step;
  step.step = 1;
  step.loss = 2.5;
  migrated.AddTrainingSteps(1, "a", {step});
  CHECK(migrated.TrainingSteps(1, "a").size() == 1);
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

}  // namespace
}  // namespace seqbench
