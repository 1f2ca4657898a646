// The diff_id of a layer hashed while its compressed bytes arrive (internal to src/image: pull
// feeds it the download's chunks, so a layer is not read and decompressed a second time).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "core/error.h"
#include "image/chunk_queue.h"

struct archive;  // libarchive's

namespace berth {

/// Decompresses (gzip, zstd or none, sniffed; gzip through ISA-L when it is installed, see
/// image/inflate.h, else libarchive) and hashes a stream pushed to it
/// chunk by chunk. The decompressor runs in a thread of its own, taking chunks from a
/// bounded ChunkQueue (its default bound), so the pusher's memory stays small and the download
/// and the decompression overlap. A corrupt or truncated stream is an error from finish().
class DiffIdStream {
 public:
  /// feed() gathers the download's small pieces into chunks of this size for the queue.
  static constexpr size_t kChunk = size_t{1} << 20;

  /// `what` names the layer in errors.
  explicit DiffIdStream(std::string what);
  ~DiffIdStream();
  DiffIdStream(const DiffIdStream&) = delete;
  DiffIdStream& operator=(const DiffIdStream&) = delete;

  /// Hands the next bytes over (copied); blocks while the queue is full. Once the
  /// decompressor has failed, bytes are dropped: finish() reports the failure.
  void feed(const char* data, size_t len);
  /// Ends the stream and waits for the decompressor: "sha256:<hex>" of the uncompressed
  /// bytes, or why they could not be had. Called once.
  Result<std::string> finish();

 private:
  void run();
  /// The diff_id of a gzip stream through ISA-L, starting with `in` (the first chunk).
  Result<std::string> inflate_digest(std::string_view in);
  long next_chunk(const void** out);  // libarchive's read callback, in the thread
  static long read_cb(::archive*, void* self, const void** out);

  std::string what_;
  ChunkQueue queue_;
  Chunk pending_;                 // the feeder's: bytes not yet queued
  bool finished_ = false;         // the feeder's: finish() was called
  std::optional<Chunk> current_;  // the thread's: the chunk being read
  bool replay_current_ = false;   // next_chunk() gives current_ again (the first, looked at)
  std::optional<Error> error_;    // the thread's, read once it is joined
  std::string digest_;            // likewise
  std::thread thread_;
};

}  // namespace berth
