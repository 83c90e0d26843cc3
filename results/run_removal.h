// Which stored runs `seqbench rm` may remove, decided before anything is changed. A run
// is refused while another run still needs it: a shard whose group keeps other shards
// (the group could no longer be gathered), one side of an A/B pair whose partner stays
// (its verdict needs both), and a run still marked running (its writer may be alive) —
// unless the caller forces it. Store::RemoveRuns then removes the allowed runs at once.
//
// Thread-safety: pure functions over a Store the caller does not write meanwhile.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "results/store.h"

namespace seqbench {

struct RunRemovalPlan {
  std::vector<RunRecord> runs;        // to remove, in the order asked, each once
  std::vector<std::string> missing;   // "no run N in FILE" for each id the store lacks
  std::vector<std::string> refusals;  // why a run must stay, and what would let it go
  bool allowed() const { return missing.empty() && refusals.empty(); }
};

// The plan for removing `run_ids` from `store`; with `force`, the refusals above are not
// made (unknown ids still are).
RunRemovalPlan PlanRunRemoval(const Store& store, const std::vector<int64_t>& run_ids, bool force);

}  // namespace seqbench
