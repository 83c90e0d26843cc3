#include "harness/benchmark_run.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <random>
#include <regex>

#include "base/files.h"
#include "base/process.h"
#include "harness/case_record.h"
#include "harness/environment.h"
#include "harness/instruction_count.h"
#include "harness/key_pattern.h"
#include "harness/lockstep.h"
#include "harness/runner.h"

namespace seqbench {

std::vector<CaseSpec> SelectCases(const Suite& suite, const CaseSelection& selection) {
  const KeyPattern filter(selection.filter.empty() ? ".*" : selection.filter);
  std::vector<CaseSpec> cases;
  for (CaseSpec spec : suite.Expand()) {
    if (selection.device) spec.workload.device = *selection.device;
    if (selection.threads) spec.workload.threads = *selection.threads;
    if (filter.Matches(spec.Key())) cases.push_back(std::move(spec));
  }
  return Shard(cases, selection.shard.index, selection.shard.count);
}

std::vector<CaseSpec> PendingCases(const std::vector<CaseSpec>& cases,
                                   const std::set<std::string>& finished) {
  std::vector<CaseSpec> pending;
  for (const CaseSpec& spec : cases) {
    if (finished.count(spec.Key()) == 0) pending.push_back(spec);
  }
  return pending;
}

double DefaultCaseTimeout(double longest_case_s) { return std::max(600.0, 20 * longest_case_s); }

namespace {

// What ended an isolated case's process, in the words of a case's message.
std::string CaseEndMessage(const ChildOutcome& outcome) {
  switch (outcome.end) {
    case ChildOutcome::End::kExited:
      return "the case's process exited with status " + std::to_string(outcome.exit_code) +
             (outcome.exit_code == 0 ? " without storing a result (did the variant call exit()?)"
                                     : "") +
             (outcome.message.empty() ? "" : " (" + outcome.message + ")");
    case ChildOutcome::End::kSignaled:
      return "the case's process " + outcome.Describe();
    case ChildOutcome::End::kTimedOut:
      return "killed after " + std::to_string(static_cast<int64_t>(outcome.wall_s)) +
             " s, past the case timeout (run --case-timeout)";
    case ChildOutcome::End::kInterrupted:
      return "interrupted";
    case ChildOutcome::End::kNotStarted:
      return "could not start the case's process: " + outcome.message;
  }
  return outcome.Describe();
}

// The record of a case whose child ended without storing it.
CaseRecord FailedChildRecord(const CaseSpec& spec, int64_t position, const ChildOutcome& outcome) {
  CaseRecord record;
  record.identity = spec.Identity();
  record.position = position;
  record.status = outcome.end == ChildOutcome::End::kTimedOut ? kStatusTimeout : kStatusError;
  record.message = CaseEndMessage(outcome);
  record.reference = "none (the case did not finish)";
  record.wall_s = outcome.wall_s;
  return record;
}

// The fewest steps whose test-slowdown extra steps (extra_per_mille each, carried over)
// come out whole, so that a counted sample of them is slowed exactly; 1 without one.
int64_t StepsPerCountedSample(int64_t extra_per_mille) {
  for (int64_t steps = 1; steps < 1000; ++steps) {
    if (extra_per_mille * steps % 1000 == 0) return steps;
  }
  return 1000;
}

// The cases a run counts, each with its stored record, which gains the counts.
struct ToCount {
  const CaseSpec* spec;
  CaseRecord record;
};

// Whether a stored case is counted: timed on the CPU. A timed CUDA case is stored again,
// saying why not.
bool Countable(const CaseSpec& spec, CaseRecord& record, Store& store, int64_t run_id) {
  if (record.status != kStatusOk && record.status != kStatusMismatch) return false;
  if (spec.workload.device == "cpu" && !spec.variant.peer) return true;
  record.message += std::string(record.message.empty() ? "" : "; ") +
                    (spec.variant.peer ? "not counted: a peer steps in its own Python process"
                                       : "not counted: valgrind sees host code only");
  store.ReplaceCase(run_id, record);
  return false;
}

// Counts every case of `batch` in one child and stores each case again with its counts
// (or the reason it has none), and the child's view of the code it ran with the run
// (count_* entries).
void CountAndStore(const Counting& counting, std::vector<ToCount>& batch,
                   const std::function<void(int64_t counted)>& on_counted,
                   const std::function<bool()>& should_stop, Store& store, int64_t run_id) {
  if (batch.empty()) return;
  std::vector<CaseSpec> specs;
  for (const ToCount& entry : batch) specs.push_back(*entry.spec);
  CountRequest request;
  request.cases = static_cast<int64_t>(specs.size());
  request.steps = counting.steps;
  request.kinds = counting.kinds;
  request.timeout_s =
      counting.timeout_s > 0 ? counting.timeout_s : 600 + 120 * static_cast<double>(specs.size());
  request.command = [&](const std::string& out_dir) {
    // The child's list, one case key a line: whole, since a short list (a full disk) would
    // count fewer cases.
    std::string keys;
    for (const CaseSpec& spec : specs) keys += spec.Key() + "\n";
    WriteFileAtomically(out_dir + "/cases", keys);
    return counting.command(specs, out_dir);
  };
  request.on_counted = on_counted;
  const CountBatch counts = CountInChild(request, should_stop);
  for (size_t i = 0; i < batch.size(); ++i) {
    CaseRecord& record = batch[i].record;
    const StepCounts& mine = counts.cases.at(i);
    if (mine.not_counted.empty()) {
      for (const Metric& metric : CountMetrics(mine)) record.metrics.push_back(metric);
      record.functions = mine.functions;
    } else {
      record.message +=
          std::string(record.message.empty() ? "" : "; ") + "not counted: " + mine.not_counted;
    }
    store.ReplaceCase(run_id, record);
  }
  std::vector<std::pair<std::string, std::string>> facts;
  for (const auto& [key, value] : counts.facts) facts.emplace_back("count_" + key, value);
  facts.emplace_back("count_wall_s", std::to_string(counts.wall_s));
  store.AddRunEnvironment(run_id, facts, {});
}

// Says that the counting begins (it takes minutes: valgrind starts LibTorch slowly), then
// counts and stores.
void CountTimedCases(const Counting& counting, std::vector<ToCount>& batch,
                     const std::function<void(const CaseProgress&)>& on_case,
                     const std::function<bool()>& should_stop, Store& store, int64_t run_id) {
  if (batch.empty()) return;
  CaseProgress progress;
  progress.counting = static_cast<int64_t>(batch.size());
  if (on_case) on_case(progress);
  const auto started = std::chrono::steady_clock::now();
  const auto on_counted = [&](int64_t counted) {
    if (!on_case) return;
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    progress.counted = counted;
    progress.eta_s =
        elapsed / static_cast<double>(counted) * static_cast<double>(progress.counting - counted);
    on_case(progress);
  };
  CountAndStore(counting, batch, on_counted, should_stop, store, run_id);
}

}  // namespace

std::vector<CaseSpec> CasesToCount(const std::vector<CaseSpec>& cases, const std::string& out_dir) {
  std::ifstream keys(out_dir + "/cases");
  if (!keys) throw std::runtime_error("no list of cases to count in " + out_dir);
  std::vector<CaseSpec> specs;
  for (std::string key; std::getline(keys, key);) {
    const auto spec = std::find_if(cases.begin(), cases.end(), [&](const CaseSpec& candidate) {
      return candidate.Key() == key;
    });
    if (spec == cases.end()) throw std::runtime_error("no case '" + key + "' in the suite");
    specs.push_back(*spec);
  }
  return specs;
}

void CountCasesInThisProcess(const Suite& suite, const std::vector<CaseSpec>& specs, int64_t steps,
                             const std::string& out_dir, bool natively) {
  CaseRunner runner(suite, CheckPolicy::kNone);
  for (size_t index = 0; index < specs.size(); ++index) {
    const std::string account = CaseCountFile(out_dir, static_cast<int64_t>(index));
    try {
      CaseSpec spec = specs[index];
      spec.workload.threads = 1;
      std::unique_ptr<PreparedCase> prepared = runner.Prepare(spec);
      if (!prepared->ready)
        throw std::runtime_error("the case did not set up (" + prepared->result.status +
                                 "): " + prepared->result.message);
      if (prepared->peer)
        throw std::runtime_error(
            "a peer steps in its own Python process: this one's counts "
            "would hold only the wait for it");
      const int64_t per_sample = StepsPerCountedSample(prepared->extra_per_mille);
      PreparedCase& p = *prepared;
      const auto sample = [&p, per_sample] {
        for (int64_t i = 0; i < per_sample; ++i) p.measured_step();
      };
      std::vector<std::pair<std::string, std::string>> facts = {
          {"steps_per_sample", std::to_string(per_sample)}};
      if (natively) {
        const std::vector<double> counts = CountStepsWithPerf(sample, steps);
        for (size_t k = 0; k < counts.size(); ++k)
          facts.emplace_back("hw_step_" + std::to_string(k + 1),
                             std::to_string(static_cast<unsigned long long>(counts[k])));
      } else {
        CountStepsUnderCallgrind(sample, steps, static_cast<int64_t>(index));
      }
      WriteFacts(account, facts);
    } catch (const std::exception& error) {
      WriteFacts(account, {{"error", DescribeError(error)}});
    }
  }
  WriteFacts(out_dir + "/facts", CodePathFacts());
}

RunSummary RunCases(const Suite& suite, const std::vector<CaseSpec>& cases,
                    const std::set<std::string>& finished, CheckPolicy check, Store& store,
                    int64_t run_id, const std::function<bool(int64_t cases_run)>& should_stop,
                    const std::function<void(const CaseProgress&)>& on_case,
                    const std::optional<Isolation>& isolation,
                    const std::optional<Counting>& counting) {
  RunSummary summary;
  std::optional<CaseRunner> runner;  // in this process, unless isolated
  if (!isolation) runner.emplace(suite, check);
  const int64_t total = static_cast<int64_t>(PendingCases(cases, finished).size());
  int64_t done = 0;
  double elapsed_s = 0, longest_s = 0;
  std::vector<ToCount> to_count;
  for (size_t position = 0; position < cases.size(); ++position) {
    const CaseSpec& spec = cases[position];
    if (finished.count(spec.Key())) continue;
    if (should_stop && should_stop(done)) {
      summary.interrupted = true;
      break;
    }
    const auto stop_now = [&] { return should_stop && should_stop(done); };
    CaseRecord record;
    if (runner) {
      record = ToRecord(runner->Run(spec), static_cast<int64_t>(position));
      store.AddCase(run_id, record);
    } else {
      const double timeout_s =
          isolation->case_timeout_s > 0 ? isolation->case_timeout_s : DefaultCaseTimeout(longest_s);
      ChildSpec child;
      child.argv = isolation->command(spec, static_cast<int64_t>(position));
      child.timeout_s = timeout_s;
      child.should_stop = stop_now;
      const ChildOutcome outcome = RunChild(child);
      if (outcome.end == ChildOutcome::End::kInterrupted) {
        summary.interrupted = true;
        break;
      }
      // The child stores its own case in one transaction; if it did not, it did not finish.
      std::optional<CaseRecord> stored = store.FindCase(run_id, spec.Key());
      if (stored) {
        record = std::move(*stored);
      } else {
        record = FailedChildRecord(spec, static_cast<int64_t>(position), outcome);
        store.AddCase(run_id, record);
      }
    }
    ++summary.status_counts[record.status];
    ++done;
    if (counting && Countable(spec, record, store, run_id)) to_count.push_back({&spec, record});
    elapsed_s += record.wall_s;
    // A timed-out case says nothing about how long a healthy one takes.
    if (record.status != kStatusTimeout) longest_s = std::max(longest_s, record.wall_s);
    if (on_case) on_case(CaseProgress{done, total, &record, elapsed_s / done * (total - done)});
  }
  if (counting && !summary.interrupted) {
    const auto stop_now = [&] { return should_stop && should_stop(done); };
    CountTimedCases(*counting, to_count, on_case, stop_now, store, run_id);
    // Stopped while counting: the cases stay stored, uncounted, and so does the stop.
    summary.interrupted = stop_now();
  }
  return summary;
}

std::vector<size_t> InterleavedOrder(size_t cases, int64_t repetitions, uint64_t seed) {
  std::vector<size_t> order;
  for (int64_t r = 0; r < repetitions; ++r) {
    for (size_t c = 0; c < cases; ++c) order.push_back(c);
  }
  std::mt19937_64 generator(seed);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[generator() % i]);
  return order;
}

