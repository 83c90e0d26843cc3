// Activation checkpointing of a segment of layers (Chen et al. 2016, "Training Deep Nets with
// Sublinear Memory Cost"; torch.utils.checkpoint): the segment runs forward without keeping
// what it computes inside, and backward runs it again, with gradients, once the gradients of
// all its outputs have arrived. Memory: the segment's input instead of all its activations;
// time: one more forward of the segment per train step.
//
// Thread-safety: CheckpointedSegment() is safe from any thread. The node it creates is run by
// the autograd engine, on the engine's thread: the segment runs again there without the
// caller's thread-local settings, autocast included, so a segment run under autocast is
// recomputed in full precision (the layer-checkpointing variants are measured without it).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

namespace seqbench {

// What a segment computes from its input: its outputs, the first of which is usually the
// next segment's input. Called twice per train step (forward, then again in backward), so it
// must be deterministic and must not write to anything it reads.
using SegmentFn = std::function<std::vector<torch::Tensor>(const torch::Tensor& input)>;

// Runs `segment` on `input` under no-grad and returns its outputs with one autograd node as
// their history. That node holds `input` only; when backward reaches it, it runs `segment`
// again from a detached copy of `input` with gradients on and back-propagates through the
// recomputed graph into `input` and `parameters`: every tensor requiring grad that
// `segment` reads besides `input` (the layers' weights). Without grad mode, or with nothing
// requiring grad, it is just segment(input). One backward per forward, as with
// torch.utils.checkpoint: the node releases what it holds after its first.
std::vector<torch::Tensor> CheckpointedSegment(const SegmentFn& segment, const torch::Tensor& input,
                                               const std::vector<torch::Tensor>& parameters);

}  // namespace seqbench
