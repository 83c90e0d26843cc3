#include "harness/run_header.h"

#include <ATen/Parallel.h>

#include <cstdio>
#include <ctime>
#include <random>

#include "base/text.h"
#include "harness/environment.h"
#include "harness/suite.h"

namespace seqbench {

RunRecord NewRunRecord(const RunDescription& description) {
  const Environment env = CaptureEnvironment();
  RunRecord run;
  run.uuid = NewUuid();
  run.kind = description.kind;
  run.suite_name = description.suite_name;
  run.suite_path = description.suite_path;
  run.suite_text = description.suite_text;
  run.suite_hash = ContentHash(description.suite_text);
  run.command_line = description.command_line;
  run.shard = description.shard;
  run.seed = description.seed;
  run.status = "running";
  run.started_at = UtcNow();
  run.baseline = description.baseline;
  run.settings = description.settings.AsStored();
  run.threads = at::get_num_threads();
  run.label = description.label;
  run.expectations = description.expectations;
  run.environment = env.entries;
  for (const auto& entry : description.extra_environment) run.environment.push_back(entry);
  run.warnings = env.warnings;
  const Environment load = CaptureLoad("start");
  run.environment.insert(run.environment.end(), load.entries.begin(), load.entries.end());
  run.warnings.insert(run.warnings.end(), load.warnings.begin(), load.warnings.end());
  return run;
}

void RecordRunEnd(Store& store, int64_t run_id) {
  const Environment load = CaptureLoad("end");
  store.AddRunEnvironment(run_id, load.entries, load.warnings);
}

std::string NewUuid() {
  std::random_device device;
  std::mt19937_64 generator((static_cast<uint64_t>(device()) << 32) ^ device());
  char text[33];
  std::snprintf(text, sizeof(text), "%016llx%016llx", (unsigned long long)generator(),
                (unsigned long long)generator());
  return text;
}

std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm parts{};
  gmtime_r(&now, &parts);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

}  // namespace seqbench
