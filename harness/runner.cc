#include "harness/runner.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <regex>

#include "harness/cuda_probe.h"
#include "harness/key_pattern.h"
#include "harness/workload.h"
#include "stats/statistics.h"
#include "variants/core/registry.h"
#include "variants/core/trace.h"

namespace seqbench {
namespace {

// Collects Google Benchmark's runs instead of printing them.
class CollectingReporter final : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override {
    collected.insert(collected.end(), runs.begin(), runs.end());
  }
  std::vector<Run> collected;
};

double Seconds(std::chrono::steady_clock::duration duration) {
  return std::chrono::duration<double>(duration).count();
}

}  // namespace

void Synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index() < 0 ? 0 : device.index());
}

Timing MeasureWithGoogleBenchmark(const std::string& name, const TimedStep& step,
                                  int64_t iterations, int64_t repetitions) {
  std::string step_error;
  benchmark::ClearRegisteredBenchmarks();
  benchmark::RegisterBenchmark(name.c_str(),
                               [&](benchmark::State& state) {
                                 for (auto _ : state) {
                                   try {
                                     state.SetIterationTime(step());
                                   } catch (const std::exception& error) {
                                     step_error = DescribeError(error);
                                     state.SkipWithError(step_error.c_str());
                                     break;
                                   }
                                 }
                               })
      ->UseManualTime()
      ->Unit(benchmark::kSecond)
      ->Iterations(iterations)
      ->Repetitions(repetitions);
  CollectingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::ClearRegisteredBenchmarks();
  if (!step_error.empty()) throw std::runtime_error(step_error);

  Timing timing;
  timing.iterations = iterations;
  for (const auto& run : reporter.collected) {
    if (run.error_occurred) throw std::runtime_error(run.error_message);
    if (run.run_type == benchmark::BenchmarkReporter::Run::RT_Iteration) {
      timing.samples_s.push_back(run.GetAdjustedRealTime());
    }
  }
  return timing;
}

std::string CheckPolicyName(CheckPolicy policy) {
  switch (policy) {
    case CheckPolicy::kFull:
      return "full";
    case CheckPolicy::kSample:
      return "sample";
    case CheckPolicy::kNone:
      return "none";
  }
  return "full";
}

std::optional<CheckPolicy> ParseCheckPolicy(const std::string& name) {
  for (const CheckPolicy policy : {CheckPolicy::kFull, CheckPolicy::kSample, CheckPolicy::kNone}) {
    if (CheckPolicyName(policy) == name) return policy;
  }
  return std::nullopt;
}

bool CaseRunner::ShouldCheck(const CaseSpec& spec) {
  if (check_ == CheckPolicy::kFull) return true;
  if (check_ == CheckPolicy::kNone) return false;
  Workload shape = spec.workload;
  shape.dtype = "float32";
  shape.threads = 1;
  return sampled_.insert(spec.variant.name + " " + shape.Key()).second;
}

CaseRunner::CaseRunner(const Suite& suite, CheckPolicy check) : suite_(suite), check_(check) {
  // Counting must start before the weights exist, so that every tensor of a case is seen.
  CountingCpuAllocator::Install();
  if (suite.measurement.test_slowdown > 0)
    slowed_cases_ = std::make_unique<KeyPattern>(suite.measurement.test_slowdown_filter);
}

const ParameterSet& CaseRunner::WeightsFor(const Workload& workload, const std::string& family) {
  const ModelConfig config = suite_.ModelFor(workload, family);
  const std::string key = config.family + " " + std::to_string(config.num_layers) + "x" +
                          std::to_string(config.width) + "x" + std::to_string(config.num_heads) +
                          "x" + std::to_string(config.vocab_size) + " " + config.ffn;
  const auto cached = weights_.find(key);
  if (cached != weights_.end()) return cached->second;
  return weights_[key] = GlobalFamilies().Get(config.family).init_weights(config, suite_.seed);
}

// The reference runs on the rows a check compares (CheckRows: at most four), so its memory
// and time do not grow with the batch (at B=32 the whole-batch float64 reference peaked at
// 4.0x the RSS of an unchecked run, and took 37 s of the README suite's 287 s); at most
// kReferenceRows of them at once.
constexpr int64_t kReferenceRows = 4;

