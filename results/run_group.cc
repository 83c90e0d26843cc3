#include "results/run_group.h"

#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include "results/machine.h"
#include "results/run_settings.h"

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

std::vector<std::string> ResumeConflicts(const RunRecord& stored, const RunRecord& requested) {
  std::vector<std::string> conflicts;
  const auto differ = [&](const std::string& what, const std::string& theirs,
                          const std::string& ours, const std::string& fix) {
    if (theirs != ours) conflicts.push_back(Conflict(what, theirs, ours, fix));
  };
  differ("suite", stored.suite_hash, requested.suite_hash,
         "resume needs the same suite file, unchanged");
  differ("shard", stored.shard, requested.shard,
         stored.shard.empty() ? "drop --shard" : "pass --shard " + stored.shard);
  for (std::string& conflict : SettingConflicts(stored.settings, requested.settings))
    conflicts.push_back(std::move(conflict));
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
  differ("group", stored.group, requested.group,
         stored.group.empty() ? "drop --group" : "pass --group " + stored.group);
  differ("label", stored.label, requested.label,
         stored.label.empty() ? "drop --label" : "pass --label '" + stored.label + "'");
  return conflicts;
}
bool IsGroupId(const std::string& id) {
  static const std::regex pattern("[A-Za-z0-9_][A-Za-z0-9._-]{0,63}");
  return std::regex_match(id, pattern);
}

std::vector<RunRecord> GroupShards(const Store& store, const std::string& id) {
  std::vector<RunRecord> shards;
  for (const RunRecord& listed : store.Runs()) {
    if (listed.group == id) shards.push_back(*store.FindRun(listed.run_id));
  }
  const auto index = [](const RunRecord& run) {
    const auto shard = ParseShard(run.shard);
    return shard ? shard->index : int64_t{0};
  };
  std::stable_sort(shards.begin(), shards.end(),
                   [&](const RunRecord& a, const RunRecord& b) { return index(a) < index(b); });
  return shards;
}

namespace {

std::string Numbers(const std::vector<int64_t>& numbers) {
  std::string text;
  for (int64_t number : numbers) text += (text.empty() ? "" : ", ") + std::to_string(number);
  return text;
}

// "shards 2, 4 of 4 are missing": the shard numbers 1..count no run recorded.
std::optional<std::string> MissingShards(
    const std::map<int64_t, std::vector<int64_t>>& runs_by_index, int64_t count) {
  std::vector<int64_t> missing;
  for (int64_t i = 1; i <= count; ++i)
    if (runs_by_index.count(i) == 0) missing.push_back(i);
  if (missing.empty()) return std::nullopt;
  return "shard(s) " + Numbers(missing) + " of " + std::to_string(count) +
         " missing: run or merge them in (seqbench run SUITE --shard i/" + std::to_string(count) +
         " --group ID)";
}

// The sentences about each shard's own record: its shard text, its status, its
// agreement with the first shard.
void ShardRecordGaps(const std::vector<RunRecord>& shards, int64_t count,
                     std::vector<std::string>& gaps) {
  const RunRecord& first = shards.front();
  for (const RunRecord& shard : shards) {
    const std::string name = "run " + std::to_string(shard.run_id);
    const auto spec = ParseShard(shard.shard);
    if (!spec || spec->count != count) {
      gaps.push_back(name + " is shard '" + shard.shard + "', not one of " + std::to_string(count) +
                     " like run " + std::to_string(first.run_id));
      continue;
    }
    if (shard.status != "complete") {
      gaps.push_back("shard " + shard.shard + " (" + name + ") is " + shard.status +
                     ": run its command again (seqbench run " + shard.suite_path + " --shard " +
                     shard.shard + " --group " + shard.group +
                     " with that shard's own --db), which resumes it, then merge again");
    }
    if (&shard == &first) continue;
    RunRecord as_first = shard;
    as_first.shard = first.shard;  // the shard number is theirs to differ in
    for (const std::string& conflict : ResumeConflicts(first, as_first))
      gaps.push_back("shard " + shard.shard + " (" + name + ") was measured unlike shard " +
                     first.shard + " (run " + std::to_string(first.run_id) + "): " + conflict);
  }
}

}  // namespace

