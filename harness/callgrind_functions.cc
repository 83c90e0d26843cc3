#include "harness/callgrind_functions.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <iterator>
#include <sstream>

namespace seqbench {
namespace {

// Callgrind's name compression: "(12) name" defines id 12, "(12)" uses it; one table for
// functions (fn=, cfn=), another for objects (ob=, cob=).
class CompressedNames {
 public:
  std::string Resolve(const std::string& spec) {
    if (spec.empty() || spec[0] != '(') return spec;
    const size_t close = spec.find(')');
    if (close == std::string::npos) return spec;
    const std::string id = spec.substr(0, close + 1);
    if (close + 1 < spec.size()) {
      const size_t begin = spec.find_first_not_of(' ', close + 1);
      if (begin != std::string::npos) names_[id] = spec.substr(begin);
    }
    const auto known = names_.find(id);
    return known != names_.end() ? known->second : id;
  }

 private:
  std::map<std::string, std::string> names_;
};

// "f'2" (a recursion level of f) is f.
std::string WithoutRecursionSuffix(const std::string& name) {
  const size_t quote = name.rfind('\'');
  if (quote == std::string::npos || quote + 1 == name.size()) return name;
  for (size_t i = quote + 1; i < name.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return name;
  return name.substr(0, quote);
}

// A function callgrind found no symbol for ("0x0000000000d173c0": a stripped library's
// local function) is named by its object too: "libtorch_cpu.so.1.13 0x0000000000d173c0".
std::string Named(const std::string& function, const std::string& object) {
  if (function.rfind("0x", 0) != 0 || object.empty()) return function;
  const size_t slash = object.rfind('/');
  return (slash == std::string::npos ? object : object.substr(slash + 1)) + " " + function;
}

bool StartsWith(const std::string& text, const char* prefix) { return text.rfind(prefix, 0) == 0; }

bool IsCostLine(const std::string& line) {
  const char c = line.empty() ? ' ' : line[0];
  return std::isdigit(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '*';
}

// The first event's count on a cost line of `positions` position columns (0 if absent).
double FirstEvent(const std::string& line, size_t positions) {
  std::istringstream fields(line);
  std::string field;
  for (size_t i = 0; i < positions; ++i)
    if (!(fields >> field)) return 0;
  return fields >> field ? std::strtod(field.c_str(), nullptr) : 0;
}

}  // namespace

std::map<std::string, double> CallgrindSelfCosts(const std::string& dump_text) {
  std::map<std::string, double> costs;
  CompressedNames names, objects;
  std::string function, object;
  size_t positions = 1;         // "positions: line" unless the header says otherwise
  bool call_cost_next = false;  // the line after calls= is the call's inclusive cost
  std::istringstream text(dump_text);
  std::string line;
  while (std::getline(text, line)) {
    if (IsCostLine(line)) {
      if (call_cost_next) {
        call_cost_next = false;
      } else if (!function.empty()) {
        costs[function] += FirstEvent(line, positions);
      }
    } else if (StartsWith(line, "fn=")) {
      function = Named(WithoutRecursionSuffix(names.Resolve(line.substr(3))), object);
    } else if (StartsWith(line, "cfn=")) {
      names.Resolve(line.substr(4));  // may define a name fn= uses later
    } else if (StartsWith(line, "ob=")) {
      object = objects.Resolve(line.substr(3));
    } else if (StartsWith(line, "cob=")) {
      objects.Resolve(line.substr(4));
    } else if (StartsWith(line, "calls=")) {
      call_cost_next = true;
    } else if (StartsWith(line, "positions:")) {
      std::istringstream kinds(line.substr(10));
      std::string kind;
      positions = 0;
      while (kinds >> kind) ++positions;
    }
  }
  for (auto it = costs.begin(); it != costs.end();)
    it = it->second == 0 ? costs.erase(it) : std::next(it);
  return costs;
}

std::vector<FunctionCost> CostliestFunctions(const std::map<std::string, double>& costs,
                                             size_t limit) {
  std::vector<FunctionCost> functions;
  for (const auto& [name, instructions] : costs) functions.push_back({name, instructions});
  std::sort(functions.begin(), functions.end(), [](const FunctionCost& a, const FunctionCost& b) {
    return a.instructions != b.instructions ? a.instructions > b.instructions
                                            : a.function < b.function;
  });
  if (functions.size() > limit) functions.resize(limit);
  return functions;
}

}  // namespace seqbench
