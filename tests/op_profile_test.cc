// OpProfile (harness/op_profile.h): self times from a hand-written trace (nesting, events
// that abut without nesting, two threads, per-step division), a trace that is not one,
// and a real step's ops counted by the profiler.
#include "harness/op_profile.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <stdexcept>
#include <string>

namespace seqbench {
namespace {

const OpTime& Op(const OpProfile& profile, const std::string& name) {
  for (const OpTime& op : profile.ops) {
    if (op.name == name) return op;
  }
  FAIL("no op " << name);
  throw std::logic_error("unreachable");
}

TEST_CASE("SummarizeTrace charges children to their parent, per thread and step", "[profile]") {
  // Thread 1: outer [0,100] encloses inner [10,40] and inner [40,50] (abutting, not
  // nested in each other) and leaf [45,47] inside the second inner; tail [100,110] starts
  // where outer ends, so it is not outer's child. Thread 2: outer [0,30], alone.
  const std::string trace = R"([
    {"name": "outer", "ph": "X", "ts": 0, "dur": 100, "tid": 1},
    {"name": "inner", "ph": "X", "ts": 10, "dur": 30, "tid": 1},
    {"name": "inner", "ph": "X", "ts": 40, "dur": 10, "tid": 1},
    {"name": "leaf", "ph": "X", "ts": 45, "dur": 2, "tid": 1},
    {"name": "tail", "ph": "X", "ts": 100, "dur": 10, "tid": 1},
    {"name": "outer", "ph": "X", "ts": 0, "dur": 30, "tid": 2},
    {"name": "meta", "ph": "M", "ts": 0, "dur": 500, "tid": 1}
  ])";
  const OpProfile profile = SummarizeTrace(trace, 2);
  REQUIRE(profile.ops.size() == 4);  // the "M" event is not an op
  CHECK(Op(profile, "outer").self_ms == Approx((60 + 30) * 1e-3 / 2));
  CHECK(Op(profile, "outer").total_ms == Approx((100 + 30) * 1e-3 / 2));
  CHECK(Op(profile, "outer").calls == Approx(1));
  CHECK(Op(profile, "inner").self_ms == Approx((30 + 8) * 1e-3 / 2));
  CHECK(Op(profile, "leaf").self_ms == Approx(2e-3 / 2));
  CHECK(Op(profile, "tail").self_ms == Approx(10e-3 / 2));
  CHECK(profile.self_ms == Approx((60 + 30 + 38 + 2 + 10) * 1e-3 / 2));
  CHECK(profile.ops.front().name == "outer");
  for (size_t i = 1; i < profile.ops.size(); ++i) {
    CHECK(profile.ops[i - 1].self_ms >= profile.ops[i].self_ms);
  }
}

TEST_CASE("SummarizeTrace refuses what is not a trace", "[profile]") {
  CHECK_THROWS_AS(SummarizeTrace("not json", 1), std::runtime_error);
  CHECK_THROWS_AS(SummarizeTrace(R"([{"name": "x", "ph": "X"}])", 1), std::runtime_error);
}

TEST_CASE("ProfileSteps counts a real step's ops per step", "[profile]") {
  const auto a = torch::randn({64, 64}), b = torch::randn({64, 64});
  const OpProfile profile = ProfileSteps(
      [&] {
        auto c = torch::mm(a, b);
        c = torch::mm(c, b);
        c = torch::mm(c, a);
        c.exp_();
      },
      4);
  CHECK(profile.steps == 4);
  CHECK(Op(profile, "aten::mm").calls == Approx(3));
  CHECK(Op(profile, "aten::exp_").calls == Approx(1));
  for (const OpTime& op : profile.ops) CHECK(op.total_ms >= op.self_ms - 1e-9);
  CHECK(profile.wall_ms > 0);
}

}  // namespace
}  // namespace seqbench
