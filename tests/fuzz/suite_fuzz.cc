// libFuzzer target for the benchmark-suite parser (harness/suite.h). Beyond "no crash, no
// sanitizer report, no hang": a refused file throws SuiteError only, at a place inside the
// text; an accepted file expands to cases that each name one of its variants, with distinct
// identities, and parsing its stored text again gives the same cases in the same order
// (resume and merge rely on that order and identity).
// Built and run by tests/fuzz/run_fuzzers, against the release build's variants.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "harness/suite.h"
#include "tests/fuzz/parser_properties.h"

namespace {

std::vector<std::string> CaseKeys(const seqbench::Suite& suite) {
  std::vector<std::string> keys;
  for (const seqbench::CaseSpec& spec : suite.Expand()) keys.push_back(spec.Key());
  return keys;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string path = "fuzz.toml";
  seqbench::Suite suite;
  try {
    suite = seqbench::ParseSuite(text, path);
  } catch (const seqbench::SuiteError& error) {
    seqbench::fuzz::CheckErrorLocation(error, text, path);
    return 0;
  }
  const std::vector<std::string> keys = CaseKeys(suite);
  if (keys.empty()) std::abort();  // "the suite has no cases" is a refusal, not a suite
  if (std::set<std::string>(keys.begin(), keys.end()).size() != keys.size()) std::abort();
  for (const seqbench::CaseSpec& spec : suite.Expand()) suite.Variant(spec.variant.name);
  suite.Variant(suite.baseline);
  if (CaseKeys(seqbench::ParseSuite(suite.text, path)) != keys) std::abort();
  return 0;
}
