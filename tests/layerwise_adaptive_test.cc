// LAMB and LARS (harness/training/layerwise_adaptive.h): a first step computed by hand,
// later steps against scalar loops written from the papers' algorithms, the trust ratio's
// invariance to the gradient's scale at both ends, the zero-norm rules, state bytes and
// checkpoints.
#include "harness/training/layerwise_adaptive.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <sstream>
#include <vector>

namespace seqbench::training {
namespace {

constexpr double kLr = 0.1, kDecay = 0.01;

std::vector<torch::optim::OptimizerParamGroup> OneGroup(const torch::Tensor& parameter,
                                                        double weight_decay) {
  torch::optim::AdamWOptions options(kLr);
  options.betas({0.9, 0.999}).eps(1e-8).weight_decay(weight_decay);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{parameter},
                      std::make_unique<torch::optim::AdamWOptions>(options));
  return groups;
}

torch::optim::AdamWOptions Defaults() { return torch::optim::AdamWOptions(kLr); }

// Sets `parameter`'s gradient to `gradient` and takes one step.
void StepWith(torch::optim::Optimizer& optimizer, torch::Tensor& parameter,
              const torch::Tensor& gradient) {
  parameter.mutable_grad() = gradient.clone();
  optimizer.step();
}

double Norm(const std::vector<double>& x) {
  double sum = 0;
  for (const double value : x) sum += value * value;
  return std::sqrt(sum);
}

std::vector<double> Values(const torch::Tensor& tensor) {
  const torch::Tensor flat = tensor.detach().to(torch::kFloat64).contiguous().view(-1);
  return std::vector<double>(flat.data_ptr<double>(), flat.data_ptr<double>() + flat.numel());
}

// The papers' algorithms, one scalar loop each, in double.
struct LambReference {
  std::vector<double> m, v;
  int step = 0;
  void Step(std::vector<double>& w, const std::vector<double>& g, double decay) {
    if (m.empty()) m.assign(w.size(), 0), v.assign(w.size(), 0);
    ++step;
    std::vector<double> u(w.size());
    for (size_t i = 0; i < w.size(); ++i) {
      m[i] = 0.9 * m[i] + 0.1 * g[i];
      v[i] = 0.999 * v[i] + 0.001 * g[i] * g[i];
      const double m_hat = m[i] / (1 - std::pow(0.9, step));
      const double v_hat = v[i] / (1 - std::pow(0.999, step));
      u[i] = m_hat / (std::sqrt(v_hat) + 1e-8) + decay * w[i];
    }
    const double w_norm = Norm(w), u_norm = Norm(u);
    const double ratio = w_norm > 0 && u_norm > 0 ? w_norm / u_norm : 1;
    for (size_t i = 0; i < w.size(); ++i) w[i] -= kLr * ratio * u[i];
  }
};

struct LarsReference {
  std::vector<double> buffer;
  double momentum = 0.9, eta = 0.001;
  void Step(std::vector<double>& w, const std::vector<double>& g, double decay) {
    if (buffer.empty()) buffer.assign(w.size(), 0);
    const double w_norm = Norm(w), g_norm = Norm(g);
    const double denominator = g_norm + decay * w_norm;
    const double local = w_norm > 0 && denominator > 0 ? eta * w_norm / denominator : 1;
    for (size_t i = 0; i < w.size(); ++i) {
      buffer[i] = momentum * buffer[i] + kLr * local * (g[i] + decay * w[i]);
      w[i] -= buffer[i];
    }
  }
};

TEST_CASE("LAMB's first step, by hand", "[layerwise]") {
  // w = (3, 4), ‖w‖ = 5; g = (0.6, -0.8). At step 1 both bias corrections undo the
  // moments' (1 − β) factors: r = g / (|g| + ε) = (1, −1) to 1e-8. With λ = 0.01:
  // u = (1.03, −0.96), ‖u‖ = √1.9825 = 1.408013; ratio = 5 / 1.408013 = 3.551104;
  // w' = w − 0.1 · 3.551104 · u = (2.634236, 4.340906), and ‖w' − w‖ = lr·‖w‖ = 0.5.
  torch::Tensor w = torch::tensor({3.0, 4.0}, torch::kFloat64);
  Lamb lamb(OneGroup(w, kDecay), Defaults());
  StepWith(lamb, w, torch::tensor({0.6, -0.8}, torch::kFloat64));
  CHECK(w[0].item<double>() == Approx(2.634236).epsilon(0).margin(1e-6));
  CHECK(w[1].item<double>() == Approx(4.340906).epsilon(0).margin(1e-6));
  CHECK((w - torch::tensor({3.0, 4.0}, torch::kFloat64)).norm().item<double>() ==
        Approx(0.5).epsilon(1e-12));
}

TEST_CASE("LARS's first step, by hand", "[layerwise]") {
  // ‖w‖ = 5, ‖g‖ = 1: local = η·5 / (1 + 0.01·5) = 0.005 / 1.05 = 0.00476190; the
  // direction g + λw = (0.63, −0.76); b = 0.1 · local · (0.63, −0.76) =
  // (0.000300000, −0.000361905); w' = (2.9997, 4.000361905).
  torch::Tensor w = torch::tensor({3.0, 4.0}, torch::kFloat64);
  Lars lars(OneGroup(w, kDecay), Defaults());
  StepWith(lars, w, torch::tensor({0.6, -0.8}, torch::kFloat64));
  CHECK(w[0].item<double>() == Approx(2.9997).epsilon(0).margin(1e-12));
  CHECK(w[1].item<double>() == Approx(4.000361905).epsilon(0).margin(1e-9));
}

TEST_CASE("LAMB and LARS follow the papers' algorithms over steps", "[layerwise]") {
  torch::manual_seed(3);
  const torch::Tensor start = torch::randn({37}, torch::kFloat64);
  std::vector<torch::Tensor> gradients;
  for (int i = 0; i < 6; ++i) gradients.push_back(torch::randn({37}, torch::kFloat64) * (i + 1));
  for (const double decay : {0.0, kDecay}) {
    DYNAMIC_SECTION("weight decay " << decay) {
      torch::Tensor w_lamb = start.clone(), w_lars = start.clone();
      Lamb lamb(OneGroup(w_lamb, decay), Defaults());
      Lars lars(OneGroup(w_lars, decay), Defaults());
      std::vector<double> expected_lamb = Values(start), expected_lars = Values(start);
      LambReference lamb_reference;
      LarsReference lars_reference;
      for (const torch::Tensor& g : gradients) {
        StepWith(lamb, w_lamb, g);
        StepWith(lars, w_lars, g);
        lamb_reference.Step(expected_lamb, Values(g), decay);
        lars_reference.Step(expected_lars, Values(g), decay);
      }
      const std::vector<double> lamb_values = Values(w_lamb), lars_values = Values(w_lars);
      for (size_t i = 0; i < expected_lamb.size(); ++i) {
        CHECK(lamb_values[i] == Approx(expected_lamb[i]).epsilon(0).margin(1e-12));
        CHECK(lars_values[i] == Approx(expected_lars[i]).epsilon(0).margin(1e-12));
      }
    }
  }
}

TEST_CASE("The trust ratio makes a layer's step independent of its gradient's scale",
          "[layerwise]") {
  // LAMB moves each tensor by lr·‖w‖ at every step; LARS (λ = 0) by lr·η·‖w‖ at its
  // first. Tried with gradients from 1e-6 to 1e6 times one direction.
  torch::manual_seed(5);
  const torch::Tensor start = torch::randn({8, 16}, torch::kFloat64);
  const torch::Tensor direction = torch::randn({8, 16}, torch::kFloat64);
  for (const double scale : {1e-6, 1.0, 1e6}) {
    DYNAMIC_SECTION("gradient scale " << scale) {
      torch::Tensor w_lamb = start.clone(), w_lars = start.clone();
      Lamb lamb(OneGroup(w_lamb, kDecay), Defaults());
      Lars lars(OneGroup(w_lars, 0), Defaults());
      StepWith(lars, w_lars, direction * scale);
      CHECK((w_lars - start).norm().item<double>() ==
            Approx(kLr * 0.001 * start.norm().item<double>()).epsilon(1e-9));
      for (int step = 0; step < 3; ++step) {
        const torch::Tensor before = w_lamb.clone();
        StepWith(lamb, w_lamb, direction * scale * (step + 1));
        CHECK((w_lamb - before).norm().item<double>() ==
              Approx(kLr * before.norm().item<double>()).epsilon(1e-9));
      }
    }
  }
}

TEST_CASE("A zero norm gives the plain step, where the ratio has none", "[layerwise]") {
  const torch::Tensor g = torch::tensor({1.0, -2.0}, torch::kFloat64);
  SECTION("zero weights: LARS steps lr·g, LAMB lr·r") {
    torch::Tensor w_lars = torch::zeros({2}, torch::kFloat64);
    Lars lars(OneGroup(w_lars, kDecay), Defaults());
    StepWith(lars, w_lars, g);
    CHECK(torch::allclose(w_lars, -kLr * g, 0, 1e-15));
    torch::Tensor w_lamb = torch::zeros({2}, torch::kFloat64);
    Lamb lamb(OneGroup(w_lamb, kDecay), Defaults());
    StepWith(lamb, w_lamb, g);
    CHECK(torch::allclose(w_lamb, torch::tensor({-kLr, kLr}, torch::kFloat64), 0, 1e-8));
  }
  SECTION("zero gradient: LARS's rate is η/λ, its step lr·η·w (the paper's formula)") {
    torch::Tensor w = torch::tensor({3.0, 4.0}, torch::kFloat64);
    Lars lars(OneGroup(w, kDecay), Defaults());
    StepWith(lars, w, torch::zeros({2}, torch::kFloat64));
    CHECK(torch::allclose(w, torch::tensor({3.0, 4.0}, torch::kFloat64) * (1 - kLr * 0.001), 0,
                          1e-15));
  }
  SECTION("zero gradient and no decay: LARS does not move") {
    torch::Tensor w = torch::tensor({3.0, 4.0}, torch::kFloat64);
    Lars lars(OneGroup(w, 0), Defaults());
    StepWith(lars, w, torch::zeros({2}, torch::kFloat64));
    CHECK(torch::equal(w, torch::tensor({3.0, 4.0}, torch::kFloat64)));
  }
}

TEST_CASE("LAMB and LARS: state bytes, checkpoints, bad options", "[layerwise]") {
  torch::manual_seed(7);
  const torch::Tensor start = torch::randn({5, 7});
  const auto gradient = [](int step) { return torch::full({5, 7}, 0.1f * (step + 1)); };
  torch::Tensor w_lamb = start.clone(), w_lars = start.clone();
  Lamb lamb(OneGroup(w_lamb, kDecay), Defaults());
  Lars lars(OneGroup(w_lars, kDecay), Defaults());
  CHECK(lamb.StateBytes() == 0);
  CHECK(lars.StateBytes() == 0);
  for (int step = 0; step < 3; ++step) {
    StepWith(lamb, w_lamb, gradient(step));
    StepWith(lars, w_lars, gradient(step));
  }
  CHECK(lamb.StateBytes() == 2 * 4 * 35);  // two float32 moments
  CHECK(lars.StateBytes() == 4 * 35);      // one momentum buffer

  // Saved after 3 steps, loaded into fresh optimizers over copies: both go on alike.
  torch::serialize::OutputArchive lamb_archive, lars_archive;
  lamb.save(lamb_archive);
  lars.save(lars_archive);
  std::ostringstream lamb_bytes, lars_bytes;
  lamb_archive.save_to(lamb_bytes);
  lars_archive.save_to(lars_bytes);
  torch::Tensor copy_lamb = w_lamb.clone(), copy_lars = w_lars.clone();
  Lamb lamb_resumed(OneGroup(copy_lamb, kDecay), Defaults());
  Lars lars_resumed(OneGroup(copy_lars, kDecay), Defaults());
  torch::serialize::InputArchive lamb_in, lars_in;
  std::istringstream lamb_stream(lamb_bytes.str()), lars_stream(lars_bytes.str());
  lamb_in.load_from(lamb_stream);
  lars_in.load_from(lars_stream);
  lamb_resumed.load(lamb_in);
  lars_resumed.load(lars_in);
  for (int step = 3; step < 5; ++step) {
    StepWith(lamb, w_lamb, gradient(step));
    StepWith(lamb_resumed, copy_lamb, gradient(step));
    StepWith(lars, w_lars, gradient(step));
    StepWith(lars_resumed, copy_lars, gradient(step));
  }
  CHECK(torch::equal(w_lamb, copy_lamb));
  CHECK(torch::equal(w_lars, copy_lars));

  // One's checkpoint is not the other's.
  std::istringstream lamb_again(lamb_bytes.str());
  torch::serialize::InputArchive wrong;
  wrong.load_from(lamb_again);
  CHECK_THROWS_WITH(lars_resumed.load(wrong), Catch::Contains("not LARS's"));

  torch::Tensor w = start.clone();
  CHECK_THROWS_WITH(Lars(OneGroup(w, 0), Defaults(), LarsOptions{1.0, 0.001}),
                    Catch::Contains("momentum"));
  CHECK_THROWS_WITH(Lars(OneGroup(w, 0), Defaults(), LarsOptions{0.9, 0}),
                    Catch::Contains("trust coefficient"));
  torch::optim::AdamWOptions amsgrad(kLr);
  amsgrad.amsgrad(true);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{w},
                      std::make_unique<torch::optim::AdamWOptions>(amsgrad));
  CHECK_THROWS_WITH(Lamb(std::move(groups), Defaults()), Catch::Contains("amsgrad"));
}

}  // namespace
}  // namespace seqbench::training
