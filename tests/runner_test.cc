// The case runner: Google Benchmark's samples and the record's statistics over them, the counting
// CPU allocator on a known allocation pattern, and a failing variant that is recorded as an error
// while the next case still runs.
#include "harness/runner.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <string>

#include "base/process.h"
#include "harness/benchmark_run.h"
#include "harness/case_record.h"
#include "harness/cuda_probe.h"
#include "harness/memory.h"
#include "harness/workload.h"
#include "stats/statistics.h"
#include "tests/test_support.h"
#include "variants/core/torch_compat.h"

namespace seqbench {
namespace {

TEST_CASE("timing samples, and the record's statistics from them", "[runner]") {
  // Each repetition is 2 iterations; manual times per iteration are known exactly. The last
  // repetition is slow, so that mean (0.0385) and median (0.026) differ.
  const std::vector<double> per_step = {0.010, 0.012, 0.020, 0.022, 0.030, 0.032, 0.090, 0.092};
  size_t next = 0;
  const Timing timing = MeasureWithGoogleBenchmark(
      "known", [&] { return per_step.at(next++); }, /*iterations=*/2, /*repetitions=*/4);
  CHECK(next == per_step.size());
  const std::vector<double> expected = {0.011, 0.021, 0.031, 0.091};  // per-repetition means
  REQUIRE(timing.samples_s.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) CHECK(timing.samples_s[i] == Approx(expected[i]));

  CaseResult result;
  result.spec.variant.name = result.spec.variant.key = "fused";
  result.status = kStatusOk;
  result.timing = timing;
  result.tokens_per_step = 52;
  result.cost.flops = 2e6;
  result.cost.bytes = 3e5;
  const CaseRecord record = ToRecord(result, 3);
  CHECK(record.position == 3);
  CHECK(record.key() == result.spec.Key());
  CHECK(record.samples_s == timing.samples_s);
  const double mean = 0.0385;
  double squares = 0;
  for (const double x : expected) squares += (x - mean) * (x - mean);
  const double stddev = std::sqrt(squares / (expected.size() - 1));  // sample std
  CHECK(*record.MetricValue("runtime_mean_s") == Approx(mean));
  CHECK(*record.MetricValue("runtime_median_s") == Approx(0.026));
  CHECK(*record.MetricValue("runtime_stddev_s") == Approx(stddev));
  CHECK(*record.MetricValue("runtime_cv") == Approx(stddev / mean));
  CHECK(*record.MetricValue("runtime_min_s") == Approx(0.011));
  CHECK(*record.MetricValue("runtime_max_s") == Approx(0.091));
  CHECK(*record.MetricValue("runtime_iqr_s") == Approx(0.046 - 0.0185));  // NumPy's quantiles
  CHECK(*record.MetricValue("runtime_q1_s") == Approx(0.0185));
  CHECK(*record.MetricValue("runtime_q3_s") == Approx(0.046));
  CHECK(*record.MetricValue("runtime_relative_iqr") == Approx((0.046 - 0.0185) / 0.026));
  // Fences 0.0185 - 1.5 IQR and 0.046 + 1.5 IQR = 0.08725: the slow 0.091 is one outlier.
  CHECK(*record.MetricValue("runtime_outliers") == 1);
  CHECK(*record.MetricValue("gflops_per_s") == Approx(2e6 / 0.026 / 1e9));
  CHECK(*record.MetricValue("gbytes_per_s") == Approx(3e5 / 0.026 / 1e9));
  CHECK(*record.MetricValue("tokens_per_s") == Approx(52 / 0.026));  // throughput of the median
}

TEST_CASE("the recompute factor: positions run again per forward position", "[runner][metrics]") {
  // 48 of 32 forward positions run again (a schedule recomputing some twice): 1.5, where
  // a share of all positions computed would be 0.6.
  CaseResult result;
  result.spec.variant.name = result.spec.variant.key = "checkpointed";
  result.status = kStatusOk;
  result.work.mode = Mode::kTrain;
  result.work.positions = 32;
  result.work.recomputed_positions = 48;
  CHECK(*ToRecord(result, 0).MetricValue("recompute_factor") == 1.5);
  result.work.mode = Mode::kForward;  // nothing runs backward: no factor
  CHECK_FALSE(ToRecord(result, 0).MetricValue("recompute_factor"));
}

TEST_CASE("a step that throws surfaces as an exception from the measurement", "[runner]") {
  int calls = 0;
  CHECK_THROWS_WITH(MeasureWithGoogleBenchmark(
                        "throws",
                        [&]() -> double {
                          if (++calls == 3) throw std::runtime_error("boom at 3");
                          return 0.001;
                        },
                        1, 5),
                    Catch::Contains("boom at 3"));
}

TEST_CASE("the counting allocator tracks live bytes and their peak exactly", "[memory]") {
  CountingCpuAllocator& allocator = CountingCpuAllocator::Install();
  REQUIRE(CountingCpuAllocator::Installed() == &allocator);
  constexpr int64_t kMiB = 1 << 20;
  // Live bytes before the step (weights, the batch): the step's activation memory is its
  // peak above them, which a fixture starting from zero live bytes cannot tell from the
  // peak itself.
  const auto held = torch::empty({5 * kMiB / 2}, torch::kUInt8);
  allocator.ResetPeak();
  const int64_t start = allocator.live_bytes();
  REQUIRE(start >= 5 * kMiB / 2);
  MemoryProbe probe(torch::kCPU);
  probe.Begin();
  {
    auto a = torch::empty({kMiB}, torch::kUInt8);
    auto b = torch::empty({2 * kMiB}, torch::kUInt8);
    CHECK(allocator.live_bytes() == start + 3 * kMiB);
    a.reset();
    auto c = torch::empty({kMiB / 2}, torch::kUInt8);
    CHECK(allocator.live_bytes() == start + 2 * kMiB + kMiB / 2);
  }
  // The resident set now, from the kernel. The kernel updates the high-water mark that
  // getrusage() reports lazily, so it may trail the current RSS a little; a
  // kilobytes-for-bytes slip would put it 1024 times off, outside these bounds.
  long resident_pages = 0, total_pages = 0;
  std::FILE* statm = std::fopen("/proc/self/statm", "r");
  REQUIRE(statm != nullptr);
  REQUIRE(std::fscanf(statm, "%ld %ld", &total_pages, &resident_pages) == 2);
  std::fclose(statm);
  const int64_t resident_bytes = static_cast<int64_t>(resident_pages) * sysconf(_SC_PAGESIZE);
  const MemoryUsage usage = probe.End();
  CHECK(allocator.live_bytes() == start);
  CHECK(usage.peak_bytes == start + 3 * kMiB);
  CHECK(usage.activation_bytes == 3 * kMiB);
  const int64_t virtual_bytes = static_cast<int64_t>(total_pages) * sysconf(_SC_PAGESIZE);
  CHECK(usage.max_rss_bytes >= resident_bytes / 2);
  CHECK(usage.max_rss_bytes <= virtual_bytes);
}

TEST_CASE("on CUDA, a step's peak and activation come from the caching allocator",
          "[memory][cuda]") {
  if (!torch::cuda::is_available()) {
    WARN("skipped: " << cuda_probe::kUnavailableReason << " (ci/gpu/run runs it)");
    return;
  }
  // The CPU test's pattern on the GPU: 2.5 MiB live at the start, 3 MiB at the step's peak.
  constexpr int64_t kMiB = 1 << 20;
  const auto on_gpu = torch::TensorOptions().dtype(torch::kUInt8).device(torch::kCUDA);
  const auto held = torch::empty({5 * kMiB / 2}, on_gpu);
  MemoryProbe probe(torch::kCUDA);
  probe.Begin();
  {
    auto a = torch::empty({kMiB}, on_gpu);
    auto b = torch::empty({2 * kMiB}, on_gpu);
    a.reset();
    auto c = torch::empty({kMiB / 2}, on_gpu);
  }
  const MemoryUsage usage = probe.End();
  CHECK(usage.activation_bytes == 3 * kMiB);  // not the peak, not what is live at the end
  // The peak includes what was live at the start (the held block, and anything earlier
  // tests left allocated).
  CHECK(usage.peak_bytes - usage.activation_bytes >= 5 * kMiB / 2);
}

TEST_CASE("the counting allocator refuses, before allocating, what passes its limit", "[memory]") {
  CountingCpuAllocator& allocator = CountingCpuAllocator::Install();
  const int64_t machine_limit = allocator.limit_bytes();
  CHECK(machine_limit > 0);
  CHECK(machine_limit <= MachineMemoryBytes());
  constexpr int64_t kMiB = 1 << 20;
  allocator.set_limit_bytes(allocator.live_bytes() + 4 * kMiB);
  const int64_t live_before = allocator.live_bytes();
  std::string message;
  try {
    auto too_big = torch::empty({5 * kMiB}, torch::kUInt8);
  } catch (const MemoryLimitExceeded& error) {
    message = error.what();
  }
  const int64_t live_after_refusal = allocator.live_bytes();
  // The limit counts what is live, not the request alone: 3 MiB fit, 2 more do not.
  const bool second_refused = [&] {
    auto held = torch::empty({3 * kMiB}, torch::kUInt8);
    try {
      auto second = torch::empty({2 * kMiB}, torch::kUInt8);
      return false;
    } catch (const MemoryLimitExceeded&) {
      return true;
    }
  }();
  allocator.set_limit_bytes(machine_limit);
  CHECK(message.find("lower batch, seq_len or width") != std::string::npos);
  CHECK(live_after_refusal == live_before);  // nothing was allocated or counted
  CHECK(second_refused);
  auto after = torch::empty({5 * kMiB}, torch::kUInt8);  // the machine's limit again
  CHECK(after.numel() == 5 * kMiB);
}

TEST_CASE("the RSS high-water mark restarts from the current resident set", "[memory]") {
  constexpr size_t kBlock = size_t{128} << 20;
  // mmap'd and unmapped directly: whatever malloc keeps, these pages leave the process.
  void* block = mmap(nullptr, kBlock, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(block != MAP_FAILED);
  std::memset(block, 1, kBlock);
  const int64_t with_block = PeakRssBytes();
  munmap(block, kBlock);
  CHECK(with_block >= static_cast<int64_t>(kBlock));
  if (!ResetPeakRss()) {
    WARN(
        "this kernel does not reset VmHWM (/proc/self/clear_refs): case_peak_rss_bytes "
        "then runs from the process's start");
    return;
  }
  const int64_t after_reset = PeakRssBytes();
  CHECK(after_reset <= with_block - static_cast<int64_t>(kBlock) / 2);
}

#if defined(__GLIBC__)
TEST_CASE("measuring keeps freed tensor memory in the process for the next step", "[memory]") {
  CountingCpuAllocator::Install();
  // 64 MiB is above glibc's largest mmap threshold: by default the block is unmapped when
  // freed, and the next step would fault in and zero fresh pages. Retained, the freed
  // block stays in the heap as free bytes (mallinfo2's fordblks) for the next allocation.
  // Measured against the heap's free bytes while the block is held, so that what earlier
  // tests in the same process left free does not matter.
  constexpr size_t kBlock = size_t{64} << 20;
  auto block = torch::empty({static_cast<int64_t>(kBlock)}, torch::kUInt8);
  block.fill_(1);
  const size_t free_while_held = mallinfo2().fordblks;
  block.reset();
  CHECK(mallinfo2().fordblks >= free_while_held + kBlock);
  CHECK(std::string(RetainFreedMemory()).find("kept") != std::string::npos);
}

TEST_CASE("a peer's process keeps freed memory as seqbench's does", "[memory][peer]") {
  const std::string policy = RetainFreedMemoryTunables("");
  CHECK(policy.find("glibc.malloc.mmap_max=0") != std::string::npos);
  // The user's own tunables stay, first.
  CHECK(RetainFreedMemoryTunables("glibc.cpu.hwcaps=-AVX512F") ==
        "glibc.cpu.hwcaps=-AVX512F:" + policy);
  // glibc takes the string: in a child started with it, a freed 64 MiB block stays in the
  // heap (without it, glibc unmaps a block that large on free). Exit 3: unmapped.
  const std::string script =
      "import ctypes, sys\n"
      "libc = ctypes.CDLL('libc.so.6')\n"
      "class Info(ctypes.Structure):\n"
      "    _fields_ = [(n, ctypes.c_size_t) for n in 'arena ordblks smblks hblks hblkhd usmblks "
      "fsmblks uordblks fordblks keepcost'.split()]\n"
      "libc.mallinfo2.restype = Info\n"
      "libc.malloc.restype = ctypes.c_void_p\n"
      "size = 64 << 20\n"
      "block = libc.malloc(size)\n"
      "ctypes.memset(block, 1, size)\n"
      "held = libc.mallinfo2().fordblks\n"
      "libc.free(ctypes.c_void_p(block))\n"
      "sys.exit(0 if libc.mallinfo2().fordblks >= held + size else 3)\n";
  const auto run = [&](const std::vector<std::string>& environment) {
    ChildSpec spec;
    spec.argv = {"/usr/bin/python3", "-c", script};
    spec.timeout_s = 60;
    spec.environment = environment;
    return RunChild(spec);
  };
  const ChildOutcome kept = run({"GLIBC_TUNABLES=" + policy});
  CHECK(kept.end == ChildOutcome::End::kExited);
  CHECK(kept.exit_code == 0);
  // The check itself can fail: glibc's default policy unmaps the block.
  CHECK(run({"GLIBC_TUNABLES="}).exit_code == 3);
}
#endif

// A variant that always fails, registered only in the test binary.
class AlwaysThrows final : public Variant {
 public:
  Capabilities capabilities() const override { return simple_rnn::BaseCapabilities("test"); }
  ForwardOutput Forward(const Batch&) override { TORCH_CHECK(false, "this variant always fails"); }
};
SEQBENCH_REGISTER_VARIANT("test_always_throws", AlwaysThrows, "fails on purpose (tests only)");

// A variant that computes a slightly different function: batched, with the logits off by
// 1e-3, well outside the float32 tolerance (1e-5 + 1e-4 * |x|) for logits of order 1.
class SlightlyWrong final : public Variant {
 public:
  Capabilities capabilities() const override { return simple_rnn::BaseCapabilities("test"); }
  ForwardOutput Forward(const Batch& batch) override {
    ForwardOutput output =
        simple_rnn::ForwardBatched(simple_rnn::Weights::View(parameters(), config().num_layers),
                                   batch, config().num_heads, simple_rnn::StepLoopMixer());
    output.logits = output.logits + 1e-3;
    return output;
  }
};
SEQBENCH_REGISTER_VARIANT("test_slightly_wrong", SlightlyWrong, "off by 1e-3 (tests only)");

// A variant whose timed forward step allocates a pattern computable by hand: 3 MiB, then
// 1 MiB beside it (4 MiB live above the start: the peak), then 3 MiB freed and 2 MiB taken
// (3 MiB), returning no logits.
class KnownAllocations final : public Variant {
 public:
  static constexpr int64_t kMiB = 1 << 20;
  Capabilities capabilities() const override { return simple_rnn::BaseCapabilities("test"); }
  ForwardOutput Forward(const Batch& batch) override {
    return simple_rnn::ForwardBatched(simple_rnn::Weights::View(parameters(), config().num_layers),
                                      batch, config().num_heads, simple_rnn::StepLoopMixer());
  }
  ForwardOutput InferStep(const Batch&) override {
    auto first = torch::empty({3 * kMiB}, torch::kUInt8);
    auto second = torch::empty({kMiB}, torch::kUInt8);
    first.reset();
    auto third = torch::empty({2 * kMiB}, torch::kUInt8);
    return {};
  }
};
SEQBENCH_REGISTER_VARIANT("test_known_allocations", KnownAllocations,
                          "allocates a known pattern (tests only)");

// The start of a suite over a tiny SimpleRNN, timed twice without warmup; the test adds
// its variants and grid.
std::string TinySuiteHeader(const std::string& name, const std::string& description) {
  return "name = \"" + name + "\"\ndescription = \"" + description +
         "\"\nfamily = \"simple_rnn\"\nbaseline = \"baseline\"\n[model]\nvocab_size = 16\n"
         "width = 8\nlayers = 1\nheads = 2\n[measure]\nrepetitions = 2\nwarmup = 0\n";
}

// A variant whose step produces NaN: one logit, the loss, and through it every gradient.
class ProducesNaN final : public Variant {
 public:
  Capabilities capabilities() const override { return simple_rnn::BaseCapabilities("test"); }
  ForwardOutput Forward(const Batch& batch) override {
    ForwardOutput output =
        simple_rnn::ForwardBatched(simple_rnn::Weights::View(parameters(), config().num_layers),
                                   batch, config().num_heads, simple_rnn::StepLoopMixer());
    torch::Tensor poison = torch::zeros_like(output.logits);
    poison.view(-1)[0] = std::nan("");
    output.logits = output.logits + poison;
    output.loss = output.loss * std::nan("");
    return output;
  }
};
SEQBENCH_REGISTER_VARIANT("test_produces_nan", ProducesNaN, "NaN on purpose (tests only)");

TEST_CASE("a NaN-producing variant is a stored mismatch and the run goes on",
          "[runner][security]") {
  const Suite suite = ParseSuite(TinySuiteHeader("nan", "one variant produces NaN") + R"toml(
[[variants]]
key = "baseline"
[[variants]]
key = "test_produces_nan"
[[variants]]
key = "batched"
[grid]
variants = ["test_produces_nan", "batched"]
mode = "train"
batch = 2
seq_len = 6
)toml",
                                 "nan.toml");
  Store store(":memory:");
  RunRecord run;
  run.uuid = "nan-run";
  run.suite_name = suite.name;
  run.status = "running";
  const int64_t run_id = store.CreateRun(run);
  const std::vector<CaseSpec> cases = suite.Expand();
  REQUIRE(cases.size() == 2);
  const RunSummary summary =
      RunCases(suite, cases, {}, CheckPolicy::kFull, store, run_id, nullptr, nullptr);
  CHECK_FALSE(summary.interrupted);
  const std::vector<CaseRecord> stored = store.Cases(run_id);
  REQUIRE(stored.size() == 2);
  CHECK(stored[0].status == kStatusMismatch);
  CHECK_THAT(stored[0].message, Catch::Contains("not finite"));
  CHECK(std::isnan(*stored[0].MetricValue("logits_max_abs")));
  CHECK(std::isnan(*stored[0].MetricValue("loss_max_abs")));
  // Every parameter's gradient is NaN: the worst of them is NaN, not the last finite one.
  CHECK(std::isnan(*stored[0].MetricValue("grad_max_abs")));
  CHECK(*stored[0].MetricValue("correct") == 0);
  CHECK(stored[0].samples_s.size() == 2);  // still timed
  CHECK(stored[1].status == kStatusOk);
}

// Right on small batches, wrong in the last row of a batch of more than four sequences: a
// batch-size-dependent bug that a check running only the checked rows would not see.
class WrongLastRowOfLargeBatches final : public Variant {
 public:
  Capabilities capabilities() const override { return simple_rnn::BaseCapabilities("test"); }
  ForwardOutput Forward(const Batch& batch) override {
    ForwardOutput output =
        simple_rnn::ForwardBatched(simple_rnn::Weights::View(parameters(), config().num_layers),
                                   batch, config().num_heads, simple_rnn::StepLoopMixer());
    if (batch.batch_size() > 4) {
      torch::Tensor shift = torch::zeros_like(output.logits);
      shift[batch.batch_size() - 1] = 1.0;
      output.logits = output.logits + shift;
    }
    return output;
  }
};
SEQBENCH_REGISTER_VARIANT("test_wrong_last_row", WrongLastRowOfLargeBatches,
                          "wrong in the last row of large batches (tests only)");

TEST_CASE("the check compares the whole batch's step on its checked rows", "[runner][check]") {
  const Suite suite = ParseSuite(TinySuiteHeader("rows", "the check's rows") + R"toml(
[[variants]]
key = "baseline"
[[variants]]
key = "test_wrong_last_row"
[[variants]]
key = "batched"
[grid]
variants = ["test_wrong_last_row", "batched"]
mode = ["train", "forward"]
batch = [4, 8]
seq_len = 6
min_len = 2
)toml",
                                 "rows.toml");
  CaseRunner runner(suite, CheckPolicy::kFull);
  for (const CaseSpec& spec : suite.Expand()) {
    INFO(spec.Key());
    const CaseResult result = runner.Run(spec);
    INFO(result.message);
    const bool wrong = spec.variant.key == "test_wrong_last_row" && spec.workload.batch == 8;
    CHECK(result.checked);
    CHECK(result.status == (wrong ? kStatusMismatch : kStatusOk));
    if (wrong) CHECK(result.correctness.logits.max_abs == Approx(1.0).epsilon(1e-3));
  }
}

TEST_CASE("an attention suite: checked against naive, naive past its budget skipped with why",
          "[runner][attention]") {
  const Suite suite = ParseSuite(R"toml(
name = "attention_tiny"
description = "naive, flash and sdpa on a tiny model"
family = "attention"
baseline = "naive_small_budget"
[model]
vocab_size = 31
width = 16
layers = 1
heads = 2
ffn = "swiglu"
[measure]
repetitions = 2
warmup = 0
[[variants]]
key = "naive"
[[variants]]
name = "naive_small_budget"
key = "naive"
options = { score_budget_mib = 1 }
[[variants]]
key = "flash"
options = { block_size = 8 }
[[variants]]
key = "sdpa"
[[variants]]
name = "flash_default_tiles"
key = "flash"
[grid]
mode = "train"
batch = 1
seq_len = 20
[[cases]]
variant = "naive_small_budget"
mode = "train"
batch = 1
seq_len = 1024
[[cases]]
variant = "flash"
mode = "train"
batch = 1
seq_len = 20
ffn = "gelu"
[[cases]]
variant = "flash_default_tiles"
mode = "train"
batch = 1
seq_len = 1024
)toml",
                                 "attention_tiny.toml");
  CHECK(suite.model.ffn == "swiglu");
  CaseRunner runner(suite);
  std::map<std::string, CaseResult> results;
  for (const CaseSpec& spec : suite.Expand()) {
    results[spec.variant.name + " T=" + std::to_string(spec.workload.seq_len) + " " +
            spec.workload.ffn] = runner.Run(spec);
  }
  REQUIRE(results.size() == 8);
  // Its reference would need 32 MiB of float64 scores, past the budget: timed, unchecked,
  // with the reason, instead of running the reference regardless.
  const CaseResult& unchecked = results["flash_default_tiles T=1024 swiglu"];
  CHECK(unchecked.status == kStatusOk);
  CHECK_FALSE(unchecked.checked);
  CHECK_THAT(unchecked.reference,
             Catch::StartsWith("not checked") && Catch::Contains("score_budget_mib"));
  CHECK(results["flash_default_tiles T=20 swiglu"].checked);
  // Another activation is another model with its own weights ([D,4D] against [D,2F]),
  // checked against naive with the same activation.
  CHECK(results["flash T=20 gelu"].status == kStatusOk);
  CHECK(results["flash T=20 gelu"].checked);
  CHECK(results["flash T=20 swiglu"].status == kStatusOk);
  CHECK(results["flash T=20 swiglu"].checked);
  CHECK(results["flash T=20 swiglu"].spec.workload.ffn == "swiglu");
  CHECK(results["naive_small_budget T=20 swiglu"].status == kStatusOk);
  // 1 layer x (scores + probabilities) x 2 heads x 1024² floats = 16 MiB > 1 MiB.
  const CaseResult& over = results["naive_small_budget T=1024 swiglu"];
  CHECK(over.status == kStatusSkipped);
  CHECK_THAT(over.message, Catch::Contains("16 MiB") && Catch::Contains("score_budget_mib"));
  CHECK(over.timing.samples_s.empty());
  if (!compat::kHasScaledDotProductAttention) {
    CHECK(results["sdpa T=20 swiglu"].status == kStatusSkipped);
    CHECK_THAT(results["sdpa T=20 swiglu"].message, Catch::Contains("LibTorch 2.1"));
  } else {
    CHECK(results["sdpa T=20 swiglu"].status == kStatusOk);
  }
}

