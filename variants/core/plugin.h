// Out-of-tree variants: a shared library that registers more variants with
// SEQBENCH_REGISTER_VARIANT and declares SEQBENCH_PLUGIN() once. `seqbench --plugin
// lib.so` loads it; the API version and the LibTorch version it was built against must
// match this binary's, or the load fails and registers nothing.
//
// Thread-safety: LoadPlugin() mutates the global registries; call it before any other
// thread reads them (the command line does so first thing).
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "variants/core/torch_compat.h"

namespace seqbench {

// Bump when Variant, Batch, ForwardOutput or the registries change layout.
// 2: capabilities (with complexity) at registration; 3: Variant::Work, FamilyEntry::step_cost;
// 4: Variant::SkipReason, Capabilities::unavailable, ModelConfig::ffn, StepWork's pairs
inline constexpr int kPluginApiVersion = 4;

class PluginError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct LoadedPlugin {
  std::string path;
  std::vector<std::string> variant_keys;  // what it registered, sorted
};

// Loads `path` and keeps it loaded for the life of the process. Throws PluginError, with
// the path and what to do about it, when the file cannot be loaded, is not a seqbench
// plugin, was built for another API or LibTorch version, registers a key that already
// exists, or registers nothing.
LoadedPlugin LoadPlugin(const std::string& path);

}  // namespace seqbench

// Declares the plugin's API and LibTorch versions. Use exactly once per plugin library.
#define SEQBENCH_PLUGIN()                                                                         \
  extern "C" __attribute__((visibility("default"))) int seqbench_plugin_api_version() {           \
    return ::seqbench::kPluginApiVersion;                                                         \
  }                                                                                               \
  extern "C" __attribute__((visibility("default"))) const char* seqbench_plugin_torch_version() { \
    return TORCH_VERSION;                                                                         \
  }
