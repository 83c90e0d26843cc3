// The one case identity: the key tells apart cases that differ in any workload field (or
// in the variant's name, key or options), labels and filters come from the same field
// table, and bounds are enforced where values are set.
#include <catch2/catch.hpp>
#include <set>

#include "results/case_identity.h"

namespace seqbench {
namespace {

// A value of `field` other than its default in `workload`.
std::string OtherValue(const WorkloadField& field, const Workload& workload) {
  const std::string current = field.Get(workload);
  if (field.text != nullptr) {
    for (const auto choice : field.choices) {
      if (choice != current) return std::string(choice);
    }
  }
  return std::to_string(workload.*field.integer + 1);
}

TEST_CASE("identity: the key separates cases that differ in any one field", "[identity]") {
  const CaseIdentity base{"scan", "scan", "chunk_size=8", Workload{}};
  std::set<std::string> keys = {base.Key()};
  for (const WorkloadField& field : WorkloadFields()) {
    INFO(field.name);
    CaseIdentity changed = base;
    REQUIRE(field.Set(changed.workload, OtherValue(field, base.workload)).empty());
    CHECK(changed.Key() != base.Key());
    CHECK_FALSE(changed == base);
    CHECK(changed.workload.Field(field.name) != base.workload.Field(field.name));
    keys.insert(changed.Key());
  }
  for (const auto& change :
       {&CaseIdentity::variant_name, &CaseIdentity::variant_key, &CaseIdentity::options}) {
    CaseIdentity changed = base;
    changed.*change += "x";
    keys.insert(changed.Key());
  }
  CHECK(keys.size() == 1 + WorkloadFields().size() + 3);
}

TEST_CASE("identity: every field is in the key, named once, with sane bounds", "[identity]") {
  const Workload workload;
  const std::string key = workload.Key();
  std::set<std::string> names;
  for (const WorkloadField& field : WorkloadFields()) {
    INFO(field.name);
    CHECK(names.insert(std::string(field.name)).second);
    // A field added after runs were stored is in the key except at its default, so that
    // those runs' keys stay what they were (the key-separation test covers other values).
    const bool in_key = field.omit_in_key.empty() || field.Get(workload) != field.omit_in_key;
    CHECK((key.find(std::string(field.name) + "=" + field.Get(workload)) != std::string::npos) ==
          in_key);
    CHECK(FindWorkloadField(field.name) == &field);
    CHECK((field.integer != nullptr) != (field.text != nullptr));
    if (field.integer != nullptr) {
      CHECK(field.min <= field.max);
      Workload copy;
      CHECK_FALSE(field.Set(copy, std::to_string(field.max) + "0").empty());
      CHECK_FALSE(field.Set(copy, std::to_string(field.min - 1)).empty());
      CHECK_FALSE(field.Set(copy, "12abc").empty());
      CHECK_FALSE(field.Set(copy, "99999999999999999999999").empty());
    } else {
      Workload copy;
      CHECK_FALSE(field.Set(copy, "not-a-choice").empty());
    }
    CHECK_FALSE(field.flag.empty());
    CHECK_FALSE(field.label.empty());
  }
  CHECK(FindWorkloadField("nope") == nullptr);
}

TEST_CASE("identity: labels drop zero padding and N outside generate mode", "[identity]") {
  Workload workload;
  workload.mode = "train";
  workload.batch = 4;
  workload.seq_len = 32;
  const std::string label = workload.Label();
  CHECK(label.find("B=4") != std::string::npos);
  CHECK(label.find("T=32") != std::string::npos);
  CHECK(label.find("min_len") == std::string::npos);
  CHECK(label.find("N=") == std::string::npos);
  workload.mode = "generate";
  workload.generate_tokens = 8;
  CHECK(workload.Label().find("N=8") != std::string::npos);
}

TEST_CASE("identity: filters match field values as text", "[identity]") {
  Workload workload;
  workload.batch = 8;
  CHECK(MatchesFilters(workload, {{"batch", "8"}, {"mode", "forward"}}));
  CHECK_FALSE(MatchesFilters(workload, {{"batch", "1"}}));
  CHECK_FALSE(MatchesFilters(workload, {{"no_such_field", "8"}}));
  CHECK(MatchesFilters(workload, {}));
}

}  // namespace
}  // namespace seqbench
