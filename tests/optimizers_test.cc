// Our optimizers against torch::optim::AdamW. 8-bit AdamW: the dynamic code, block-wise
// quantisation against a brute-force reference, the update, the state's size, and
// checkpoints. Offloaded AdamW: the host update, its bytes, checkpoints, and where the
// pipeline skips it.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <random>
#include <vector>

#include "harness/training/adamw_8bit.h"
#include "harness/training/offloaded_adamw.h"
#include "harness/training/pipeline.h"
#include "harness/training/trainer.h"
#include "tests/test_support.h"

namespace seqbench::training {
namespace {

std::vector<float> Values(const torch::Tensor& tensor) {
  const torch::Tensor flat = tensor.contiguous().to(torch::kFloat32).view(-1);
  return std::vector<float>(flat.data_ptr<float>(), flat.data_ptr<float>() + flat.numel());
}

// Magnitudes spread log-uniformly over `decades` decades below 1, with either sign.
torch::Tensor SpreadValues(int64_t n, uint64_t seed, bool non_negative, double decades = 8) {
  std::mt19937_64 generator(seed);
  std::uniform_real_distribution<double> exponent(-decades, 0);
  std::bernoulli_distribution negative(non_negative ? 0.0 : 0.5);
  std::vector<float> values(n);
  for (auto& value : values) {
    value =
        static_cast<float>(std::pow(10.0, exponent(generator)) * (negative(generator) ? -1 : 1));
  }
  return torch::tensor(values);
}

// A least-squares problem y = x·W*ᵀ + noise (loss floor 1e-4) whose weight is large enough (8192
// elements) to be stored in 8 bits, and a small bias that stays in float32.
struct ToyProblem {
  torch::Tensor inputs, targets;
  explicit ToyProblem(uint64_t seed) {
    torch::manual_seed(seed);
    inputs = torch::randn({256, 64});
    targets = inputs.matmul(0.1 * torch::randn({128, 64}).t()) + 0.01 * torch::randn({256, 128});
  }
  torch::Tensor Loss(const torch::Tensor& weight, const torch::Tensor& bias) const {
    return (inputs.matmul(weight.t()) + bias - targets).pow(2).mean();
  }
};

// Runs `steps` of `optimizer` on the toy problem from fixed weights; returns {weight, bias}.
template <typename MakeOptimizer>
std::vector<torch::Tensor> Train(const ToyProblem& problem, int steps, MakeOptimizer make) {
  torch::manual_seed(99);
  torch::Tensor weight = (0.1 * torch::randn({128, 64})).requires_grad_();
  torch::Tensor bias = torch::zeros({128}).requires_grad_();
  std::vector<torch::optim::OptimizerParamGroup> groups;
  torch::optim::AdamWOptions decayed(1e-2);
  decayed.weight_decay(0.01);
  torch::optim::AdamWOptions not_decayed(1e-2);
  not_decayed.weight_decay(0);
  groups.emplace_back(std::vector<torch::Tensor>{weight},
                      std::make_unique<torch::optim::AdamWOptions>(decayed));
  groups.emplace_back(std::vector<torch::Tensor>{bias},
                      std::make_unique<torch::optim::AdamWOptions>(not_decayed));
  auto optimizer = make(std::move(groups));
  for (int i = 0; i < steps; ++i) {
    optimizer->zero_grad();
    problem.Loss(weight, bias).backward();
    optimizer->step();
  }
  return {weight.detach().clone(), bias.detach().clone()};
}

// 80 training and 16 validation samples of 8 to 40 random bytes.
void RandomSamples(Samples& train, Samples& validation) {
  std::mt19937_64 generator(11);
  train.resize(80);
  validation.resize(16);
  std::uniform_int_distribution<int64_t> byte(0, 255), length(8, 40);
  for (auto* samples : {&train, &validation}) {
    for (auto& sample : *samples) {
      sample.resize(length(generator));
      for (auto& token : sample) token = byte(generator);
    }
  }
}

// A checkpoint of `config` taken after 4 steps resumes with the same next 3 losses, bit
// for bit, and is refused under `other` (another optimizer: another configuration).
void CheckResumeUnder(const TrainingConfig& config, const TrainingConfig& other,
                      const Samples& train, const Samples& validation) {
  // One file per process: ctest -j runs this file's test cases at once.
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("seqbench_optimizers_test_" + std::to_string(getpid()) + ".pt"))
                               .string();
  const auto losses = testing::StepAcrossResume(config, train, validation, path, 4, 7);
  CHECK(losses.loaded_step == 4);
  CHECK(losses.resumed == losses.straight);
  Trainer other_trainer(other, train, validation);
  CHECK_THROWS_WITH(other_trainer.Load(path), Catch::Contains("different training configuration"));
  std::filesystem::remove(path);
}

}  // namespace

