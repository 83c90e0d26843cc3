// libFuzzer target for the training-suite parser (harness/training/training_suite.h).
// Beyond "no crash, no sanitizer report, no hang": a refused file throws SuiteError only,
// at a place inside the text; an accepted file has uniquely named pipelines, the reference
// among them, and parsing its stored text again gives the same pipelines.
// Built and run by tests/fuzz/run_fuzzers, against the release build's variants.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "harness/training/training_suite.h"
#include "tests/fuzz/parser_properties.h"

namespace {

std::vector<std::string> Described(const seqbench::training::TrainingSuite& suite) {
  std::vector<std::string> pipelines;
  for (const auto& pipeline : suite.pipelines) {
    pipelines.push_back(pipeline.name + ": " + pipeline.Describe());
  }
  return pipelines;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string path = "fuzz.toml";
  seqbench::training::TrainingSuite suite;
  try {
    suite = seqbench::training::ParseTrainingSuite(text, path);
  } catch (const seqbench::SuiteError& error) {
    seqbench::fuzz::CheckErrorLocation(error, text, path);
    return 0;
  }
  if (suite.pipelines.empty()) std::abort();
  std::set<std::string> names;
  for (const auto& pipeline : suite.pipelines) names.insert(pipeline.name);
  if (names.size() != suite.pipelines.size()) std::abort();
  suite.Pipeline(suite.reference);
  const seqbench::training::TrainingSuite again =
      seqbench::training::ParseTrainingSuite(suite.text, path);
  if (Described(again) != Described(suite)) std::abort();
  return 0;
}
