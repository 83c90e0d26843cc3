// A DataLoader turns samples into an endless, deterministic stream of batches, epoch
// after epoch, each epoch planned by PlanEpoch(). With workers > 0, background threads
// collate (and pin, for CUDA) up to `prefetch` batches ahead of the consumer while the
// model trains; a reorder buffer hands them out in plan order, so that the stream is the
// same whatever the number of workers. With workers = 0, Next() collates in the caller.
//
// Thread-safety: Next() and position() are for one consumer thread; the workers are
// internal. Destruction stops and joins the workers.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "harness/training/batching.h"

namespace seqbench::training {

struct LoaderOptions {
  int64_t workers = 0;      // background collating threads; 0 = collate in Next()
  int64_t prefetch = 4;     // batches ready ahead of the consumer, at most
  bool pin_memory = false;  // page-locked host tensors, for asynchronous copies to CUDA
};

// Where the stream stands: the next batch is batch `batch` of epoch `epoch`.
struct LoaderPosition {
  int64_t epoch = 0;
  int64_t batch = 0;
  bool operator==(const LoaderPosition& other) const {
    return epoch == other.epoch && batch == other.batch;
  }
};

// A data-parallel rank's place: the loader serves this rank's ShardPlan() of every epoch.
struct DataShard {
  int64_t rank = 0;
  int64_t ranks = 1;
};

class DataLoader {
 public:
  // `samples` must outlive the loader. Throws std::invalid_argument for empty samples or
  // batching options that cannot hold them.
  DataLoader(const Samples& samples, BatchingOptions batching, LoaderOptions loader, uint64_t seed,
             int64_t pad_token, LoaderPosition start = {}, DataShard shard = {});
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // The next batch in plan order; blocks until a worker has it ready.
  Batch Next();
  // The position of the batch the next Next() returns.
  LoaderPosition position() const { return consumer_position_; }
  // Padding statistics of one epoch's plan (the first epoch the loader serves; this rank's
  // shares of it).
  PaddingStats EpochPadding() const;

 private:
  struct Ticket {
    int64_t sequence;
    std::vector<int64_t> indices;
  };
  // Plans epochs on demand; called with mutex_ held (or before workers start).
  const BatchPlan& PlanFor(int64_t epoch);
  Ticket TakeTicket();  // with mutex_ held
  void Advance(LoaderPosition& position);
  void WorkerLoop();

  const Samples& samples_;
  const std::vector<int64_t> lengths_;
  const BatchingOptions batching_;
  const LoaderOptions options_;
  const uint64_t seed_;
  const int64_t pad_token_;
  const DataShard shard_;
  LoaderPosition start_;
  LoaderPosition consumer_position_;

  std::mutex mutex_;
  std::condition_variable ready_;  // a batch arrived
  std::condition_variable space_;  // the consumer took one, or stop
  std::map<int64_t, BatchPlan> plans_;
  LoaderPosition producer_position_;
  int64_t next_ticket_ = 0;    // sequence number of the next batch to hand to a worker
  int64_t next_consumed_ = 0;  // sequence number of the next batch Next() returns
  std::map<int64_t, Batch> ready_batches_;
  std::exception_ptr worker_error_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace seqbench::training