std::vector<std::string> GroupGaps(const std::vector<RunRecord>& shards) {
  std::vector<std::string> gaps;
  if (shards.empty()) return {"no shards"};
  const auto first = ParseShard(shards.front().shard);
  const int64_t count = first ? first->count : 0;
  std::map<int64_t, std::vector<int64_t>> runs_by_index;
  for (const RunRecord& shard : shards) {
    if (const auto spec = ParseShard(shard.shard); spec && spec->count == count)
      runs_by_index[spec->index].push_back(shard.run_id);
  }
  if (count == 0) {
    gaps.push_back("run " + std::to_string(shards.front().run_id) + " has no shard (i/n)");
    return gaps;
  }
  if (auto missing = MissingShards(runs_by_index, count)) gaps.push_back(*missing);
  for (const auto& [index, runs] : runs_by_index) {
    if (runs.size() > 1) {
      gaps.push_back("shard " + std::to_string(index) + "/" + std::to_string(count) + " stored " +
                     std::to_string(runs.size()) + " times (runs " + Numbers(runs) +
                     "): a requeued shard must resume its run, not start another");
    }
  }
  ShardRecordGaps(shards, count, gaps);
  return gaps;
}

std::vector<std::vector<RunRecord>> MachineSplit(const std::vector<RunRecord>& shards) {
  std::vector<std::pair<Machine, std::vector<RunRecord>>> parts;
  for (const RunRecord& shard : shards) {
    const Machine machine = MachineOf(shard);
    auto part = std::find_if(parts.begin(), parts.end(),
                             [&](const auto& p) { return Compatible(p.first, machine); });
    if (part == parts.end()) part = parts.insert(parts.end(), {machine, {}});
    part->first.insert(machine.begin(), machine.end());
    part->second.push_back(shard);
  }
  std::vector<std::vector<RunRecord>> split;
  for (auto& part : parts) split.push_back(std::move(part.second));
  return split;
}

namespace {

GatheredRun Gather(const Store& store, const std::vector<RunRecord>& shards, bool whole) {
  GatheredRun gathered;
  gathered.shards = shards;
  gathered.run = shards.front();
  RunRecord& run = gathered.run;
  run.shard = "";
  if (!whole) {
    for (const RunRecord& shard : shards)
      run.shard += (run.shard.empty() ? "shards " : ", ") + shard.shard;
  }
  std::set<std::string> warnings(run.warnings.begin(), run.warnings.end());
  for (const RunRecord& shard : shards) {
    run.started_at = std::min(run.started_at, shard.started_at);
    run.finished_at = std::max(run.finished_at, shard.finished_at);
    for (const std::string& warning : shard.warnings) {
      if (warnings.insert(warning).second) run.warnings.push_back(warning);
    }
    const ShardSpec spec = *ParseShard(shard.shard);  // GroupGaps checked it
    for (CaseRecord& c : store.Cases(shard.run_id)) {
      c.position = SuitePosition(c.position, spec);
      gathered.cases.push_back(std::move(c));
    }
  }
  std::stable_sort(
      gathered.cases.begin(), gathered.cases.end(),
      [](const CaseRecord& a, const CaseRecord& b) { return a.position < b.position; });
  return gathered;
}

std::string MachineRefusal(const std::string& id,
                           const std::vector<std::vector<RunRecord>>& parts) {
  const RunRecord &one = parts[0].front(), &other = parts[1].front();
  std::string message = "group '" + id + "': shard " + one.shard + " (run " +
                        std::to_string(one.run_id) + ") and shard " + other.shard + " (run " +
                        std::to_string(other.run_id) + ") ran on different machines:";
  for (const std::string& difference : MachineDifferences(MachineOf(one), MachineOf(other)))
    message += "\n  " + difference;
  return message +
         "\ntheir timings do not belong in one table; rerun those shards on one kind of "
         "machine, or pass --allow-mixed-machines to read each machine's shards apart";
}

}  // namespace

std::vector<GatheredRun> GatherGroup(const Store& store, const std::string& id,
                                     MixedMachines mixed) {
  const std::vector<RunRecord> shards = GroupShards(store, id);
  if (shards.empty()) {
    throw GroupError("no run of group '" + id + "' in " + store.path() + " (seqbench show --db " +
                     store.path() + " lists runs with their groups)");
  }
  const std::vector<std::string> gaps = GroupGaps(shards);
  if (!gaps.empty()) {
    std::string message = "group '" + id + "' in " + store.path() + " is not whole:";
    for (const std::string& gap : gaps) message += "\n  " + gap;
    throw GroupError(message);
  }
  const auto parts = MachineSplit(shards);
  if (parts.size() > 1 && mixed == MixedMachines::kRefuse)
    throw GroupError(MachineRefusal(id, parts));
  std::vector<GatheredRun> gathered;
  for (const auto& part : parts) gathered.push_back(Gather(store, part, parts.size() == 1));
  return gathered;
}

std::string RunName(const RunRecord& run) {
  if (run.group.empty() || ParseShard(run.shard)) return "run " + std::to_string(run.run_id);
  return "group '" + run.group + "'" + (run.shard.empty() ? "" : " (" + run.shard + ")");
}

}  // namespace seqbench
