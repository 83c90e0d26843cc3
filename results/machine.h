// What machine a stored run measured on, as the environment entries that name it: the
// one list every command that must not mix machines reads (history's series, a run
// group's shards).
//
// Thread-safety: pure functions over values; safe from any thread.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "results/records.h"

namespace seqbench {

// What a list of environment keys is for. One table (MachineKeyTable) says which key
// serves which use, so that a new machine fact is one row.
enum class MachineKeyUse {
  kIdentity,     // names a machine: history's series, a run group's shards (MachineKeys())
  kHardware,     // makes two runs' times incomparable (hostnames of one CI VM type differ)
  kLimits,       // a stored GEMM rate and bandwidth still hold (roofline's cache)
  kEnvironment,  // compare lists it when base and head differ
};

struct MachineKey {
  const char* name;
  bool identity, hardware, limits, environment;
};

// Every environment key that describes the machine or the software a run measured with,
// in the order messages list them.
const std::vector<MachineKey>& MachineKeyTable();

// The keys of the table that serve `use`, in the table's order.
std::vector<std::string> MachineKeysFor(MachineKeyUse use);

// The environment keys that name a machine: CPU model and logical cores, GPU, LibTorch,
// the BLAS library and the core it ran, ATen's CPU capability.
const std::vector<std::string>& MachineKeys();

using Machine = std::map<std::string, std::string>;  // the MachineKeys() a run recorded

Machine MachineOf(const RunRecord& run);

// Whether two runs may be the same machine: no key both recorded differs. A key one of
// them lacks (recorded only by a later seqbench) is unknown, not different.
bool Compatible(const Machine& a, const Machine& b);

// "blas_core: Haswell vs SkylakeX" for each key both recorded that differs.
std::vector<std::string> MachineDifferences(const Machine& a, const Machine& b);

// "cpu_model=..., blas_core=...": the keys recorded, in MachineKeys() order.
std::string MachineText(const Machine& machine);

}  // namespace seqbench
