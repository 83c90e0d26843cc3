// `checkpointed_logarithmic`: `batched` with checkpointing over time by bisection. Reversing
// a range snapshots its middle, reverses the second half, then the first from the start
// again: log2 T snapshots, and each step run at most log2(T)/2 more times. A range whose
// states fit the remaining budget stores them all; with no snapshot left, each step of the
// range is reached from its start (quadratic). The classic O(log T) memory and time schedule
// that Revolve (checkpointed_binomial) improves on at every budget.
#include "variants/core/registry.h"
#include "variants/simple_rnn/checkpoint_schedule.h"

namespace seqbench::simple_rnn {
namespace {

class CheckpointedLogarithmic final : public ScheduledCheckpointing {
 public:
  CheckpointedLogarithmic() : ScheduledCheckpointing(CheckpointSchedule::kLogarithmic) {}
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("checkpointed_logarithmic", CheckpointedLogarithmic,
                          "batched + checkpointing over time by bisection (log2 T snapshots)");

}  // namespace seqbench::simple_rnn
