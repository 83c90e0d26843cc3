// A user's regular expression over case keys (run --filter, --test-slowdown-filter,
// verify --filter), matched by RE2: time linear in the key's length whatever the pattern,
// so that no pattern can hang a run. std::regex backtracks: "(.*)*x" never finishes on a
// 70-character key. RE2's syntax is ECMAScript's without backreferences and lookaround.
//
// Thread-safety: immutable after construction; Matches() is safe from any thread.
#pragma once

#include <memory>
#include <string>

namespace re2 {
class RE2;
}

namespace seqbench {

class KeyPattern {
 public:
  // Throws std::invalid_argument, with RE2's reason, where `pattern` is not a valid one.
  explicit KeyPattern(const std::string& pattern);
  ~KeyPattern();
  KeyPattern(const KeyPattern&) = default;
  KeyPattern& operator=(const KeyPattern&) = default;

  // Whether the pattern matches anywhere in `key` (as std::regex_search would).
  bool Matches(const std::string& key) const;

 private:
  std::shared_ptr<const re2::RE2> re2_;
};

}  // namespace seqbench