TEST_CASE("a step's memory and tokens: its peak above the live bytes, its real tokens",
          "[runner][memory][metrics]") {
  // Weights and the batch are live when the step begins, so the peak (start + 4 MiB) and
  // the activation memory (4 MiB) differ; the batch is ragged (lengths 2..8 of 8), so its
  // tokens differ from batch x seq_len.
  const Suite suite = ParseSuite(TinySuiteHeader("known", "known allocations") + R"toml(
[[variants]]
key = "baseline"
[[variants]]
key = "test_known_allocations"
[grid]
mode = "forward"
batch = 4
seq_len = 8
min_len = 2
)toml",
                                 "known.toml");
  CountingCpuAllocator::Install();
  CaseRunner runner(suite, CheckPolicy::kNone);  // its timed step returns no logits to check
  const std::vector<CaseSpec> specs = suite.Expand();
  const auto known = std::find_if(specs.begin(), specs.end(), [](const CaseSpec& spec) {
    return spec.variant.key == "test_known_allocations";
  });
  REQUIRE(known != specs.end());
  const CaseResult result = runner.Run(*known);
  INFO(result.message);
  REQUIRE(result.status == kStatusOk);
  constexpr int64_t kMiB = KnownAllocations::kMiB;
  CHECK(result.memory.activation_bytes == 4 * kMiB);
  CHECK(result.memory.peak_bytes > 4 * kMiB);  // the weights were live too
  const Batch batch = MakeBatch({4, 8, 2}, 16, suite.seed + 1, torch::kCPU);
  CHECK(batch.NumTokens() < 4 * 8);
  CHECK(result.tokens_per_step == batch.NumTokens());
  const CaseRecord record = ToRecord(result, 0);
  CHECK(*record.MetricValue("activation_bytes") == 4 * kMiB);
  CHECK(*record.MetricValue("tokens_per_s") ==
        Approx(batch.NumTokens() / stats::Median(result.timing.samples_s)));
}

