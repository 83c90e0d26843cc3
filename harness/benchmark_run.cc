#include "harness/benchmark_run.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <random>
#include <regex>

#include "harness/child_process.h"
#include "harness/runner.h"

namespace seqbench {

std::string ShardSpec::Text() const {
  return count == 1 ? "" : std::to_string(index) + "/" + std::to_string(count);
}

std::optional<ShardSpec> ParseShard(const std::string& text) {
  static const std::regex pattern("([0-9]{1,7})/([0-9]{1,7})");
  std::smatch match;
  if (!std::regex_match(text, match, pattern)) return std::nullopt;
  ShardSpec shard{std::stoll(match[1]), std::stoll(match[2])};
  constexpr int64_t kMaxShards = int64_t{1} << 20;
  if (shard.index < 1 || shard.index > shard.count || shard.count > kMaxShards) {
    return std::nullopt;
  }
  return shard;
}

std::vector<CaseSpec> SelectCases(const Suite& suite, const CaseSelection& selection) {
  std::regex filter;
  try {
    filter = std::regex(selection.filter.empty() ? ".*" : selection.filter);
  } catch (const std::regex_error& error) {
    throw std::invalid_argument("'" + selection.filter + "' is not a valid regex: " + error.what());
  }
  std::vector<CaseSpec> cases;
  for (CaseSpec spec : suite.Expand()) {
    if (selection.device) spec.workload.device = *selection.device;
    if (selection.threads) spec.workload.threads = *selection.threads;
    if (std::regex_search(spec.Key(), filter)) cases.push_back(std::move(spec));
  }
  return Shard(cases, selection.shard.index, selection.shard.count);
}

namespace {
// A minimum sample time as `run --min-time` takes it: "10ms".
std::string FormatSeconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%gms", seconds * 1e3);
  return text;
}
}  // namespace

std::vector<std::string> ResumeConflicts(const RunRecord& stored, const RunRecord& requested) {
  std::vector<std::string> conflicts;
  const auto differ = [&](const std::string& what, const std::string& theirs,
                          const std::string& ours, const std::string& fix) {
    if (theirs != ours) {
      conflicts.push_back(what + ": the run has " + (theirs.empty() ? "none" : theirs) +
                          ", this command " + (ours.empty() ? "none" : ours) + " (" + fix + ")");
    }
  };
  differ("suite", stored.suite_hash, requested.suite_hash,
         "resume needs the same suite file, unchanged");
  differ("shard", stored.shard, requested.shard,
         stored.shard.empty() ? "drop --shard" : "pass --shard " + stored.shard);
  differ("repetitions", std::to_string(stored.repetitions), std::to_string(requested.repetitions),
         "pass --repetitions " + std::to_string(stored.repetitions));
  differ("warmup", std::to_string(stored.warmup), std::to_string(requested.warmup),
         "pass --warmup " + std::to_string(stored.warmup));
  differ("min time", FormatSeconds(stored.min_time_s), FormatSeconds(requested.min_time_s),
         "pass --min-time " + FormatSeconds(stored.min_time_s));
  const auto noise = [](const RunRecord& run) {
    char text[64] = "off";
    if (run.max_noise > 0)
      std::snprintf(text, sizeof(text), "%g%% within %gs", run.max_noise * 100, run.max_time_s);
    return std::string(text);
  };
  char noise_fix[96] = "drop --max-noise";
  if (stored.max_noise > 0)
    std::snprintf(noise_fix, sizeof(noise_fix), "pass --max-noise %g%% --max-time %gs",
                  stored.max_noise * 100, stored.max_time_s);
  differ("max noise", noise(stored), noise(requested), noise_fix);
  differ("check policy", stored.check_policy, requested.check_policy,
         "pass --check " + stored.check_policy);
  differ("threads", std::to_string(stored.threads), std::to_string(requested.threads),
         "run with the same thread count");
  // Runs stored before these entries existed have none; they are not judged on them.
  const auto differ_if_stored = [&](const std::string& what, const std::string& key,
                                    const std::string& fix) {
    if (!stored.Environment(key).empty())
      differ(what, stored.Environment(key), requested.Environment(key), fix);
  };
  differ_if_stored("filter", "case_filter",
                   stored.Environment("case_filter") == "none"
                       ? "drop --filter"
                       : "pass --filter '" + stored.Environment("case_filter") + "'");
  const auto build = [](const RunRecord& run) {
    return run.Environment("git_sha").substr(0, 12) +
           (run.Environment("git_dirty") == "true" ? " (dirty)" : "") + " " +
           run.Environment("build_type");
  };
  differ("build", build(stored), build(requested),
         "resume with the binary that started the run, or start a new run");
  differ("test slowdown",
         stored.Environment("test_slowdown").empty() ? "off" : stored.Environment("test_slowdown"),
         requested.Environment("test_slowdown").empty() ? "off"
                                                        : requested.Environment("test_slowdown"),
         "pass the run's --test-slowdown and --test-slowdown-filter, or none");
  differ_if_stored("repetition order", "repetition_order",
                   stored.Environment("repetition_order") == "case after case"
                       ? "drop --interleave"
                       : "pass --interleave");
  differ("label", stored.label, requested.label,
         stored.label.empty() ? "drop --label" : "pass --label '" + stored.label + "'");
  return conflicts;
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

// The record of a case whose child ended without storing it.
CaseRecord FailedChildRecord(const CaseSpec& spec, int64_t position, const ChildOutcome& outcome) {
  CaseRecord record;
  record.identity = spec.Identity();
  record.position = position;
  record.status = outcome.end == ChildOutcome::End::kTimedOut ? kStatusTimeout : kStatusError;
  record.message = outcome.Describe();
  record.reference = "none (the case did not finish)";
  record.wall_s = outcome.wall_s;
  return record;
}

}  // namespace

