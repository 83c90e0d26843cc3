// Variants that fail in every way a process can, for the isolation tests of `run
// --isolate`: each takes its case's process down (or never returns), and the run must
// record that case and go on. Never load it outside tests.
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <limits>
#include <thread>

#include "variants/core/plugin.h"
#include "variants/core/registry.h"
#include "variants/simple_rnn/model.h"

namespace {

using namespace seqbench;
using namespace seqbench::simple_rnn;

// Batched, and then `Fail()` at the first step: in the correctness check.
class FaultyVariant : public Variant {
 public:
  Capabilities capabilities() const override { return BaseCapabilities("faulty (tests)"); }
  ForwardOutput Forward(const Batch& batch) override {
    ForwardOutput output = ForwardBatched(Weights::View(parameters(), config().num_layers), batch,
                                          config().num_heads, StepLoopMixer());
    Fail(output);
    return output;
  }

 protected:
  virtual void Fail(ForwardOutput& output) = 0;
};

class Segfaults final : public FaultyVariant {
  void Fail(ForwardOutput&) override { std::raise(SIGSEGV); }
};
class Aborts final : public FaultyVariant {
  void Fail(ForwardOutput&) override { std::abort(); }
};
class Exits final : public FaultyVariant {
  void Fail(ForwardOutput&) override { std::exit(0); }
};
class Hangs final : public FaultyVariant {
  void Fail(ForwardOutput&) override {
    while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
};
class ProducesNaN final : public FaultyVariant {
  void Fail(ForwardOutput& output) override {
    output.logits = output.logits * std::numeric_limits<double>::quiet_NaN();
  }
};

}  // namespace

SEQBENCH_PLUGIN()
SEQBENCH_REGISTER_VARIANT("faulty_segfault", Segfaults, "raises SIGSEGV (tests only)");
SEQBENCH_REGISTER_VARIANT("faulty_abort", Aborts, "calls abort() (tests only)");
SEQBENCH_REGISTER_VARIANT("faulty_exit", Exits, "calls exit(0) (tests only)");
SEQBENCH_REGISTER_VARIANT("faulty_hang", Hangs, "never returns (tests only)");
// Its description carries terminal controls (ESC, a bidi override, C1 CSI): `list` must
// print them as text (tests/CMakeLists.txt, cli.list_escapes_plugin_text).
SEQBENCH_REGISTER_VARIANT("faulty_nan", ProducesNaN,
                          "NaN logits \x1b[31mred\x1b[0m \u202e \u009b2J (tests only)");
