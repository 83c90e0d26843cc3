// Data-parallel scaling from a training run's stored cases: the measured table (tokens/s
// against the one-rank reference, the network each group measured, where the step's time
// went), the ring all-reduce model's extrapolation to more ranks from those measurements,
// and their plots. The model is stats/ring_model.h; every figure it produces
// is labelled as a model.
//
// Thread-safety: pure functions, except the Render*Plot() ones, which run gnuplot.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "results/records.h"

namespace seqbench {

// One data-parallel pipeline (a case with ranks > 1 and the network metrics), as measured.
struct ScalingRow {
  std::string pipeline, options;
  int64_t ranks = 0;
  double bucket_mb = 0;
  double alpha_s = 0, beta_s_per_byte = 0;  // the ring model's, fitted on this group
  double tokens_per_s = 0;
  // tokens/s ÷ (ranks × the reference's tokens/s): 1 when p ranks go p times as fast as
  // one rank on the same global batch. NaN without a one-rank reference in the run.
  double efficiency = 0;
  double step_s = 0;                // mean step wall time
  double gradient_bytes = 0;        // per step, each rank's share
  double buckets = 0;               // gradient all-reduces per step
  double gradient_allreduce_s = 0;  // per step, launch to completion, overlapped or not
  double count_allreduces = 0;      // per step
  double count_allreduce_s = 0;     // per step, blocking
  // The step without its communication: step_s minus both all-reduce times (a lower bound
  // of the compute, since the gradient all-reduces partly overlap backward).
  double compute_s() const;
};

// The ok cases of `cases` with ranks > 1 and network metrics, in order; the reference is
// each case's `reference` pipeline among `cases`.
std::vector<ScalingRow> ScalingRows(const std::vector<CaseRecord>& cases);

// A Markdown table of the rows and a note on its columns. Throws std::invalid_argument
// when there is no row.
std::string RenderScalingTable(const std::vector<ScalingRow>& rows);

// The model's step time and efficiency of each row's workload on `extrapolate_to` ranks
// under weak scaling (each rank keeps its share of the batch), from the row's measured
// compute, gradient bytes, buckets and network; with the formula. Only rows with one
// gradient bucket a step, whose compute the stored times separate. Throws
// std::invalid_argument when there is no such row.
std::string RenderScalingModel(const std::vector<ScalingRow>& rows,
                               const std::vector<int64_t>& extrapolate_to = {8, 64, 512});

struct ScalingPlotRequest {
  // efficiency: measured efficiency against the fitted network (x = bandwidth: 1/β, or
  // latency: α), one line per bucket size; model_efficiency: the model's efficiency
  // against ranks (1 to 512), one line per row.
  std::string y = "efficiency";
  std::string x = "bandwidth";
  std::string title;
  std::string output;  // the .svg file
};
// Throws std::invalid_argument for an unknown y or no row.
std::string BuildScalingPlotScript(const std::vector<ScalingRow>& rows,
                                   const ScalingPlotRequest& request);
void RenderScalingPlot(const std::vector<ScalingRow>& rows, const ScalingPlotRequest& request);

}  // namespace seqbench
