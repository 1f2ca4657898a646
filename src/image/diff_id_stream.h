// The diff_id of a layer hashed while its compressed bytes arrive (internal to src/image: pull
// feeds it the download's chunks, so a layer is not read and decompressed a second time).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "core/error.h"

struct archive;  // libarchive's

namespace berth {

/// Decompresses (gzip, zstd or none, sniffed; gzip through ISA-L when it is installed, see
/// image/inflate.h, else libarchive) and hashes a stream pushed to it
/// chunk by chunk. The decompressor runs in a thread of its own, taking chunks from a
/// bounded queue (kMaxQueued bytes), so the pusher's memory stays small and the download
/// and the decompression overlap. A corrupt or truncated stream is an error from finish().
class DiffIdStream {
 public:
  static constexpr size_t kMaxQueued = size_t{8} << 20;

  /// `what` names the layer in errors.
  explicit DiffIdStream(std::string what);
  ~DiffIdStream();
  DiffIdStream(const DiffIdStream&) = delete;
  DiffIdStream& operator=(const DiffIdStream&) = delete;

  /// Hands the next chunk over (copied); blocks while kMaxQueued bytes wait. Once the
  /// decompressor has failed, chunks are dropped: finish() reports the failure.
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
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  size_t queued_ = 0;
  bool closed_ = false;          // no more chunks come
  bool done_ = false;            // the thread has stopped reading
  std::string current_;          // the chunk libarchive is reading
  bool replay_current_ = false;  // next_chunk() gives current_ again (the first, looked at)
  std::optional<Error> error_;
  std::string digest_;
  std::thread thread_;
};

}  // namespace berth
