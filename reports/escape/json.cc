#include "reports/escape/json.h"

#include "reports/escape/visible.h"

namespace seqbench::escape {
namespace {

// Every string and key of `value` made valid UTF-8 by ValidUtf8, the one rule for all sinks.
nlohmann::json Valid(const nlohmann::json& value) {
  if (value.is_string()) return ValidUtf8(value.get<std::string>());
  if (value.is_array()) {
    nlohmann::json array = nlohmann::json::array();
    for (const auto& item : value) array.push_back(Valid(item));
    return array;
  }
  if (value.is_object()) {
    nlohmann::json object = nlohmann::json::object();
    for (const auto& [key, item] : value.items()) object[ValidUtf8(key)] = Valid(item);
    return object;
  }
  return value;
}

}  // namespace

std::string DumpJson(const nlohmann::json& document, int indent) {
  return Valid(document).dump(indent, ' ', false, nlohmann::json::error_handler_t::strict);
}

}  // namespace seqbench::escape
