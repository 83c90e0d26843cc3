// The machine limits a roofline is drawn against, measured on this machine rather than
// looked up: the GEMM rate (square products whose operands fit in the last-level cache,
// best of several) and the streaming bandwidth (a copy of a buffer far larger than the
// caches, counted as STREAM counts it: bytes read plus bytes written). `seqbench run`
// measures them once, before its first case, at each device, dtype and thread count its
// cases use (a long run again after its last case, keeping the higher), and stores them in
// the run's environment (PeakGemmKey, PeakStreamKey), so that "% of peak" compares a case
// with what this machine did under the same conditions.
//
// Thread-safety: changes the process-wide thread settings (SetThreads); call from the
// thread that runs cases, before them.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "harness/environment.h"
#include "harness/suite.h"
#include "results/records.h"

namespace seqbench {

struct MachineLimits {
  double gemm_gflops = 0;  // FLOP/s of torch::mm on [n,n]·[n,n] in `dtype`, / 1e9
  double stream_gbs = 0;   // (bytes read + bytes written) / s of a large copy, / 1e9
};

// The rates from one timed call: a [n,n]·[n,n] product is n³ multiply-adds, 2n³ FLOPs; a
// copy of `bytes` reads them and writes them.
double GemmGflops(int64_t n, double seconds);
double CopyGbs(int64_t bytes, double seconds);

// Measures both limits on `device` with `threads` intra-op and BLAS threads (left set).
// About half a second on a CPU core.
MachineLimits MeasureMachineLimits(torch::Device device, torch::ScalarType dtype, int64_t threads);

// The limits for every (device, dtype, threads) among `cases`, as environment entries
// named by PeakGemmKey() and PeakStreamKey(). Devices this process cannot use (CUDA
// without a GPU) are left out: their cases are skipped anyway.
std::vector<std::pair<std::string, std::string>> MeasureLimitsFor(
    const std::vector<CaseSpec>& cases);

// A limit is what the machine can do, and a disturbance (a neighbour on a shared VM, for
// seconds at a time) only lowers a measurement of it: a long run measures its limits again
// after its last case (MeasureLimitsFor) and keeps, per entry, the higher of that and what
// `run` stored at its start. Returns the entries to store over the run's (none when the
// start's were as high), with "machine_limits" saying which were raised.
std::vector<std::pair<std::string, std::string>> KeepHigherLimits(
    const RunRecord& run, const std::vector<std::pair<std::string, std::string>>& again);

// The environment entries that decide what the limits measure: the machine (CPU model and
// logical cores, GPU, host), and the code the GEMM and copy run (LibTorch, the BLAS library
// and its core, ATen's CPU capability, OPENBLAS_CORETYPE). Runs that agree on all of them
// measured the same limits.
const std::vector<std::string>& LimitFingerprintKeys();

// The limits `cases` need, measured once per machine (issue 48): taken from the newest of
// `earlier` (stored runs, newest first, with their environments) whose LimitFingerprintKeys
// entries equal `now`'s and which holds every entry MeasureLimitsFor would give (never an
// A/B side's: its two workers measured at once), else
// measured (always with `remeasure`). Adds entry "machine_limits": "measured", or "from run
// N (UUID, same machine fingerprint)".
std::vector<std::pair<std::string, std::string>> LimitsFor(const std::vector<CaseSpec>& cases,
                                                           const Environment& now,
                                                           const std::vector<RunRecord>& earlier,
                                                           bool remeasure);

}  // namespace seqbench
