#include "variants/core/registry.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "variants/core/plugin.h"

namespace seqbench {
namespace {

// Set while LoadPlugin() runs dlopen(): registrations then record their errors and keys
// here instead of aborting, so a bad plugin becomes a clear error and leaves no trace.
struct PluginLoadState {
  std::string path;
  std::vector<std::string> added_keys;
  std::vector<std::string> errors;
};
PluginLoadState* active_plugin_load = nullptr;

template <typename Entry>
void AddOrDie(Registry<Entry>& registry, Entry entry) {
  const std::string key = entry.key;
  try {
    registry.Add(std::move(entry));
    if (active_plugin_load != nullptr) active_plugin_load->added_keys.push_back(key);
  } catch (const std::exception& error) {
    if (active_plugin_load != nullptr) {
      active_plugin_load->errors.push_back(error.what());
      return;
    }
    std::fprintf(stderr, "seqbench: fatal: %s\n", error.what());
    std::abort();
  }
}

}  // namespace

VariantRegistry& GlobalVariants() {
  static VariantRegistry registry("variant", "variants");
  return registry;
}

FamilyRegistry& GlobalFamilies() {
  static FamilyRegistry registry("model family", "model families");
  return registry;
}

std::unique_ptr<Variant> CreateVariant(std::string_view key) {
  return GlobalVariants().Get(key).factory();
}

VariantRegistration::VariantRegistration(const char* key, const char* description,
                                         std::function<std::unique_ptr<Variant>()> factory,
                                         Capabilities capabilities) {
  const std::string origin =
      active_plugin_load != nullptr ? active_plugin_load->path : std::string("built-in");
  AddOrDie(GlobalVariants(),
           VariantEntry{key, description, std::move(factory), origin, std::move(capabilities)});
}

FamilyRegistration::FamilyRegistration(
    const char* key, const char* description,
    std::function<ParameterSet(const ModelConfig&, uint64_t)> init_weights,
    std::function<void(const ModelConfig&)> validate,
    std::function<StepCost(const ModelConfig&, const StepWork&)> step_cost) {
  AddOrDie(GlobalFamilies(), FamilyEntry{key, description, std::move(init_weights),
                                         std::move(validate), std::move(step_cost)});
}

LoadedPlugin LoadPlugin(const std::string& path) {
  if (void* loaded = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD)) {
    dlclose(loaded);  // drops the reference RTLD_NOLOAD just took
    throw PluginError(path + ": plugin already loaded; give each --plugin once");
  }
  PluginLoadState state{path, {}, {}};
  active_plugin_load = &state;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  active_plugin_load = nullptr;
  if (handle == nullptr) {
    throw PluginError(path + ": cannot load plugin: " + dlerror() +
                      " (give the path of a shared library built with SEQBENCH_PLUGIN())");
  }
  const auto fail = [&](const std::string& message) {
    for (const auto& key : state.added_keys) GlobalVariants().Remove(key);
    dlclose(handle);
    throw PluginError(path + ": " + message);
  };

  using ApiVersionFn = int (*)();
  using TorchVersionFn = const char* (*)();
  const auto api_version =
      reinterpret_cast<ApiVersionFn>(dlsym(handle, "seqbench_plugin_api_version"));
  const auto torch_version =
      reinterpret_cast<TorchVersionFn>(dlsym(handle, "seqbench_plugin_torch_version"));
  if (api_version == nullptr || torch_version == nullptr) {
    fail(
        "not a seqbench plugin: add SEQBENCH_PLUGIN() (variants/core/plugin.h) to one of "
        "its source files");
  }
  if (api_version() != kPluginApiVersion) {
    fail("built for plugin API version " + std::to_string(api_version()) +
         ", but this seqbench has version " + std::to_string(kPluginApiVersion) +
         "; rebuild the plugin against this seqbench's headers");
  }
  if (compat::TorchVersion() != torch_version()) {
    fail(std::string("built against LibTorch ") + torch_version() + ", but this seqbench uses " +
         compat::TorchVersion() + "; rebuild the plugin against the same LibTorch");
  }
  if (!state.errors.empty()) {
    std::string joined;
    for (const auto& error : state.errors) joined += (joined.empty() ? "" : "; ") + error;
    fail(joined);
  }
  if (state.added_keys.empty()) fail("the plugin registers no variants");
  std::sort(state.added_keys.begin(), state.added_keys.end());
  return LoadedPlugin{path, state.added_keys};
}

}  // namespace seqbench
