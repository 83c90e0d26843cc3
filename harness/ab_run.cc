#include "harness/ab_run.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <stdexcept>

#include "harness/case_record.h"
#include "harness/child_process.h"
#include "harness/run_header.h"

namespace seqbench {
namespace {

namespace fs = std::filesystem;

std::string LastLine(const std::string& path) {
  std::ifstream file(path);
  std::string line, last;
  while (std::getline(file, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

// One side's process for one round: `run` into that side's scratch database.
void RunSide(const AbRequest& request, const std::string& side, int64_t round,
             const std::string& scratch_dir, const std::function<bool()>& should_stop) {
  const std::string binary = side == "base" ? request.base_binary : request.new_binary;
  std::vector<std::string> argv = {
      binary,          "run", request.suite_path, "--db",    scratch_dir + "/" + side + ".db",
      "--repetitions", "1",   "--in-process",     "--check", round == 1 ? "full" : "none"};
  // Time only: counts are the other gate, and compare would judge a pair by them.
  if (request.suite_counts) argv.insert(argv.end(), {"--count", "none"});
  argv.insert(argv.end(), request.run_flags.begin(), request.run_flags.end());
  if (side == "new" && request.test_slowdown > 0)
    argv.insert(argv.end(), {"--test-slowdown", std::to_string(request.test_slowdown)});
  const std::string output = scratch_dir + "/" + side + "." + std::to_string(round) + ".log";
  const ChildOutcome outcome = RunChild(argv, request.process_timeout_s, should_stop, {}, output);
  if (outcome.end == ChildOutcome::End::kInterrupted) throw std::runtime_error("ab: interrupted");
  // Exit 1 is a case that mismatched or failed: stored, and judged by compare.
  const bool ran = outcome.end == ChildOutcome::End::kExited &&
                   (outcome.exit_code == 0 || outcome.exit_code == 1);
  if (!ran)
    throw std::runtime_error("ab: the " + side + " side's run of round " + std::to_string(round) +
                             " failed: " + outcome.Describe() + ": " + LastLine(output) +
                             " (its output: " + output + ")");
}

// The runs one side stored, oldest first, with their cases.
std::vector<std::vector<CaseRecord>> SideRounds(const std::string& path,
                                                std::optional<RunRecord>& first) {
  Store side(path, StoreAccess::kReadOnly);
  std::vector<std::vector<CaseRecord>> rounds;
  for (const RunRecord& run : side.Runs()) {
    if (!first) first = side.FindRun(run.run_id);
    rounds.push_back(side.Cases(run.run_id));
  }
  return rounds;
}

// Stores one side's gathered run, linked to its partner by uuid.
int64_t StoreSide(Store& store, RunRecord run, const std::vector<CaseRecord>& cases,
                  const AbRequest& request, const std::string& side, const std::string& own_uuid,
                  const std::string& partner_uuid, const std::string& order) {
  run.uuid = own_uuid;
  run.label = request.label + " " + side;
  run.repetitions = request.rounds;
  run.status = "running";
  run.environment.emplace_back("ab_side", side);
  run.environment.emplace_back("ab_pair", partner_uuid);
  run.environment.emplace_back("ab_order", order);
  run.environment.emplace_back("ab_binary",
                               side == "base" ? request.base_binary : request.new_binary);
  const int64_t run_id = store.CreateRun(run);
  for (const CaseRecord& c : cases) store.AddCase(run_id, c);
  store.SetRunStatus(run_id, "complete", UtcNow());
  return run_id;
}

}  // namespace

std::vector<bool> AbOrder(int64_t rounds, uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::vector<bool> base_first;
  for (int64_t r = 0; r < rounds; ++r) base_first.push_back((generator() & 1) == 0);
  return base_first;
}

std::vector<CaseRecord> GatherRounds(const std::vector<std::vector<CaseRecord>>& rounds) {
  std::vector<CaseRecord> gathered;
  std::map<std::string, size_t> index;
  std::map<std::string, size_t> rounds_with_one_sample;
  for (const std::vector<CaseRecord>& round : rounds) {
    for (const CaseRecord& c : round) {
      rounds_with_one_sample[c.key()] += c.samples_s.size() == 1;
      const auto found = index.find(c.key());
      if (found == index.end()) {
        index[c.key()] = gathered.size();
        gathered.push_back(c);
      } else {
        std::vector<double>& samples = gathered[found->second].samples_s;
        samples.insert(samples.end(), c.samples_s.begin(), c.samples_s.end());
      }
    }
  }
  for (CaseRecord& c : gathered) {
    // Sample r must be round r on both sides: a case missing from a round (it failed
    // there) or timed more than once a round (adaptive stopping) keeps no samples.
    if (rounds_with_one_sample[c.key()] != rounds.size() && !c.samples_s.empty()) {
      c.samples_s.clear();
      c.message +=
          std::string(c.message.empty() ? "" : "; ") + "not one sample in every round: not paired";
    }
    std::vector<Metric> metrics =
        RuntimeMetrics(c.samples_s, c.tokens_per_step, c.MetricValue("step_flops").value_or(0),
                       c.MetricValue("step_bytes").value_or(0));
    for (const Metric& metric : c.metrics) {
      const bool runtime = std::any_of(metrics.begin(), metrics.end(),
                                       [&](const Metric& m) { return m.name == metric.name; });
      if (!runtime) metrics.push_back(metric);
    }
    c.metrics = std::move(metrics);
  }
  return gathered;
}

AbResult RunAb(const AbRequest& request, Store& store, const std::string& scratch_dir,
               const std::function<void(const AbProgress&)>& on_progress,
               const std::function<bool()>& should_stop) {
  AbResult result;
  const std::vector<bool> base_first = AbOrder(request.rounds, request.seed);
  for (int64_t round = 1; round <= request.rounds; ++round) {
    const bool base_leads = base_first[static_cast<size_t>(round - 1)];
    result.order += std::string(result.order.empty() ? "" : " ") + (base_leads ? "BN" : "NB");
    for (const char* side : base_leads ? std::vector<const char*>{"base", "new"}
                                       : std::vector<const char*>{"new", "base"}) {
      if (on_progress) on_progress(AbProgress{round, request.rounds, side});
      RunSide(request, side, round, scratch_dir, should_stop);
    }
  }
  std::optional<RunRecord> base_run, new_run;
  const auto base_rounds = SideRounds(scratch_dir + "/base.db", base_run);
  const auto new_rounds = SideRounds(scratch_dir + "/new.db", new_run);
  if (!base_run || !new_run) throw std::runtime_error("ab: a side stored no run");
  const std::string base_uuid = NewUuid(), new_uuid = NewUuid();
  result.base_run_id = StoreSide(store, *base_run, GatherRounds(base_rounds), request, "base",
                                 base_uuid, new_uuid, result.order);
  result.new_run_id = StoreSide(store, *new_run, GatherRounds(new_rounds), request, "new", new_uuid,
                                base_uuid, result.order);
  return result;
}

}  // namespace seqbench
