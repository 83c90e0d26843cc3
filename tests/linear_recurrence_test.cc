// The elementwise-recurrence families (qrnn, min_gru, min_lstm), the RHN, and the two evaluations
// of h_t = a_t⊙h_{t−1} + b_t they share: the hand-written pass and the log-space scan equal a
// literal loop under autograd, values and gradients; each family's reference equals its
// README's formula written out element by element; every variant equals its family's
// reference on ragged batches, in float64 and in float32 within its declared tolerance.
#include "variants/core/linear_recurrence.h"

#include <catch2/catch.hpp>
#include <cmath>

#include "tests/test_support.h"
#include "variants/min_gru/model.h"
#include "variants/min_lstm/model.h"
#include "variants/qrnn/model.h"
#include "variants/rhn/model.h"

namespace seqbench {
namespace {

using testing::MakeVariant;

// h_t = a_t⊙h_{t−1} + b_t as the formula reads, one step at a time under autograd.
torch::Tensor LiteralRecurrence(const torch::Tensor& a, const torch::Tensor& b,
                                const torch::Tensor& h0) {
  const auto a_steps = a.unbind(1), b_steps = b.unbind(1);
  std::vector<torch::Tensor> states;
  torch::Tensor state = h0;
  for (size_t t = 0; t < a_steps.size(); ++t) {
    state = a_steps[t] * state + b_steps[t];
    states.push_back(state);
  }
  return torch::stack(states, 1);
}

struct RecurrenceGradients {
  torch::Tensor h, d_a, d_b, d_h0;
};

// Values and gradients of sum(h·weights) through `recurrence`, for a random upstream gradient.
template <typename Fn>
RecurrenceGradients Differentiate(Fn recurrence, const torch::Tensor& a, const torch::Tensor& b,
                                  const torch::Tensor& h0, const torch::Tensor& upstream) {
  auto a_leaf = a.clone().requires_grad_(), b_leaf = b.clone().requires_grad_(),
       h0_leaf = h0.clone().requires_grad_();
  const torch::Tensor h = recurrence(a_leaf, b_leaf, h0_leaf);
  (h * upstream).sum().backward();
  return {h.detach(), a_leaf.grad(), b_leaf.grad(), h0_leaf.grad()};
}

// Both of its evaluations: the CPU kernel, and the tensor-op passes that run off the CPU.
TEST_CASE("LinearRecurrence equals the literal loop, gradients included", "[recurrence_families]") {
  using Recurrence =
      torch::Tensor (*)(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&);
  const std::pair<const char*, Recurrence> evaluations[] = {
      {"kernel", LinearRecurrence}, {"tensor ops", detail::LinearRecurrenceWithTensorOps}};
  for (const auto& [name, evaluation] : evaluations) {
    for (const auto dtype : {torch::kFloat64, torch::kFloat32}) {
      DYNAMIC_SECTION(name << " " << DtypeName(dtype)) {
        torch::manual_seed(3);
        const auto options = torch::TensorOptions().dtype(dtype);
        const int64_t batch = 3, steps = 17, width = 5;
        const auto a = torch::rand({batch, steps, width}, options) * 1.2 - 0.1;  // some a < 0
        const auto b = torch::randn({batch, steps, width}, options);
        const auto h0 = torch::randn({batch, width}, options);
        const auto upstream = torch::randn({batch, steps, width}, options);
        const auto expected = Differentiate(LiteralRecurrence, a, b, h0, upstream);
        const auto actual = Differentiate(evaluation, a, b, h0, upstream);
        const double rtol = dtype == torch::kFloat64 ? 1e-12 : 1e-5;
        const double atol = dtype == torch::kFloat64 ? 1e-12 : 1e-6;
        CHECK(torch::allclose(actual.h, expected.h, rtol, atol));
        CHECK(torch::allclose(actual.d_a, expected.d_a, rtol, atol));
        CHECK(torch::allclose(actual.d_b, expected.d_b, rtol, atol));
        CHECK(torch::allclose(actual.d_h0, expected.d_h0, rtol, atol));
      }
    }
  }
}

TEST_CASE("the log-space scan equals the literal loop for positive b, gradients included",
          "[recurrence_families]") {
  torch::manual_seed(5);
  const auto options = torch::TensorOptions().dtype(torch::kFloat64);
  const auto a = torch::rand({2, 40, 6}, options) * 0.98 + 0.01;
  const auto b = torch::rand({2, 40, 6}, options) + 1e-3;
  const auto h0 = torch::zeros({2, 6}, options);
  const auto upstream = torch::randn({2, 40, 6}, options);
  const auto expected = Differentiate(LiteralRecurrence, a, b, h0, upstream);
  const auto scan = [](const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& h0) {
    return LogSpaceLinearRecurrence(a.log(), b.log()) + 0 * h0.sum();
  };
  const auto actual = Differentiate(scan, a, b, h0, upstream);
  CHECK(torch::allclose(actual.h, expected.h, 1e-10, 1e-12));
  CHECK(torch::allclose(actual.d_a, expected.d_a, 1e-9, 1e-12));
  CHECK(torch::allclose(actual.d_b, expected.d_b, 1e-9, 1e-12));
}

TEST_CASE("the positive activation is continuous and positive, and its log matches it",
          "[recurrence_families]") {
  const auto x = torch::linspace(-30, 30, 6001, torch::kFloat64).requires_grad_();
  const torch::Tensor g = PositiveActivation(x);
  CHECK(g.min().item<double>() > 0);
  CHECK(torch::allclose(LogPositiveActivation(x), g.log(), 1e-12, 1e-12));
  // Continuous at 0, where the branches meet: σ(0) = 0 + 0.5.
  const auto near_zero = torch::tensor({-1e-9, 1e-9}, torch::kFloat64);
  const auto around = PositiveActivation(near_zero);
  CHECK(std::abs(around[0].item<double>() - around[1].item<double>()) < 1e-8);
  LogPositiveActivation(x).sum().backward();
  CHECK(torch::isfinite(x.grad()).all().item<bool>());
}

ModelConfig SmallModel(const std::string& family, int64_t layers = 2) {
  ModelConfig config;
  config.family = family;
  config.vocab_size = 29;
  config.width = 12;
  config.num_layers = layers;
  return config;
}

// The family's variant of category "reference", as `seqbench verify` picks it.
std::string ReferenceOf(const std::string& family) {
  for (const VariantEntry* entry : GlobalVariants().Entries()) {
    const Capabilities& caps = entry->capabilities;
    if (caps.family == family && caps.category == "reference") return entry->key;
  }
  FAIL("family " << family << " has no reference variant");
  return "";
}

// σ as the README writes it, for the element-by-element formulas below.
double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double Positive(double x) { return x >= 0 ? x + 0.5 : Sigmoid(x); }

// One sequence's recurrence, element by element: s_t = a(t, n)·s_{t−1} + b(t, n), s_{−1} = 0.
template <typename Coefficients>
torch::Tensor ElementwiseRecurrence(int64_t batch, int64_t steps, int64_t width,
                                    Coefficients coefficients) {
  auto s = torch::zeros({batch, steps, width}, torch::kFloat64);
  auto out = s.accessor<double, 3>();
  for (int64_t i = 0; i < batch; ++i) {
    for (int64_t n = 0; n < width; ++n) {
      double state = 0;
      for (int64_t t = 0; t < steps; ++t) {
        const auto [a, b] = coefficients(i, t, n);
        state = a * state + b;
        out[i][t][n] = state;
      }
    }
  }
  return s;
}

torch::Tensor LiteralMinGru(const torch::Tensor& k_z, const torch::Tensor& k_h) {
  auto z = k_z.accessor<double, 3>(), h = k_h.accessor<double, 3>();
  return ElementwiseRecurrence(k_z.size(0), k_z.size(1), k_z.size(2),
                               [&](int64_t i, int64_t t, int64_t n) {
                                 const double gate = Sigmoid(z[i][t][n]);
                                 return std::pair{1 - gate, gate * Positive(h[i][t][n])};
                               });
}

torch::Tensor LiteralMinLstm(const min_lstm::GateInputs& gates) {
  auto f = gates.forget.accessor<double, 3>(), in = gates.input.accessor<double, 3>(),
       h = gates.candidate.accessor<double, 3>();
  const torch::Tensor& k = gates.candidate;
  return ElementwiseRecurrence(
      k.size(0), k.size(1), k.size(2), [&](int64_t i, int64_t t, int64_t n) {
        const double forget = Sigmoid(f[i][t][n]), input = Sigmoid(in[i][t][n]);
        return std::pair{forget / (forget + input),
                         input / (forget + input) * Positive(h[i][t][n])};
      });
}

torch::Tensor LiteralQrnnLayer(const torch::Tensor& u, const qrnn::LayerWeights& layer) {
  const int64_t batch = u.size(0), steps = u.size(1), d = u.size(2);
  auto x = u.accessor<double, 3>();
  auto w = layer.w_conv.accessor<double, 2>();
  auto bias = layer.b_conv.accessor<double, 1>();
  // Column c of [u_t, u_{t−1}]·W_conv + b_conv, with u_{−1} = 0.
  const auto conv = [&](int64_t i, int64_t t, int64_t c) {
    double sum = bias[c];
    for (int64_t j = 0; j < d; ++j) {
      sum += x[i][t][j] * w[j][c];
      if (t > 0) sum += x[i][t - 1][j] * w[d + j][c];
    }
    return sum;
  };
  torch::Tensor cell = ElementwiseRecurrence(batch, steps, d, [&](int64_t i, int64_t t, int64_t n) {
    const double forget = Sigmoid(conv(i, t, d + n));
    return std::pair{forget, (1 - forget) * std::tanh(conv(i, t, n))};
  });
  auto out = cell.accessor<double, 3>();
  for (int64_t i = 0; i < batch; ++i) {
    for (int64_t t = 0; t < steps; ++t) {
      for (int64_t n = 0; n < d; ++n) out[i][t][n] *= Sigmoid(conv(i, t, 2 * d + n));
    }
  }
  return cell;
}

// The RHN layer as variants/rhn/model.h writes it, element by element: per step, kDepth
// micro-layers, the input in the first only, h⊙τ + s⊙(1 − τ).
torch::Tensor LiteralRhnLayer(const torch::Tensor& u, const rhn::LayerWeights& layer) {
  const int64_t batch = u.size(0), steps = u.size(1), d = u.size(2);
  auto x = u.accessor<double, 3>();
  auto w = layer.w_in.accessor<double, 2>();
  auto r = layer.r.accessor<double, 3>();
  auto bias = layer.b.accessor<double, 2>();
  torch::Tensor out = torch::zeros({batch, steps, d}, torch::kFloat64);
  auto o = out.accessor<double, 3>();
  for (int64_t i = 0; i < batch; ++i) {
    std::vector<double> s(d, 0.0), next(d);
    for (int64_t t = 0; t < steps; ++t) {
      for (int64_t l = 0; l < rhn::kDepth; ++l) {
        for (int64_t n = 0; n < d; ++n) {
          double a_h = bias[l][n], a_t = bias[l][d + n];
          for (int64_t j = 0; j < d; ++j) {
            a_h += s[j] * r[l][j][n];
            a_t += s[j] * r[l][j][d + n];
            if (l == 0) {
              a_h += x[i][t][j] * w[j][n];
              a_t += x[i][t][j] * w[j][d + n];
            }
          }
          const double transform = Sigmoid(a_t);
          next[n] = std::tanh(a_h) * transform + s[n] * (1 - transform);
        }
        s = next;
      }
      for (int64_t n = 0; n < d; ++n) o[i][t][n] = s[n];
    }
  }
  return out;
}

// The family's reference on a ragged batch against the same model with its time mixing
// written out from the README, element by element in float64.
TEST_CASE("each family's reference is its README's formula", "[recurrence_families]") {
  const Batch batch = MakeBatch({3, 11, 4}, 29, /*seed=*/13);
  const auto mask = batch.PaddingMask().unsqueeze(-1);  // logits at padding: unspecified
  for (const std::string family :
       {qrnn::kFamily, min_gru::kFamily, min_lstm::kFamily, rhn::kFamily}) {
    DYNAMIC_SECTION(family) {
      const ModelConfig config = SmallModel(family);
      const ParameterSet weights = GlobalFamilies().Get(family).init_weights(config, 7);
      auto reference = MakeVariant(ReferenceOf(family), config, weights, torch::kFloat64);
      const ForwardOutput actual = reference->InferStep(batch);
      const ForwardOutput literal =
          family == qrnn::kFamily  ? qrnn::ForwardWith(weights, config, batch, LiteralQrnnLayer)
          : family == rhn::kFamily ? rhn::ForwardWith(weights, config, batch, LiteralRhnLayer)
          : family == min_gru::kFamily
              ? min_gru::ForwardWith(weights, config, batch, LiteralMinGru)
              : min_lstm::ForwardWith(weights, config, batch, LiteralMinLstm);
      CHECK(torch::allclose(actual.logits.masked_fill(~mask, 0),
                            literal.logits.masked_fill(~mask, 0), 1e-10, 1e-12));
      CHECK(torch::allclose(actual.loss, literal.loss, 1e-10, 1e-12));
    }
  }
}

const std::vector<std::string> kFamilies = {qrnn::kFamily, min_gru::kFamily, min_lstm::kFamily,
                                            rhn::kFamily};

TEST_CASE("every variant of the recurrence families equals its reference on ragged batches",
          "[recurrence_families][equivalence]") {
  const BatchShape ragged{/*batch_size=*/4, /*max_length=*/13, /*min_length=*/2};
  for (const std::string& family : kFamilies) {
    const ModelConfig config = SmallModel(family);
    const ParameterSet weights = GlobalFamilies().Get(family).init_weights(config, 7);
    const auto keys = testing::VariantsOf(family, ReferenceOf(family));
    REQUIRE(keys.size() >= 1);
    for (const std::string& key : keys) {
      for (const auto dtype : {torch::kFloat64, torch::kFloat32}) {
        for (const auto mode : {Mode::kTrain, Mode::kForward, Mode::kGenerate}) {
          DYNAMIC_SECTION(key << " " << ModeName(mode) << " " << DtypeName(dtype)) {
            auto reference = MakeVariant(ReferenceOf(family), config, weights, dtype);
            auto candidate = MakeVariant(key, config, weights, dtype);
            const Batch batch = MakeBatch(ragged, config.vocab_size, /*seed=*/11);
            const EquivalenceResult result =
                CheckEquivalence(*candidate, *reference, mode, batch,
                                 candidate->capabilities().ToleranceFor(dtype), /*generate=*/4);
            INFO("logits max_abs=" << result.logits.max_abs << " grad max_rel="
                                   << result.gradients.max_rel << " (" << result.worst_gradient
                                   << ") mismatched tokens " << result.mismatched_tokens);
            CHECK(result.passed());
            if (mode == Mode::kTrain) CHECK_FALSE(result.worst_gradient.empty());
          }
        }
      }
    }
  }
}

// The scans' float32 tolerance is stated for long sequences: hold them to it at T = 2048,
// where the decay sums the log-space form cancels are largest among the suites' lengths.
TEST_CASE("the float32 scans stay within their tolerance at T = 2048", "[recurrence_families]") {
  for (const std::string key : {"min_gru_scan", "min_lstm_scan"}) {
    DYNAMIC_SECTION(key) {
      const std::string family = GlobalVariants().Get(key).capabilities.family;
      const ModelConfig config = SmallModel(family, /*layers=*/1);
      const ParameterSet weights = GlobalFamilies().Get(family).init_weights(config, 7);
      auto reference = MakeVariant(ReferenceOf(family), config, weights, torch::kFloat32);
      auto candidate = MakeVariant(key, config, weights, torch::kFloat32);
      const Batch batch = MakeBatch({2, 2048, 0}, config.vocab_size, /*seed=*/11);
      const EquivalenceResult result =
          CheckEquivalence(*candidate, *reference, Mode::kForward, batch,
                           candidate->capabilities().ToleranceFor(torch::kFloat32));
      INFO("logits max_abs=" << result.logits.max_abs << " max_rel=" << result.logits.max_rel);
      CHECK(result.passed());
    }
  }
}

}  // namespace
}  // namespace seqbench
