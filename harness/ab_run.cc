#include "harness/ab_run.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>

#include "base/process.h"
#include "harness/benchmark_run.h"
#include "harness/case_record.h"
#include "harness/child_run.h"
#include "harness/lockstep.h"
#include "harness/roofline.h"
#include "harness/run_header.h"
#include "harness/suite.h"

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

// Throws unless a side's process ran to its end: exit 0, or 1 (a case that mismatched or
// failed: stored, and judged by compare).
void RequireRan(const ChildOutcome& outcome, const std::string& what, const std::string& output) {
  if (outcome.end == ChildOutcome::End::kInterrupted) throw std::runtime_error("ab: interrupted");
  const bool ran = outcome.end == ChildOutcome::End::kExited &&
                   (outcome.exit_code == 0 || outcome.exit_code == 1);
  if (!ran)
    throw std::runtime_error("ab: " + what + " failed: " + outcome.Describe() + ": " +
                             LastLine(output) + " (its output: " + output + ")");
}

// One side's process for one round (process rounds).
void RunSide(const AbRequest& request, const std::string& side, int64_t round,
             const std::string& scratch_dir, const std::function<bool()>& should_stop) {
  const std::string output = scratch_dir + "/" + side + "." + std::to_string(round) + ".log";
  ChildSpec spec;
  spec.argv = AbSideRun(request, side, scratch_dir, round == 1, 1).ToArgv();
  spec.timeout_s = request.process_timeout_s;
  spec.should_stop = should_stop;
  spec.output = ChildSpec::Output::kFile;
  spec.output_path = output;
  const ChildOutcome outcome = RunChild(spec);
  RequireRan(outcome, "the " + side + " side's run of round " + std::to_string(round), output);
}

// One side's lockstep worker (run --lockstep), supervised on a thread of its own while the
// controller talks to it over its pipes; killed when the controller gives up.
class LockstepWorker {
 public:
  LockstepWorker(const AbRequest& request, const std::string& side, const std::string& scratch_dir,
                 const std::function<bool()>& should_stop)
      : side_(side), prefix_(scratch_dir + "/" + side), output_(prefix_ + ".log") {
    MakeLockstepPipes(prefix_);
    channel_.emplace(LineChannel::Controller(prefix_));
    ChildRun worker = AbSideRun(request, side, scratch_dir, true, request.rounds);
    worker.lockstep = prefix_;
    const auto stop = [this, should_stop] { return abandon_ || (should_stop && should_stop()); };
    // No limit on the whole process, which lives as long as the pair: each answer has one.
    ChildSpec spec;
    spec.argv = worker.ToArgv();
    spec.should_stop = stop;
    spec.output = ChildSpec::Output::kFile;
    spec.output_path = output_;
    thread_ = std::thread([this, spec] {
      outcome_ = RunChild(spec);
      ended_ = true;
    });
  }
  ~LockstepWorker() {
    abandon_ = true;
    if (thread_.joinable()) thread_.join();
  }
  // The cases it set up and may time, once it says "prepared".
  std::vector<std::string> ReadyCases(double timeout_s) {
    std::vector<std::string> keys;
    for (std::string line; (line = Receive(timeout_s)) != "prepared";) {
      if (line.rfind("ready ", 0) != 0) throw std::runtime_error("ab: " + side_ + " said " + line);
      keys.push_back(line.substr(6));
    }
    return keys;
  }
  void Sample(const std::string& key, double timeout_s) {
    channel_->Send("time " + key);
    if (const std::string line = Receive(timeout_s); line != "done")
      throw std::runtime_error("ab: " + side_ + " said " + line);
  }
  // Ends the conversation and waits, up to `timeout_s`, for the process to store its run.
  void Finish(double timeout_s) {
    channel_->Send("end");
    const auto began = std::chrono::steady_clock::now();
    while (!ended_) {
      const std::chrono::duration<double> waited = std::chrono::steady_clock::now() - began;
      if (timeout_s > 0 && waited.count() > timeout_s)
        Fail("did not store its run within " + std::to_string(static_cast<int64_t>(timeout_s)) +
             " s of the end");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    thread_.join();
    RequireRan(outcome_, "the " + side_ + " side's worker", output_);
  }

 private:
  std::string Receive(double timeout_s) {
    try {
      return channel_->Receive(
          timeout_s, [this] { return ended_.load(); }, "the " + side_ + " side");
    } catch (const std::runtime_error& error) {
      Fail(error.what());
    }
  }
  // Gives up on the worker: kills it if it still runs, waits for it, and throws `why` with
  // how it ended and its output's last line, so that a timeout is not reported as the kill
  // that followed it.
  [[noreturn]] void Fail(const std::string& why) {
    abandon_ = true;
    if (thread_.joinable()) thread_.join();
    throw std::runtime_error("ab: the " + side_ + " side's worker: " + why + " (then " +
                             outcome_.Describe() + "; its output, " + output_ +
                             ", ends: " + LastLine(output_) + ")");
  }
  std::string side_, prefix_, output_;
  std::optional<LineChannel> channel_;
  std::atomic<bool> abandon_{false}, ended_{false};
  ChildOutcome outcome_;
  std::thread thread_;
};

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
                  const std::string& partner_uuid, const std::string& order,
                  const std::string& started_at) {
  run.uuid = own_uuid;
  run.label = request.label + " " + side;
  run.settings.repetitions = request.rounds;
  run.status = "running";
  run.environment.emplace_back("ab_side", side);
  run.environment.emplace_back("ab_pair", partner_uuid);
  run.environment.emplace_back("ab_order", order);
  run.environment.emplace_back("ab_started_at", started_at);
  run.environment.emplace_back("ab_binary",
                               side == "base" ? request.base_binary : request.new_binary);
  const int64_t run_id = store.CreateRun(run);
  for (const CaseRecord& c : cases) store.AddCase(run_id, c);
  store.SetRunStatus(run_id, "complete", UtcNow());
  return run_id;
}

