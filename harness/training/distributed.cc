#include "harness/training/distributed.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <thread>

#ifdef SEQBENCH_DISTRIBUTED
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>
#endif

namespace seqbench::training {
namespace {

int64_t ParseInteger(const char* name, const char* text) {
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text, &end, 10);
  if (text[0] == '\0' || *end != '\0' || errno != 0) {
    throw std::invalid_argument(std::string(name) + "='" + text + "' is not an integer");
  }
  return value;
}

}  // namespace

std::string FirstSlurmHost(const std::string& nodelist) {
  // Up to the first comma outside brackets: "node[01-03,07]" is one item of a hostlist.
  std::string first;
  int depth = 0;
  for (char c : nodelist) {
    if (c == ',' && depth == 0) break;
    depth += c == '[' ? 1 : c == ']' ? -1 : 0;
    first += c;
  }
  // Each bracket's first number or range start, with its zero padding: "rack[2-3]n[08]".
  std::string host;
  for (size_t i = 0; i < first.size(); ++i) {
    if (first[i] != '[') {
      host += first[i];
      continue;
    }
    const size_t close = first.find(']', i);
    const size_t end = first.find_first_of(",-]", i + 1);
    if (close == std::string::npos || end == i + 1)
      throw std::invalid_argument("SLURM_JOB_NODELIST='" + nodelist + "' is not a hostlist");
    host += first.substr(i + 1, end - i - 1);
    i = close;
  }
  return host;
}

namespace {

// Slurm's description of an srun step of more than one task: SLURM_PROCID of
// SLURM_STEP_NUM_TASKS, SLURM_LOCALID on its node, the step's first host as the rendezvous
// and a port derived from the job id. SLURM_STEP_NUM_TASKS, not SLURM_NTASKS: a batch
// script of an --ntasks=2 job has SLURM_NTASKS=2 and SLURM_PROCID=0 too, and is no rank
// (measured, Slurm 22.05); only srun sets the step's count.
std::optional<WorldEnvironment> ReadSlurmWorld(const std::function<const char*(const char*)>& get) {
  const char* tasks = get("SLURM_STEP_NUM_TASKS");
  const char* rank = get("SLURM_PROCID");
  if (tasks == nullptr || rank == nullptr || ParseInteger("SLURM_STEP_NUM_TASKS", tasks) < 2)
    return std::nullopt;
  WorldEnvironment environment;
  environment.world_size = ParseInteger("SLURM_STEP_NUM_TASKS", tasks);
  environment.rank = ParseInteger("SLURM_PROCID", rank);
  if (environment.rank < 0 || environment.rank >= environment.world_size)
    throw std::invalid_argument("SLURM_PROCID=" + std::string(rank) + " is outside 0.." +
                                std::to_string(environment.world_size - 1));
  const char* local = get("SLURM_LOCALID");
  environment.local_rank = local ? ParseInteger("SLURM_LOCALID", local) : environment.rank;
  const char* nodes =
      get("SLURM_STEP_NODELIST") ? get("SLURM_STEP_NODELIST") : get("SLURM_JOB_NODELIST");
  if (nodes != nullptr) environment.master_address = FirstSlurmHost(nodes);
  if (const char* job = get("SLURM_JOB_ID"))
    environment.master_port = kSlurmFirstPort + ParseInteger("SLURM_JOB_ID", job) % kSlurmPorts;
  return environment;
}

// torchrun's RANK of WORLD_SIZE, LOCAL_RANK defaulting to RANK.
WorldEnvironment ReadTorchrunWorld(const std::function<const char*(const char*)>& get) {
  const char* rank = get("RANK");
  if (rank == nullptr) throw std::invalid_argument("WORLD_SIZE is set but RANK is not");
  WorldEnvironment environment;
  environment.world_size = ParseInteger("WORLD_SIZE", get("WORLD_SIZE"));
  environment.rank = ParseInteger("RANK", rank);
  if (environment.world_size < 1) throw std::invalid_argument("WORLD_SIZE must be at least 1");
  if (environment.rank < 0 || environment.rank >= environment.world_size) {
    throw std::invalid_argument("RANK=" + std::to_string(environment.rank) + " is outside 0.." +
                                std::to_string(environment.world_size - 1) +
                                " (WORLD_SIZE=" + std::to_string(environment.world_size) + ")");
  }
  environment.local_rank = environment.rank;
  if (const char* local = get("LOCAL_RANK"))
    environment.local_rank = ParseInteger("LOCAL_RANK", local);
  return environment;
}

}  // namespace