namespace {

// The pending cases of an interleaved or lockstep run, all prepared (set up, checked,
// warmed up) and alive at once, with their positions in the run.
struct PreparedCases {
  std::vector<size_t> positions;
  std::vector<std::unique_ptr<PreparedCase>> cases;
};

// Prepares every pending case; false when `should_stop` interrupted.
bool PrepareAll(CaseRunner& runner, const std::vector<CaseSpec>& cases,
                const std::set<std::string>& finished,
                const std::function<bool(int64_t cases_run)>& should_stop, PreparedCases& out) {
  for (size_t position = 0; position < cases.size(); ++position) {
    if (finished.count(cases[position].Key())) continue;
    if (should_stop && should_stop(0)) return false;
    out.positions.push_back(position);
    out.cases.push_back(runner.Prepare(cases[position]));
  }
  return true;
}

// Finishes and stores every prepared case, in the run's order; the counting's cases.
std::vector<ToCount> FinishAll(CaseRunner& runner, PreparedCases& prepared,
                               const std::vector<CaseSpec>& cases, Store& store, int64_t run_id,
                               bool counting, RunSummary& summary,
                               const std::function<void(const CaseProgress&)>& on_case) {
  const int64_t total = static_cast<int64_t>(prepared.cases.size());
  int64_t done = 0;
  std::vector<ToCount> to_count;
  for (size_t i = 0; i < prepared.cases.size(); ++i) {
    const size_t position = prepared.positions[i];
    CaseRecord record =
        ToRecord(runner.Finish(std::move(prepared.cases[i])), static_cast<int64_t>(position));
    store.AddCase(run_id, record);
    ++summary.status_counts[record.status];
    ++done;
    if (counting && Countable(cases[position], record, store, run_id))
      to_count.push_back({&cases[position], record});
    if (on_case) on_case(CaseProgress{done, total, &record, 0});
  }
  return to_count;
}

// Tells `on_case` of every tenth of the samples, with the time left at this pace.
void ReportSamples(const std::function<void(const CaseProgress&)>& on_case, int64_t cases,
                   int64_t done, int64_t total, std::chrono::steady_clock::time_point began) {
  if (!on_case || done * 10 / total == (done - 1) * 10 / total) return;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  CaseProgress progress{0, cases, nullptr, 0, done, total};
  progress.eta_s = elapsed / static_cast<double>(done) * static_cast<double>(total - done);
  on_case(progress);
}

}  // namespace

