// Peers: the same model written the way a PyTorch user would write it, in eager Python,
// timed beside seqbench's variants in the same run. A suite lists them under [[peers]];
// each case of a peer is a Python process (peers/pytorch/*.py under the source tree, or
// under $SEQBENCH_PEERS_DIR; Debian's python3-torch)
// that loads the suite's weights and batch from files seqbench writes, checks its step
// against the family's float64 reference like any variant, and times each train step with
// torch.utils.benchmark's clock (timeit.default_timer, i.e. perf_counter). Its samples are stored
// as an ordinary case, category kPeerCategory, so that reports, speedups and `check` set the
// variants beside it.
//
// The conversation is the lockstep one (harness/lockstep.h): one JSON line a message over
// two named pipes; the script's docstring lists the requests.
//
// Thread-safety: the table is immutable; a PeerProcess belongs to one thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/process.h"
#include "harness/equivalence.h"
#include "harness/lockstep.h"

namespace seqbench {

inline constexpr char kPeerCategory[] = "PyTorch eager (peer)";

// One peer a suite may list: its key, the family whose weights it takes, the script (under
// the source tree's peers/) and the form the script runs.
struct PeerEntry {
  std::string_view key;
  std::string_view family;
  std::string_view script;
  std::string_view form;
  std::string_view description;
};

// Every peer, in listing order.
const std::vector<PeerEntry>& Peers();
// The peer called `key`, or nullptr.
const PeerEntry* FindPeer(std::string_view key);
// The keys, comma-separated: for an error that lists what a suite may name.
std::string PeerKeys();

// Why `entry` cannot run on this machine ("" when it can): its script missing, or no
// python3 that imports torch and numpy ($SEQBENCH_PYTHON, the python3s on PATH, then
// /usr/bin/python3; probed once per process).
std::string PeerUnavailableReason(const PeerEntry& entry);

// One running peer: a python3 process and its pipes in a scratch directory, both gone
// with the object (the process is asked to quit, then killed).
class PeerProcess {
 public:
  // Starts the script with `threads` intra-op and BLAS threads (OMP_NUM_THREADS,
  // OPENBLAS_NUM_THREADS and torch.set_num_threads). An answer that takes longer than
  // `answer_timeout_s` fails its request (the process is then killed with the object).
  // Throws std::runtime_error when the scratch directory or the pipes cannot be made.
  PeerProcess(const PeerEntry& entry, int64_t threads, double answer_timeout_s);
  ~PeerProcess();
  PeerProcess(const PeerProcess&) = delete;
  PeerProcess& operator=(const PeerProcess&) = delete;

  // Hands the peer the model: `weights` (float64, the family's initialisation), the sizes
  // in `config`, the batch it times (tokens [B,T], lengths [B]) and the dtype it times in.
  // Returns its libraries, e.g. "PyTorch 1.13.1, Python 3.11.2". Throws on its failure.
  std::string Setup(const ModelConfig& config, const ParameterSet& weights, const Batch& batch,
                    const std::string& dtype);
  // One float64 train step (gradients, no update) on `rows` (a batch of the same T): its
  // logits [R,T,V], loss and every parameter's gradient, named as `weights` were.
  StepOutcome Check(const Batch& rows);
  // One train step in the timed dtype, timed in the peer by torch.utils.benchmark's
  // clock: its seconds. Untimed steps are the same request with the answer dropped.
  double TimedStep();
  // The peer process's peak resident set (bytes) after its last timed step; -1 before one.
  int64_t max_rss_bytes() const { return max_rss_bytes_; }

 private:
  // Sends `request` (a JSON object) and returns the answer; throws std::runtime_error with
  // the peer's error, or the tail of its log when it ended.
  std::string Ask(const std::string& request);
  std::string LogTail() const;

  int64_t threads_;
  double answer_timeout_s_;
  std::string dir_;
  std::vector<std::string> names_;  // the parameters, in the order of parameters.bin
  std::optional<LineChannel> channel_;
  std::thread thread_;
  std::atomic<bool> ended_{false};
  std::atomic<bool> abandon_{false};
  ChildOutcome outcome_;
  int64_t max_rss_bytes_ = -1;
};

}  // namespace seqbench
