// Lockstep sampling, for seqbench ab: two processes, the base build and the new one, time
// the same cases in turns, one sample at a time, so that the two samples of a pair are
// taken milliseconds apart. This VM switches between two speeds about 1.6x apart several
// times a second (one process's repetitions of one case read 0.060 0.058 0.084 s); a pair
// of whole-suite processes one after the other (seconds apart) lands on different speeds
// as often as not, a pair of samples taken back to back rarely does.
//
// A controller (RunAb) and each worker (`run --lockstep PREFIX`) talk over two named pipes
// the controller makes, PREFIX.in (to the worker) and PREFIX.out (from it), one line a
// message:
//   worker:     "ready KEY" for each case it set up, checked and warmed up, then "prepared";
//   controller: "time KEY": one sample of that case (one untimed step, then the timed one),
//               answered "done";
//   controller: "end": the worker finishes and stores every case, then exits.
// The controller opens both pipes read-write (Linux: a FIFO opened O_RDWR never blocks),
// so that neither side's open blocks; a worker reads end of file when its controller is
// gone, and stops. The controller, holding both ends itself, never reads end of file: it
// learns of a worker's end through Receive's `give_up`.
//
// Thread-safety: a LineChannel belongs to one thread.
#pragma once

#include <functional>
#include <string>

namespace seqbench {

// The FIFOs PREFIX.in and PREFIX.out, made for the controller; throws std::runtime_error
// when mkfifo fails.
void MakeLockstepPipes(const std::string& prefix);

// One end of a lockstep conversation: lines out on one pipe, lines in on the other.
class LineChannel {
 public:
  // The controller's end of PREFIX's pipes (both opened read-write: never blocks).
  static LineChannel Controller(const std::string& prefix);
  // A worker's end (PREFIX.in read-only, PREFIX.out write-only).
  static LineChannel Worker(const std::string& prefix);
  LineChannel(LineChannel&& other) noexcept;
  LineChannel& operator=(LineChannel&&) = delete;
  LineChannel(const LineChannel&) = delete;
  ~LineChannel();

  // Writes `line` and a newline. A worker whose controller is gone dies of SIGPIPE here;
  // throws std::runtime_error on another write error.
  void Send(const std::string& line);
  // The next line, without its newline. Throws std::runtime_error at end of file (a
  // worker's controller is gone), after
  // `timeout_s` seconds without a line (<= 0: no limit), or when `give_up` (polled every
  // 100 ms; may be empty) says so, naming `who`.
  std::string Receive(double timeout_s, const std::function<bool()>& give_up,
                      const std::string& who);

 private:
  LineChannel(int in, int out) : in_(in), out_(out) {}
  static LineChannel Open(const std::string& in_path, int in_flags, const std::string& out_path,
                          int out_flags);
  int in_ = -1, out_ = -1;
  std::string buffer_;  // read past the last line returned
};

}  // namespace seqbench
