#include "image/chunk_queue.h"

#include <utility>

namespace berth {

Chunk ChunkQueue::take_buffer(size_t capacity) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (!spare_.empty()) {
      Chunk c = std::move(spare_.back());
      spare_.pop_back();
      if (c.bytes.size() < capacity) continue;  // too small for this producer: let it go
      c.size = 0;
      return c;
    }
  }
  Chunk c;
  c.bytes.resize(capacity);
  return c;
}

bool ChunkQueue::push(Chunk chunk) {
  if (chunk.size == 0) return true;
  std::unique_lock<std::mutex> lock(mu_);
  // One chunk larger than the bound still goes through, alone.
  cv_.wait(lock, [&] { return cancelled_ || queued_ == 0 || queued_ + chunk.size <= bound_; });
  if (cancelled_) return false;
  queued_ += chunk.size;
  queue_.push_back(std::move(chunk));
  cv_.notify_all();
  return true;
}

void ChunkQueue::close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  cv_.notify_all();
}

std::optional<Chunk> ChunkQueue::pop() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return cancelled_ || closed_ || !queue_.empty(); });
  if (cancelled_ || queue_.empty()) return std::nullopt;
  Chunk c = std::move(queue_.front());
  queue_.pop_front();
  queued_ -= c.size;
  cv_.notify_all();
  return c;
}

void ChunkQueue::recycle(Chunk chunk) {
  std::lock_guard<std::mutex> lock(mu_);
  if (spare_.size() < kMaxSpare && !chunk.bytes.empty()) spare_.push_back(std::move(chunk));
}

void ChunkQueue::cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
  queue_.clear();
  queued_ = 0;
  cv_.notify_all();
}

size_t ChunkQueue::queued_bytes() {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_;
}

}  // namespace berth
