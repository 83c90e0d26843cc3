#include "results/metrics.h"

#include <cctype>
#include <stdexcept>
#include <string>

#include "results/records.h"

namespace seqbench {
namespace {

// Whether `name` is one of the values `placeholder` stands for.
bool FillsPlaceholder(std::string_view placeholder, std::string_view value) {
  if (placeholder == "<k>") {
    if (value.empty() || value[0] == '0') return false;
    for (const char c : value)
      if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    return true;
  }
  if (placeholder == "<D>") {  // a recall distance
    if (value.empty() || value[0] == '0') return false;
    for (const char c : value)
      if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    return true;
  }
  if (placeholder == "<K>") return !value.empty();  // a registered variant key, any spelling
  if (placeholder == "<phase>") {
    for (const char* phase : kCasePhases)
      if (value == phase) return true;
  }
  return false;
}

// Whether `name` matches `pattern`: equal, or equal around its one placeholder.
bool Matches(std::string_view pattern, std::string_view name) {
  const size_t open = pattern.find('<');
  if (open == std::string_view::npos) return pattern == name;
  const size_t close = pattern.find('>', open);
  const std::string_view prefix = pattern.substr(0, open), suffix = pattern.substr(close + 1);
  if (name.size() <= prefix.size() + suffix.size()) return false;
  if (name.substr(0, prefix.size()) != prefix) return false;
  if (name.substr(name.size() - suffix.size()) != suffix) return false;
  return FillsPlaceholder(pattern.substr(open, close - open + 1),
                          name.substr(prefix.size(), name.size() - prefix.size() - suffix.size()));
}

}  // namespace

const std::vector<MetricSpec>& CaseMetrics() {
  static const std::vector<MetricSpec> table = {
      {"runtime_mean_s", "s", "mean of the repetition samples", true},
      {"runtime_median_s", "s", "median of the samples: what reports and verdicts use", true},
      {"runtime_stddev_s", "s", "sample standard deviation", true},
      {"runtime_cv", "ratio", "stddev / mean", true},
      {"runtime_min_s", "s", "fastest sample", true},
      {"runtime_max_s", "s", "slowest sample", true},
      {"runtime_q1_s", "s", "first quartile (linear)", true},
      {"runtime_q3_s", "s", "third quartile (linear)", true},
      {"runtime_iqr_s", "s", "q3 - q1", true},
      {"runtime_relative_iqr", "ratio", "IQR / median, which the noise warnings judge", true},
      {"runtime_outliers", "count", "samples outside Tukey's fences", true},
      {"tokens_per_s", "tokens/s", "tokens a step over the median step", true},
      {"peak_bytes", "bytes", "peak live tensor bytes during one step", true},
      {"activation_bytes", "bytes", "that peak minus what was live when the step began", true},
      {"max_rss_bytes", "bytes", "the process's resident-set peak so far", true},
      {"logits_max_abs", "abs", "largest absolute difference of the logits", true},
      {"logits_max_rel", "ratio", "that over the reference's largest magnitude", true},
      {"loss_max_abs", "abs", "absolute difference of the loss", true},
      {"grad_max_abs", "abs", "largest absolute difference of a gradient", true},
      {"grad_max_rel", "ratio", "that over the reference's largest magnitude", true},
      {"mismatched_tokens", "count", "generated tokens that differ from the reference's", true},
      {"correct", "bool", "1 when every compared element is within tolerance", true},
      {"step_flops", "FLOP", "one step's floating-point operations (cost formula)", true},
      {"step_bytes", "bytes", "one step's compulsory bytes (cost formula)", true},
      {"step_gemm_flops", "FLOP", "of step_flops, those in matrix products (cost formula)", true},
      {"gflops_per_s", "GFLOP/s", "step_flops over the median step", true},
      {"gbytes_per_s", "GB/s", "step_bytes over the median step", true},
      {"instructions_per_step", "instructions", "callgrind's count, median step", true},
      {"instructions_spread", "ratio", "(max - min) / median of the counted steps", true},
      {"instructions_step_<k>", "instructions", "each counted step", false},
      {"cycles_estimate_per_step", "cycles", "estimate from the simulated cache, median", true},
      {"cycles_estimate_spread", "ratio", "(max - min) / median of the estimates", false},
      {"cycles_estimate_step_<k>", "cycles", "each step's estimate", false},
      {"hw_instructions_per_step", "instructions", "the CPU's instructions:u, median", true},
      {"hw_instructions_spread", "ratio", "(max - min) / median of the counted steps", false},
      {"hw_instructions_step_<k>", "instructions", "each counted step", false},
      {"recompute_factor", "ratio", "recurrence steps run again in backward a position", false},
      {"threads_intra_op", "count", "LibTorch's intra-op threads in force", false},
      {"threads_blas", "count", "OpenBLAS's threads in force", false},
      {"threads_omp", "count", "OpenMP's threads in force", false},
      {"case_peak_rss_bytes", "bytes",
       "resident-set peak of the case's own set-up to its memory "
       "pass",
       false},
      {"phase_<phase>_s", "s", "the case's wall time in one phase", false},
  };
  return table;
}

const std::vector<MetricSpec>& TrainingMetrics() {
  static const std::vector<MetricSpec> table = {
      {"tokens_per_s", "tokens/s", "non-padding tokens / wall time after timing_warmup", false},
      {"tokens_per_s_stddev", "tokens/s", "standard deviation of the per-step rate", false},
      {"runtime_mean_s", "s", "mean seconds per optimizer step", false},
      {"runtime_stddev_s", "s", "their standard deviation", false},
      {"padding_efficiency", "ratio", "non-padding tokens / B*T_max over the steps", false},
      {"epoch_padding_efficiency", "ratio", "the same over one whole epoch's plan", false},
      {"final_train_loss", "nats/token", "mean training loss over the last 10% of steps", false},
      {"final_validation_loss", "nats/token", "validation loss after the last step", false},
      {"skipped_steps", "count", "steps skipped for inf/NaN gradients", false},
      {"final_loss_scale", "ratio", "the loss scale at the end", false},
      {"peak_bytes", "bytes", "peak live tensor bytes of the whole training", false},
      {"max_rss_bytes", "bytes", "the process's resident-set peak at the end", false},
      {"optimizer_state_bytes", "bytes", "the optimizer's per-parameter state", false},
      {"optimizer_host_bytes", "bytes", "every host byte of the offloaded optimizer", false},
      {"parameters", "count", "the model's trainable parameters", false},
      {"weight_sparsity", "ratio", "the matrices' entries at zero (pruning)", false},
      {"ranks", "count", "the data-parallel ranks the pipeline trained on", false},
      {"network_alpha_s", "s", "the ring model's latency per message", false},
      {"network_beta_s_per_byte", "s/B", "the ring model's seconds per byte", false},
      {"bucket_mb", "MiB", "the gradient bucket size", false},
      {"allreduce_buckets_per_step", "count", "gradient buckets reduced a step", false},
      {"allreduce_bytes_per_step", "bytes", "gradient bytes reduced a step", false},
      {"allreduce_s_per_step", "s", "seconds in the gradients' all-reduces a step", false},
      {"count_allreduces_per_step", "count", "the other all-reduces a step", false},
      {"count_allreduce_s_per_step", "s", "seconds in them a step", false},
      {"zero_broadcast_bytes_per_step", "bytes", "ZeRO-1's parameter bytes broadcast a step",
       false},
      {"zero_broadcast_s_per_step", "s", "seconds in ZeRO-1's broadcasts a step", false},
      {"recall_accuracy_d<D>", "ratio", "recall answers right at distance D", false},
      {"recall_samples_d<D>", "count", "recall samples at distance D", false},
      {"inference_loss_<K>", "nats/token", "held-out loss through variant K", false},
      {"inference_reference_loss_<K>", "nats/token", "through the pipeline's own", false},
      {"inference_argmax_agreement_<K>", "ratio", "positions with the same argmax", false},
      {"inference_logit_rms_error_<K>", "logit", "RMS of the logits' difference", false},
      {"inference_generated_agreement_<K>", "ratio", "generated tokens the same", false},
      {"inference_generated_prefix_<K>", "tokens", "mean tokens before a difference", false},
      {"inference_generated_tokens_<K>", "count", "generated tokens compared", false},
      {"inference_weight_bytes_<K>", "bytes", "what K holds once set up and run", false},
  };
  return table;
}

const MetricSpec* FindTrainingMetric(std::string_view name) {
  for (const MetricSpec& spec : TrainingMetrics())
    if (Matches(spec.name, name)) return &spec;
  return nullptr;
}

Metric TrainingMetric(const std::string& name, double value) {
  const MetricSpec* spec = FindTrainingMetric(name);
  if (spec == nullptr)
    throw std::logic_error("training metric '" + name +
                           "' has no row in results/metrics.cc's TrainingMetrics()");
  return {name, value, spec->unit};
}

const MetricSpec* FindCaseMetric(std::string_view name) {
  for (const MetricSpec& spec : CaseMetrics())
    if (Matches(spec.name, name)) return &spec;
  return nullptr;
}

const char* MetricUnit(std::string_view name) {
  const MetricSpec* spec = FindCaseMetric(name);
  if (spec == nullptr)
    throw std::logic_error("metric '" + std::string(name) +
                           "' has no row in results/metrics.cc's CaseMetrics()");
  return spec->unit;
}

}  // namespace seqbench