TEST_CASE("the dynamic codes: 256 sorted values, dense near zero", "[adamw8bit]") {
  for (const bool is_signed : {true, false}) {
    INFO("signed " << is_signed);
    const std::vector<float> code = Values(DynamicQuantizationCode(is_signed));
    REQUIRE(code.size() == 256);
    for (size_t i = 1; i < code.size(); ++i) CHECK(code[i - 1] < code[i]);
    CHECK(code.back() == 1.0F);
    CHECK(std::count(code.begin(), code.end(), 0.0F) == 1);
    CHECK(code.front() == (is_signed ? Approx(-(0.9859375 + 1) / 2) : Approx(0.0)));
    // Every decade from 1e-6 to 1 has values: 2^i of them (signed) or 2^(i+1) (unsigned),
    // so that a moment 10^6 below its block's largest is still told from zero.
    for (int decade = 0; decade < 7; ++decade) {
      const double low = 0.1 * std::pow(10.0, decade - 6), high = std::pow(10.0, decade - 6);
      const auto positives =
          std::count_if(code.begin(), code.end(), [&](float v) { return v >= low && v < high; });
      CHECK(positives == (is_signed ? 1 << decade : 2 << decade));
    }
  }
}

TEST_CASE("block-wise quantisation picks the nearest code value of each block's scale",
          "[adamw8bit]") {
  for (const bool is_signed : {true, false}) {
    INFO("signed " << is_signed);
    const torch::Tensor code_tensor = DynamicQuantizationCode(is_signed);
    const std::vector<float> code = Values(code_tensor);
    // 2.5 blocks, the third block's tail short; block 1 all zeros.
    const int64_t n = 2 * kQuantizationBlock + kQuantizationBlock / 2;
    torch::Tensor values = SpreadValues(n, 3, /*non_negative=*/!is_signed);
    values.slice(0, kQuantizationBlock, 2 * kQuantizationBlock).zero_();
    const BlockQuantized quantized = QuantizeBlockwise(values, code_tensor);
    REQUIRE(quantized.indices.scalar_type() == torch::kUInt8);
    REQUIRE(quantized.absmax.numel() == 3);
    // The tensor operations (CUDA's form) pick the same indices as the C++ loop.
    BlockQuantized with_tensor_ops{torch::empty_like(quantized.indices),
                                   torch::empty_like(quantized.absmax)};
    QuantizeBlockwiseWithTensorOps(values, code_tensor, with_tensor_ops);
    CHECK(torch::equal(with_tensor_ops.indices, quantized.indices));
    CHECK(torch::equal(with_tensor_ops.absmax, quantized.absmax));
    const std::vector<float> x = Values(values),
                             restored = Values(DequantizeBlockwise(quantized, code_tensor));
    const std::vector<float> absmax = Values(quantized.absmax);
    const torch::Tensor indices = quantized.indices.to(torch::kLong);
    for (int64_t block = 0; block < 3; ++block) {
      // The reference: the block's largest magnitude, by a plain loop.
      float largest = 0;
      const int64_t begin = block * kQuantizationBlock;
      const int64_t end = std::min(n, begin + kQuantizationBlock);
      for (int64_t i = begin; i < end; ++i) largest = std::max(largest, std::abs(x[i]));
      CHECK(absmax[block] == largest);
      for (int64_t i = begin; i < end; ++i) {
        if (largest == 0) {
          CHECK(restored[i] == 0.0F);
          continue;
        }
        const double normalized = static_cast<double>(x[i]) / largest;
        double nearest = 1e9;
        for (const float value : code) nearest = std::min(nearest, std::abs(value - normalized));
        const double chosen = code[indices[i].item<int64_t>()];
        INFO("element " << i << " = " << x[i]);
        // Nearest to within float32's rounding of the division.
        CHECK(std::abs(chosen - normalized) <= nearest + 1e-7);
        // A round trip within half a quantisation step: half the gap between the two code
        // values around the element, at the block's scale.
        // Beyond the code's ends (the signed code's lowest value is -0.993, not -1) the
        // nearest value is the bound.
        const auto above = std::lower_bound(code.begin(), code.end(), normalized);
        const double bound = above == code.begin() || above == code.end()
                                 ? nearest
                                 : (static_cast<double>(*above) - *(above - 1)) / 2;
        CHECK(std::abs(restored[i] - x[i]) <= (bound + 1e-7) * largest);
      }
    }
  }
}

