// Regenerates the generated sections of a Markdown file (README.md). A section is the
// text between a begin marker, whose attributes say what to render, and an end marker:
//
//   <!-- seqbench:begin suite=readme device=cpu -->
//   ...generated; replaced on every run...
//   <!-- seqbench:end -->
//
// Only the text between markers changes; everything else is kept byte for byte, and
// rewriting an up-to-date file changes nothing.
//
// Thread-safety: pure functions.
#pragma once

#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace seqbench {

class ReadmeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A section that no complete run in the store matches: `readme` with several databases
// (CPU and GPU runs kept apart) then looks in the next one.
class NoMatchingRun : public ReadmeError {
 public:
  using ReadmeError::ReadmeError;
};

struct ReadmeSection {
  std::map<std::string, std::string> attributes;  // e.g. {suite: readme, device: cpu}
  int64_t line = 0;                               // of the begin marker
};

// Renders one section's new content (without markers) from its attributes; throws
// ReadmeError when it cannot (e.g. no matching run).
using SectionRenderer = std::function<std::string(const ReadmeSection& section)>;

// Returns `text` with every section's content replaced. Throws ReadmeError, naming
// `path` and the line, for a file without sections, a begin without end, an end without
// begin, nested sections or a malformed attribute.
std::string RewriteReadme(const std::string& text, const std::string& path,
                          const SectionRenderer& render);

}  // namespace seqbench