std::optional<WorldEnvironment> ReadWorldEnvironment(
    const std::function<const char*(const char*)>& get_argument) {
  const auto get = get_argument ? get_argument : [](const char* name) { return std::getenv(name); };
  std::optional<WorldEnvironment> environment =
      get("WORLD_SIZE") ? ReadTorchrunWorld(get) : ReadSlurmWorld(get);
  if (!environment) return std::nullopt;
  if (const char* address = get("MASTER_ADDR")) environment->master_address = address;
  if (const char* port = get("MASTER_PORT"))
    environment->master_port = ParseInteger("MASTER_PORT", port);
  if (environment->master_port < 1 || environment->master_port > 65535) {
    throw std::invalid_argument("MASTER_PORT=" + std::to_string(environment->master_port) +
                                " is not a TCP port (1..65535)");
  }
  return environment;
}

std::vector<std::string> WorldEnvironmentFor(int64_t rank, int64_t world_size, int64_t port) {
  return {"RANK=" + std::to_string(rank), "LOCAL_RANK=" + std::to_string(rank),
          "WORLD_SIZE=" + std::to_string(world_size), "MASTER_ADDR=127.0.0.1",
          "MASTER_PORT=" + std::to_string(port)};
}

int64_t FreeLocalPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;  // the kernel picks
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const std::string why = std::strerror(errno);
    close(fd);
    throw std::runtime_error("no free local port: " + why);
  }
  close(fd);
  return ntohs(address.sin_port);
}

std::vector<int64_t> DataParallelOptions::Members() const {
  if (!members.empty()) return members;
  std::vector<int64_t> first(static_cast<size_t>(std::max<int64_t>(ranks, 1)));
  for (size_t i = 0; i < first.size(); ++i) first[i] = static_cast<int64_t>(i);
  return first;
}

CommunicationStats& CommunicationStats::operator+=(const CommunicationStats& other) {
  buckets += other.buckets;
  bytes += other.bytes;
  allreduce_seconds += other.allreduce_seconds;
  count_allreduces += other.count_allreduces;
  count_allreduce_seconds += other.count_allreduce_seconds;
  broadcast_bytes += other.broadcast_bytes;
  broadcast_seconds += other.broadcast_seconds;
  return *this;
}

std::vector<int64_t> ShardOwners(const std::vector<int64_t>& sizes, int64_t ranks) {
  if (ranks < 1) throw std::invalid_argument("ZeRO needs at least 1 rank");
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  std::vector<int64_t> load(static_cast<size_t>(ranks), 0), owners(sizes.size(), 0);
  for (const size_t i : order) {
    const auto least = std::min_element(load.begin(), load.end());  // the first of equals
    owners[i] = least - load.begin();
    *least += sizes[i];
  }
  return owners;
}

#ifdef SEQBENCH_DISTRIBUTED

bool DistributedAvailable() { return true; }
std::string DistributedUnavailableReason() { return ""; }

namespace {

struct SharedStats {
  std::atomic<int64_t> buckets{0}, bytes{0}, nanoseconds{0};
};

// The Reducer's communication hook: each bucket averaged by the process group's own
// all-reduce, as c10d's built-in ALLREDUCE and FP16_COMPRESS hooks do (libtorch 1.13 does
// not export those classes, only an enum to register them, which leaves no place to
// time them), timed from launch to the completion of the future the Reducer waits on.
class TimedAllReduceHook : public c10d::CommHookInterface {
 public:
  TimedAllReduceHook(c10::intrusive_ptr<c10d::ProcessGroup> group, bool fp16,
                     std::shared_ptr<SharedStats> stats)
      : group_(std::move(group)), fp16_(fp16), stats_(std::move(stats)) {}

  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override {
    // bucket: the flat gradients of a few parameters, [n] float32; the result replaces it.
    const at::Tensor buffer = bucket.getBufferRef();
    at::Tensor payload = fp16_ ? buffer.to(at::kHalf) : buffer;
    payload.div_(group_->getSize());  // before the sum, as c10d's hooks: no fp16 overflow
    stats_->buckets += 1;
    stats_->bytes += payload.numel() * payload.element_size();
    const auto launched = std::chrono::steady_clock::now();
    std::vector<at::Tensor> tensors{payload};
    auto future = group_->allreduce(tensors)->getFuture();
    auto stats = stats_;
    return future->then(
        [stats, launched, buffer, payload](c10::ivalue::Future& done) {
          // then() runs on failure too: a failed all-reduce must reach the Reducer as an
          // error, not as a bucket holding this rank's own gradients.
          done.value();
          stats->nanoseconds += std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::steady_clock::now() - launched)
                                    .count();
          if (payload.data_ptr() != buffer.data_ptr()) buffer.copy_(payload);
          return c10::IValue(buffer);
        },
        c10::TensorType::get());
  }

