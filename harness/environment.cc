#include "harness/environment.h"

#include <sys/utsname.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "build_info.h"
#include "git_info.h"
#include "harness/memory.h"
#include "harness/threads.h"
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

}  // namespace

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
  add("torch_threads", std::to_string(at::get_num_threads()));
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
  add("cpu_logical_cores", std::to_string(std::thread::hardware_concurrency()));
  const std::string governor = FirstLine("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor");
  add("cpu_governor", governor.empty() ? "unavailable" : governor);
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
