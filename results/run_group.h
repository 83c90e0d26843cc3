// Shards and run groups. `run --shard i/n` measures a deterministic subset of a suite;
// the shards of one invocation (`run --group ID`, every i of one n) form a run group, one
// logical run that the reports read as if one process had measured it all: its cases
// are every shard's, in suite order, under the first shard's record.
//
// A group is gathered only when it is whole: every shard 1..n stored once, complete,
// from the same suite text, settings, build and label; shards measured on different
// machines (MachineKeys()) are refused unless asked to be split by machine. Gathering
// reads; nothing is written (the shards stay as they were stored, merge carries them).
//
// Thread-safety: pure functions over a Store the caller does not write meanwhile.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "results/store.h"

namespace seqbench {

struct ShardSpec {
  int64_t index = 1, count = 1;  // shard `index` of `count`, 1-based
  // "i/n", or "" for the whole suite.
  std::string Text() const;
};

// Parses "i/n" with 1 <= i <= n (n at most 2^20); nullopt for anything else, overflow
// included.
std::optional<ShardSpec> ParseShard(const std::string& text);

// Shards deal a suite's cases round-robin (after --filter): case k, 0-based in suite order,
// goes to shard k mod n + 1, so shards stay alike in size and in their mix of variants.
inline bool InShard(int64_t suite_position, const ShardSpec& shard) {
  return suite_position % shard.count == shard.index - 1;
}
// The suite position of the case stored at `position` within `shard` (a shard numbers its
// own cases from 0): the inverse of InShard's dealing.
inline int64_t SuitePosition(int64_t position, const ShardSpec& shard) {
  return position * shard.count + shard.index - 1;
}

// A group id as `run --group` takes it: 1 to 64 of [A-Za-z0-9._-], not starting with
// '.' or '-', since it names files (a Slurm job's shard databases) and travels through
// job scripts.
bool IsGroupId(const std::string& id);

// The reasons a stored run cannot be continued by a command that would start `requested`
// (same suite text, shard, and measurement facts: repetitions, warmup, min time, noise
// target, check policy, threads, filter, build, label), each naming the stored value and
// how to match it. Empty: it may. A group's shards must agree on the same facts.
std::vector<std::string> ResumeConflicts(const RunRecord& stored, const RunRecord& requested);

// A group that cannot be gathered: the message names the group, the shard numbers and
// runs at fault, and the fix.
class GroupError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The runs of `store` that recorded group `id`, with their environments, by shard
// number then run id. Empty when there are none.
std::vector<RunRecord> GroupShards(const Store& store, const std::string& id);

// What keeps `shards` (GroupShards) from being one logical run, a sentence each: shard
// numbers missing, stored twice, not complete, or measured unlike shard 1 (suite, settings,
// build, label). Empty: whole. Machines are not compared here (MachineSplit).
std::vector<std::string> GroupGaps(const std::vector<RunRecord>& shards);

// The shards split by machine (MachineOf, Compatible), each part in shard order: one part
// when every shard ran on one kind of machine.
std::vector<std::vector<RunRecord>> MachineSplit(const std::vector<RunRecord>& shards);

// A run group read as one run.
struct GatheredRun {
  // Shard 1's record (its run_id, environment and expectations) with shard "" (split by
  // machine: "shards 1/4, 3/4"), started at the first shard's start and finished
  // at the last's, and every shard's warnings once.
  RunRecord run;
  std::vector<CaseRecord> cases;  // every shard's, in suite order (SuitePosition)
  std::vector<RunRecord> shards;  // the shards gathered, by shard number
};

// How a group measured on several kinds of machine is read.
enum class MixedMachines { kRefuse, kSplit };

// Gathers group `id` of `store`: one GatheredRun, or with kSplit one per machine. Throws
// GroupError for no such group, for GroupGaps, and (kRefuse) for shards whose machines
// differ, naming the field and the shards.
std::vector<GatheredRun> GatherGroup(const Store& store, const std::string& id,
                                     MixedMachines mixed = MixedMachines::kRefuse);

// "run 12", or for a gathered group's record "group 'nightly-7'": for messages.
std::string RunName(const RunRecord& run);

}  // namespace seqbench
