#include "harness/lockstep.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace seqbench {
namespace {

int OpenPipe(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0)
    throw std::runtime_error("lockstep: cannot open " + path + ": " + std::strerror(errno));
  return fd;
}

}  // namespace

void MakeLockstepPipes(const std::string& prefix) {
  for (const char* end : {".in", ".out"}) {
    const std::string path = prefix + end;
    if (::mkfifo(path.c_str(), 0600) != 0)
      throw std::runtime_error("lockstep: cannot make the pipe " + path + ": " +
                               std::strerror(errno));
  }
}

// Both ends, the first closed again when the second cannot be opened.
LineChannel LineChannel::Open(const std::string& in_path, int in_flags, const std::string& out_path,
                              int out_flags) {
  const int in = OpenPipe(in_path, in_flags);
  try {
    return LineChannel(in, OpenPipe(out_path, out_flags));
  } catch (...) {
    ::close(in);
    throw;
  }
}

LineChannel LineChannel::Controller(const std::string& prefix) {
  return Open(prefix + ".out", O_RDWR, prefix + ".in", O_RDWR);
}

LineChannel LineChannel::Worker(const std::string& prefix) {
  return Open(prefix + ".in", O_RDONLY, prefix + ".out", O_WRONLY);
}

LineChannel::LineChannel(LineChannel&& other) noexcept
    : in_(other.in_), out_(other.out_), buffer_(std::move(other.buffer_)) {
  other.in_ = other.out_ = -1;
}

LineChannel::~LineChannel() {
  if (in_ >= 0) ::close(in_);
  if (out_ >= 0) ::close(out_);
}

void LineChannel::Send(const std::string& line) {
  const std::string message = line + "\n";
  size_t written = 0;
  while (written < message.size()) {
    const ssize_t n = ::write(out_, message.data() + written, message.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("lockstep: the other side is gone (write failed)");
    written += static_cast<size_t>(n);
  }
}

std::string LineChannel::Receive(double timeout_s, const std::function<bool()>& give_up,
                                 const std::string& who) {
  const auto began = std::chrono::steady_clock::now();
  for (;;) {
    if (const size_t newline = buffer_.find('\n'); newline != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return line;
    }
    pollfd ready{in_, POLLIN, 0};
    const int polled = ::poll(&ready, 1, 100);
    if (polled < 0 && errno != EINTR)
      throw std::runtime_error(std::string("lockstep: poll: ") + std::strerror(errno));
    if (polled > 0) {
      char chunk[4096];
      const ssize_t n = ::read(in_, chunk, sizeof(chunk));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw std::runtime_error("lockstep: " + who + " closed the conversation");
      buffer_.append(chunk, static_cast<size_t>(n));
      continue;
    }
    // Nothing to read: only now ask whether to give up, so that a last line is never lost.
    if (give_up && give_up()) throw std::runtime_error("lockstep: " + who + " stopped");
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    if (timeout_s > 0 && waited > timeout_s)
      throw std::runtime_error("lockstep: no answer from " + who + " in " +
                               std::to_string(static_cast<int64_t>(timeout_s)) + " s");
  }
}

}  // namespace seqbench
