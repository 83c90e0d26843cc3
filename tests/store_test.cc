// The results store: what goes in comes out, in memory and on disk, typed run facts and
// expectations included; a case is all or nothing; case keys stay within their run; merge
// adds nothing twice; a newer schema is refused; older ones migrate with their facts.
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
  run.baseline = "baseline";
  run.repetitions = 7;
  run.warmup = 3;
  run.min_time_s = 0.25;
  run.threads = 2;
  run.check_policy = "full";
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
  CHECK(run->repetitions == 7);
  CHECK(run->warmup == 3);
  CHECK(run->min_time_s == 0.25);
  CHECK(run->threads == 2);
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

// Turns a database this seqbench wrote back into what `version` (1 or 4) wrote: without
// the columns and tables later versions added.
void Downgrade(const std::string& path, int version) {
  std::vector<std::string> statements = {"ALTER TABLE cases DROP COLUMN heads",
                                         "ALTER TABLE cases DROP COLUMN vocab_size",
                                         "ALTER TABLE cases DROP COLUMN threads",
                                         "ALTER TABLE runs DROP COLUMN kind",
                                         "ALTER TABLE runs DROP COLUMN baseline",
                                         "ALTER TABLE runs DROP COLUMN repetitions",
                                         "ALTER TABLE runs DROP COLUMN warmup",
                                         "ALTER TABLE runs DROP COLUMN min_time_s",
                                         "ALTER TABLE runs DROP COLUMN threads",
                                         "ALTER TABLE runs DROP COLUMN check_policy",
                                         "DROP TABLE expectations"};
  if (version < 4) {
    for (const char* sql :
         {"ALTER TABLE cases DROP COLUMN category", "ALTER TABLE cases DROP COLUMN description",
          "ALTER TABLE cases DROP COLUMN layers", "ALTER TABLE cases DROP COLUMN width",
          "DROP TABLE training_steps"}) {
      statements.push_back(sql);
    }
  }
  statements.push_back("UPDATE schema_version SET version = " + std::to_string(version));
  ExecuteAll(path, statements);
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
  CHECK(run.repetitions == 5);  // the override in force, not the suite's default
  CHECK(run.warmup == 4);
  CHECK(run.min_time_s == Approx(0.05));
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

}  // namespace
}  // namespace seqbench
