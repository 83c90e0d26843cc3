// The header a run is stored with before its first case: identity (uuid), provenance
// (suite text and hash, command line, start time), the environment, and the typed facts
// of how it measures. One builder for `seqbench run` and `seqbench train`, so that both
// kinds of run describe themselves the same way.
//
// Thread-safety: NewRunRecord() reads process-wide state (environment, thread counts);
// call it from one thread. The rest are pure or use their own random device.
#pragma once

#include <string>

#include "results/store.h"

namespace seqbench {

struct RunDescription {
  std::string kind = kRunKindBenchmark;
  std::string suite_name, suite_path, suite_text;
  std::string command_line;
  std::string shard;  // "i/n" or ""
  uint64_t seed = 0;
  std::string baseline;
  RunSettings settings;  // stored as RunSettings::AsStored()
  std::string label;     // free text for selecting the run later (run --label)
  std::vector<Expectation> expectations;
  // Entries only this kind of run knows (the timer it uses, the data it trains on).
  std::vector<std::pair<std::string, std::string>> extra_environment;
};

// A "running" run with a new uuid, the start time, the captured environment and its
// warnings, the machine's load at the start, and the LibTorch intra-op threads in force.
RunRecord NewRunRecord(const RunDescription& description);

// Stores with the run what the machine was doing at its end (CaptureLoad("end"), with
// any warning it raises), beside what NewRunRecord recorded at its start.
void RecordRunEnd(Store& store, int64_t run_id);

// A random 128-bit identifier as 32 hex digits: a run's identity across databases.
std::string NewUuid();
// Now, as ISO 8601 UTC ("2026-11-21T14:08:01Z").
std::string UtcNow();

}  // namespace seqbench