TEST_CASE("with float32 moments the update is torch's AdamW, bit for bit", "[adamw8bit]") {
  const ToyProblem problem(1);
  const auto reference = Train(problem, 30, [](auto groups) {
    return std::make_unique<torch::optim::AdamW>(std::move(groups),
                                                 torch::optim::AdamWOptions(1e-2));
  });
  AdamW8bitOptions float32_moments;
  float32_moments.min_8bit_elements = int64_t{1} << 40;  // no tensor is large enough
  const auto same = Train(problem, 30, [&](auto groups) {
    return std::make_unique<AdamW8bit>(std::move(groups), torch::optim::AdamWOptions(1e-2),
                                       float32_moments);
  });
  CHECK(torch::equal(same[0], reference[0]));
  CHECK(torch::equal(same[1], reference[1]));
}

TEST_CASE("8-bit moments stay close to float32 AdamW over 100 steps", "[adamw8bit]") {
  const ToyProblem problem(2);
  const auto make_adamw = [](auto groups) {
    return std::make_unique<torch::optim::AdamW>(std::move(groups),
                                                 torch::optim::AdamWOptions(1e-2));
  };
  const auto make_8bit = [](AdamW8bitOptions options) {
    return [options](auto groups) {
      return std::make_unique<AdamW8bit>(std::move(groups), torch::optim::AdamWOptions(1e-2),
                                         options);
    };
  };
  torch::manual_seed(99);
  const torch::Tensor start = 0.1 * torch::randn({128, 64});
  AdamW8bitOptions fused;       // the C++ pass per block
  AdamW8bitOptions tensor_ops;  // what CUDA runs
  tensor_ops.fused_cpu = false;
  tensor_ops.blocks_per_chunk = 3;  // 4 blocks: a chunk boundary and a short last chunk
  for (const AdamW8bitOptions& options : {fused, tensor_ops}) {
    INFO((options.fused_cpu ? "fused" : "tensor operations"));
    // How far the 8-bit weight ends from fp32's, against the distance fp32's travelled.
    // Early (10 steps, where the bias corrections matter most) and late (100 steps, near
    // the loss floor). Measured: 2.4% and 0.3%. A second-moment bias correction left out
    // measures 134% at 10 steps; a linear code instead of the dynamic one diverges.
    const auto relative_distance = [&](int steps) {
      const auto reference = Train(problem, steps, make_adamw);
      const auto eight_bit = Train(problem, steps, make_8bit(options));
      return (eight_bit[0] - reference[0]).norm().item<double>() /
             (reference[0] - start).norm().item<double>();
    };
    CHECK(relative_distance(10) < 0.1);
    CHECK(relative_distance(100) < 0.02);
    const auto reference = Train(problem, 100, make_adamw);
    const auto eight_bit = Train(problem, 100, make_8bit(options));
    // The same loss at the end: within 1% of the drop (measured 3e-6 of it).
    const double start_loss = problem.Loss(start, torch::zeros({128})).item<double>();
    const double reference_loss = problem.Loss(reference[0], reference[1]).item<double>();
    const double eight_bit_loss = problem.Loss(eight_bit[0], eight_bit[1]).item<double>();
    INFO("loss from " << start_loss << " to " << reference_loss << " (fp32), " << eight_bit_loss
                      << " (8-bit)");
    CHECK(std::abs(eight_bit_loss - reference_loss) < 0.01 * (start_loss - reference_loss));
    // Quantised for real: the paths are not the same.
    CHECK_FALSE(torch::equal(eight_bit[0], reference[0]));
  }
  // Chunks of blocks are bookkeeping: one chunk or many, the same numbers.
  AdamW8bitOptions one_chunk = tensor_ops;
  one_chunk.blocks_per_chunk = 64;
  CHECK(torch::equal(Train(problem, 100, make_8bit(one_chunk))[0],
                     Train(problem, 100, make_8bit(tensor_ops))[0]));
}

