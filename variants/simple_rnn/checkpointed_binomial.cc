// `checkpointed_binomial`: `batched` with checkpointing over time by Griewank's Revolve,
// the binomial schedule. Under a budget of M states held at once it runs the fewest steps
// again that any checkpointing schedule can (for T = 256 and M = 16: 1.41 recomputed steps
// per step, where bisection runs 2.38): snapshots sit where the binomial counts put them,
// and each range is re-entered from the nearest one. Backward reverses one step at a
// time by hand (checkpoint_schedule.h); the plan is computed once per (T, M).
#include "variants/core/registry.h"
#include "variants/simple_rnn/checkpoint_schedule.h"

namespace seqbench::simple_rnn {
namespace {

class CheckpointedBinomial final : public ScheduledCheckpointing {
 public:
  CheckpointedBinomial() : ScheduledCheckpointing(CheckpointSchedule::kBinomial) {}
};

}  // namespace

SEQBENCH_REGISTER_VARIANT(
    "checkpointed_binomial", CheckpointedBinomial,
    "batched + checkpointing over time by Revolve (binomial): least recomputation for max_states");

}  // namespace seqbench::simple_rnn
