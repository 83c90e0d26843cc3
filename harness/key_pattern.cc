#include "harness/key_pattern.h"

#include <re2/re2.h>

#include <stdexcept>

namespace seqbench {

KeyPattern::KeyPattern(const std::string& pattern) {
  RE2::Options options;
  options.set_log_errors(false);  // the error goes into the exception, not to stderr
  auto compiled = std::make_shared<const RE2>(pattern, options);
  if (!compiled->ok()) {
    throw std::invalid_argument(
        "'" + pattern + "' is not a valid regular expression (RE2: " + compiled->error() + ")");
  }
  re2_ = std::move(compiled);
}

KeyPattern::~KeyPattern() = default;

bool KeyPattern::Matches(const std::string& key) const { return RE2::PartialMatch(key, *re2_); }

}  // namespace seqbench