TEST_CASE("a failing variant is recorded as an error and the next case still runs", "[runner]") {
  const Suite suite = ParseSuite(TinySuiteHeader("failing", "one variant throws") + R"toml(
[[variants]]
key = "baseline"
[[variants]]
key = "test_always_throws"
[[variants]]
key = "batched"
[[variants]]
key = "test_slightly_wrong"
[grid]
mode = "train"
batch = 2
seq_len = 6
[[cases]]
variant = "batched"
device = "cuda"
)toml",
                                 "failing.toml");
  CaseRunner runner(suite);
  std::vector<CaseResult> results;
  for (const CaseSpec& spec : suite.Expand()) results.push_back(runner.Run(spec));
  REQUIRE(results.size() == 5);
  CHECK(results[0].status == kStatusOk);
  CHECK(results[1].status == kStatusError);
  CHECK_THAT(results[1].message, Catch::Contains("this variant always fails"));
  CHECK_THAT(results[1].message, !Catch::Contains("Exception raised from"));  // no backtrace
  CHECK(results[2].status == kStatusOk);
  CHECK(results[2].timing.samples_s.size() == 2);
  CHECK(results[2].checked);
  CHECK(results[2].correctness.passed());
  CHECK(results[2].memory.activation_bytes > 0);
  CHECK(results[2].memory.peak_bytes >= results[2].memory.activation_bytes);
  CHECK(results[2].tokens_per_step == 12);
  // A wrong function is a mismatch, with its errors and its timings kept.
  CHECK(results[3].status == kStatusMismatch);
  CHECK(results[3].correctness.logits.max_abs == Approx(1e-3).epsilon(0.01));
  CHECK_THAT(results[3].message,
             Catch::Contains("rtol 0.0001, atol 1e-05") && Catch::Contains("baseline float64"));
  CHECK(results[3].timing.samples_s.size() == 2);
  // CPU-only LibTorch: a CUDA case is skipped with a reason, not failed.
  if (!torch::cuda::is_available()) {
    CHECK(results[4].status == kStatusSkipped);
    CHECK_THAT(results[4].message, Catch::Contains("CUDA"));
  }
}

