#include "results/run_removal.h"

#include <optional>
#include <set>
#include <utility>

namespace seqbench {
namespace {

std::string RunIds(const std::vector<int64_t>& ids) {
  std::string text;
  for (const int64_t id : ids) text += (text.empty() ? "" : " ") + std::to_string(id);
  return text;
}

// The other runs of `run`'s group that are not being removed with it.
std::vector<int64_t> GroupRunsLeft(const std::vector<RunRecord>& all, const RunRecord& run,
                                   const std::set<int64_t>& removing) {
  std::vector<int64_t> left;
  if (run.group.empty()) return left;
  for (const RunRecord& other : all) {
    if (other.group == run.group && !removing.count(other.run_id)) left.push_back(other.run_id);
  }
  return left;
}

// `run`'s A/B partner, where it is stored and stays.
std::optional<int64_t> PartnerLeft(const Store& store, const RunRecord& run,
                                   const std::set<int64_t>& removing) {
  const std::string partner = run.Environment("ab_pair");
  if (partner.empty()) return std::nullopt;
  const auto found = store.FindRunByUuid(partner);
  if (!found || removing.count(found->run_id)) return std::nullopt;
  return found->run_id;
}

}  // namespace

RunRemovalPlan PlanRunRemoval(const Store& store, const std::vector<int64_t>& run_ids, bool force) {
  RunRemovalPlan plan;
  std::set<int64_t> removing;
  for (const int64_t id : run_ids) {
    if (removing.count(id)) continue;  // asked twice: removed once
    auto run = store.FindRun(id);      // with its environment: the A/B partner is there
    if (!run) {
      plan.missing.push_back("no run " + std::to_string(id) + " in " + store.path());
      continue;
    }
    removing.insert(id);
    plan.runs.push_back(std::move(*run));
  }
  if (force) return plan;
  const std::vector<RunRecord> all = store.Runs();
  for (const RunRecord& run : plan.runs) {
    const std::string name = "run " + std::to_string(run.run_id);
    if (run.status == "running") {
      plan.refusals.push_back(name +
                              " is marked running: its seqbench may still be writing it "
                              "(--force if it is not)");
    }
    if (const auto left = GroupRunsLeft(all, run, removing); !left.empty()) {
      plan.refusals.push_back(name + " is a shard of group '" + run.group +
                              "', which keeps run(s) " + RunIds(left) +
                              ": remove them too, or --force");
    }
    if (const auto partner = PartnerLeft(store, run, removing)) {
      plan.refusals.push_back(name + " is one side of an A/B pair whose other side, run " +
                              std::to_string(*partner) + ", stays: remove both, or --force");
    }
  }
  return plan;
}

}  // namespace seqbench
