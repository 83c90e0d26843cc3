// Roofline accounting: the families' step costs count what their models compute (checked
// against parameter counts read off the initialised weights and against GEMM shapes
// counted by hand), each variant states the work its own step does, and the machine
// limits a run stores are measured.
#include "harness/roofline.h"

#include <catch2/catch.hpp>
#include <cmath>

#include "harness/environment.h"
#include "harness/threads.h"
#include "tests/test_support.h"
#include "variants/attention/model.h"
#include "variants/lstm/model.h"
#include "variants/min_gru/model.h"
#include "variants/min_lstm/model.h"
#include "variants/qrnn/model.h"
#include "variants/rhn/model.h"

namespace seqbench {
namespace {

double ParameterCount(const ModelConfig& config) {
  double count = 0;
  for (const auto& item : GlobalFamilies().Get(config.family).init_weights(config, 1)) {
    count += static_cast<double>(item.value().numel());
  }
  return count;
}

ModelConfig Tiny(const std::string& family) {
  ModelConfig config;
  config.family = family;
  config.vocab_size = 16;
  config.width = 8;
  config.num_layers = 1;
  config.num_heads = 2;  // dh = 4
  return config;
}

StepCost CostOf(const ModelConfig& config, const StepWork& work) {
  return GlobalFamilies().Get(config.family).step_cost(config, work);
}

TEST_CASE("family step costs count every parameter and every GEMM", "[roofline]") {
  for (const std::string family :
       {simple_rnn::kFamily, lstm::kFamily, attention::kFamily, qrnn::kFamily, min_gru::kFamily,
        min_lstm::kFamily, rhn::kFamily}) {
    INFO(family);
    for (const int64_t layers : {1, 3}) {
      ModelConfig config = Tiny(family);
      config.num_layers = layers;
      const double parameters = ParameterCount(config);
      // A train step over no positions is the SGD update alone: 2 FLOPs per parameter; its
      // bytes are the weights read, the gradients written, and the update's read and write.
      const StepCost update = CostOf(config, StepWork{Mode::kTrain, 0, 0, 0, 4});
      CHECK(update.flops == Approx(2 * parameters));
      CHECK(update.bytes == Approx(4 * 4 * parameters));
      const StepCost read = CostOf(config, StepWork{Mode::kGenerate, 0, 0, 0, 8});
      CHECK(read.bytes == Approx(8 * parameters));
    }
  }
  // One position, forward, by hand. simple_rnn (D=8, dh=4, V=16): 5 [8,8] projections
  // (q, k, v, g, o) = 5·2·64 = 640; per head S·diag(g) 16 + k·vᵀ 2·16 + Sᵀq 2·16 = 80, ×2
  // heads = 160; the head [8,16] = 256.
  const StepWork one{Mode::kForward, 1, 1, 0, 4};
  CHECK(CostOf(Tiny(simple_rnn::kFamily), one).flops == Approx(640 + 160 + 256));
  // lstm: x·W_ihᵀ and h·W_hhᵀ, each [8,32] = 512, and the head 256.
  CHECK(CostOf(Tiny(lstm::kFamily), one).flops == Approx(512 + 512 + 256));
  // qrnn: the convolution [16,24] = 768; min_gru: z, h, o [8,8] = 384; min_lstm: f, i, h, o
  // [8,8] = 512; each with the head's 256.
  CHECK(CostOf(Tiny(qrnn::kFamily), one).flops == Approx(768 + 256));
  CHECK(CostOf(Tiny(min_gru::kFamily), one).flops == Approx(384 + 256));
  CHECK(CostOf(Tiny(min_lstm::kFamily), one).flops == Approx(512 + 256));
  // rhn (kDepth = 3): the input's [8,16] = 256 and three recurrent [8,16] = 768.
  CHECK(CostOf(Tiny(rhn::kFamily), one).flops == Approx(256 + 3 * 256 + 256));
  // attention (gelu, F = 32): q, k, v, o [8,8] = 4·128 = 512; the feed-forward's [8,32]
  // and [32,8] = 2·512; the head 256; and 4·D = 32 per (query, key) pair attended.
  CHECK(CostOf(Tiny(attention::kFamily), one).flops == Approx(512 + 1024 + 256));
  StepWork attended = one;
  attended.attention_pairs = 3;
  CHECK(CostOf(Tiny(attention::kFamily), attended).flops == Approx(512 + 1024 + 256 + 3 * 32));
  // Train: attention's forward ×3, and the recomputed scores (q·k, 2·D a pair) once more.
  StepWork attended_train{Mode::kTrain, 1, 1, 0, 4};
  attended_train.attention_pairs = 3;
  const double train_without_recompute = CostOf(Tiny(attention::kFamily), attended_train).flops;
  attended_train.recomputed_pairs = 3;
  CHECK(CostOf(Tiny(attention::kFamily), attended_train).flops - train_without_recompute ==
        Approx(3 * 16));
  // Forward mode writes its logits: V floats per head position.
  const double parameters = ParameterCount(Tiny(simple_rnn::kFamily));
  CHECK(CostOf(Tiny(simple_rnn::kFamily), one).bytes == Approx(4 * parameters + 4 * 16));
  // Linear in positions; train is forward and a backward of twice its work, plus the update.
  const StepWork many{Mode::kForward, 10, 10, 0, 4};
  const ModelConfig config = Tiny(simple_rnn::kFamily);
  CHECK(CostOf(config, many).flops == Approx(10 * CostOf(config, one).flops));
  const StepWork train{Mode::kTrain, 10, 10, 0, 4};
  CHECK(CostOf(config, train).flops == Approx(3 * CostOf(config, many).flops + 2 * parameters));
  // Recomputation adds one forward of the recurrence (160 per position here).
  const StepWork recomputing{Mode::kTrain, 10, 10, 10, 4};
  CHECK(CostOf(config, recomputing).flops - CostOf(config, train).flops == Approx(10 * 160));
}

TEST_CASE("the GEMM floor's FLOPs are the products alone, by hand", "[roofline]") {
  // One position, forward (Tiny: D=8, dh=4, V=16). simple_rnn: its 5 projections (640) and
  // the head (256), not the recurrence's 160.
  const StepWork one{Mode::kForward, 1, 1, 0, 4};
  CHECK(CostOf(Tiny(simple_rnn::kFamily), one).gemm_flops == Approx(640 + 256));
  // Every FLOP of the lstm, qrnn, min_gru and min_lstm layers is a product.
  for (const std::string family :
       {lstm::kFamily, qrnn::kFamily, min_gru::kFamily, min_lstm::kFamily, rhn::kFamily}) {
    INFO(family);
    CHECK(CostOf(Tiny(family), one).gemm_flops == Approx(CostOf(Tiny(family), one).flops));
  }
  // attention: projections, feed-forward, head, and q·k, p·v (32 a pair).
  StepWork attended = one;
  attended.attention_pairs = 3;
  CHECK(CostOf(Tiny(attention::kFamily), attended).gemm_flops == Approx(512 + 1024 + 256 + 3 * 32));
  // Train: forward and backward's two products each (×3), not the SGD update's 2 a
  // parameter; recomputing simple_rnn's recurrence adds no product, the lstm's layer does
  // (1024 a position).
  const StepWork train{Mode::kTrain, 10, 10, 0, 4};
  const StepWork recomputing{Mode::kTrain, 10, 10, 10, 4};
  const ModelConfig rnn = Tiny(simple_rnn::kFamily);
  CHECK(CostOf(rnn, train).gemm_flops == Approx(3 * 10 * (640 + 256)));
  CHECK(CostOf(rnn, recomputing).gemm_flops == Approx(CostOf(rnn, train).gemm_flops));
  const ModelConfig lstm_config = Tiny(lstm::kFamily);
  CHECK(CostOf(lstm_config, recomputing).gemm_flops - CostOf(lstm_config, train).gemm_flops ==
        Approx(10 * 1024));
  // Generation's step is the same sums over the positions it runs.
  CHECK(CostOf(rnn, StepWork{Mode::kGenerate, 4, 4, 0, 4}).gemm_flops == Approx(4 * (640 + 256)));
}

TEST_CASE("each variant states the work of its own step", "[roofline]") {
  const ModelConfig config = testing::SmallSimpleRnn(/*layers=*/2, /*heads=*/3);
  const ParameterSet weights = simple_rnn::InitWeights(config, 5);
  // Ragged: padding positions separate the variants that compute them from those that do not.
  const Batch batch =
      MakeBatch({/*batch_size=*/4, /*max_length=*/12, /*min_length=*/5}, config.vocab_size, 3);
  REQUIRE(batch.NumTokens() < 4 * 12);
  const auto work = [&](const std::string& key, Mode mode, int64_t num_tokens = 0) {
    return testing::MakeVariant(key, config, weights, torch::kFloat32)
        ->Work(mode, batch, num_tokens);
  };
  const StepWork batched = work("batched", Mode::kTrain);
  CHECK(batched.positions == 4 * 12);
  CHECK(batched.head_positions == 4 * 12);
  CHECK(batched.recomputed_positions == 0);
  CHECK(batched.element_bytes == 4);
  for (const char* one_at_a_time : {"baseline", "fused"}) {
    INFO(one_at_a_time);
    CHECK(work(one_at_a_time, Mode::kTrain).positions == batch.NumTokens());
    CHECK(work(one_at_a_time, Mode::kForward).head_positions == batch.NumTokens());
  }
  const StepWork checkpointed = work("checkpointed", Mode::kTrain);
  // K = ceil(sqrt(12)) = 4: three segments, the last kept from forward, two recomputed.
  CHECK(checkpointed.recomputed_positions == 4 * 8);
  CHECK(work("checkpointed", Mode::kForward).recomputed_positions == 0);
  // fused_recurrent's products run on the padded grid, its kernel on real steps only
  // (recomputed in train); packed runs everything on real tokens.
  for (const char* key : {"fused_recurrent", "packed"}) {
    INFO(key);
    CHECK(work(key, Mode::kTrain).recomputed_positions == batch.NumTokens());
    CHECK(work(key, Mode::kForward).recomputed_positions == 0);
  }
  CHECK(work("fused_recurrent", Mode::kTrain).positions == 4 * 12);
  CHECK(work("packed", Mode::kTrain).positions == batch.NumTokens());
  CHECK(CostOf(config, checkpointed).flops > CostOf(config, batched).flops);
  // Generate 3 tokens after a prompt of 12: the default re-runs 12, 13 and 14 positions;
  // stepwise runs the prompt once and then one position per token after the first.
  const StepWork rerun = work("baseline", Mode::kGenerate, 3);
  CHECK(rerun.positions == 4 * (12 + 13 + 14));
  const StepWork incremental = work("stepwise", Mode::kGenerate, 3);
  CHECK(incremental.positions == 4 * (12 + 2));
  CHECK(incremental.head_positions == 4 * 3);
  CHECK(CostOf(config, incremental).flops < CostOf(config, rerun).flops);
  // float64 steps move twice the bytes.
  CHECK(testing::MakeVariant("batched", config, weights, torch::kFloat64)
            ->Work(Mode::kTrain, batch, 0)
            .element_bytes == 8);
}

TEST_CASE("machine limits: a product is 2n^3 FLOPs, a copy reads and writes its bytes",
          "[roofline]") {
  CHECK(GemmGflops(512, 1e-3) == Approx(268.435456));           // 2 * 512^3 / 1 ms
  CHECK(GemmGflops(4096, 0.5) == Approx(274.877906944));        // n^3 alone would be half
  CHECK(CopyGbs(int64_t{1} << 27, 0.1) == Approx(2.68435456));  // 2 * 128 MiB / 0.1 s
}

TEST_CASE("machine limits are measured per device, dtype and thread count", "[roofline]") {
  const int64_t threads_before = CurrentThreads().intra_op;
  const MachineLimits limits = MeasureMachineLimits(torch::kCPU, torch::kFloat32, 1);
  CHECK(std::isfinite(limits.gemm_gflops));
  CHECK(limits.gemm_gflops > 0);
  CHECK(std::isfinite(limits.stream_gbs));
  CHECK(limits.stream_gbs > 0);

  const auto spec = [](const std::string& device, const std::string& dtype, int64_t threads) {
    CaseSpec c;
    c.workload.device = device;
    c.workload.dtype = dtype;
    c.workload.threads = threads;
    return c;
  };
  std::vector<CaseSpec> cases = {spec("cpu", "float32", 1), spec("cpu", "float64", 1),
                                 spec("cpu", "float32", 1), spec("cpu", "float32", 2)};
  if (!torch::cuda::is_available()) cases.push_back(spec("cuda", "float32", 1));
  std::map<std::string, double> entries;
  for (const auto& [key, value] : MeasureLimitsFor(cases)) entries[key] = std::stod(value);
  // One GEMM rate per (device, dtype, threads), one bandwidth per (device, threads), and
  // nothing for a device this process cannot use.
  CHECK(entries.size() == 5);
  for (const std::string& key :
       {PeakGemmKey("cpu", "float32", 1), PeakGemmKey("cpu", "float64", 1),
        PeakGemmKey("cpu", "float32", 2), PeakStreamKey("cpu", 1), PeakStreamKey("cpu", 2)}) {
    INFO(key);
    REQUIRE(entries.count(key));
    CHECK(entries[key] > 0);
  }
  SetThreads(threads_before);
}

TEST_CASE("the machine limits are measured once per machine fingerprint", "[roofline]") {
  const int64_t threads_before = CurrentThreads().intra_op;
  CaseSpec spec;
  spec.workload.device = "cpu";
  spec.workload.dtype = "float32";
  spec.workload.threads = 1;
  const Environment now = CaptureEnvironment();
  // An earlier run on this machine, with planted limits no measurement gives.
  RunRecord earlier;
  earlier.run_id = 7;
  earlier.uuid = "u7";
  for (const std::string& key : LimitFingerprintKeys())
    earlier.environment.emplace_back(key, now.Get(key));
  earlier.environment.emplace_back(PeakGemmKey("cpu", "float32", 1), "123.25");
  earlier.environment.emplace_back(PeakStreamKey("cpu", 1), "4.5");
  const auto value = [](const std::vector<std::pair<std::string, std::string>>& entries,
                        const std::string& key) {
    for (const auto& [k, v] : entries)
      if (k == key) return v;
    return std::string();
  };
  const auto reused = LimitsFor({spec}, now, {earlier}, false);
  CHECK(value(reused, PeakGemmKey("cpu", "float32", 1)) == "123.25");
  CHECK(value(reused, PeakStreamKey("cpu", 1)) == "4.5");
  CHECK(value(reused, "machine_limits") == "from run 7 (u7, same machine fingerprint)");
  // Never an A/B side's limits: its two workers measured them at once.
  RunRecord ab_side = earlier;
  ab_side.environment.emplace_back("ab_side", "base");
  CHECK(value(LimitsFor({spec}, now, {ab_side}, false), "machine_limits") == "measured");
  // Asked to measure again; a run that lacks a limit this one needs; and each entry of the
  // fingerprint changed in turn (another BLAS core runs other GEMM kernels): measured.
  CHECK(value(LimitsFor({spec}, now, {earlier}, true), "machine_limits") == "measured");
  CaseSpec two_threads = spec;
  two_threads.workload.threads = 2;
  CHECK(value(LimitsFor({two_threads}, now, {earlier}, false), "machine_limits") == "measured");
  for (const std::string& key : LimitFingerprintKeys()) {
    RunRecord elsewhere = earlier;
    for (auto& [k, v] : elsewhere.environment)
      if (k == key) v += " (another)";
    INFO(key);
    const auto measured = LimitsFor({spec}, now, {elsewhere}, false);
    CHECK(value(measured, "machine_limits") == "measured");
    CHECK(value(measured, PeakGemmKey("cpu", "float32", 1)) != "123.25");
  }
  SetThreads(threads_before);
}

TEST_CASE("a run's end raises a limit its start measured low, never lowers one", "[roofline]") {
  RunRecord run;
  run.environment = {{"machine_limits", "measured"},
                     {PeakGemmKey("cpu", "float32", 2), "82"},
                     {PeakStreamKey("cpu", 2), "15.4"},
                     {PeakGemmKey("cpu", "float64", 2), "60"}};
  const auto raised = KeepHigherLimits(run, {{PeakGemmKey("cpu", "float32", 2), "131"},
                                             {PeakStreamKey("cpu", 2), "15.4"},
                                             {PeakGemmKey("cpu", "float64", 2), "59.9"}});
  // Only the higher one is replaced; an equal or lower one stays as the start measured it.
  REQUIRE(raised.size() == 2);
  CHECK(raised[0] == std::make_pair(PeakGemmKey("cpu", "float32", 2), std::string("131")));
  CHECK(raised[1].first == "machine_limits");
  CHECK(raised[1].second.rfind("measured; measured higher after the last case: ", 0) == 0);
  CHECK(raised[1].second.find("82 -> 131") != std::string::npos);
  // Nothing higher: nothing to store, not even the note.
  CHECK(KeepHigherLimits(run, {{PeakGemmKey("cpu", "float32", 2), "82"}}).empty());
  // A limit the start did not store (another condition) is not invented at the end.
  CHECK(KeepHigherLimits(run, {{PeakGemmKey("cpu", "float32", 1), "999"}}).empty());
}

}  // namespace
}  // namespace seqbench
