#include "harness/case_record.h"

#include "results/metrics.h"
#include "stats/statistics.h"

namespace seqbench {

std::vector<Metric> RuntimeMetrics(const std::vector<double>& samples_s, int64_t tokens_per_step,
                                   double step_flops, double step_bytes) {
  std::vector<Metric> metrics;
  if (samples_s.empty()) return metrics;
  const auto add = [&](const std::string& name, double value) {
    metrics.push_back({name, value, MetricUnit(name)});
  };
  const stats::Summary summary = stats::Summarize(samples_s);
  add("runtime_mean_s", summary.mean);
  add("runtime_median_s", summary.median);
  add("runtime_stddev_s", summary.stddev);
  add("runtime_cv", summary.cv);
  add("runtime_min_s", summary.min);
  add("runtime_max_s", summary.max);
  add("runtime_q1_s", summary.q1);
  add("runtime_q3_s", summary.q3);
  add("runtime_iqr_s", summary.iqr);
  add("runtime_relative_iqr", summary.RelativeIqr());
  add("runtime_outliers", static_cast<double>(summary.outliers));
  if (summary.median > 0) add("tokens_per_s", tokens_per_step / summary.median);
  // Roofline: the step's work over the median step (the peaks are the run's).
  if (step_flops > 0 && summary.median > 0) {
    add("gflops_per_s", step_flops / summary.median / 1e9);
    add("gbytes_per_s", step_bytes / summary.median / 1e9);
  }
  return metrics;
}

CaseRecord ToRecord(const CaseResult& result, int64_t position) {
  const Workload& w = result.spec.workload;
  CaseRecord record;
  record.identity = result.spec.Identity();
  record.position = position;
  record.category = result.category;
  record.description = result.description;
  record.status = result.status;
  record.message = result.message;
  record.reference = result.reference;
  record.iterations = result.timing.iterations;
  record.tokens_per_step = result.tokens_per_step;
  record.wall_s = result.wall_s;
  record.samples_s = result.timing.samples_s;
  const auto add = [&](const std::string& name, double value) {
    record.metrics.push_back({name, value, MetricUnit(name)});
  };
  record.metrics = RuntimeMetrics(record.samples_s, result.tokens_per_step, result.cost.flops,
                                  result.cost.bytes);
  if (result.cost.flops > 0) {
    add("step_flops", result.cost.flops);
    add("step_bytes", result.cost.bytes);
    add("step_gemm_flops", result.cost.gemm_flops);
  }
  // Gradient checkpointing's price, in steps of the recurrence run again per position:
  // machine-independent, so schedules compare exactly where their times are noisy.
  if (result.work.mode == Mode::kTrain && result.work.positions > 0) {
    add("recompute_factor", static_cast<double>(result.work.recomputed_positions) /
                                static_cast<double>(result.work.positions));
  }
  // Where the case's time went (report --phases), in kCasePhases' order.
  for (const char* phase : kCasePhases) {
    const auto seconds = result.phases_s.find(phase);
    if (seconds != result.phases_s.end())
      add(std::string("phase_") + phase + "_s", seconds->second);
  }
  // The threads really in force, which the identity's `threads` asked for.
  if (result.threads.intra_op >= 0) add("threads_intra_op", result.threads.intra_op);
  if (result.threads.blas >= 0) add("threads_blas", result.threads.blas);
  if (result.threads.omp >= 0) add("threads_omp", result.threads.omp);
  if (result.memory.peak_bytes >= 0) add("peak_bytes", result.memory.peak_bytes);
  if (result.memory.activation_bytes >= 0) add("activation_bytes", result.memory.activation_bytes);
  if (result.memory.max_rss_bytes >= 0) add("max_rss_bytes", result.memory.max_rss_bytes);
  if (result.peak_rss_bytes >= 0) add("case_peak_rss_bytes", result.peak_rss_bytes);
  if (result.checked) {
    const EquivalenceResult& c = result.correctness;
    if (w.mode == "generate") {
      add("mismatched_tokens", c.mismatched_tokens);
    } else {
      add("logits_max_abs", c.logits.max_abs);
      add("logits_max_rel", c.logits.max_rel);
      add("loss_max_abs", c.loss.max_abs);
      if (w.mode == "train") {
        add("grad_max_abs", c.gradients.max_abs);
        add("grad_max_rel", c.gradients.max_rel);
      }
    }
    add("correct", c.passed() ? 1 : 0);
  }
  return record;
}

}  // namespace seqbench
