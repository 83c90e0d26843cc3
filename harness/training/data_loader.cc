#include "harness/training/data_loader.h"

#include <stdexcept>

namespace seqbench::training {

DataLoader::DataLoader(const Samples& samples, BatchingOptions batching, LoaderOptions loader,
                       uint64_t seed, int64_t pad_token, LoaderPosition start, DataShard shard)
    : samples_(samples),
      lengths_(Lengths(samples)),
      batching_(batching),
      options_(loader),
      seed_(seed),
      pad_token_(pad_token),
      shard_(shard),
      start_(start),
      consumer_position_(start),
      producer_position_(start) {
  if (samples.empty()) throw std::invalid_argument("no samples to load");
  if (options_.workers < 0) throw std::invalid_argument("workers must be at least 0");
  if (options_.prefetch < 1) throw std::invalid_argument("prefetch must be at least 1");
  // Plans first: invalid options throw here, in the caller, not in a worker. A resumed
  // position past the epoch's end is an error too.
  if (start.batch < 0 || start.batch >= static_cast<int64_t>(PlanFor(start.epoch).size())) {
    throw std::invalid_argument("loader position beyond the epoch's plan");
  }
  for (int64_t i = 0; i < options_.workers; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

DataLoader::~DataLoader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  space_.notify_all();
  for (auto& worker : workers_) worker.join();
}

const BatchPlan& DataLoader::PlanFor(int64_t epoch) {
  auto it = plans_.find(epoch);
  if (it == plans_.end()) {
    BatchPlan plan = PlanEpoch(lengths_, batching_, seed_, epoch);
    if (shard_.ranks > 1) plan = ShardPlan(plan, lengths_, shard_.rank, shard_.ranks);
    it = plans_.emplace(epoch, std::move(plan)).first;
    // Plans two epochs back are never asked for again.
    plans_.erase(plans_.begin(), plans_.lower_bound(epoch - 1));
  }
  return it->second;
}

void DataLoader::Advance(LoaderPosition& position) {
  if (++position.batch >= static_cast<int64_t>(PlanFor(position.epoch).size())) {
    ++position.epoch;
    position.batch = 0;
  }
}

DataLoader::Ticket DataLoader::TakeTicket() {
  Ticket ticket{next_ticket_++, PlanFor(producer_position_.epoch)[producer_position_.batch]};
  Advance(producer_position_);
  return ticket;
}

Batch DataLoader::Next() {
  Batch batch;
  if (workers_.empty()) {
    std::vector<int64_t> indices;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      indices = TakeTicket().indices;
    }
    batch = Collate(samples_, indices, pad_token_, options_.pin_memory);
  } else {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait(lock, [&] { return worker_error_ || ready_batches_.count(next_consumed_) > 0; });
    if (worker_error_) std::rethrow_exception(worker_error_);
    auto node = ready_batches_.extract(next_consumed_);
    batch = std::move(node.mapped());
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++next_consumed_;
    Advance(consumer_position_);
  }
  space_.notify_all();
  return batch;
}

void DataLoader::WorkerLoop() {
  while (true) {
    Ticket ticket;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      space_.wait(lock,
                  [&] { return stopping_ || next_ticket_ < next_consumed_ + options_.prefetch; });
      if (stopping_) return;
      ticket = TakeTicket();
    }
    try {
      Batch batch = Collate(samples_, ticket.indices, pad_token_, options_.pin_memory);
      std::lock_guard<std::mutex> lock(mutex_);
      ready_batches_.emplace(ticket.sequence, std::move(batch));
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      worker_error_ = std::current_exception();
    }
    ready_.notify_all();
  }
}

PaddingStats DataLoader::EpochPadding() const {
  BatchPlan plan = PlanEpoch(lengths_, batching_, seed_, start_.epoch);
  if (shard_.ranks > 1) plan = ShardPlan(plan, lengths_, shard_.rank, shard_.ranks);
  return MeasurePadding(plan, lengths_);
}

}  // namespace seqbench::training
