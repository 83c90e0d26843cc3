// An NVTX injection library for the tests: NVTX3 loads it from NVTX_INJECTION64_PATH on
// the first range; it counts pushes and pops and records range names, written to the file
// named by SEQBENCH_NVTX_LOG when the process exits. It proves that the ranges are really
// emitted, on a machine without any NVIDIA tool.
//
// Thread-safety: the counters are atomics; log lines from several threads may interleave.
#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace {

FILE* log_file = nullptr;
std::atomic<long> pushes{0}, pops{0};

int CountPush(const char* message) {
  ++pushes;
  if (log_file != nullptr) std::fprintf(log_file, "push %s\n", message != nullptr ? message : "");
  return 0;
}

int CountPop() {
  ++pops;
  return 0;
}

void WriteTotals() {
  if (log_file != nullptr) {
    std::fprintf(log_file, "pushes %ld\npops %ld\n", pushes.load(), pops.load());
    std::fclose(log_file);
  }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get_export_table) {
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (callbacks == nullptr ||
      !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size)) {
    return 0;
  }
  if (size <= NVTX_CBID_CORE_RangePop) return 0;
  *table[NVTX_CBID_CORE_RangePushA] = reinterpret_cast<NvtxFunctionPointer>(CountPush);
  *table[NVTX_CBID_CORE_RangePop] = reinterpret_cast<NvtxFunctionPointer>(CountPop);
  if (const char* path = std::getenv("SEQBENCH_NVTX_LOG")) log_file = std::fopen(path, "w");
  std::atexit(WriteTotals);
  return 1;
}
