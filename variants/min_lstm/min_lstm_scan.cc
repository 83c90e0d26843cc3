// `min_lstm_scan`: the paper's parallel form. With r = log i − log f = log σ(k_i) − log σ(k_f),
// the normalised gates are log f' = log σ(−r) and log i' = log σ(r) (f' = 1/(1 + i/f));
// then the log-space scan (LogSpaceLinearRecurrence) with log b = log i' + log g(k_h): two
// cumulative ops over T per layer instead of T steps.
#include "variants/core/linear_recurrence.h"
#include "variants/core/registry.h"
#include "variants/min_lstm/model.h"

namespace seqbench::min_lstm {
namespace {

torch::Tensor ScanRecurrence(const GateInputs& gates) {
  const torch::Tensor log_ratio =  // log i − log f
      torch::log_sigmoid(gates.input) - torch::log_sigmoid(gates.forget);
  return LogSpaceLinearRecurrence(
      torch::log_sigmoid(-log_ratio),
      torch::log_sigmoid(log_ratio) + LogPositiveActivation(gates.candidate));
}

class MinLstmScan final : public Variant {
 public:
  Capabilities capabilities() const override {
    Capabilities caps = BaseCapabilities("parallel scan");
    // As min_gru_scan: the scan's cancellation costs float32 about |Σ log f'|·6e-8 of the
    // state; the logits' error at T = 2048 is about 4e-5 (tests/linear_recurrence_test.cc).
    caps.float32 = {2e-4, 1e-4};
    return caps;
  }

  ForwardOutput Forward(const Batch& batch) override {
    return ForwardWith(parameters(), config(), batch, ScanRecurrence);
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("min_lstm_scan", MinLstmScan,
                          "min_lstm as a log-space parallel scan (logcumsumexp), as in the paper");

}  // namespace seqbench::min_lstm
