// The run facts that databases before schema v5 kept only inside the stored suite text,
// read back once, when such a database is migrated to v5. After the migration every
// report reads typed columns; nothing else parses stored suite text.
//
// The reader is deliberately lenient and registry-free: it reads the keys it needs with
// their old meanings and ignores everything else, so a run naming a variant that has since
// been renamed or removed still migrates.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "results/records.h"

namespace seqbench::legacy {

struct LegacyFacts {
  std::string kind = kRunKindBenchmark;
  std::string baseline;
  int64_t repetitions = 10, warmup = 2;
  double min_time_s = 0;
  std::vector<Expectation> expectations;
  // The [model] sizes every case of the run had unless its workload overrode them.
  int64_t layers = 2, width = 128, heads = 4, vocab_size = 256;
};

// Facts of a run stored by seqbench before v5. `environment` supplies what the text
// cannot (repetitions overridden on the command line were stored there).
LegacyFacts ReadLegacyFacts(const std::string& suite_text,
                            const std::vector<std::pair<std::string, std::string>>& environment);

}  // namespace seqbench::legacy