// The machine's limits at the conditions of `cases`, measured by this process once both
// workers have ended: each worker measured its own while its partner measured too, so
// both halved what the machine can do. The entries replace the workers' in both runs.
std::vector<std::pair<std::string, std::string>> LimitsMeasuredOnce(
    const std::vector<CaseRecord>& cases) {
  std::vector<CaseSpec> conditions;
  for (const CaseRecord& c : cases) {
    CaseSpec spec;
    spec.workload = c.workload();
    conditions.push_back(spec);
  }
  auto limits = MeasureLimitsFor(conditions);
  limits.emplace_back("machine_limits",
                      "measured once by ab after both sides ended (the sides' own, measured at "
                      "the same time, replaced)");
  return limits;
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

namespace {

// Each side's run as the A/B pair stores it: its record and its cases, sample r of a case
// paired with the other side's sample r.
struct SideRuns {
  std::optional<RunRecord> base_run, new_run;
  std::vector<CaseRecord> base_cases, new_cases;
};

// Process rounds: each round one process a side, in AbOrder's order.
SideRuns RunProcessRounds(const AbRequest& request, const std::string& scratch_dir,
                          const std::function<void(const AbProgress&)>& on_progress,
                          const std::function<bool()>& should_stop, std::string& order) {
  const std::vector<bool> base_first = AbOrder(request.rounds, request.seed);
  for (int64_t round = 1; round <= request.rounds; ++round) {
    const bool base_leads = base_first[static_cast<size_t>(round - 1)];
    order += std::string(order.empty() ? "" : " ") + (base_leads ? "BN" : "NB");
    for (const char* side : base_leads ? std::vector<const char*>{"base", "new"}
                                       : std::vector<const char*>{"new", "base"}) {
      if (on_progress) on_progress(AbProgress{round, request.rounds, side});
      RunSide(request, side, round, scratch_dir, should_stop);
    }
  }
  SideRuns runs;
  runs.base_cases = GatherRounds(SideRounds(scratch_dir + "/base.db", runs.base_run));
  runs.new_cases = GatherRounds(SideRounds(scratch_dir + "/new.db", runs.new_run));
  return runs;
}

// Lockstep: both sides' workers alive at once, each case's samples taken in turns, one
// pair at a time in InterleavedOrder over the cases both sides have ready, the side that
// goes first a coin per pair (AbOrder).
SideRuns RunLockstepPairs(const AbRequest& request, const std::string& scratch_dir,
                          const std::function<void(const AbProgress&)>& on_progress,
                          const std::function<bool()>& should_stop, std::string& order) {
  const double timeout_s = request.process_timeout_s;
  {
    LockstepWorker base(request, "base", scratch_dir, should_stop);
    LockstepWorker next(request, "new", scratch_dir, should_stop);
    const std::vector<std::string> base_keys = base.ReadyCases(timeout_s);
    const std::vector<std::string> new_keys = next.ReadyCases(timeout_s);
    const std::set<std::string> on_new(new_keys.begin(), new_keys.end());
    std::vector<std::string> keys;
    std::copy_if(base_keys.begin(), base_keys.end(), std::back_inserter(keys),
                 [&](const std::string& key) { return on_new.count(key) > 0; });
    const std::vector<size_t> pairs = InterleavedOrder(keys.size(), request.rounds, request.seed);
    // The coins from a seed of their own, apart from the shuffle's stream.
    const std::vector<bool> base_first =
        AbOrder(static_cast<int64_t>(pairs.size()), request.seed ^ 0x9E3779B97F4A7C15ULL);
    const int64_t total = static_cast<int64_t>(pairs.size());
    for (int64_t i = 0; i < total; ++i) {
      if (should_stop && should_stop()) throw std::runtime_error("ab: interrupted");
      const bool base_leads = base_first[static_cast<size_t>(i)];
      const std::string& key = keys[pairs[static_cast<size_t>(i)]];
      (base_leads ? base : next).Sample(key, timeout_s);
      (base_leads ? next : base).Sample(key, timeout_s);
      order += std::string(order.empty() ? "" : " ") + (base_leads ? "BN" : "NB");
      if (on_progress && (i + 1) * 10 / total != i * 10 / total)
        on_progress(AbProgress{0, 0, "", i + 1, total});
    }
    base.Finish(timeout_s);
    next.Finish(timeout_s);
  }
  SideRuns runs;
  for (const char* side : {"base", "new"}) {
    const bool base = std::string(side) == "base";
    const auto rounds =
        SideRounds(scratch_dir + "/" + side + ".db", base ? runs.base_run : runs.new_run);
    if (rounds.size() != 1)
      throw std::runtime_error(std::string("ab: the ") + side + " side's worker stored " +
                               std::to_string(rounds.size()) + " runs, not 1, in " + scratch_dir);
    (base ? runs.base_cases : runs.new_cases) = rounds[0];
  }
  return runs;
}

}  // namespace

ChildRun AbSideRun(const AbRequest& request, const std::string& side,
                   const std::string& scratch_dir, bool check, int64_t repetitions) {
  ChildRun run;
  run.binary = side == "base" ? request.base_binary : request.new_binary;
  run.suite_path = request.suite_path;
  run.db_path = scratch_dir + "/" + side + ".db";
  run.repetitions = repetitions;
  run.in_process = true;
  run.check = check ? "full" : "none";
  // Time only: counts are the other gate, and compare would judge a pair by them.
  if (request.suite_counts) run.count = "none";
  run.filter = request.filter;
  run.threads = request.threads;
  if (side == "new") run.test_slowdown = request.test_slowdown;
  return run;
}

AbResult RunAb(const AbRequest& request, Store& store, const std::string& scratch_dir,
               const std::function<void(const AbProgress&)>& on_progress,
               const std::function<bool()>& should_stop) {
  AbResult result;
  const std::string started_at = UtcNow();
  const SideRuns runs =
      request.lockstep
          ? RunLockstepPairs(request, scratch_dir, on_progress, should_stop, result.order)
          : RunProcessRounds(request, scratch_dir, on_progress, should_stop, result.order);
  if (!runs.base_run || !runs.new_run) throw std::runtime_error("ab: a side stored no run");
  const std::string base_uuid = NewUuid(), new_uuid = NewUuid();
  result.base_run_id = StoreSide(store, *runs.base_run, runs.base_cases, request, "base", base_uuid,
                                 new_uuid, result.order, started_at);
  result.new_run_id = StoreSide(store, *runs.new_run, runs.new_cases, request, "new", new_uuid,
                                base_uuid, result.order, started_at);
  const auto limits = LimitsMeasuredOnce(runs.new_cases);
  for (const int64_t run_id : {result.base_run_id, result.new_run_id}) {
    store.AddRunEnvironment(run_id, limits, {});
  }
  return result;
}

}  // namespace seqbench
