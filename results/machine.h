// What machine a stored run measured on, as the environment entries that name it: the
// one list every command that must not mix machines reads (history's series, a run
// group's shards).
//
// Thread-safety: pure functions over values; safe from any thread.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "results/store.h"

namespace seqbench {

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
