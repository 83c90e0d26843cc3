// Test-only mutations of code that every variant shares, so that a regression gate's
// power against extra work inside one shared function can be measured (ci/measure_gate).
// Off unless a test-only flag sets them (run --test-extra-head-passes).
//
// Thread-safety: set once, before any case runs; read from the thread that runs a case.
#pragma once

#include <cstdint>

namespace seqbench {

// LanguageModelHead (variants/core/language_model.h) computes its logits this many extra
// times and discards them. 0, the default: off.
void SetTestExtraHeadPasses(int64_t passes);
int64_t TestExtraHeadPasses();

}  // namespace seqbench