const StepOutcome* CaseRunner::ReferenceFor(const PreparedCase& p, const std::string& family,
                                            torch::ScalarType dtype, std::string& skipped_because) {
  const Workload& workload = p.result.spec.workload;
  const Batch& batch = *p.batch;
  // Keyed by the reference's dtype, not the case's: float32 and float64 cases of one shape
  // share one float64 reference.
  Workload reference_workload = workload;
  reference_workload.dtype = DtypeName(dtype);
  reference_workload.threads = 1;  // the same numbers whatever the thread count
  const std::string key = family + " " + reference_workload.Key();
  const auto skipped = reference_skips_.find(key);
  if (skipped != reference_skips_.end()) {
    skipped_because = skipped->second;
    return nullptr;
  }
  const auto cached = references_.find(key);
  if (cached != references_.end()) return &cached->second;
  const VariantSpec& baseline = suite_.Variant(suite_.ReferenceOf(family));
  auto variant = CreateVariant(baseline.key);
  variant->Setup(suite_.ModelFor(workload, family), WeightsFor(workload, family), p.device, dtype,
                 baseline.options);
  // The reference is held to its own limits (naive attention's score budget): a case whose
  // reference cannot run is timed unchecked, with the reason, rather than exhausting memory.
  const Mode mode = p.mode;
  // Train and forward: the rows the check compares (CheckRows); generate: every prompt.
  const Batch checked = mode == Mode::kGenerate ? batch : SelectRows(batch, CheckRows(batch));
  if (std::string why = variant->SkipReason(mode, checked, workload.generate_tokens);
      !why.empty()) {
    skipped_because = reference_skips_[key] = baseline.name + " " + DtypeName(dtype) + ": " + why;
    return nullptr;
  }
  return &(references_[key] = RunStepInRowChunks(*variant, mode, checked, workload.generate_tokens,
                                                 kReferenceRows));
}

EquivalenceResult CaseRunner::CheckCase(PreparedCase& p, const std::string& family,
                                        const StepOutcome& reference) {
  const CaseSpec& spec = p.result.spec;
  const Workload& workload = spec.workload;
  const Mode mode = p.mode;
  Variant& variant = *p.variant;
  const Batch& batch = *p.batch;
  const Tolerance& tolerance = p.tolerance;
  const StepOutcome whole = RunStep(variant, mode, batch, workload.generate_tokens);
  if (mode == Mode::kGenerate) return CompareOutcomes(whole, reference, mode, batch, tolerance);
  // A fresh copy, from the same weights (`variant` took an optimizer step in train mode),
  // runs the checked rows alone: its loss and gradients are those the reference has.
  const std::vector<int64_t> rows = CheckRows(batch);
  const Batch checked = SelectRows(batch, rows);
  std::unique_ptr<Variant> copy = GlobalVariants().Get(spec.variant.key).factory();
  copy->Setup(suite_.ModelFor(workload, family), WeightsFor(workload, family), variant.device(),
              variant.dtype(), spec.variant.options);
  EquivalenceResult result =
      CompareOutcomes(RunStep(*copy, mode, checked), reference, mode, checked, tolerance);
  Accumulate(result.logits,
             CompareRows(whole.output.logits, reference.output.logits, batch, rows, tolerance));
  return result;
}

namespace {

// One untimed step of `p` under a MemoryProbe. A peer's tensors live in its own process,
// which reports only its resident-set peak.
MemoryUsage MeasureMemory(PreparedCase& p) {
  if (p.peer) {
    p.step();
    MemoryUsage usage;
    usage.max_rss_bytes = p.peer->max_rss_bytes();
    return usage;
  }
  MemoryProbe probe(p.device);
  probe.Begin();
  p.step();
  Synchronize(p.device);
  return probe.End();
}

// Adds the wall time of its scope to a case's own time.
class OwnTime {
 public:
  explicit OwnTime(PreparedCase& prepared)
      : prepared_(prepared), started_(std::chrono::steady_clock::now()) {}
  ~OwnTime() { prepared_.own_s += Seconds(std::chrono::steady_clock::now() - started_); }

