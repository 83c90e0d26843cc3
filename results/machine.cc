#include "results/machine.h"

namespace seqbench {

const std::vector<std::string>& MachineKeys() {
  static const std::vector<std::string> keys = {
      "cpu_model",    "cpu_logical_cores", "gpu_name",           "torch_version",
      "blas_library", "blas_core",         "aten_cpu_capability"};
  return keys;
}

Machine MachineOf(const RunRecord& run) {
  Machine machine;
  for (const std::string& key : MachineKeys()) {
    if (std::string value = run.Environment(key); !value.empty()) machine[key] = value;
  }
  return machine;
}

std::vector<std::string> MachineDifferences(const Machine& a, const Machine& b) {
  std::vector<std::string> differences;
  for (const std::string& key : MachineKeys()) {
    const auto mine = a.find(key), theirs = b.find(key);
    if (mine != a.end() && theirs != b.end() && mine->second != theirs->second)
      differences.push_back(key + ": " + mine->second + " vs " + theirs->second);
  }
  return differences;
}

bool Compatible(const Machine& a, const Machine& b) { return MachineDifferences(a, b).empty(); }

std::string MachineText(const Machine& machine) {
  std::string text;
  for (const std::string& key : MachineKeys()) {
    if (const auto it = machine.find(key); it != machine.end())
      text += (text.empty() ? "" : ", ") + key + "=" + it->second;
  }
  return text;
}

}  // namespace seqbench
