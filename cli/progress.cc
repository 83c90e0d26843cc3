#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>
#include <utility>

#include "reports/format.h"

namespace seqbench::cli {

TerminalProgress::TerminalProgress(std::string what)
    : what_(std::move(what)),
      enabled_(::isatty(STDOUT_FILENO) == 1 && ::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()) {}

TerminalProgress::~TerminalProgress() { Finish(); }

void TerminalProgress::Update(size_t done, size_t total) {
  if (!enabled_ || total == 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (shown_ && done < total && now - last_drawn_ < std::chrono::milliseconds(100)) return;
  last_drawn_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double eta = done == 0 ? 0 : elapsed * static_cast<double>(total - done) / done;
  // \r and erase-to-end: the line is redrawn where it stands.
  std::fprintf(stderr, "\r%s: %zu of %zu  ETA %s\033[K", what_.c_str(), done, total,
               FormatEta(eta).c_str());
  std::fflush(stderr);
  shown_ = true;
}

void TerminalProgress::Finish() {
  if (!shown_) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  shown_ = false;
}

}  // namespace seqbench::cli
