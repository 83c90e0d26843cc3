#include "harness/peer.h"

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "base/files.h"
#include "build_info.h"
#include "harness/memory.h"

namespace seqbench {
namespace {

using nlohmann::json;

// The interpreter the peers run on: the first of $SEQBENCH_PYTHON, the python3s on PATH
// and Debian's /usr/bin/python3 that imports torch and numpy (a pyenv or venv python3
// earlier on PATH does not see Debian's python3-torch). Probed once per process; `path`
// empty and `reason` set when none does.
struct PeerPython {
  std::string path;
  std::string reason;
};

const PeerPython& FindPeerPython() {
  static const PeerPython found = [] {
    std::vector<std::string> candidates;
    if (const char* chosen = std::getenv("SEQBENCH_PYTHON"); chosen != nullptr && *chosen)
      candidates.push_back(chosen);
    for (const std::string& on_path : AllOnPath("python3")) candidates.push_back(on_path);
    candidates.push_back("/usr/bin/python3");
    PeerPython python;
    std::string tried;
    for (const std::string& candidate : candidates) {
      if (::access(candidate.c_str(), X_OK) != 0) continue;
      ChildSpec spec;
      spec.argv = {candidate, "-c", "import torch, numpy"};
      spec.timeout_s = 120;
      spec.output = ChildSpec::Output::kFile;
      spec.output_path = "/dev/null";
      if (RunChild(spec).Succeeded()) {
        python.path = candidate;
        return python;
      }
      tried += (tried.empty() ? "" : ", ") + candidate;
    }
    python.reason =
        (tried.empty() ? std::string("no python3 found")
                       : "no python3 that imports torch and numpy (tried " + tried + ")") +
        ": the peer needs Debian's python3-torch";
    return python;
  }();
  return found;
}

std::string ScriptPath(const PeerEntry& entry) {
  const char* dir = std::getenv("SEQBENCH_PEERS_DIR");
  const std::string base = dir != nullptr && *dir != '\0'
                               ? std::string(dir)
                               : std::string(SEQBENCH_SOURCE_DIR) + "/peers";
  return base + "/" + std::string(entry.script);
}

// Writes a tensor's elements, contiguous in its own dtype, to `path` (base/files.h:
// whole or not at all, like every file seqbench writes).
void WriteTensor(const std::string& path, const torch::Tensor& tensor) {
  const torch::Tensor data = tensor.contiguous().cpu();
  WriteFileAtomically(path, std::string(static_cast<const char*>(data.data_ptr()),
                                        data.numel() * data.element_size()));
}

// Reads float64 elements of `shape` from `path`.
torch::Tensor ReadFloat64(const std::string& path, const std::vector<int64_t>& shape) {
  torch::Tensor tensor = torch::empty(shape, torch::kFloat64);
  std::ifstream in(path, std::ios::binary);
  const auto bytes = static_cast<std::streamsize>(tensor.numel() * sizeof(double));
  in.read(static_cast<char*>(tensor.data_ptr()), bytes);
  if (in.gcount() != bytes) throw std::runtime_error("peer: " + path + " is short");
  return tensor;
}

void WriteBatch(const std::string& dir, const std::string& prefix, const Batch& batch) {
  WriteTensor(dir + "/" + prefix + "tokens.bin", batch.tokens.to(torch::kInt64));
  WriteTensor(dir + "/" + prefix + "lengths.bin", batch.lengths.to(torch::kInt64));
}

}  // namespace

const std::vector<PeerEntry>& Peers() {
  static const std::vector<PeerEntry> peers = {
      {"pytorch_index", "simple_rnn", "pytorch/simple_rnn.py", "index",
       "PyTorch eager, per-step loop reading x[:, t] (what most users write)"},
      {"pytorch_unbind", "simple_rnn", "pytorch/simple_rnn.py", "unbind",
       "PyTorch eager, per-step loop over tensors unbound once"},
      {"pytorch_chunk", "simple_rnn", "pytorch/simple_rnn.py", "chunk",
       "PyTorch eager, chunkwise form (chunk 32, log-space decays)"},
      {"pytorch_lstm", "lstm", "pytorch/lstm.py", "nn_lstm",
       "PyTorch eager, torch.nn.LSTM (packed where ragged)"},
      {"pytorch_attention", "attention", "pytorch/attention.py", "naive",
       "PyTorch eager, naive causal attention (the [T,T] scores)"},
  };
  return peers;
}

const PeerEntry* FindPeer(std::string_view key) {
  for (const PeerEntry& entry : Peers()) {
    if (entry.key == key) return &entry;
  }
  return nullptr;
}

std::string PeerKeys() {
  std::string keys;
  for (const PeerEntry& entry : Peers())
    keys += (keys.empty() ? "" : ", ") + std::string(entry.key);
  return keys;
}

std::string PeerUnavailableReason(const PeerEntry& entry) {
  if (const std::string script = ScriptPath(entry); !std::filesystem::exists(script))
    return "the peer's script " + script + " is missing";
  return FindPeerPython().reason;
}

PeerProcess::PeerProcess(const PeerEntry& entry, int64_t threads, double answer_timeout_s)
    : threads_(threads), answer_timeout_s_(answer_timeout_s) {
  std::string pattern = std::filesystem::temp_directory_path().string() + "/seqbench-peer-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr)
    throw std::runtime_error("peer: cannot make a scratch directory in " + pattern);
  dir_ = pattern;
  const std::string prefix = dir_ + "/pipe";
  try {
    MakeLockstepPipes(prefix);
    channel_.emplace(LineChannel::Controller(prefix));
  } catch (...) {  // the destructor does not run for a constructor that throws
    RemoveTree(dir_);
    throw;
  }
  const std::vector<std::string> argv = {
      FindPeerPython().path,  ScriptPath(entry), "--pipes", prefix, "--form",
      std::string(entry.form)};
  const std::string n = std::to_string(threads);
  // TMPDIR: the peer's scratch is removed with it (PyTorch 2.x's import leaves a
  // torchinductor_USER directory in the temporary directory).
  // GLIBC_TUNABLES: the malloc policy seqbench's own cases run under (RetainFreedMemory).
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  const std::vector<std::string> environment = {
      "OMP_NUM_THREADS=" + n, "OPENBLAS_NUM_THREADS=" + n, "TMPDIR=" + dir_,
      "GLIBC_TUNABLES=" + RetainFreedMemoryTunables(tunables != nullptr ? tunables : "")};
  ChildSpec spec;
  spec.argv = argv;
  spec.should_stop = [this] { return abandon_.load(); };
  spec.environment = environment;
  spec.output = ChildSpec::Output::kFile;
  spec.output_path = dir_ + "/peer.log";
  thread_ = std::thread([this, spec] {
    outcome_ = RunChild(spec);
    ended_ = true;
  });
}

PeerProcess::~PeerProcess() {
  try {
    if (!ended_) channel_->Send(json{{"op", "quit"}}.dump());
  } catch (const std::exception&) {  // gone already: nothing to ask
  }
  const auto began = std::chrono::steady_clock::now();
  while (!ended_ && std::chrono::steady_clock::now() - began < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  abandon_ = true;
  if (thread_.joinable()) thread_.join();
  channel_.reset();
  RemoveTree(dir_);
}

std::string PeerProcess::LogTail() const {
  std::ifstream log(dir_ + "/peer.log");
  std::string line, last;
  while (std::getline(log, line)) {
    if (!line.empty()) last = line;
  }
  return last.empty() ? "(no output)" : last;
}

std::string PeerProcess::Ask(const std::string& request) {
  std::string line;
  try {
    channel_->Send(request);
    line = channel_->Receive(
        answer_timeout_s_, [this] { return ended_.load(); }, "the peer");
  } catch (const std::runtime_error& error) {
    if (!ended_) throw;
    const std::string how = outcome_.end == ChildOutcome::End::kExited
                                ? "exited with status " + std::to_string(outcome_.exit_code)
                            : outcome_.end == ChildOutcome::End::kSignaled
                                ? "killed by signal " + std::to_string(outcome_.signal)
                                : outcome_.Describe();
    throw std::runtime_error("the peer ended (" + how + "): " + LogTail());
  }
  const json answer = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!answer.is_object()) throw std::runtime_error("the peer answered: " + line);
  if (!answer.value("ok", false))
    throw std::runtime_error("the peer failed: " + answer.value("error", line));
  return line;
}

std::string PeerProcess::Setup(const ModelConfig& config, const ParameterSet& weights,
                               const Batch& batch, const std::string& dtype) {
  json parameters = json::array();
  std::vector<torch::Tensor> flat;
  for (const auto& item : weights) {
    names_.push_back(item.key());
    parameters.push_back({{"name", item.key()}, {"shape", item.value().sizes().vec()}});
    flat.push_back(item.value().to(torch::kFloat64).reshape({-1}));
  }
  WriteTensor(dir_ + "/parameters.bin", torch::cat(flat));
  WriteBatch(dir_, "", batch);
  const json manifest = {{"config",
                          {{"vocab_size", config.vocab_size},
                           {"width", config.width},
                           {"layers", config.num_layers},
                           {"heads", config.num_heads},
                           {"ffn", config.ffn}}},
                         {"parameters", parameters},
                         {"batch", {batch.batch_size(), batch.max_length()}},
                         {"dtype", dtype},
                         {"threads", threads_}};
  WriteFileAtomically(dir_ + "/manifest.json", manifest.dump());
  const json answer = json::parse(Ask(json{{"op", "setup"}, {"dir", dir_}}.dump()));
  return "PyTorch " + answer.value("torch", "?") + ", Python " + answer.value("python", "?");
}

StepOutcome PeerProcess::Check(const Batch& rows) {
  WriteBatch(dir_, "check_", rows);
  const json answer = json::parse(
      Ask(json{{"op", "check"}, {"batch", {rows.batch_size(), rows.max_length()}}}.dump()));
  StepOutcome outcome;
  const int64_t vocab = answer.at("vocab_size").get<int64_t>();
  outcome.output.logits =
      ReadFloat64(dir_ + "/logits.bin", {rows.batch_size(), rows.max_length(), vocab});
  // As text, so that a NaN or infinite loss arrives as one (a mismatch, not an error).
  outcome.output.loss =
      torch::scalar_tensor(std::stod(answer.at("loss").get<std::string>()), torch::kFloat64);
  const json shapes = answer.at("shapes");
  const torch::Tensor gradients =
      ReadFloat64(dir_ + "/gradients.bin", {answer.at("gradient_elements").get<int64_t>()});
  int64_t offset = 0;
  for (size_t i = 0; i < names_.size(); ++i) {
    const std::vector<int64_t> shape = shapes.at(i).get<std::vector<int64_t>>();
    int64_t size = 1;
    for (const int64_t extent : shape) size *= extent;
    outcome.gradients.insert(names_[i], gradients.slice(0, offset, offset + size).reshape(shape));
    offset += size;
  }
  return outcome;
}

double PeerProcess::TimedStep() {
  const json answer = json::parse(Ask(json{{"op", "time"}}.dump()));
  max_rss_bytes_ = answer.value("max_rss_bytes", int64_t{-1});
  return answer.at("seconds").get<double>();
}

}  // namespace seqbench