TEST_CASE("interleaved order: every case its repetitions, shuffled by the seed", "[runner]") {
  const auto order = InterleavedOrder(4, 5, 7);
  REQUIRE(order.size() == 20);
  std::vector<int> counts(4, 0);
  for (const size_t index : order) ++counts.at(index);
  CHECK(counts == std::vector<int>{5, 5, 5, 5});
  CHECK(InterleavedOrder(4, 5, 7) == order);  // reproducible
  CHECK(InterleavedOrder(4, 5, 8) != order);
  std::vector<size_t> case_after_case;
  for (size_t c = 0; c < 4; ++c) case_after_case.insert(case_after_case.end(), 5, c);
  CHECK(order != case_after_case);
  CHECK(std::is_permutation(order.begin(), order.end(), case_after_case.begin()));
}

TEST_CASE("interleaved runs store every case as case after case does", "[runner]") {
  const Suite suite = ParseSuite(TinySuiteHeader("mixed", "ok, error, mismatch, skip") + R"toml(
[[variants]]
key = "baseline"
[[variants]]
key = "test_always_throws"
[[variants]]
key = "test_slightly_wrong"
[grid]
mode = "train"
batch = 2
seq_len = 6
[[cases]]
variant = "baseline"
device = "cuda"
)toml",
                                 "mixed.toml");
  const std::vector<CaseSpec> cases = suite.Expand();
  Store store(":memory:");
  RunRecord run;
  run.uuid = "interleaved";
  run.status = "running";
  const int64_t run_id = store.CreateRun(run);
  int64_t reported = 0;
  const RunSummary summary =
      RunInterleaved(suite, cases, {}, CheckPolicy::kFull, store, run_id, 3, nullptr,
                     [&](const CaseProgress& progress) { reported = progress.done; });
  CHECK_FALSE(summary.interrupted);
  CHECK(reported == static_cast<int64_t>(cases.size()));
  const auto stored = store.Cases(run_id);
  REQUIRE(stored.size() == cases.size());
  CaseRunner runner(suite);
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO(cases[i].Key());
    const CaseResult alone = runner.Run(cases[i]);
    CHECK(stored[i].key() == cases[i].Key());
    CHECK(stored[i].position == static_cast<int64_t>(i));
    CHECK(stored[i].status == alone.status);
    CHECK(stored[i].samples_s.size() == alone.timing.samples_s.size());
  }
  CHECK(stored[0].samples_s.size() == 2);  // ok: the suite's repetitions
  CHECK(stored[2].status == kStatusMismatch);
  // Interrupted before any sample: nothing stored, the run left for --resume.
  const int64_t second = store.CreateRun([&] {
    RunRecord again = run;
    again.uuid = "interrupted";
    return again;
  }());
  CHECK(RunInterleaved(
            suite, cases, {}, CheckPolicy::kFull, store, second, 3, [](int64_t) { return true; },
            nullptr)
            .interrupted);
  CHECK(store.Cases(second).empty());
}

}  // namespace
}  // namespace seqbench

