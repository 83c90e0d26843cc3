#include "harness/benchmark_run.h"

#include <algorithm>
#include <regex>

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
         "the suite's [measure] warmup decides it");
  differ("min time", std::to_string(stored.min_time_s), std::to_string(requested.min_time_s),
         "the suite's [measure] min_time_ms decides it");
  differ("check policy", stored.check_policy, requested.check_policy,
         "pass --check " + stored.check_policy);
  differ("threads", std::to_string(stored.threads), std::to_string(requested.threads),
         "run with the same thread count");
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

RunSummary RunCases(const Suite& suite, const std::vector<CaseSpec>& cases,
                    const std::set<std::string>& finished, CheckPolicy check, Store& store,
                    int64_t run_id, const std::function<bool(int64_t cases_run)>& should_stop,
                    const std::function<void(const CaseProgress&)>& on_case) {
  RunSummary summary;
  CaseRunner runner(suite, check);
  const int64_t total = static_cast<int64_t>(PendingCases(cases, finished).size());
  int64_t done = 0;
  double elapsed_s = 0;
  for (size_t position = 0; position < cases.size(); ++position) {
    const CaseSpec& spec = cases[position];
    if (finished.count(spec.Key())) continue;
    if (should_stop && should_stop(done)) {
      summary.interrupted = true;
      break;
    }
    const CaseResult result = runner.Run(spec);
    const CaseRecord record = ToRecord(result, static_cast<int64_t>(position));
    store.AddCase(run_id, record);
    ++summary.status_counts[result.status];
    ++done;
    elapsed_s += result.wall_s;
    if (on_case) {
      on_case(CaseProgress{done, total, &result, &record, elapsed_s / done * (total - done)});
    }
  }
  return summary;
}

}  // namespace seqbench
