// Data-parallel training on LibTorch's own c10d: the processes of one training run form a
// world (torchrun's RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), meet through
// a c10d::TCPStore that rank 0 serves, and each pipeline that trains on k ranks gets a
// process group of k of the world's ranks, rank 0 always among them (Gloo; its own key
// prefix in the store).
// Gradients are averaged by c10d::Reducer, the bucketed all-reduce behind PyTorch's
// DistributedDataParallel that starts a bucket's all-reduce while backward still runs;
// each bucket goes through the process group's all-reduce (no collective is written here),
// from a communication hook that times it and optionally casts it to fp16. Each step also
// sums the ranks' target, token and loss counts with the process group's all-reduce.
// Under ZeRO-1 (zero_stage = 1) each rank's optimizer holds the state of its own share of
// the parameters, and after the step each share is broadcast from its owner (c10d's
// broadcast_coalesced, as ZeroRedundancyOptimizer does): the gradients still travel by the
// Reducer's all-reduce, since Gloo in LibTorch 1.13 has no reduce-scatter, so a step moves
// the all-reduce's bytes plus one copy of the parameters.
//
// Debian 12's libtorch-dev ships the c10d headers but not the distributed-autograd header
// reducer.hpp includes; harness/training/c10d_compat/ declares the two names it needs (see
// its README). The code is verified against LibTorch 1.13 only: other versions build with
// SEQBENCH_DISTRIBUTED off, where a world of more than one rank is refused with the reason.
//
// Thread-safety: a World, a DataParallelGroup and a GradientReducer each belong to the one
// thread that trains; c10d's communication threads are internal. Several Worlds may live
// in one process (the tests run ranks as threads), each with its own store connection.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace seqbench::training {

// Whether this build can form a world of more than one rank, and if not, why not.
bool DistributedAvailable();
std::string DistributedUnavailableReason();

// torchrun's environment. RANK and WORLD_SIZE are required together; LOCAL_RANK defaults
// to RANK, MASTER_ADDR to 127.0.0.1, MASTER_PORT to 29500.
struct WorldEnvironment {
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;
  std::string master_address = "127.0.0.1";
  int64_t master_port = 29500;
};

// The world described by the environment `get` reads (std::getenv by default): torchrun's,
// or else, in an `srun` step of 2 or more tasks, Slurm's (SLURM_PROCID, SLURM_STEP_NUM_TASKS,
// SLURM_LOCALID; the first host of SLURM_STEP_NODELIST or SLURM_JOB_NODELIST as
// MASTER_ADDR; port kSlurmFirstPort + SLURM_JOB_ID % kSlurmPorts, the same in every task of
// the job), MASTER_ADDR and MASTER_PORT overriding. nullopt when neither is set. Throws
// std::invalid_argument naming the variable for a value that is not a number, a rank
// outside [0, world size), or a port outside 1..65535.
std::optional<WorldEnvironment> ReadWorldEnvironment(
    const std::function<const char*(const char*)>& get = nullptr);

inline constexpr int64_t kSlurmFirstPort = 15000, kSlurmPorts = 15000;

// The first host of a Slurm hostlist: "node[07-09,12],gpu1" -> "node07". Throws
// std::invalid_argument for an unclosed bracket.
std::string FirstSlurmHost(const std::string& nodelist);

// The variables a launcher sets for rank `rank` of `world_size` ranks on this machine.
std::vector<std::string> WorldEnvironmentFor(int64_t rank, int64_t world_size, int64_t port);

// A TCP port that was free a moment ago on the loopback interface (for a launcher).
int64_t FreeLocalPort();

// How a pipeline's gradients travel.
struct DataParallelOptions {
  int64_t ranks = 1;  // ranks that train the pipeline
  // The world ranks that train it, ascending from 0; empty: the world's first `ranks`.
  // (The network study puts each peer behind a link of its own and picks one per pipeline.)
  std::vector<int64_t> members;
  double bucket_mb = 25;             // c10d::Reducer bucket cap, MiB (DDP's default)
  std::string compression;           // "" (float32 buckets) or "fp16" (c10d's FP16 compress hook)
  std::chrono::seconds timeout{60};  // a collective waiting longer than this fails
  // ZeRO stage 1 (Rajbhandari et al. 2020): 1 = each rank keeps the optimizer state of its
  // share of the parameters only (ShardOwners), steps that share, and broadcasts it to the
  // other ranks after the step; 0 = every rank steps every parameter.
  int64_t zero_stage = 0;

  // `members`, or [0, ranks) when it is empty.
  std::vector<int64_t> Members() const;
};

