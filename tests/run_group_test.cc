// Run groups: a group is gathered only when whole (every shard once, complete, measured
// alike, on one kind of machine), its cases in suite order; a Slurm job's scripts carry
// user text quoted; srun's environment forms a c10d world.
#include "results/run_group.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "base/files.h"
#include "harness/slurm_job.h"
#include "harness/training/distributed.h"
#include "results/machine.h"

namespace seqbench {
namespace {

RunRecord Shard(int64_t index, int64_t count, const std::string& group = "g1") {
  RunRecord run;
  run.uuid = group + "-shard-" + std::to_string(index) + "-" + std::to_string(count);
  run.suite_name = "tiny";
  run.suite_path = "suites/tiny.toml";
  run.suite_text = "name = \"tiny\"\n";
  run.suite_hash = "0123456789abcdef";
  run.shard = std::to_string(index) + "/" + std::to_string(count);
  run.group = group;
  run.status = "complete";
  run.started_at = "2026-11-27T10:0" + std::to_string(index) + ":00Z";
  run.finished_at = "2026-11-27T11:0" + std::to_string(index) + ":00Z";
  run.settings.repetitions = 5;
  run.threads = 1;
  run.environment = {{"git_sha", "abc"}, {"cpu_model", "test cpu"}, {"blas_core", "Haswell"}};
  return run;
}

CaseRecord Case(const std::string& name, int64_t position) {
  CaseRecord c;
  c.position = position;
  c.identity.variant_name = name;
  c.identity.variant_key = name;
  c.identity.workload.batch = 4;
  c.identity.workload.seq_len = 32;
  c.status = "ok";
  c.samples_s = {0.1, 0.1, 0.4};  // mean 0.2, median 0.1
  return c;
}

// Shards 1..count of a 6-case suite as `run --shard` stores them, shard count first: case k
// of the suite is case k / count of shard k % count + 1, numbered from 0 within it.
void StoreGroup(Store& store, int64_t count, const std::string& group = "g1") {
  for (int64_t index = count; index >= 1; --index) {
    const int64_t run_id = store.CreateRun(Shard(index, count, group));
    int64_t in_shard = 0;
    for (int64_t k = 0; k < 6; ++k) {
      if (InShard(k, ShardSpec{index, count}))
        store.AddCase(run_id, Case("v" + std::to_string(k), in_shard++));
    }
  }
}

bool Mentions(const std::vector<std::string>& gaps, const std::string& text) {
  for (const std::string& gap : gaps)
    if (gap.find(text) != std::string::npos) return true;
  return false;
}

TEST_CASE("a whole group gathers every shard's cases in suite order", "[run_group]") {
  Store store("");
  StoreGroup(store, 3);
  StoreGroup(store, 2, "other");
  const auto gathered = GatherGroup(store, "g1");
  REQUIRE(gathered.size() == 1);
  const GatheredRun& run = gathered[0];
  REQUIRE(run.cases.size() == 6);
  for (size_t i = 0; i < run.cases.size(); ++i) {
    CHECK(run.cases[i].position == static_cast<int64_t>(i));
    CHECK(run.cases[i].name() == "v" + std::to_string(i));
  }
  CHECK(run.shards.size() == 3);
  CHECK(run.shards[0].shard == "1/3");  // by shard number, whatever the order stored
  CHECK(run.run.shard.empty());
  CHECK(run.run.group == "g1");
  CHECK(run.run.started_at == "2026-11-27T10:01:00Z");
  CHECK(run.run.finished_at == "2026-11-27T11:03:00Z");
  CHECK(RunName(run.run) == "group 'g1'");
  CHECK(RunName(run.shards[1]) == "run " + std::to_string(run.shards[1].run_id));
}

TEST_CASE("a group with a missing, duplicated or unfinished shard is refused by number",
          "[run_group]") {
  Store store("");
  CHECK_THROWS_WITH(GatherGroup(store, "g1"), Catch::Contains("no run of group 'g1'"));
  store.CreateRun(Shard(1, 4));
  RunRecord running = Shard(3, 4);
  running.status = "running";
  store.CreateRun(running);
  store.CreateRun(Shard(4, 4));
  RunRecord again = Shard(4, 4);
  again.uuid += "-again";
  store.CreateRun(again);
  const auto gaps = GroupGaps(GroupShards(store, "g1"));
  CHECK(Mentions(gaps, "shard(s) 2 of 4 missing"));
  CHECK(Mentions(gaps, "shard 3/4 (run 2) is running"));
  CHECK(Mentions(gaps, "shard 4/4 stored 2 times (runs 3, 4)"));
  CHECK(gaps.size() == 3);
  CHECK_THROWS_WITH(GatherGroup(store, "g1"), Catch::Contains("is not whole"));
}

TEST_CASE("shards measured unlike the first are refused, naming the fact", "[run_group]") {
  Store store("");
  store.CreateRun(Shard(1, 2));
  RunRecord other = Shard(2, 2);
  other.settings.repetitions = 9;
  other.environment[0].second = "def";  // git_sha: another build
  store.CreateRun(other);
  const auto gaps = GroupGaps(GroupShards(store, "g1"));
  CHECK(Mentions(gaps, "shard 2/2 (run 2) was measured unlike shard 1/2"));
  CHECK(Mentions(gaps, "repetitions"));
  CHECK(Mentions(gaps, "build"));
}

TEST_CASE("shards from two machines are refused, or split by machine when asked", "[run_group]") {
  Store store("");
  for (int64_t index = 1; index <= 3; ++index) {
    RunRecord shard = Shard(index, 3);
    if (index == 2) shard.environment[2].second = "SkylakeX";  // blas_core
    const int64_t run_id = store.CreateRun(shard);
    store.AddCase(run_id, Case("v" + std::to_string(index), 0));
  }
  CHECK(GroupGaps(GroupShards(store, "g1")).empty());
  CHECK_THROWS_WITH(GatherGroup(store, "g1"), Catch::Contains("blas_core: Haswell vs SkylakeX") &&
                                                  Catch::Contains("--allow-mixed-machines"));
  const auto parts = GatherGroup(store, "g1", MixedMachines::kSplit);
  REQUIRE(parts.size() == 2);
  CHECK(parts[0].run.shard == "shards 1/3, 3/3");
  CHECK(parts[0].cases.size() == 2);
  CHECK(parts[1].run.shard == "shards 2/3");
  CHECK(MachineOf(parts[1].run).at("blas_core") == "SkylakeX");
  CHECK(RunName(parts[1].run) == "group 'g1' (shards 2/3)");
}

TEST_CASE("one table of machine keys serves every use, each as it must", "[run_group]") {
  const auto keys = [](MachineKeyUse use) {
    const std::vector<std::string> list = MachineKeysFor(use);
    return std::set<std::string>(list.begin(), list.end());
  };
  const auto identity = keys(MachineKeyUse::kIdentity), hardware = keys(MachineKeyUse::kHardware),
             limits = keys(MachineKeyUse::kLimits), environment = keys(MachineKeyUse::kEnvironment);
  CHECK(MachineKeys() == MachineKeysFor(MachineKeyUse::kIdentity));
  // The hardware that makes times incomparable names a machine; whatever names a machine
  // invalidates its stored limits; compare lists every difference in what names one.
  for (const std::string& key : hardware) CHECK(identity.count(key) == 1);
  for (const std::string& key : identity) CHECK(limits.count(key) == 1);
  for (const std::string& key : identity) CHECK(environment.count(key) == 1);
  // A CI VM's host name is not its identity, but its limits are its own; the core
  // OpenBLAS was told to use changes the GEMM rate, not what the machine is.
  CHECK(identity.count("hostname") == 0);
  CHECK(limits.count("hostname") == 1);
  CHECK(limits.count("env_openblas_coretype") == 1);
  CHECK(identity.count("env_openblas_coretype") == 0);
  CHECK(hardware == std::set<std::string>{"cpu_model", "cpu_logical_cores", "gpu_name"});
  // No key twice, and every key serves some use.
  std::set<std::string> names;
  for (const MachineKey& key : MachineKeyTable()) {
    CHECK(names.insert(key.name).second);
    CHECK((key.identity || key.hardware || key.limits || key.environment));
  }
}

TEST_CASE("group ids are file-name safe", "[run_group]") {
  CHECK(IsGroupId("ci-20261127T140000"));
  CHECK(IsGroupId("a.b_c"));
  for (const char* bad : {"", "-x", ".x", "a/b", "a b", "a'b", "a$b"}) CHECK_FALSE(IsGroupId(bad));
  CHECK_FALSE(IsGroupId(std::string(65, 'a')));
}

// Runs `script` with bash, with a fake seqbench that writes its argv, one per line.
std::vector<std::string> ArgvOfScript(const std::string& script, const std::string& dir) {
  const std::string path = dir + "/script.sh", out = dir + "/argv";
  std::ofstream(path) << script;
  const std::string command = "SLURM_ARRAY_TASK_ID=3 bash '" + path + "'";
  REQUIRE(std::system(command.c_str()) == 0);
  std::ifstream in(out);
  std::vector<std::string> argv;
  for (std::string line; std::getline(in, line);) argv.push_back(line);
  return argv;
}

TEST_CASE("a Slurm job's scripts pass paths and flags as written, quoted", "[slurm]") {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("seqbench_slurm_" + std::to_string(::getpid()));
  const std::string odd = dir + "/it's a \"dir\" $HOME `x`";
  std::filesystem::create_directories(odd);
  const std::string fake = odd + "/fake seqbench";
  std::ofstream(fake) << "#!/bin/bash\nprintf '%s\\n' \"$@\" > '" << dir << "/argv'\n";
  std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
  SlurmJobRequest request;
  request.task.binary = fake;
  request.workdir = odd;
  request.task.suite_path = "suites/it's.toml";
  request.shards = 4;
  request.group = "g-1";
  request.db_dir = odd + "/100%";
  request.task.user_flags = {"--label", "a 'b' $(c)"};
  request.task.repetitions = 3;  // a field, beside the user's words
  request.gres = "gpu:1";
  request.time_limit = "1:00:00";
  const SlurmJob job = PlanSlurmJob(request);
  // Task 3 runs ShardRun(request, 3), every word as written.
  std::vector<std::string> argv = ArgvOfScript(job.array_script, dir);
  argv.insert(argv.begin(), fake);
  const ChildRun third = ChildRun::FromArgv(argv);
  CHECK(third == ShardRun(request, 3));
  CHECK(third.db_path == odd + "/100%/shard-3.db");
  CHECK(third.user_flags == request.task.user_flags);
  const std::string gather = job.gather_script;
  CHECK(gather.find("merge") != std::string::npos);
  CHECK(gather.find("check --group 'g-1'") != std::string::npos);
  std::map<std::string, std::string> options;
  for (size_t i = 0; i + 1 < job.array_options.size(); ++i)
    options[job.array_options[i]] = job.array_options[i + 1];
  CHECK(options.at("--array") == "1-4");
  CHECK(options.at("--gres") == "gpu:1");
  CHECK(options.at("--output") == odd + "/100%%/slurm-%A_%a.out");
  CHECK(std::count(job.array_options.begin(), job.array_options.end(), "--requeue") == 1);
  CHECK(std::count(job.gather_options.begin(), job.gather_options.end(), "--gres") == 0);
  CHECK(std::count(job.gather_options.begin(), job.gather_options.end(), "--time") == 1);
  CHECK(SlurmDependency("17")[1] == "afterany:17");
  CHECK(RemoveTree(dir));
}

TEST_CASE("srun's environment forms the c10d world; torchrun's wins", "[slurm]") {
  using training::ReadWorldEnvironment;
  // A batch script of an --ntasks=4 job: no srun step, no world.
  std::map<std::string, std::string> env = {
      {"SLURM_NTASKS", "4"}, {"SLURM_PROCID", "0"}, {"SLURM_JOB_ID", "123"}};
  const auto batch = [&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  CHECK_FALSE(ReadWorldEnvironment(batch));
  env = {{"SLURM_NTASKS", "4"},   {"SLURM_STEP_NUM_TASKS", "4"},
         {"SLURM_PROCID", "2"},   {"SLURM_LOCALID", "0"},
         {"SLURM_JOB_ID", "123"}, {"SLURM_JOB_NODELIST", "gpu[07-08,11],cpu1"}};
  const auto from = [&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto world = ReadWorldEnvironment(from);
  REQUIRE(world);
  CHECK(world->rank == 2);
  CHECK(world->world_size == 4);
  CHECK(world->local_rank == 0);
  CHECK(world->master_address == "gpu07");
  CHECK(world->master_port == training::kSlurmFirstPort + 123);
  env["SLURM_STEP_NODELIST"] = "node[3-4]";
  env["MASTER_PORT"] = "2222";
  world = ReadWorldEnvironment(from);
  CHECK(world->master_address == "node3");
  CHECK(world->master_port == 2222);
  env["WORLD_SIZE"] = "2";
  env["RANK"] = "1";
  CHECK(ReadWorldEnvironment(from)->world_size == 2);  // torchrun under srun
  env.erase("WORLD_SIZE");
  env["SLURM_STEP_NUM_TASKS"] = "1";  // one task: no world
  CHECK_FALSE(ReadWorldEnvironment(from));
  env["SLURM_STEP_NUM_TASKS"] = "2";
  env["SLURM_PROCID"] = "2";
  CHECK_THROWS_WITH(ReadWorldEnvironment(from), Catch::Contains("SLURM_PROCID"));
  CHECK(training::FirstSlurmHost("a") == "a");
  CHECK(training::FirstSlurmHost("rack[2-3]n[08,09]") == "rack2n08");
  CHECK_THROWS(training::FirstSlurmHost("node[1-2"));
}

}  // namespace
}  // namespace seqbench
