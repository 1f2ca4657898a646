// A bounded queue of byte chunks between one producer thread and one consumer thread (internal
// to src/image: a layer's bytes on their way from the thread that decompresses them to the one
// that hashes or unpacks them, so that the two steps overlap with bounded memory).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

namespace berth {

/// A buffer and how many of its bytes are filled.
struct Chunk {
  std::vector<char> bytes;
  size_t size = 0;
  std::string_view view() const { return {bytes.data(), size}; }
};

/// Single producer, single consumer. push() blocks while `bound` bytes wait, so memory stays
/// near the bound however fast each side is; buffers go back to the producer through
/// recycle()/take_buffer() rather than the allocator. The producer ends the stream with
/// close(); what it wrote before close() is visible to the consumer once pop() has returned
/// nullopt (the queue's lock orders them), which is how an owner hands over an error.
class ChunkQueue {
 public:
  static constexpr size_t kDefaultBound = size_t{4} << 20;

  explicit ChunkQueue(size_t bound = kDefaultBound) : bound_(bound) {}
  ChunkQueue(const ChunkQueue&) = delete;
  ChunkQueue& operator=(const ChunkQueue&) = delete;

  /// Producer: a buffer of at least `capacity` bytes, size 0: a recycled one when there is one.
  Chunk take_buffer(size_t capacity);
  /// Producer: queues the chunk (an empty one is dropped); blocks while the bound is reached.
  /// False, the chunk dropped, once the consumer has cancelled.
  bool push(Chunk chunk);
  /// Producer: no more chunks come.
  void close();

  /// Consumer: the next chunk; nullopt once the queue is closed and drained, or cancelled.
  std::optional<Chunk> pop();
  /// Consumer: hands a popped chunk's buffer back for take_buffer().
  void recycle(Chunk chunk);
  /// Consumer: stops reading; queued chunks are dropped, a blocked or later push() returns false.
  void cancel();

  /// The bytes waiting now (for tests: never more than the bound but for one chunk alone).
  size_t queued_bytes();

 private:
  static constexpr size_t kMaxSpare = 8;  // recycled buffers kept

  const size_t bound_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Chunk> queue_;
  std::vector<Chunk> spare_;
  size_t queued_ = 0;  // bytes in queue_
  bool closed_ = false;
  bool cancelled_ = false;
};

}  // namespace berth
