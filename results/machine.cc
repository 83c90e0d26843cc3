#include "results/machine.h"

namespace seqbench {

const std::vector<MachineKey>& MachineKeyTable() {
  // name                    identity hardware limits environment
  static const std::vector<MachineKey> table = {
      {"cpu_model", true, true, true, true},
      {"cpu_logical_cores", true, true, true, true},
      {"gpu_name", true, true, true, true},
      {"torch_version", true, false, true, true},
      {"cuda_version", false, false, false, true},
      {"cudnn_version", false, false, false, true},
      {"blas_library", true, false, true, true},
      {"blas_core", true, false, true, true},
      {"aten_cpu_capability", true, false, true, true},
      {"simple_rnn_kernels", true, false, true, true},
      {"env_openblas_coretype", false, false, true, false},
      {"glibc_version", false, false, false, true},
      {"torch_threads", false, false, false, true},
      {"build_type", false, false, false, true},
      {"compiler", false, false, false, true},
      // A machine's limits are measured per host; a CI VM's name is not its identity.
      {"hostname", false, false, true, true},
  };
  return table;
}

std::vector<std::string> MachineKeysFor(MachineKeyUse use) {
  std::vector<std::string> keys;
  for (const MachineKey& key : MachineKeyTable()) {
    const bool serves = use == MachineKeyUse::kIdentity   ? key.identity
                        : use == MachineKeyUse::kHardware ? key.hardware
                        : use == MachineKeyUse::kLimits   ? key.limits
                                                          : key.environment;
    if (serves) keys.emplace_back(key.name);
  }
  return keys;
}

const std::vector<std::string>& MachineKeys() {
  static const std::vector<std::string> keys = MachineKeysFor(MachineKeyUse::kIdentity);
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
