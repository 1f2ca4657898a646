// A layer file's bytes on their way to a tar reader, checked as they pass (internal to
// src/image: the unpacker and the squashfs writer read layers through it).
#pragma once

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/sha256.h"
#include "image/archive_api.h"
#include "image/chunk_queue.h"
#include "image/inflate.h"
#include "image/unpack.h"

namespace berth {

/// The bytes of one layer file on their way to the tar reader, hashed as they pass: the file
/// as stored (digest) and, for a compressed file, the decompressed stream (diff_id). Threads
/// of the stream's own do the work, so that it overlaps applying the entries (writing files),
/// each handing bytes to the next through a ChunkQueue (a few MB in flight): for a compressed
/// file, one reads and hashes the file and one decompresses that and hashes the result (the
/// one step that cannot be split, and the longest); for a plain tar, one reads and hashes it.
/// The file is read to its last byte whatever the tar reader takes (the end-of-archive
/// padding, trailing bytes, the rest after a failure), and finish() compares both digests
/// once it is.
/// For a layer whose diff_id record is used (LayerInput::use_diff_id_record), the record read
/// from the open file stands for the decompressed stream's hash: the bytes are still
/// decompressed (the tar reader needs them), not hashed a second time.
class CheckedStream {
 public:
  CheckedStream(int fd, const LayerInput& layer);
  ~CheckedStream();
  CheckedStream(const CheckedStream&) = delete;
  CheckedStream& operator=(const CheckedStream&) = delete;

  /// The tar reader over this stream (called once; the threads start here).
  Result<ArchiveReader> open_tar();
  /// Waits for the rest of the file to be read and checks both digests.
  Status finish();
  /// After the layer failed to apply: waits for the rest of the file to be read and fails when
  /// it does not hash to its digest (a changed file explains the failure better than what it
  /// caused).
  Status check_file();
  /// Why the stream stopped early (a read or decompression error), for the tar reader's
  /// error message, which says less; nullptr when it did not.
  const Error* failure() const { return failure_ ? &*failure_ : nullptr; }

 private:
  static constexpr size_t kChunk = size_t{1} << 20;

  // The threads' part.
  void produce();
  Status produce_plain();  // the tar bytes into queue_, until they end, fail or are cancelled
  Status produce_gzip();
  Status produce_raw();
  Status produce_uncompressed();
  void read_all();  // reader_: the compressed file into file_queue_, hashed, to its end
  /// The next chunk of the compressed file from read_all(): its length, 0 at the end, -1 when
  /// reading failed (file_error_).
  ssize_t next_input(const char** out);
  /// Reads the file's next bytes into `to` (at most `cap`), hashing them: their count, 0 at
  /// the end, -1 on an error (in file_error_).
  ssize_t file_more(char* to, size_t cap);
  bool push(Chunk chunk);  // hashes the tar bytes (unless the record stands for them), queues
  static la_ssize_t read_file(archive*, void* self, const void** out);  // raw_'s input

  // The reader's part.
  static la_ssize_t read_plain(archive*, void* self, const void** out);
  void stop();  // waits for the threads, the whole file read
  Status compare_stored();
  void read_record();

  int fd_;
  const LayerInput& layer_;
  bool compressed_ = false;
  std::optional<std::string> record_;  // the diff_id recorded on the file, when used
  ArchiveReader raw_;                 // the decompressing reader, for zstd (and gzip without ISA-L)
  std::optional<GzipInflater> gzip_;  // for gzip, when ISA-L is installed
  ChunkQueue queue_;                  // the tar bytes, from thread_ to the tar reader
  ChunkQueue file_queue_;             // a compressed file's bytes, from reader_ to thread_
  std::thread thread_;                // decompresses (a compressed file) or reads (a plain tar)
  std::thread reader_;                // reads a compressed file and hashes it

  // The threads' (file_error_ and stored_: reader_'s for a compressed file), read by the
  // caller's thread only once they are joined (stream_error_: once queue_ ended).
  std::vector<char> buf_;       // reader_'s, once it no longer hands the bytes on
  std::optional<Chunk> input_;  // thread_'s: the chunk of file_queue_ being decompressed
  bool input_failed_ = false;   // thread_'s: next_input() met file_error_
  Sha256 stored_, plain_;
  std::optional<Error> file_error_;    // reading the file failed
  std::optional<Error> plain_error_;   // decompressing it failed
  std::optional<Error> stream_error_;  // what ended the tar bytes early

  // The caller's, where the tar reader runs.
  std::optional<Chunk> current_;  // the chunk the tar reader is reading
  std::optional<Error> failure_;  // stream_error_, once the reader met the early end
  std::string stored_digest_;
};

}  // namespace berth