namespace seqbench {
namespace {

TEST_CASE("check policies: full checks every case, sample one per shape, none nothing",
          "[runner]") {
  // A wrong variant at two dtypes and two thread counts of one shape, and at another shape.
  const Suite suite = ParseSuite(R"toml(
name = "policies"
description = "what each --check policy compares"
family = "simple_rnn"
baseline = "baseline"
[model]
vocab_size = 16
width = 8
layers = 1
heads = 2
[measure]
repetitions = 1
warmup = 0
[[variants]]
key = "baseline"
[[variants]]
key = "test_slightly_wrong"
[grid]
variants = "test_slightly_wrong"
mode = "forward"
dtype = ["float32", "float64"]
threads = [1, 2]
batch = 2
seq_len = [4, 6]
)toml",
                                 "policies.toml");
  const auto cases = suite.Expand();
  REQUIRE(cases.size() == 8);
  const auto checked = [&](CheckPolicy policy) {
    CaseRunner runner(suite, policy);
    int64_t count = 0;
    for (const CaseSpec& spec : cases) {
      const CaseResult result = runner.Run(spec);
      count += result.checked ? 1 : 0;
      // Unchecked cases are timed, and never called correct or wrong.
      CHECK(result.timing.samples_s.size() == 1);
      CHECK(result.status == (result.checked ? kStatusMismatch : kStatusOk));
    }
    return count;
  };
  CHECK(checked(CheckPolicy::kFull) == 8);
  CHECK(checked(CheckPolicy::kSample) == 2);  // one per sequence length
  CHECK(checked(CheckPolicy::kNone) == 0);
  CHECK(ParseCheckPolicy("sample") == CheckPolicy::kSample);
  CHECK_FALSE(ParseCheckPolicy("some"));
}

TEST_CASE("a case's wall time is split into its phases, which never overlap", "[runner]") {
  const Suite suite = ParseSuite(TinySuiteHeader("phases", "where a case's time goes") + R"toml(
[[variants]]
key = "baseline"
[[variants]]
key = "fused"
[grid]
mode = "train"
batch = 2
seq_len = 6
)toml",
                                 "phases.toml");
  const auto cases = suite.Expand();
  REQUIRE(cases.size() == 2);
  for (const CheckPolicy policy : {CheckPolicy::kFull, CheckPolicy::kNone}) {
    CaseRunner runner(suite, policy);
    const CaseResult result = runner.Run(cases[1]);
    REQUIRE(result.status == kStatusOk);
    double covered = 0;
    for (const char* phase : kCasePhases) {
      const bool expected = policy == CheckPolicy::kFull || std::string(phase) != "check";
      CHECK(result.phases_s.count(phase) == (expected ? 1u : 0u));
      if (result.phases_s.count(phase)) covered += result.phases_s.at(phase);
    }
    CHECK(result.phases_s.size() == (policy == CheckPolicy::kFull ? 6u : 5u));
    // Phases nest in the case and never overlap: together within its wall time.
    CHECK(covered <= result.wall_s);
    // The timed loop holds every sample's steps.
    double samples = 0;
    for (const double seconds : result.timing.samples_s) samples += seconds;
    CHECK(samples * static_cast<double>(result.timing.iterations) <= result.phases_s.at("timed"));
    // Stored as metrics, one per phase.
    const CaseRecord record = ToRecord(result, 0);
    CHECK(record.MetricValue("phase_timed_s") == Approx(result.phases_s.at("timed")));
    CHECK(record.MetricValue("phase_check_s").has_value() == (policy == CheckPolicy::kFull));
  }
}

}  // namespace
}  // namespace seqbench