RunSummary RunCases(const Suite& suite, const std::vector<CaseSpec>& cases,
                    const std::set<std::string>& finished, CheckPolicy check, Store& store,
                    int64_t run_id, const std::function<bool(int64_t cases_run)>& should_stop,
                    const std::function<void(const CaseProgress&)>& on_case,
                    const std::optional<Isolation>& isolation) {
  RunSummary summary;
  std::optional<CaseRunner> runner;  // in this process, unless isolated
  if (!isolation) runner.emplace(suite, check);
  const int64_t total = static_cast<int64_t>(PendingCases(cases, finished).size());
  int64_t done = 0;
  double elapsed_s = 0, longest_s = 0;
  for (size_t position = 0; position < cases.size(); ++position) {
    const CaseSpec& spec = cases[position];
    if (finished.count(spec.Key())) continue;
    if (should_stop && should_stop(done)) {
      summary.interrupted = true;
      break;
    }
    CaseRecord record;
    if (runner) {
      record = ToRecord(runner->Run(spec), static_cast<int64_t>(position));
      store.AddCase(run_id, record);
    } else {
      const double timeout_s =
          isolation->case_timeout_s > 0 ? isolation->case_timeout_s : DefaultCaseTimeout(longest_s);
      const ChildOutcome outcome =
          RunChild(isolation->command(spec, static_cast<int64_t>(position)), timeout_s,
                   [&] { return should_stop && should_stop(done); });
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
    elapsed_s += record.wall_s;
    // A timed-out case says nothing about how long a healthy one takes.
    if (record.status != kStatusTimeout) longest_s = std::max(longest_s, record.wall_s);
    if (on_case) on_case(CaseProgress{done, total, &record, elapsed_s / done * (total - done)});
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

RunSummary RunInterleaved(const Suite& suite, const std::vector<CaseSpec>& cases,
                          const std::set<std::string>& finished, CheckPolicy check, Store& store,
                          int64_t run_id, uint64_t seed,
                          const std::function<bool(int64_t cases_run)>& should_stop,
                          const std::function<void(const CaseProgress&)>& on_case) {
  RunSummary summary;
  CaseRunner runner(suite, check);
  std::vector<size_t> positions;
  std::vector<std::unique_ptr<PreparedCase>> prepared;
  for (size_t position = 0; position < cases.size(); ++position) {
    if (finished.count(cases[position].Key())) continue;
    if (should_stop && should_stop(0)) {
      summary.interrupted = true;
      return summary;
    }
    positions.push_back(position);
    prepared.push_back(runner.Prepare(cases[position]));
  }
  const std::vector<size_t> order =
      InterleavedOrder(prepared.size(), suite.measurement.repetitions, seed);
  const auto timing_began = std::chrono::steady_clock::now();
  const int64_t samples_total = static_cast<int64_t>(order.size());
  int64_t samples_done = 0;
  for (const size_t index : order) {
    if (should_stop && should_stop(0)) {
      summary.interrupted = true;
      return summary;
    }
    runner.TimeSamples(*prepared[index], 1, 1);
    ++samples_done;
    if (on_case && samples_done * 10 / samples_total != (samples_done - 1) * 10 / samples_total) {
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - timing_began).count();
      CaseProgress progress{
          0, static_cast<int64_t>(prepared.size()), nullptr, 0, samples_done, samples_total};
      progress.eta_s = elapsed / static_cast<double>(samples_done) *
                       static_cast<double>(samples_total - samples_done);
      on_case(progress);
    }
  }
  const int64_t total = static_cast<int64_t>(prepared.size());
  int64_t done = 0;
  for (size_t i = 0; i < prepared.size(); ++i) {
    const CaseRecord record =
        ToRecord(runner.Finish(std::move(prepared[i])), static_cast<int64_t>(positions[i]));
    store.AddCase(run_id, record);
    ++summary.status_counts[record.status];
    ++done;
    if (on_case) on_case(CaseProgress{done, total, &record, 0});
  }
  return summary;
}

}  // namespace seqbench