  at::Tensor parseHookResult(const c10::IValue& result) override { return result.toTensor(); }

 private:
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  bool fp16_;
  std::shared_ptr<SharedStats> stats_;
};

class C10dReducer : public GradientReducer {
 public:
  C10dReducer(const std::vector<torch::Tensor>& parameters,
              const c10::intrusive_ptr<c10d::ProcessGroup>& group,
              const DataParallelOptions& options)
      : stats_(std::make_shared<SharedStats>()) {
    TORCH_CHECK(options.bucket_mb > 0, "bucket_mb must be positive, got ", options.bucket_mb);
    TORCH_CHECK(options.compression.empty() || options.compression == "fp16",
                "compression must be \"fp16\" or absent, got \"", options.compression, "\"");
    const auto bucket_bytes = static_cast<int64_t>(options.bucket_mb * 1024 * 1024);
    // As DistributedDataParallel: a small first bucket, so that communication starts
    // early in backward, then buckets up to the cap, in reverse parameter order (the
    // order in which backward produces gradients).
    const int64_t first_bucket_bytes =
        std::min<int64_t>(c10d::kDefaultFirstBucketBytes, bucket_bytes);
    std::vector<bool> sparse(parameters.size(), false);
    auto [buckets, limits] = c10d::compute_bucket_assignment_by_size(
        parameters, {static_cast<size_t>(first_bucket_bytes), static_cast<size_t>(bucket_bytes)},
        sparse);
    std::reverse(buckets.begin(), buckets.end());
    std::reverse(limits.begin(), limits.end());
    reducer_ = std::make_unique<c10d::Reducer>(
        parameters, buckets, limits, group, sparse, bucket_bytes,
        /*find_unused_parameters=*/false, /*gradient_as_bucket_view=*/false,
        std::unordered_map<size_t, std::string>{}, first_bucket_bytes);
    reducer_->register_comm_hook(
        std::make_unique<TimedAllReduceHook>(group, options.compression == "fp16", stats_));
  }

  void BeforeForward(bool synchronized) override {
    // As DDP's forward: after the first iteration the buckets follow the order in which
    // the gradients became ready (rank 0's order, broadcast to the others).
    reducer_->rebuild_buckets();
    if (synchronized) reducer_->prepare_for_forward();
  }

  void BeforeSynchronizedBackward(const torch::Tensor& loss) override {
    reducer_->prepare_for_backward({loss});
  }

  CommunicationStats TakeStats() override {
    CommunicationStats stats;
    stats.buckets = stats_->buckets.exchange(0);
    stats.bytes = stats_->bytes.exchange(0);
    stats.allreduce_seconds = stats_->nanoseconds.exchange(0) * 1e-9;
    return stats;
  }

 private:
  std::shared_ptr<SharedStats> stats_;
  std::unique_ptr<c10d::Reducer> reducer_;
};

class GlooGroup : public DataParallelGroup {
 public:
  GlooGroup(c10::intrusive_ptr<c10d::ProcessGroup> group) : group_(std::move(group)) {}
  int64_t rank() const override { return group_->getRank(); }
  int64_t size() const override { return group_->getSize(); }

  void BroadcastFromFirst(const std::vector<torch::Tensor>& tensors) override {
    torch::NoGradGuard no_grad;
    std::vector<at::Tensor> data;
    for (const auto& tensor : tensors) data.push_back(tensor.detach());
    c10d::broadcast_coalesced(group_, data, /*buffer_size=*/256 << 20, /*rank=*/0);
  }

  int64_t BroadcastFromOwners(const std::vector<torch::Tensor>& tensors,
                              const std::vector<int64_t>& owners) override {
    TORCH_CHECK(tensors.size() == owners.size(), "one owner a tensor");
    torch::NoGradGuard no_grad;
    int64_t bytes = 0;
    for (int64_t owner = 0; owner < size(); ++owner) {
      std::vector<at::Tensor> data;
      for (size_t i = 0; i < tensors.size(); ++i) {
        if (owners[i] != owner) continue;
        data.push_back(tensors[i].detach());
        bytes += tensors[i].numel() * tensors[i].element_size();
      }
      if (!data.empty()) c10d::broadcast_coalesced(group_, data, /*buffer_size=*/256 << 20, owner);
    }
    return bytes;
  }

  std::vector<double> Sum(const std::vector<double>& values) override {
    std::vector<at::Tensor> tensors{
        torch::tensor(values, torch::TensorOptions().dtype(torch::kFloat64))};
    group_->allreduce(tensors)->wait();
    const auto summed = tensors.front();
    return {summed.data_ptr<double>(), summed.data_ptr<double>() + summed.numel()};
  }