// ZeRO-1's partition of parameters of `sizes` elements over `ranks` ranks: the owning rank
// of each, whole tensors, the largest first to the rank with the fewest elements so far
// (ties to the lower rank), as torch.distributed.optim.ZeroRedundancyOptimizer partitions.
// Whole tensors keep every per-parameter optimizer (AdamW, LAMB's and LARS's trust ratios)
// exactly as unsharded. Throws std::invalid_argument for ranks < 1.
std::vector<int64_t> ShardOwners(const std::vector<int64_t>& sizes, int64_t ranks);

class DataParallelGroup;

// This process's membership of the world: its store connection. Constructing it waits
// until every rank has connected (or `timeout` passes: std::runtime_error).
class World {
 public:
  World(const WorldEnvironment& environment, std::chrono::seconds timeout);
  // Waits (up to the timeout) for every rank to reach its destructor, so that rank 0's
  // store outlives the other ranks' last use of it.
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int64_t rank() const { return environment_.rank; }
  int64_t size() const { return environment_.world_size; }
  // After a failure that may have taken a rank with it: the destructor waits for nobody.
  void Abandon() { abandoned_ = true; }

  // A process group of the world ranks `members` (ascending, the first 0) for the pipeline
  // `name` (unique in the run), or nullptr on a rank outside it. Every member calls it with
  // the same arguments; the group's rank i is members[i].
  std::shared_ptr<DataParallelGroup> Group(const std::string& name,
                                           const std::vector<int64_t>& members,
                                           std::chrono::seconds timeout);

 private:
  struct State;  // the c10d store
  WorldEnvironment environment_;
  std::chrono::seconds timeout_;
  bool abandoned_ = false;
  std::unique_ptr<State> state_;
};

// Communication measured on one rank.
struct CommunicationStats {
  int64_t buckets = 0;  // gradient all-reduces started
  int64_t bytes = 0;    // bucket payload handed to c10d (each rank's share of the sum)
  // Summed over buckets, from the hook's launch to its future's completion: all-reduce
  // time, overlapped with backward or not.
  double allreduce_seconds = 0;
  // The trainer's blocking all-reduces of a few numbers (the step's target count before
  // forward, its loss and token counts after backward): each costs a network round trip
  // that nothing overlaps.
  int64_t count_allreduces = 0;
  double count_allreduce_seconds = 0;
  // ZeRO-1's broadcasts of the stepped parameters from their owners: the bytes every rank
  // takes part in (sent from its own share, received for the others'), and their time.
  int64_t broadcast_bytes = 0;
  double broadcast_seconds = 0;

  CommunicationStats& operator+=(const CommunicationStats& other);
};

// Averages gradients across a group through c10d::Reducer. Per optimizer step the trainer
// calls BeforeForward() before every micro-batch's forward, `synchronized` for the last
// one only, and BeforeSynchronizedBackward() before that last backward: earlier
// micro-batches accumulate locally, as under DDP's no_sync(). When the last backward
// returns, every parameter's .grad is the group's mean.
class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  virtual void BeforeForward(bool synchronized) = 0;
  // loss: [] the tensor backward() is called on.
  virtual void BeforeSynchronizedBackward(const torch::Tensor& loss) = 0;
  virtual CommunicationStats TakeStats() = 0;
};

class DataParallelGroup {
 public:
  virtual ~DataParallelGroup() = default;
  virtual int64_t rank() const = 0;
  virtual int64_t size() const = 0;
  // Overwrites every rank's `tensors` with rank 0's, in place (DDP's start-up sync).
  virtual void BroadcastFromFirst(const std::vector<torch::Tensor>& tensors) = 0;
  // Overwrites every rank's tensors[i] with rank owners[i]'s, in place: one coalesced
  // broadcast per owning rank (ZeRO-1's, after the optimizer step). Returns the bytes
  // broadcast. Every member calls it with the same arguments.
  virtual int64_t BroadcastFromOwners(const std::vector<torch::Tensor>& tensors,
                                      const std::vector<int64_t>& owners) = 0;
  // The element-wise sum of `values` over the group's ranks.
  virtual std::vector<double> Sum(const std::vector<double>& values) = 0;
  // A reducer for `parameters` (each with requires_grad, all on one device).
  virtual std::unique_ptr<GradientReducer> MakeReducer(const std::vector<torch::Tensor>& parameters,
                                                       const DataParallelOptions& options) = 0;
  // The wall times of `repetitions` blocking all-reduces of `bytes` bytes of float32
  // (after one untimed): what the pipeline fits the ring model's α and β to
  // (ring_model.h). Every member calls it with the same arguments.
  virtual std::vector<double> TimeAllReduces(int64_t bytes, int64_t repetitions) = 0;
};

}  // namespace seqbench::training