TEST_CASE("the C++ pass per block and the tensor operations take the same steps", "[adamw8bit]") {
  // One parameter of 4 blocks under fixed gradients spread over three decades (wider, and
  // a moment whose square underflows the code while it does not takes a step of
  // lr·m/eps, as in bitsandbytes, which would swamp the comparison), with a
  // weight decay (0.1) large enough to show in one step. Two forms of one arithmetic
  // differ by rounding only; over more steps a rounding difference may move a moment to
  // the neighbouring code value, so the bound grows with the steps.
  const int64_t n = 4 * kQuantizationBlock;
  const auto run = [&](bool fused_cpu, int steps) {
    torch::manual_seed(5);
    torch::Tensor parameter = torch::randn({n}).requires_grad_();
    torch::optim::AdamWOptions defaults(1e-2);
    defaults.weight_decay(0.1);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(std::vector<torch::Tensor>{parameter},
                        std::make_unique<torch::optim::AdamWOptions>(defaults));
    AdamW8bitOptions options;
    options.fused_cpu = fused_cpu;
    AdamW8bit optimizer(std::move(groups), defaults, options);
    for (int step = 0; step < steps; ++step) {
      parameter.mutable_grad() = SpreadValues(n, 20 + step, /*non_negative=*/false, 3);
      optimizer.step();
    }
    return parameter.detach().clone();
  };
  torch::manual_seed(5);
  const torch::Tensor start = torch::randn({n});
  for (const auto& [steps, bound] : std::vector<std::pair<int, double>>{{1, 1e-5}, {3, 1e-3}}) {
    const torch::Tensor fused = run(true, steps), tensor_ops = run(false, steps);
    const double apart = (fused - tensor_ops).norm().item<double>();
    const double travelled = (tensor_ops - start).norm().item<double>();
    INFO(steps << " steps: the forms " << apart << " apart, " << travelled << " travelled");
    CHECK(apart < bound * travelled);
  }
}

TEST_CASE("8-bit AdamW's state is a quarter of AdamW's, and checkpoints resume it", "[adamw8bit]") {
  Samples train, validation;
  RandomSamples(train, validation);
  TrainingConfig adamw = testing::SmallTrainingConfig();
  adamw.model.width = 64;  // 260 × 64 embedding, 64 × 64 projections: 4096+ elements each
  TrainingConfig eight_bit = adamw;
  eight_bit.optimizer = OptimizerKind::kAdamW8bit;
  Trainer fp32_trainer(adamw, train, validation);
  Trainer eight_bit_trainer(eight_bit, train, validation);
  CHECK(eight_bit_trainer.optimizer_state_bytes() == 0);  // moments come with the first step
  fp32_trainer.Step();
  eight_bit_trainer.Step();
  // The expected sizes, parameter by parameter: 8 bytes per element for AdamW; for 8 bits,
  // 2 bytes per element plus two float32 scales per block, or 8 below 4096 elements.
  int64_t expected_fp32 = 0, expected_8bit = 0;
  for (const auto& parameter : fp32_trainer.variant().parameters().values()) {
    const int64_t n = parameter.numel();
    expected_fp32 += 8 * n;
    expected_8bit += n >= 4096 ? 2 * n + 8 * ((n + 2047) / 2048) : 8 * n;
  }
  CHECK(fp32_trainer.optimizer_state_bytes() == expected_fp32);
  CHECK(eight_bit_trainer.optimizer_state_bytes() == expected_8bit);
  const double ratio = static_cast<double>(eight_bit_trainer.optimizer_state_bytes()) /
                       static_cast<double>(fp32_trainer.optimizer_state_bytes());
  INFO("8-bit / fp32 state: " << ratio);
  CHECK(ratio < 0.3);

  // The 8-bit state round-trips.
  CheckResumeUnder(eight_bit, adamw, train, validation);
}