 private:
  PreparedCase& prepared_;
  std::chrono::steady_clock::time_point started_;
};

// One phase of a case: an NVTX range, and its wall time added to the case's phases_s.
class Phase {
 public:
  Phase(CaseResult& result, const char* name)
      : result_(result), name_(name), range_(name), started_(std::chrono::steady_clock::now()) {}
  ~Phase() { result_.phases_s[name_] += Seconds(std::chrono::steady_clock::now() - started_); }
  Phase(const Phase&) = delete;
  Phase& operator=(const Phase&) = delete;

 private:
  CaseResult& result_;
  const char* name_;
  TraceRange range_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace

CaseRunner::~CaseRunner() = default;

namespace {

// Why the variant cannot run this case at all, or "" (before anything is allocated).
std::string UnsupportedBecause(const Capabilities& caps, const Workload& workload, Mode mode,
                               torch::Device device, torch::ScalarType dtype) {
  if (device.is_cuda() && !torch::cuda::is_available()) return cuda_probe::kUnavailableReason;
  if (!caps.unavailable.empty()) return caps.unavailable;
  if (!caps.Supports(mode)) return "variant does not support mode " + std::string(ModeName(mode));
  if (!caps.Supports(device.type())) return "variant does not support device " + workload.device;
  if (!caps.Supports(dtype)) return "variant does not support dtype " + workload.dtype;
  return "";
}

// The case's steps: untimed, measured (with the test slowdown's extra whole steps, in
// thousandths of a step carried over, so that 10 consecutive timed steps do exactly 13
// steps' work at 1.3) and timed.
void BindSteps(PreparedCase& p, int64_t generate_tokens) {
  Variant* variant = p.variant.get();
  const Batch& batch = *p.batch;
  const Mode mode = p.mode;
  p.step = [variant, mode, &batch, generate_tokens]() {
    switch (mode) {
      case Mode::kTrain:
        variant->TrainStep(batch);
        break;
      case Mode::kForward:
        variant->InferStep(batch);
        break;
      case Mode::kGenerate:
        variant->Generate(batch.tokens, generate_tokens);
        break;
    }
  };
  PreparedCase* self = &p;
  p.measured_step = [self]() {
    self->step();
    for (self->carried_per_mille += self->extra_per_mille; self->carried_per_mille >= 1000;
         self->carried_per_mille -= 1000) {
      self->step();
    }
  };
  p.timed_step = [self]() {
    if (self->device.is_cuda() && cuda_probe::Compiled())
      return cuda_probe::TimeStep(self->measured_step, self->device);
    Synchronize(self->device);
    const auto begin = std::chrono::steady_clock::now();
    self->measured_step();
    Synchronize(self->device);
    return Seconds(std::chrono::steady_clock::now() - begin);
  };
}

// A peer's steps: each one a train step its process times (torch.utils.benchmark), whose
// seconds are the sample.
void BindPeerSteps(PreparedCase& p) {
  PeerProcess* peer = p.peer.get();
  p.step = [peer] { peer->TimedStep(); };
  p.measured_step = p.step;
  p.timed_step = [peer] { return peer->TimedStep(); };
}

// Warmup (the check's whole-batch step was the first; the last is the memory pass), then
// the steps a sample times for `min_time_s`.
void WarmUp(PreparedCase& p, const Measurement& measure) {
  // A peer's check ran on other rows, in float64: not a warmup step of what it times.
  const bool check_warmed = p.result.checked && !p.peer;
  const int64_t warmup = std::max<int64_t>(0, measure.warmup - (check_warmed ? 1 : 0));
  for (int64_t i = 0; i < warmup; ++i) {
    if (i + 1 < warmup) {
      p.step();
    } else {  // no step is run for the memory pass alone
      p.result.memory = MeasureMemory(p);
      p.memory_measured = true;
    }
  }
  if (measure.min_time_s > 0) {
    // The plain step: slowed and plain runs then time the same number of steps.
    Synchronize(p.device);
    const auto begin = std::chrono::steady_clock::now();
    p.step();
    Synchronize(p.device);
    const double one_step = Seconds(std::chrono::steady_clock::now() - begin);
    p.iterations = std::max<int64_t>(1, std::ceil(measure.min_time_s / one_step));
  }
  if (measure.test_slowdown > 0) p.iterations = (p.iterations + 9) / 10 * 10;
  p.carried_per_mille = 0;
}

}  // namespace

CaseRunner::CheckPlan CaseRunner::PlanCheck(const PreparedCase& p, const std::string& family) {
  const CaseSpec& spec = p.result.spec;
  const torch::ScalarType dtype = p.dtype;
  CheckPlan plan;
  plan.baseline = &suite_.Variant(suite_.ReferenceOf(family));
  // Against the baseline in float64 where it has float64: on long sequences a float32 step
  // loop drifts further from the function than a good variant. Generated tokens are
  // compared one for one, so there the baseline runs in the case's dtype (near-ties may
  // break differently across dtypes).
  const bool has_float64 =
      GlobalVariants().Get(plan.baseline->key).capabilities.Supports(torch::kFloat64);
  plan.reference_dtype = (p.mode != Mode::kGenerate && has_float64) ? torch::kFloat64 : dtype;
  // The reference itself in the reference's dtype would be compared with its own
  // computation: nothing to learn, the reference's whole cost to pay.
  plan.own_reference = spec.variant.key == plan.baseline->key &&
                       spec.variant.options == plan.baseline->options &&
                       plan.reference_dtype == dtype;
  plan.run = !plan.own_reference && ShouldCheck(spec);
  return plan;
}

void CaseRunner::RunCheck(PreparedCase& p, const std::string& family, const CheckPlan& plan) {
  CaseResult& result = p.result;
  std::string skipped;
  const StepOutcome* reference =
      plan.run ? ReferenceFor(p, family, plan.reference_dtype, skipped) : nullptr;
  const std::string& name = plan.baseline->name;
  if (reference != nullptr) {
    result.reference = name + " " + DtypeName(plan.reference_dtype);
    if (p.peer) {  // its float64 step on the rows the reference ran
      const Batch rows = SelectRows(*p.batch, CheckRows(*p.batch));
      result.correctness =
          CompareOutcomes(p.peer->Check(rows), *reference, p.mode, rows, p.tolerance);
    } else {
      result.correctness = CheckCase(p, family, *reference);
    }
    result.checked = true;
  } else if (!skipped.empty()) {
    result.reference = std::string(kNotCheckedReference) + " (" + skipped + ")";
  } else if (plan.own_reference) {
    result.reference = std::string(kNotCheckedReference) + " (the case is its reference, " + name +
                       " " + DtypeName(plan.reference_dtype) + ")";
  } else {
    result.reference =
        std::string(kNotCheckedReference) + " (--check " + CheckPolicyName(check_) + ")";
  }
}

void CaseRunner::PreparePeer(PreparedCase& p, const PeerEntry& entry) {
  const torch::ScalarType dtype = p.dtype;
  std::optional<Phase> phase(std::in_place, p.result, "setup");
  CaseResult& result = p.result;
  const Workload& workload = result.spec.workload;
  const std::string family(entry.family);
  result.category = kPeerCategory;
  result.description = std::string(entry.description);
  std::string why = PeerUnavailableReason(entry);
  if (why.empty() && p.mode != Mode::kTrain) why = "the peer times train steps only";
  if (why.empty() && !p.device.is_cpu()) why = "the peer runs on the CPU only";
  if (!why.empty()) {
    result.status = kStatusSkipped;
    result.message = why;
    return;
  }
  p.batch.emplace(MakeBatch({workload.batch, workload.seq_len, workload.min_len},
                            workload.vocab_size, suite_.seed + 1, p.device));
  result.tokens_per_step = p.batch->NumTokens();
  const ModelConfig model = suite_.ModelFor(workload, family);
  // The suite's case timeout bounds each answer too; else ten minutes, far above any
  // step a suite times.
  const double case_timeout_s = suite_.measurement.case_timeout_s;
  p.peer = std::make_unique<PeerProcess>(entry, workload.threads,
                                         case_timeout_s > 0 ? case_timeout_s : 600);
  p.rss_epoch = -1;  // this process's resident-set peak is not the peer's
  const std::string libraries =
      p.peer->Setup(model, WeightsFor(workload, family), *p.batch, workload.dtype);
  result.description += " (" + libraries + ")";
  // Every position of the padded batch through layers and head, as the default steps.
  result.work.mode = p.mode;
  result.work.positions = result.work.head_positions =
      p.batch->batch_size() * p.batch->max_length();
  result.work.element_bytes = static_cast<int64_t>(c10::elementSize(dtype));
  if (const FamilyEntry& entry_family = GlobalFamilies().Get(family); entry_family.step_cost)
    result.cost = entry_family.step_cost(model, result.work);
  // 1. Correctness: the peer computes in float64, so it is held to float64's tolerance.
  const CheckPlan plan = PlanCheck(p, family);
  p.tolerance = Capabilities{}.ToleranceFor(plan.reference_dtype);
  if (plan.run) {
    phase.reset();
    phase.emplace(result, "check");
  }
  RunCheck(p, family, plan);
  // 2. Warmup, and the steps the timer runs.
  BindPeerSteps(p);
  phase.reset();
  phase.emplace(result, "warmup");
  WarmUp(p, suite_.measurement);
  p.ready = true;
}

std::unique_ptr<PreparedCase> CaseRunner::Prepare(const CaseSpec& spec) {
  auto prepared = std::make_unique<PreparedCase>();
  PreparedCase& p = *prepared;
  OwnTime own(p);
  CaseResult& result = p.result;
  result.spec = spec;
  const Workload& workload = spec.workload;
  const TypedWorkload typed = Typed(workload);
  p.mode = typed.mode;
  p.dtype = typed.dtype;
  p.device = typed.device;
  TraceRange case_range("case " + spec.Key());
  std::optional<Phase> phase;  // one at a time, each an NVTX range and a stored time
  phase.emplace(result, "setup");
  if (ResetPeakRss()) p.rss_epoch = ++rss_epoch_;  // the case's own high-water mark from here
  const auto skip = [&](const std::string& why) {
    result.status = kStatusSkipped;
    result.message = why;
    return std::move(prepared);
  };
  try {
    const torch::ScalarType dtype = p.dtype;
    result.threads = SetThreads(workload.threads);
    if (spec.variant.peer) {
      phase.reset();
      PreparePeer(p, *FindPeer(spec.variant.key));
      return prepared;
    }
    const VariantEntry& entry = GlobalVariants().Get(spec.variant.key);
    const Capabilities& caps = entry.capabilities;
    result.category = caps.category;
    result.description = entry.description;
    if (std::string why = UnsupportedBecause(caps, workload, p.mode, p.device, dtype); !why.empty())
      return skip(why);
    // The same tokens for every variant at this batch shape.
    p.batch.emplace(MakeBatch({workload.batch, workload.seq_len, workload.min_len},
                              workload.vocab_size, suite_.seed + 1, p.device));
    result.tokens_per_step = p.mode == Mode::kGenerate ? workload.batch * workload.generate_tokens
                                                       : p.batch->NumTokens();
    p.variant = entry.factory();
    const ModelConfig model = suite_.ModelFor(workload, caps.family);
    p.variant->Setup(model, WeightsFor(workload, caps.family), p.device, dtype,
                     spec.variant.options);
    if (std::string why = p.variant->SkipReason(p.mode, *p.batch, workload.generate_tokens);
        !why.empty())
      return skip(why);
    result.work = p.variant->Work(p.mode, *p.batch, workload.generate_tokens);
    const FamilyEntry& family = GlobalFamilies().Get(caps.family);
    if (family.step_cost) result.cost = family.step_cost(model, result.work);
    p.tolerance = caps.ToleranceFor(dtype);
    // 1. Correctness.
    const CheckPlan plan = PlanCheck(p, caps.family);
    if (plan.run) {
      phase.reset();
      phase.emplace(result, "check");
    }
    RunCheck(p, caps.family, plan);
    // 2. Warmup, and the steps the timer runs.
    const Measurement& measure = suite_.measurement;
    const bool slowed = slowed_cases_ != nullptr && slowed_cases_->Matches(spec.Key());
    p.extra_per_mille = slowed ? std::llround((measure.test_slowdown - 1) * 1000) : int64_t{0};
    BindSteps(p, workload.generate_tokens);
    phase.reset();
    phase.emplace(result, "warmup");
    WarmUp(p, measure);
    p.ready = true;
  } catch (const std::exception& error) {
    result.status = kStatusError;
    result.message = DescribeError(error);
  }
  return prepared;
}

void CaseRunner::TimeSamples(PreparedCase& prepared, int64_t repetitions, int64_t warmup) {
  if (!prepared.ready) return;
  OwnTime own(prepared);
  TraceRange case_range("case " + prepared.result.spec.Key());
  try {
    SetThreads(prepared.result.spec.workload.threads);
    if (warmup > 0) {
      Phase warming(prepared.result, "warmup");
      for (int64_t i = 0; i < warmup; ++i) prepared.step();
    }
    Phase phase(prepared.result, "timed");
    const Timing more = MeasureWithGoogleBenchmark(prepared.result.spec.Key(), prepared.timed_step,
                                                   prepared.iterations, repetitions);
    prepared.result.timing.iterations = more.iterations;
    prepared.result.timing.samples_s.insert(prepared.result.timing.samples_s.end(),
                                            more.samples_s.begin(), more.samples_s.end());
  } catch (const std::exception& error) {
    prepared.ready = false;
    prepared.result.status = kStatusError;
    prepared.result.message = DescribeError(error);
  }
}

CaseResult CaseRunner::Finish(std::unique_ptr<PreparedCase> prepared) {
  PreparedCase& p = *prepared;
  CaseResult& result = p.result;
  {
    OwnTime own(p);
    TraceRange case_range("case " + result.spec.Key());
    if (p.ready) {
      try {
        SetThreads(result.spec.workload.threads);
        if (!p.memory_measured) {  // 3. Without warmup: memory of one more step.
          Phase phase(result, "memory");
          result.memory = MeasureMemory(p);
        }
        if (!result.checked || result.correctness.passed()) {
          result.status = kStatusOk;
        } else {
          result.status = kStatusMismatch;
          char bounds[64];
          std::snprintf(bounds, sizeof(bounds), "rtol %g, atol %g", p.tolerance.rtol,
                        p.tolerance.atol);
          result.message =
              result.correctness.finite()
                  ? std::string("outside tolerance (") + bounds + ") against " + result.reference
                  : "not finite (NaN or infinity) where " + result.reference + " is";
        }
      } catch (const std::exception& error) {
        result.status = kStatusError;
        result.message = DescribeError(error);
      }
    }
    if (p.rss_epoch >= 0 && p.rss_epoch == rss_epoch_) result.peak_rss_bytes = PeakRssBytes();
    // The case's tensors go now; the next case should not inherit its cached blocks,
    // least of all after an out-of-memory failure.
    Phase teardown(result, "teardown");
    p.step = nullptr;
    p.measured_step = nullptr;
    p.timed_step = nullptr;
    p.variant.reset();
    p.peer.reset();
    p.batch.reset();
    if (p.device.is_cuda() && torch::cuda::is_available()) {
      try {
        cuda_probe::ReleaseCachedMemory();
      } catch (const std::exception& error) {  // a broken CUDA context: keep the case's result
        if (result.status == kStatusOk) result.status = kStatusError;
        result.message += std::string(result.message.empty() ? "" : "; ") +
                          "freeing the CUDA cache after the case failed: " + DescribeError(error);
      }
    }
  }
  result.wall_s = p.own_s;
  return std::move(result);
}

CaseResult CaseRunner::Run(const CaseSpec& spec) {
  std::unique_ptr<PreparedCase> prepared = Prepare(spec);
  const Measurement& measure = suite_.measurement;
  const auto timing_started = std::chrono::steady_clock::now();
  TimeSamples(*prepared, measure.repetitions, 0);
  // Adaptive stopping (run --max-noise): more repetitions, a batch at a time, until the
  // median's interval is narrow enough or the case's timing budget is spent.
  while (prepared->ready && measure.max_noise > 0) {
    const std::vector<double>& samples = prepared->result.timing.samples_s;
    const auto noise = stats::MedianRelativeHalfWidth(samples);
    const bool converged = noise && *noise <= measure.max_noise;
    const bool spent =
        Seconds(std::chrono::steady_clock::now() - timing_started) >= measure.max_time_s ||
        static_cast<int64_t>(samples.size()) >= kMaxAdaptiveRepetitions;
    if (converged || spent) break;
    TimeSamples(*prepared,
                std::min<int64_t>(measure.repetitions,
                                  kMaxAdaptiveRepetitions - static_cast<int64_t>(samples.size())),
                0);
  }
  return Finish(std::move(prepared));
}

}  // namespace seqbench
