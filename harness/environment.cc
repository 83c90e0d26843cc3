#include "harness/environment.h"

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "build_info.h"
#include "git_info.h"
#include "harness/memory.h"
#include "harness/threads.h"
#include "variants/simple_rnn/recurrence_kernels.h"
#include "variants/core/torch_compat.h"

namespace seqbench {
namespace {

std::string FirstLine(const std::string& path) {
  std::ifstream file(path);
  std::string line;
  std::getline(file, line);
  return file ? line : "";
}

// The value of the first "key ... : value" line in /proc/cpuinfo.
std::string CpuInfo(const std::string& key) {
  std::ifstream file("/proc/cpuinfo");
  std::string line;
  while (std::getline(file, line)) {
    if (line.rfind(key, 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

// The vector extensions among /proc/cpuinfo's flags that decide a CPU's floating-point
// peak and which kernels fit it, in a fixed order ("sse2 sse3 ssse3 sse4_1 sse4_2 avx fma
// avx2 avx512f"; cpuinfo calls SSE3 "pni"), or "none" (another architecture).
std::string SimdFlags() {
  std::istringstream words(CpuInfo("flags"));
  std::set<std::string> present;
  for (std::string word; words >> word;) present.insert(word == "pni" ? "sse3" : word);
  std::string flags;
  for (const char* flag :
       {"sse2", "sse3", "ssse3", "sse4_1", "sse4_2", "avx", "fma", "avx2", "avx512f"}) {
    if (present.count(flag)) flags += (flags.empty() ? "" : " ") + std::string(flag);
  }
  return flags.empty() ? "none" : flags;
}

std::string OsName() {
  std::ifstream file("/etc/os-release");
  std::string line;
  while (std::getline(file, line)) {
    if (line.rfind("PRETTY_NAME=", 0) == 0) {
      std::string value = line.substr(12);
      if (value.size() >= 2 && value.front() == '"') value = value.substr(1, value.size() - 2);
      return value;
    }
  }
  return "unknown";
}

// "BLAS_INFO=open" and friends from LibTorch's build configuration.
std::string BuildSetting(const std::string& config, const std::string& name) {
  const std::regex pattern(name + "=([^,\\n]*)");
  std::smatch match;
  return std::regex_search(config, match, pattern) ? match[1].str() : "unknown";
}

// The BLAS shared library actually mapped into this process: Debian resolves libblas.so.3
// through alternatives, and OpenBLAS (pthreads) against the reference BLAS is a 10x
// difference on a 512^3 matmul.
std::string LoadedBlasLibrary() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    if (path.find("blas") != std::string::npos || path.find("mkl") != std::string::npos) {
      std::error_code ignored;
      const auto resolved = std::filesystem::canonical(path, ignored);
      return ignored ? path : resolved.string();
    }
  }
  return "none found";
}

// ATen's intra-op thread pool, as LibTorch was built: beside OpenMP, a BLAS with a pool
// of its own hands the cores back and forth (reports/hardware.h: BlasPoolWarning).
std::string AtenParallelBackend() {
#if AT_PARALLEL_OPENMP
  return "OpenMP";
#elif AT_PARALLEL_NATIVE
  return "native";
#else
  return "TBB";
#endif
}

// A string returned by an OpenBLAS function of this process, or `otherwise` when the BLAS
// mapped is not OpenBLAS (the reference BLAS, MKL).
std::string OpenBlasString(const char* function, const std::string& otherwise) {
  using Getter = char* (*)();
  const auto getter = reinterpret_cast<Getter>(dlsym(RTLD_DEFAULT, function));
  if (getter == nullptr) return otherwise;
  std::string text = getter();
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text;
}

std::string VariableOrUnset(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "unset" : value;
}

// google/benchmark's view of the CPU (the one its own JSON reports): caches as the JSON
// array it writes, so that an export can give them back as they were.
std::string CachesJson(const benchmark::CPUInfo& info) {
  std::string text = "[";
  for (const auto& cache : info.caches) {
    if (text.size() > 1) text += ",";
    text += "{\"type\":\"" + cache.type + "\",\"level\":" + std::to_string(cache.level) +
            ",\"size\":" + std::to_string(cache.size) +
            ",\"num_sharing\":" + std::to_string(cache.num_sharing) + "}";
  }
  return text + "]";
}

struct ProcessTimes {
  std::string name;
  int64_t parent = 0;
  int64_t ticks = 0;  // user + system CPU time, in clock ticks
};

// Every process's CPU time so far, from /proc/PID/stat. A process that exits while being
// read is simply missing.
std::map<int64_t, ProcessTimes> ReadProcessTimes() {
  std::map<int64_t, ProcessTimes> processes;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string pid_text = entry.path().filename().string();
    if (pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream file(entry.path() / "stat");
    std::string line;
    if (!std::getline(file, line)) continue;
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so the fields
    // are counted from the last ')'.
    const auto open = line.find('('), close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close < open) continue;
    std::istringstream fields(line.substr(close + 2));
    std::string state;
    ProcessTimes times;
    times.name = line.substr(open + 1, close - open - 1);
    fields >> state >> times.parent;
    std::string skipped;
    for (int i = 0; i < 9; ++i) fields >> skipped;  // pgrp .. cmajflt
    int64_t user = 0, system = 0;
    if (!(fields >> user >> system)) continue;
    times.ticks = user + system;
    processes[std::stoll(pid_text)] = times;
  }
  return processes;
}

}  // namespace

Environment CaptureLoad(const std::string& when) {
  Environment env;
  double load[3] = {0, 0, 0};
  const int samples = getloadavg(load, 3);
  char text[64] = "unavailable";
  if (samples == 3) std::snprintf(text, sizeof(text), "%.2f %.2f %.2f", load[0], load[1], load[2]);
  env.entries.emplace_back("load_avg_" + when, text);

  constexpr double kWindowS = 0.25, kBusyShare = 0.10;
  const auto before = ReadProcessTimes();
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(kWindowS));
  const auto after = ReadProcessTimes();
  const double window_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double ticks_per_s = static_cast<double>(sysconf(_SC_CLK_TCK));
  const int64_t self = getpid();
  std::vector<std::pair<double, std::string>> busy;
  for (const auto& [pid, times] : after) {
    const auto earlier = before.find(pid);
    if (pid == self || times.parent == self || earlier == before.end()) continue;
    const double share = (times.ticks - earlier->second.ticks) / ticks_per_s / window_s;
    if (share < kBusyShare) continue;
    busy.emplace_back(share, times.name + " (pid " + std::to_string(pid) + ", " +
                                 std::to_string(static_cast<int>(share * 100 + 0.5)) +
                                 "% of a CPU)");
  }
  std::sort(busy.rbegin(), busy.rend());
  std::string list;
  for (const auto& [share, description] : busy) list += (list.empty() ? "" : ", ") + description;
  env.entries.emplace_back("busy_processes_" + when, list.empty() ? "none" : list);
  if (!busy.empty()) {
    env.warnings.push_back("at the run's " + when + ", " + std::to_string(busy.size()) +
                           " other process(es) used a CPU: " + list);
  }
  return env;
}

std::string Environment::Get(const std::string& key) const {
  for (const auto& [name, value] : entries) {
    if (name == key) return value;
  }
  return "";
}

std::string VersionLine() {
  const std::string sha = SEQBENCH_GIT_SHA;
  return std::string("seqbench ") + SEQBENCH_VERSION + ", git " + sha.substr(0, 7) +
         (std::string(SEQBENCH_GIT_DIRTY) == "true" ? " (dirty)" : "") + ", LibTorch " +
         compat::TorchVersion() + ", " + SEQBENCH_BUILD_TYPE + " build (" + SEQBENCH_COMPILER + ")";
}

std::vector<std::pair<std::string, std::string>> CodePathFacts() {
  // ATen reports the capability its dispatch uses in its build summary (the function
  // itself, at::native::get_cpu_capability, is not exported by Debian's LibTorch).
  static const std::regex usage("CPU capability usage: ([A-Za-z0-9_]+)");
  const std::string config = at::show_config();
  std::smatch match;
  const std::string capability =
      std::regex_search(config, match, usage) ? match[1].str() : "unknown";
  return {
      {"blas_core", OpenBlasString("openblas_get_corename", "not OpenBLAS")},
      {"blas_config", OpenBlasString("openblas_get_config", "not OpenBLAS")},
      {"aten_cpu_capability", capability},
      {"simple_rnn_kernels",
       simple_rnn::KernelSetName(simple_rnn::WidestKernelSetOfThisCpu())},
      {"glibc_version", gnu_get_libc_version()},
      {"env_openblas_coretype", VariableOrUnset("OPENBLAS_CORETYPE")},
      {"env_aten_cpu_capability", VariableOrUnset("ATEN_CPU_CAPABILITY")},
      {"env_glibc_tunables", VariableOrUnset("GLIBC_TUNABLES")},
  };
}

Environment CaptureEnvironment() {
  Environment env;
  const auto add = [&](const std::string& key, const std::string& value) {
    env.entries.emplace_back(key, value);
  };
  add("seqbench_version", SEQBENCH_VERSION);
  add("git_sha", SEQBENCH_GIT_SHA);
  add("git_dirty", SEQBENCH_GIT_DIRTY);
  add("compiler", SEQBENCH_COMPILER);
  add("build_type", SEQBENCH_BUILD_TYPE);
  add("cxx_flags", SEQBENCH_CXX_FLAGS);
  add("torch_version", compat::TorchVersion());
  const std::string torch_config = at::show_config();
  add("blas", BuildSetting(torch_config, "BLAS_INFO"));
  add("lapack", BuildSetting(torch_config, "LAPACK_INFO"));
  add("blas_library", LoadedBlasLibrary());
  for (const auto& [key, value] : CodePathFacts()) add(key, value);
  add("torch_threads", std::to_string(at::get_num_threads()));
  add("aten_parallel", AtenParallelBackend());
  add("torch_interop_threads", std::to_string(at::get_num_interop_threads()));
  const ThreadsInForce threads = CurrentThreads();
  add("malloc", RetainFreedMemory());
  add("blas_threads", threads.blas >= 0 ? std::to_string(threads.blas) : "unknown");
  add("omp_threads", threads.omp >= 0 ? std::to_string(threads.omp) : "unknown");
  add("cpu_physical_cores", std::to_string(PhysicalCores()));
  add("cuda_available", torch::cuda::is_available() ? "true" : "false");
  add("cuda_device_count", std::to_string(torch::cuda::device_count()));
  add("cudnn_available", torch::cuda::cudnn_is_available() ? "true" : "false");
  add("cpu_model", CpuInfo("model name"));
  add("cpu_simd", SimdFlags());
  add("cpu_logical_cores", std::to_string(std::thread::hardware_concurrency()));
  const std::string governor = FirstLine("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor");
  add("cpu_governor", governor.empty() ? "unavailable" : governor);
  const benchmark::CPUInfo& cpu = benchmark::CPUInfo::Get();
  add("cpu_mhz", std::to_string(static_cast<int64_t>(cpu.cycles_per_second / 1e6 + 0.5)));
  add("cpu_caches", CachesJson(cpu));
  add("gbench_version", SEQBENCH_GBENCH_VERSION);
  utsname names{};
  if (uname(&names) == 0) {
    add("kernel", std::string(names.sysname) + " " + names.release);
    add("hostname", names.nodename);
    add("machine", names.machine);
  }
  add("os", OsName());

#ifndef NDEBUG
  env.warnings.push_back(
      "debug build (assertions on, no optimisation): timings are not representative");
#endif
  if (!governor.empty() && governor != "performance") {
    env.warnings.push_back("CPU frequency governor is '" + governor +
                           "', not 'performance': timings may vary with clock scaling");
  }
  return env;
}

}  // namespace seqbench