  std::unique_ptr<GradientReducer> MakeReducer(const std::vector<torch::Tensor>& parameters,
                                               const DataParallelOptions& options) override {
    return std::make_unique<C10dReducer>(parameters, group_, options);
  }

  std::vector<double> TimeAllReduces(int64_t bytes, int64_t repetitions) override {
    TORCH_CHECK(bytes >= 4 && repetitions >= 1, "an all-reduce probe of ", bytes, " bytes, ",
                repetitions, " times");
    std::vector<at::Tensor> tensors{torch::zeros({bytes / 4}, torch::kFloat32)};
    group_->allreduce(tensors)->wait();  // the first carries the connection's set-up
    std::vector<double> seconds;
    for (int64_t i = 0; i < repetitions; ++i) {
      const auto start = std::chrono::steady_clock::now();
      group_->allreduce(tensors)->wait();
      seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    return seconds;
  }

 private:
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
};

}  // namespace

struct World::State {
  c10::intrusive_ptr<c10d::Store> store;
};

World::World(const WorldEnvironment& environment, std::chrono::seconds timeout)
    : environment_(environment), timeout_(timeout), state_(std::make_unique<State>()) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(environment.master_port);
  options.isServer = environment.rank == 0;
  options.numWorkers = static_cast<int>(environment.world_size);
  options.waitWorkers = true;
  options.timeout = timeout;
  state_->store = c10::make_intrusive<c10d::TCPStore>(environment.master_address, options);
}

World::~World() {
  if (abandoned_) return;
  try {
    state_->store->add("world/finished", 1);
    if (rank() != 0) return;
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (state_->store->add("world/finished", 0) < size() &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  } catch (const std::exception&) {
    // A rank that is gone cannot be waited for; the store closes either way.
  }
}

std::shared_ptr<DataParallelGroup> World::Group(const std::string& name,
                                                const std::vector<int64_t>& members,
                                                std::chrono::seconds timeout) {
  TORCH_CHECK(!members.empty() && members.front() == 0,
              "a group's members start at world rank 0 (which writes the results)");
  for (size_t i = 0; i < members.size(); ++i) {
    TORCH_CHECK(members[i] < size() && (i == 0 || members[i] > members[i - 1]),
                "a group's members are ascending world ranks below ", size(), "; got rank ",
                members[i]);
  }
  const auto found = std::find(members.begin(), members.end(), rank());
  if (found == members.end()) return nullptr;
  const auto ranks = static_cast<int64_t>(members.size());
  const auto group_rank = static_cast<int>(found - members.begin());
  // The ranks arrive when they have finished the pipelines before this one, which ranks
  // outside those pipelines skipped: wait for all of them without a deadline (Gloo's
  // rendezvous would give up after `timeout`). A rank 0 that dies takes the store with it,
  // which ends the wait with an error.
  const std::string arrived = "arrived/" + name;
  state_->store->add(arrived, 1);
  while (state_->store->add(arrived, 0) < ranks) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto store = c10::make_intrusive<c10d::PrefixStore>("group/" + name, state_->store);
  auto options = c10d::ProcessGroupGloo::Options::create();
  // Across hosts, GLOO_SOCKET_IFNAME names the interface (as for PyTorch); on one machine
  // the loopback interface.
  if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME")) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(interface));
  } else if (environment_.master_address == "127.0.0.1" ||
             environment_.master_address == "localhost") {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  } else {
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  options->timeout = timeout;
  return std::make_shared<GlooGroup>(c10::make_intrusive<c10d::ProcessGroupGloo>(
      store, group_rank, static_cast<int>(ranks), options));
}

#else  // !SEQBENCH_DISTRIBUTED

bool DistributedAvailable() { return false; }
std::string DistributedUnavailableReason() {
  return "this seqbench was built without c10d data parallelism (verified with LibTorch 1.13 "
         "only; configure with -DSEQBENCH_DISTRIBUTED=ON to try this LibTorch)";
}

struct World::State {};

World::World(const WorldEnvironment& environment, std::chrono::seconds timeout)
    : environment_(environment), timeout_(timeout) {
  throw std::runtime_error(DistributedUnavailableReason());
}
World::~World() = default;
std::shared_ptr<DataParallelGroup> World::Group(const std::string&, const std::vector<int64_t>&,
                                                std::chrono::seconds) {
  throw std::runtime_error(DistributedUnavailableReason());
}

#endif  // SEQBENCH_DISTRIBUTED

}  // namespace seqbench::training
