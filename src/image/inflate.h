// gzip decompression through ISA-L's igzip (Intel's Intelligent Storage Acceleration Library,
// Debian's libisal2), loaded on first use when it is installed: on this project's machines it
// inflates layers about three times as fast as zlib, which libarchive uses (bench/results/
// pull.md). A gzip layer is decompressed twice per image, once by the pull (for its diff_id)
// and once by create (for its files), so this is most of the CPU time of both. Internal to
// src/image: DiffIdStream and CheckedStream use it for gzip layers when fast_gzip_available(),
// and libarchive's gzip filter otherwise (and for zstd, always).
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "core/error.h"

namespace berth {

/// Whether libisal.so.2 can be loaded (tried once). False also when BERTH_GZIP=zlib is set,
/// which makes Berth use libarchive's zlib path (the tests run both).
bool fast_gzip_available();

/// A streaming gzip decompressor over ISA-L: one or more members (as `cat a.gz b.gz` makes),
/// each member's CRC-32 and length checked at its end. Bytes after the last member that do
/// not start another one end the stream, as they do for libarchive and gzip's `-d`.
/// Requires fast_gzip_available().
class GzipInflater {
 public:
  GzipInflater();
  ~GzipInflater();
  GzipInflater(const GzipInflater&) = delete;
  GzipInflater& operator=(const GzipInflater&) = delete;

  /// Decompresses from `*in`, advancing it past what was used, into `out` (up to `cap`
  /// bytes): how many bytes were written. 0 with `*in` not empty means the stream ended.
  /// Corrupt data is an error whose detail says why ("corrupt gzip data: ...").
  Result<size_t> inflate(std::string_view* in, char* out, size_t cap);
  /// Whether the stream may end here: between members, after at least one. At the end of the
  /// input, false means it was cut short.
  bool at_end() const { return at_end_; }

 private:
  struct State;
  std::unique_ptr<State> state_;
  bool at_end_ = false;  // the last member was whole
  bool over_ = false;    // bytes after a member that are not another: the stream is over
};

}  // namespace berth
