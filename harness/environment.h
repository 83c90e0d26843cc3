// What a run was measured on and with: build, libraries, hardware, OS. Captured once
// per run and stored with it, so that a number can be traced to its conditions.
//
// Thread-safety: CaptureEnvironment() reads process-wide state; call it from one thread.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace seqbench {

struct Environment {
  // Ordered (key, value) pairs, e.g. ("torch_version", "1.13.0").
  std::vector<std::pair<std::string, std::string>> entries;
  // Conditions that make the numbers less trustworthy (debug build, CPU governor).
  std::vector<std::string> warnings;

  std::string Get(const std::string& key) const;
};

Environment CaptureEnvironment();

// What decides which machine code this process runs, whatever its source: OpenBLAS's core
// and build (openblas_get_corename/config, or "not OpenBLAS"), ATen's CPU capability in
// force, the widest of seqbench's own SimpleRNN step kernels this CPU runs, glibc's
// version, and the variables that override them (OPENBLAS_CORETYPE, ATEN_CPU_CAPABILITY,
// GLIBC_TUNABLES; "unset" when absent). Keys: blas_core, blas_config,
// aten_cpu_capability, simple_rnn_kernels, glibc_version, env_openblas_coretype,
// env_aten_cpu_capability, env_glibc_tunables. Part of CaptureEnvironment(); a counted
// child reports its own under valgrind, where they differ from the native run's.
std::vector<std::pair<std::string, std::string>> CodePathFacts();

// The machine's load at one moment of a run ("start" or "end"): entries load_avg_<when>
// (1, 5 and 15 minute load averages) and busy_processes_<when> (other processes that used
// at least 10% of a CPU over a 0.25 s sample, this process and its children excluded), and
// a warning naming those processes. Sleeps for the sample.
Environment CaptureLoad(const std::string& when);

// "seqbench 0.1.0, git 1b7f7f9 (dirty), LibTorch 1.13.0, Release build (GNU 12.2.0)": what
// `seqbench --version` prints, from the same build facts a run records.
std::string VersionLine();

}  // namespace seqbench
