// Knowledge distillation: the soft-target loss against a hand computation and its
// gradient, and the trainer's objective (the logged loss stays the next-token loss).
#include "harness/training/distillation.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "harness/text_data.h"
#include "harness/training/trainer.h"
#include "tests/test_support.h"

namespace seqbench::training {
namespace {

// A batch of `lengths` (padded with text::kPad to the longest), tokens 1, 2, ...
Batch BatchOf(const std::vector<int64_t>& lengths) {
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  Batch batch;
  batch.tokens =
      torch::full({static_cast<int64_t>(lengths.size()), longest}, text::kPad, torch::kLong);
  for (size_t b = 0; b < lengths.size(); ++b) {
    for (int64_t t = 0; t < lengths[b]; ++t) batch.tokens[b][t] = t + 1;
  }
  batch.lengths = torch::tensor(lengths, torch::kLong);
  return batch;
}

// KL(softmax(teacher/T) ‖ softmax(student/T)) of two 2-way distributions, by hand.
double TwoWayDivergence(double s0, double s1, double t0, double t1, double temperature) {
  const auto softmax0 = [&](double a, double b) {
    return std::exp(a / temperature) / (std::exp(a / temperature) + std::exp(b / temperature));
  };
  const double p = softmax0(t0, t1), q = softmax0(s0, s1);
  return p * std::log(p / q) + (1 - p) * std::log((1 - p) / (1 - q));
}

TEST_CASE("the distillation loss is T² times the teacher's KL, over target positions",
          "[distillation]") {
  // Sequences of 3 and 2 tokens in a [2,3] batch: targets at (0,0), (0,1) and (1,0).
  const Batch batch = BatchOf({3, 2});
  auto student = torch::zeros({2, 3, 2}, torch::kFloat64);
  auto teacher = torch::zeros({2, 3, 2}, torch::kFloat64);
  const double values[3][4] = {{0.3, -0.2, std::log(3.0), 0}, {1, 2, -1, 0.5}, {0, 0, 2, -2}};
  const int positions[3][2] = {{0, 0}, {0, 1}, {1, 0}};
  for (int i = 0; i < 3; ++i) {
    const auto [b, t] = positions[i];
    student[b][t][0] = values[i][0], student[b][t][1] = values[i][1];
    teacher[b][t][0] = values[i][2], teacher[b][t][1] = values[i][3];
  }
  // The last position of each row (no target) and the padding disagree wildly: not counted.
  teacher[0][2][0] = 40, teacher[1][1][1] = -40, teacher[1][2][0] = 40;
  for (const double temperature : {1.0, 2.0, 5.0}) {
    INFO("T = " << temperature);
    double expected = 0;
    for (const auto& v : values) expected += TwoWayDivergence(v[0], v[1], v[2], v[3], temperature);
    expected *= temperature * temperature / 3;
    CHECK(DistillationLoss(student, teacher, batch, temperature).item<double>() ==
          Approx(expected).epsilon(1e-12));
  }
  CHECK(DistillationLoss(teacher, teacher, batch, 2.0).item<double>() == Approx(0).margin(1e-15));
  CHECK_THROWS(DistillationLoss(student, teacher, batch, 0.0));
  CHECK_THROWS(DistillationLoss(student, teacher.slice(1, 0, 2), batch, 2.0));
}

TEST_CASE("the distillation loss's gradient is T(q − p) per target position, over the count",
          "[distillation]") {
  const Batch batch = BatchOf({4, 2, 3});
  torch::manual_seed(3);
  const auto student = torch::randn({3, 4, 5}, torch::kFloat64).requires_grad_(true);
  const auto teacher = torch::randn({3, 4, 5}, torch::kFloat64);
  const double temperature = 3;
  DistillationLoss(student, teacher, batch, temperature).backward();
  const auto q = torch::softmax(student.detach() / temperature, -1);
  const auto p = torch::softmax(teacher / temperature, -1);
  // Targets: positions t < length − 1, 3 + 1 + 2 = 6 of them.
  auto mask = torch::zeros({3, 4, 1}, torch::kFloat64);
  const int64_t lengths[3] = {4, 2, 3};
  for (int64_t b = 0; b < 3; ++b) mask.slice(0, b, b + 1).slice(1, 0, lengths[b] - 1).fill_(1);
  const auto expected = temperature * (q - p) * mask / 6;
  CHECK(torch::allclose(student.grad(), expected, 1e-10, 1e-12));
}

std::vector<double> Losses(Trainer& trainer, int steps) {
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) losses.push_back(trainer.Step().loss);
  return losses;
}

TEST_CASE("a distilled student logs its next-token loss and follows the mixed objective",
          "[distillation]") {
  const Samples train = testing::RandomSamples(64, 5, 2, 40),
                validation = testing::RandomSamples(16, 6, 2, 40);
  TrainingConfig teacher_config = testing::SmallTrainingConfig();
  teacher_config.variant = "batched";
  Trainer teacher_trainer(teacher_config, train, validation);
  Losses(teacher_trainer, 6);
  const CheckpointModel teacher = teacher_trainer.Model();
  // The trained model in memory: the trainer's step and weights, copied (another step of
  // the trainer leaves them as they were).
  CHECK(teacher.variant == "batched");
  CHECK(teacher.step == 6);
  const auto trained = teacher_trainer.variant().parameters();
  REQUIRE(teacher.weights.size() == trained.size());
  for (const auto& item : trained) {
    CHECK(torch::equal(teacher.weights[item.key()], item.value()));
    CHECK(teacher.weights[item.key()].data_ptr() != item.value().data_ptr());
  }
  Losses(teacher_trainer, 1);
  CHECK_FALSE(torch::equal(teacher.weights[trained.begin()->key()], trained.begin()->value()));

  TrainingConfig student = teacher_config;
  student.model.width = 8;
  Trainer alone(student, train, validation);
  const std::vector<double> alone_losses = Losses(alone, 4);
  student.distillation.teacher = "teacher";
  SECTION("weight 0: the soft term drops out, the trajectory is the student's alone") {
    student.distillation.weight = 0;
    Trainer distilled(student, train, validation);
    distilled.SetTeacher(teacher);
    CHECK(Losses(distilled, 4) == alone_losses);
  }
  SECTION("weight 0.5: the same first loss (before any update), then another path") {
    Trainer distilled(student, train, validation);
    distilled.SetTeacher(teacher);
    const std::vector<double> losses = Losses(distilled, 4);
    CHECK(losses[0] == alone_losses[0]);
    CHECK(losses[3] != alone_losses[3]);
  }
  SECTION("no teacher set, or a teacher for a student that does not distil: refused") {
    Trainer distilled(student, train, validation);
    CHECK_THROWS_WITH(distilled.Step(), Catch::Contains("no teacher"));
    Trainer plain(teacher_config, train, validation);
    CHECK_THROWS_WITH(plain.SetTeacher(teacher), Catch::Contains("does not distil"));
  }
}

}  // namespace
}  // namespace seqbench::training
