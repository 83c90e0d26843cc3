// The hand-written CPU recurrence kernel of `fused_recurrent` as a time mixer, for the
// variants built on it (`packed`): one autograd node per layer whose forward keeps a state
// every few steps and whose backward recomputes a segment at a time (fused_recurrent.cc).
//
// Thread-safety: the mixer is a stateless function; the kernel splits its work with
// at::parallel_for on LibTorch's one intra-op pool.
#pragma once

#include "variants/simple_rnn/model.h"

namespace seqbench::simple_rnn {

// The recurrence over sigmoid decays (1 at padding: `mask` [B,T] bool or undefined), in the
// promoted type of its inputs. Host code: CPU tensors only. With `lengths` ([B] int64),
// sequence b runs only its first lengths[b] steps: the later ones are padding, whose
// outputs it writes as 0 and whose inputs get no gradient — exact where padding's queries
// are 0 and nothing reads padding's outputs (`packed`, which scatters zeros there).
// Undefined: every sequence runs all T steps.
TimeMixer FusedRecurrentMixer(const torch::Tensor& lengths = torch::Tensor());

}  // namespace seqbench::simple_rnn
