// A progress line for a long wait (site, history, merge, ab's rounds): "what: 3 of 40  ETA 12s",
// rewritten in place on stderr while both stdout and stderr are terminals, and nothing at
// all otherwise, so that a log, a pipe or a CI job gets only the command's own output. The line is
// cleared when the work ends (Finish, or the destructor), before the command prints.
//
// Thread-safety: not thread-safe; one per wait, updated from the thread that owns it.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace seqbench::cli {

class TerminalProgress {
 public:
  explicit TerminalProgress(std::string what);
  ~TerminalProgress();
  TerminalProgress(const TerminalProgress&) = delete;
  TerminalProgress& operator=(const TerminalProgress&) = delete;

  // `done` of `total` steps are finished; redrawn at most every 100 ms (and at the end).
  void Update(size_t done, size_t total);
  // Clears the line (if one is shown).
  void Finish();

 private:
  std::string what_;
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_, last_drawn_;
};

}  // namespace seqbench::cli
