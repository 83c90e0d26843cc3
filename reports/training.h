// Reports of `seqbench train` runs: the pipelines' throughput table, the recall task's
// accuracy-by-distance table, the trained weights' comparison through inference variants,
// their loss curves as SVG plots through gnuplot, and the training expectations the CI
// gate evaluates. A
// pipeline is stored as one case (variant_name = the pipeline's name, description = its
// options, reference = the suite's reference pipeline) with its steps in the
// training_steps table.
//
// Thread-safety: pure functions, except RenderLossPlot() which runs gnuplot.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "reports/check.h"
#include "results/store.h"

namespace seqbench {

// Each pipeline's steps, by case key.
using TrainingCurves = std::map<std::string, std::vector<TrainingStepRecord>>;

// Each case's logged steps, read from the store (the pipelines of one run).
TrainingCurves LoadCurves(const Store& store, int64_t run_id, const std::vector<CaseRecord>& cases);

// One row per pipeline: its options (the case's description), its parameter count (when
// the run stored one), tokens/s (mean ± std over steps) and
// the ratio to the reference pipeline, peak memory and its ratio, the optimizer's state,
// padding efficiency, steps, and the final training and validation losses.
std::string RenderTrainingTable(const std::vector<CaseRecord>& cases);

// The long-range study's table (training suites with [data] corpus = "recall"): one row per
// pipeline with its parameter count, its greedy accuracy on the recall answer at each
// distance any pipeline was scored at (ascending), and its final validation loss. Throws
// std::invalid_argument when no case has a recall accuracy.
std::string RenderRecallTable(const std::vector<CaseRecord>& cases);
// Whether RenderRecallTable has something to show: a case with a recall accuracy.
bool HasRecallScores(const std::vector<CaseRecord>& cases);

// The trained weights through other variants (a pipeline's evaluate_with, e.g. int8
// inference): one row per pipeline and variant with the held-out loss through each, the
// loss difference and perplexity factor, argmax agreement, the logits' RMS difference,
// agreement of greedy continuations, and the bytes the variant holds. Throws
// std::invalid_argument when no case has such a comparison.
std::string RenderInferenceTable(const std::vector<CaseRecord>& cases);
bool HasInferenceComparisons(const std::vector<CaseRecord>& cases);

struct LossPlotRequest {
  std::string x = "step";  // step | time (seconds since the pipeline started)
  std::string y = "loss";  // loss (training, trailing mean) | validation_loss |
                           // loss_difference (|loss − over's loss| per step, log scale)
  std::string over;        // loss_difference: the pipeline compared with
  std::string title;
  std::string output;  // the .svg file
};

// One line per pipeline in `cases` order. The training loss is a trailing mean over
// max(1, longest run/40) steps, the same window for every line, so that the curves' trend
// reads through batch-to-batch noise and lines stay comparable.
// Throws std::invalid_argument for an unknown x or y, or when no pipeline has points.
std::string BuildLossPlotScript(const std::vector<CaseRecord>& cases, const TrainingCurves& curves,
                                const LossPlotRequest& request);
void RenderLossPlot(const std::vector<CaseRecord>& cases, const TrainingCurves& curves,
                    const LossPlotRequest& request);

// The training suite's [[expect]] kinds, between pipelines of one run:
//   throughput             tokens/s of `variant` / tokens/s of `over`
//   memory_ratio           peak bytes of `variant` / peak bytes of `over`
//   optimizer_state_ratio  optimizer-state bytes of `variant` / those of `over`
//   loss_match             largest |training loss difference| over the steps both ran
//   validation_loss_ratio  final validation loss of `variant` / that of `over`
//   all_correct            every pipeline finished with status ok
std::vector<ExpectationOutcome> EvaluateTrainingExpectations(
    const std::vector<Expectation>& expectations, const std::vector<CaseRecord>& cases,
    const TrainingCurves& curves);

}  // namespace seqbench