RunSummary RunInterleaved(const Suite& suite, const std::vector<CaseSpec>& cases,
                          const std::set<std::string>& finished, CheckPolicy check, Store& store,
                          int64_t run_id, uint64_t seed,
                          const std::function<bool(int64_t cases_run)>& should_stop,
                          const std::function<void(const CaseProgress&)>& on_case,
                          const std::optional<Counting>& counting) {
  RunSummary summary;
  CaseRunner runner(suite, check);
  PreparedCases prepared;
  if (!PrepareAll(runner, cases, finished, should_stop, prepared)) {
    summary.interrupted = true;
    return summary;
  }
  const std::vector<size_t> order =
      InterleavedOrder(prepared.cases.size(), suite.measurement.repetitions, seed);
  const auto timing_began = std::chrono::steady_clock::now();
  const int64_t samples_total = static_cast<int64_t>(order.size());
  int64_t samples_done = 0;
  for (const size_t index : order) {
    if (should_stop && should_stop(0)) {
      summary.interrupted = true;
      return summary;
    }
    runner.TimeSamples(*prepared.cases[index], 1, 1);
    ReportSamples(on_case, static_cast<int64_t>(prepared.cases.size()), ++samples_done,
                  samples_total, timing_began);
  }
  std::vector<ToCount> to_count =
      FinishAll(runner, prepared, cases, store, run_id, counting.has_value(), summary, on_case);
  if (counting) {
    const auto stop_now = [&] { return should_stop && should_stop(0); };
    CountTimedCases(*counting, to_count, on_case, stop_now, store, run_id);
    summary.interrupted = stop_now();
  }
  return summary;
}

RunSummary RunLockstep(const Suite& suite, const std::vector<CaseSpec>& cases, CheckPolicy check,
                       Store& store, int64_t run_id, LineChannel& channel,
                       const std::function<void(const CaseProgress&)>& on_case) {
  RunSummary summary;
  CaseRunner runner(suite, check);
  PreparedCases prepared;
  PrepareAll(runner, cases, {}, nullptr, prepared);
  std::map<std::string, PreparedCase*> by_key;
  for (const auto& p : prepared.cases) {
    if (!p->ready) continue;
    by_key[p->result.spec.Key()] = p.get();
    channel.Send("ready " + p->result.spec.Key());
  }
  channel.Send("prepared");
  for (std::string line; (line = channel.Receive(0, nullptr, "the controller")) != "end";) {
    const auto found = line.rfind("time ", 0) == 0 ? by_key.find(line.substr(5)) : by_key.end();
    if (found == by_key.end())
      throw std::runtime_error("lockstep: unexpected request '" + line + "'");
    runner.TimeSamples(*found->second, 1, 1);
    channel.Send("done");
  }
  FinishAll(runner, prepared, cases, store, run_id, false, summary, on_case);
  return summary;
}

}  // namespace seqbench