TEST_CASE("offloaded AdamW takes torch's AdamW steps from its host copies", "[offload]") {
  // The host pass fuses AdamW's tensor operations into one loop, so the two agree to
  // rounding: measured 7e-7 apart after 100 steps that travelled 12.7. Planted: the bias
  // corrections of step 1 at every step put them 0.14 apart; the updated master copy not
  // written back, 12.7 (the parameter never moves).
  const ToyProblem problem(3);
  torch::manual_seed(99);
  const torch::Tensor start = 0.1 * torch::randn({128, 64});
  const auto reference = Train(problem, 100, [](auto groups) {
    return std::make_unique<torch::optim::AdamW>(std::move(groups),
                                                 torch::optim::AdamWOptions(1e-2));
  });
  const auto host = Train(problem, 100, [](auto groups) {
    return std::make_unique<OffloadedAdamW>(std::move(groups), torch::optim::AdamWOptions(1e-2));
  });
  const double apart = (host[0] - reference[0]).norm().item<double>();
  const double travelled = (reference[0] - start).norm().item<double>();
  INFO("weight " << apart << " from AdamW's after travelling " << travelled);
  CHECK(apart <= 1e-5 * travelled);
  // The bias from zero. Relative to its net travel failed on LibTorch 2.11 (1.40e-7 apart
  // after 0.0131; ci/gpu/README.md, fourth lease), whose AdamW rounds in another order: the
  // bias oscillates about zero, so rounding accumulates along a path far longer than its
  // net travel. Adam moves a component about lr a step at most, so the path is at most
  // lr * steps * sqrt(numel) long (8 here); the two may differ by a millionth of that.
  const double bias_apart = (host[1] - reference[1]).norm().item<double>();
  const double bias_travelled = reference[1].norm().item<double>();
  const double bias_path = 1e-2 * 100 * std::sqrt(static_cast<double>(reference[1].numel()));
  INFO("bias " << bias_apart << " from AdamW's after travelling " << bias_travelled
               << " net, at most " << bias_path << " along its path");
  CHECK(bias_apart <= 1e-6 * bias_path);
  CHECK(bias_travelled > 0.01);
}

TEST_CASE("offloaded AdamW in the trainer: AdamW's losses, its bytes, and a resume", "[offload]") {
  Samples train, validation;
  RandomSamples(train, validation);
  TrainingConfig adamw = testing::SmallTrainingConfig();
  TrainingConfig offload = adamw;
  offload.offload_optimizer = true;
  Trainer adamw_trainer(adamw, train, validation);
  Trainer offload_trainer(offload, train, validation);
  CHECK(offload_trainer.optimizer_state_bytes() == 0);  // moments come with the first step
  for (int step = 0; step < 6; ++step) {
    const double expected = adamw_trainer.Step().loss;
    INFO("step " << step + 1);
    CHECK(offload_trainer.Step().loss == Approx(expected).epsilon(1e-5));
  }
  // The moments are AdamW's 8 bytes per element, on the host; the master copies and the
  // gradients' staging add 8 more.
  int64_t elements = 0;
  for (const auto& parameter : adamw_trainer.variant().parameters().values()) {
    elements += parameter.numel();
  }
  CHECK(offload_trainer.optimizer_state_bytes() == adamw_trainer.optimizer_state_bytes());
  CHECK(offload_trainer.optimizer_state_bytes() == 8 * elements);
  const auto& optimizer = dynamic_cast<const OffloadedAdamW&>(offload_trainer.optimizer());
  CHECK(optimizer.HostBytes() == 16 * elements);

  // The moments round-trip, and the master copies are taken from the loaded parameters.
  CheckResumeUnder(offload, adamw, train, validation);

  TrainingConfig eight_bit = offload;
  eight_bit.optimizer = OptimizerKind::kAdamW8bit;
  CHECK_THROWS_WITH(Trainer(eight_bit, train, validation), Catch::Contains("does not combine"));
}

TEST_CASE("a pipeline is skipped where it cannot be measured, with the reason", "[offload]") {
  TrainingConfig config = testing::SmallTrainingConfig();
  CHECK(PipelineSkipReason(config).empty());
  config.offload_optimizer = true;
  CHECK_THAT(PipelineSkipReason(config),
             Catch::Contains("off a CUDA device") && Catch::Contains("trains on cpu"));
  config.device = "cuda";
  CHECK(PipelineSkipReason(config) ==
        (torch::cuda::is_available() ? "" : "CUDA is not available to this build or machine"));
}

}  // namespace seqbench::training
