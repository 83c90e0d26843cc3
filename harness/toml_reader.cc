#include "harness/toml_reader.h"

namespace seqbench {
namespace {

// time_per_doubling: `over` names the workload field that doubles, and `variant` is
// optional (every variant of the run when left out).
void ReadDoublingExpectation(const TomlReader& reader, const toml::table& table,
                             const std::set<std::string>& names, const std::string& names_are,
                             Expectation& e) {
  const std::string context = "[[expect]] of what = \"time_per_doubling\"";
  const toml::node& over = reader.Required(table, "over", context);
  e.over = reader.String(over, "over");
  const WorkloadField* field = FindWorkloadField(e.over);
  if (field == nullptr || field->integer == nullptr) {
    reader.Fail(over.source(), context + ": over '" + e.over +
                                   "' is not an integer workload field; it names the field "
                                   "that doubles, e.g. over = \"seq_len\"");
  }
  if (const toml::node* variant = table.get("variant")) {
    e.variant = reader.String(*variant, "variant");
    if (names.count(e.variant) == 0) {
      reader.Fail(variant->source(), "[[expect]] variant '" + e.variant + "' is not " + names_are +
                                         ": " + Joined({names.begin(), names.end()}));
    }
  }
  if (!e.at_least && !e.at_most) {
    reader.Fail(table.source(), context + " needs 'at_least' or 'at_most'");
  }
}

// A name an expectation bounds: one of `names`, or "peer:NAME" for one of `peers` (a
// [[peers]] entry, stored under NAME), which says in the suite that the bound is against
// the PyTorch a user would write.
std::string ExpectedName(const TomlReader& reader, const toml::node& node, const char* role,
                         const std::set<std::string>& names, const std::string& names_are,
                         const std::set<std::string>& peers) {
  const std::string name = reader.String(node, role);
  constexpr char kPeer[] = "peer:";
  if (name.rfind(kPeer, 0) == 0) {
    const std::string peer = name.substr(sizeof(kPeer) - 1);
    if (peers.count(peer) == 0)
      reader.Fail(node.source(), std::string("[[expect]] ") + role + " '" + name + "': '" + peer +
                                     "' is not one of the suite's [[peers]]" +
                                     (peers.empty() ? " (it has none)"
                                                    : ": " + Joined({peers.begin(), peers.end()})));
    return peer;
  }
  if (names.count(name) == 0) {
    reader.Fail(node.source(), std::string("[[expect]] ") + role + " '" + name + "' is not " +
                                   names_are + ": " + Joined({names.begin(), names.end()}));
  }
  return name;
}

}  // namespace

std::vector<Expectation> ReadExpectations(const TomlReader& reader, const toml::table& root,
                                          const std::vector<std::string>& kinds,
                                          const std::set<std::string>& names,
                                          const std::string& names_are,
                                          const std::vector<std::string>& extra_keys,
                                          const ExtraExpectationReader& read_extra,
                                          const std::set<std::string>& peers) {
  std::vector<Expectation> expectations;
  const toml::node* expect = root.get("expect");
  if (expect == nullptr) return expectations;
  if (!expect->is_array_of_tables()) {
    reader.Fail(expect->source(), "'expect' must be an array of tables: [[expect]]");
  }
  std::vector<std::string> keys = {"what", "variant", "over", "at_least", "at_most"};
  keys.insert(keys.end(), extra_keys.begin(), extra_keys.end());
  for (const toml::node& element : *expect->as_array()) {
    const toml::table& table = *element.as_table();
    reader.CheckKeys(table, "[[expect]]", keys);
    Expectation e;
    e.line = table.source().begin.line;
    e.what = reader.Choice(reader.Required(table, "what", "[[expect]]"), "what", kinds);
    if (auto* n = table.get("at_least")) e.at_least = reader.Number(*n, "at_least", 0);
    if (auto* n = table.get("at_most")) e.at_most = reader.Number(*n, "at_most", 0);
    if (e.what == "time_per_doubling") {
      ReadDoublingExpectation(reader, table, names, names_are, e);
    } else if (e.what != "all_correct") {
      // gemm_floor is one variant's figure: nothing to compare it with.
      const bool alone = e.what == "gemm_floor";
      if (const toml::node* over = table.get("over"); alone && over != nullptr) {
        reader.Fail(over->source(),
                    "[[expect]] of what = \"gemm_floor\" is one variant's "
                    "step over its own GEMM floor; drop 'over'");
      }
      for (const char* role : {"variant", "over"}) {
        if (alone && std::string(role) == "over") continue;
        const toml::node& n =
            reader.Required(table, role, "[[expect]] of what = \"" + e.what + "\"");
        (std::string(role) == "variant" ? e.variant : e.over) =
            ExpectedName(reader, n, role, names, names_are, peers);
      }
      if (!e.at_least && !e.at_most) {
        reader.Fail(table.source(),
                    "[[expect]] of what = \"" + e.what + "\" needs 'at_least' or 'at_most'");
      }
    }
    if (read_extra) read_extra(table, e);
    expectations.push_back(std::move(e));
  }
  return expectations;
}

}  // namespace seqbench
