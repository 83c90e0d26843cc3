// A broken plugin for the tests: it registers a new key and then `baseline`, which the
// host already has. Loading it must fail and leave neither key behind.
#include "variants/core/plugin.h"
#include "variants/core/registry.h"
#include "variants/simple_rnn/model.h"

namespace {

class NotReallyBaseline final : public seqbench::Variant {
 public:
  seqbench::Capabilities capabilities() const override {
    return seqbench::simple_rnn::BaseCapabilities("test");
  }
  seqbench::ForwardOutput Forward(const seqbench::Batch&) override {
    TORCH_CHECK(false, "never registered, never run");
  }
};

}  // namespace

SEQBENCH_PLUGIN()
SEQBENCH_REGISTER_VARIANT("duplicate_plugin_fresh_key", NotReallyBaseline, "should be removed");
SEQBENCH_REGISTER_VARIANT("baseline", NotReallyBaseline, "collides with the built-in");
