// A layer file's bytes on their way to a tar reader, checked as they pass (internal to
// src/image: the unpacker and the squashfs writer read layers through it).
#pragma once

#include <sys/xattr.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/sha256.h"
#include "image/archive_api.h"
#include "image/inflate.h"
#include "image/layer_file.h"
#include "image/unpack.h"

namespace berth {

/// The bytes of one layer file on their way to the tar reader, hashed as they pass: the file
/// as stored (digest) and, for a compressed file, the decompressed stream (diff_id), which a
/// raw-format reader in the middle produces. finish() reads what the tar reader left (the
/// end-of-archive padding, trailing bytes) so that every byte is covered, then compares.
/// For a layer whose diff_id record is used (LayerInput::use_diff_id_record), the record read
/// from the open file stands for the decompressed stream's hash: the bytes are still
/// decompressed (the tar reader needs them), not hashed a second time.
class CheckedStream {
 public:
  CheckedStream(int fd, const LayerInput& layer) : fd_(fd), layer_(layer), buf_(kChunk) {}

  /// The tar reader over this stream.
  Result<ArchiveReader> open_tar() {
    char head[8] = {};
    ssize_t n = ::pread(fd_, head, sizeof head, 0);
    if (n < 0) return sys_error("read", layer_.path);
    Compression c = BERTH_TRY(sniff_compression(std::string_view(head, n), layer_.path));
    compressed_ = c != Compression::kNone;
    if (compressed_) read_record();
    if (c == Compression::kGzip && fast_gzip_available()) {
      gzip_.emplace();
      plain_out_.resize(kChunk);
    } else if (compressed_) {
      raw_ = BERTH_TRY(open_archive_stream(this, &CheckedStream::read_file, ArchiveFormat::kRaw,
                                           "unpack", layer_.path));
      archive_entry* e = nullptr;
      if (archive_api().read_next_header(raw_.get(), &e) != ARCHIVE_OK)
        return make_error("unpack", layer_.path, archive_message(raw_.get()));
    }
    return open_archive_stream(this, &CheckedStream::read_plain, ArchiveFormat::kTar, "unpack",
                               layer_.path);
  }

  /// Reads the rest of the file and checks both digests.
  Status finish() {
    if (compressed_) {
      while (plain_more() > 0) {
      }
    }
    while (!file_error_ && file_more() > 0) {
    }
    if (const Error* e = failure()) return *e;
    BERTH_CHECK(compare_stored());
    // The record only after the file's digest matched: it vouches for those bytes alone.
    std::string plain = !compressed_ ? stored_digest_ : record_ ? *record_ : plain_.digest();
    if (!layer_.diff_id.empty() && plain != layer_.diff_id)
      return make_error("verify", layer_.path,
                        "the uncompressed layer hashes to " + plain + ", not the diff_id " +
                            layer_.diff_id + " the image config lists");
    return {};
  }

  /// After the layer failed to apply: reads the rest of the file and fails when it does not
  /// hash to its digest (a changed file explains the failure better than what it caused).
  Status check_file() {
    while (!file_error_ && file_more() > 0) {
    }
    if (file_error_) return *file_error_;
    return compare_stored();
  }

  /// Why the stream stopped early (a read or decompression error), for the tar reader's
  /// error message, which says less; nullptr when it did not.
  const Error* failure() const {
    return file_error_ ? &*file_error_ : plain_error_ ? &*plain_error_ : nullptr;
  }

 private:
  static constexpr size_t kChunk = size_t{1} << 20;

  Status compare_stored() {
    stored_digest_ = stored_.digest();  // finishes the hash: called once
    const std::string& stored = stored_digest_;
    if (layer_.digest.empty() || stored == layer_.digest) return {};
    return make_error("verify", layer_.path,
                      "the layer file hashes to " + stored + ", not " + layer_.digest)
        .with_hint("the file changed after it was stored: pull the image again");
  }

  /// Reads the next chunk of the file into buf_, hashing it: its length, 0 at the end, -1 on error.
  ssize_t file_more() {
    ssize_t n;
    do n = ::read(fd_, buf_.data(), buf_.size());
    while (n < 0 && errno == EINTR);
    if (n < 0) {
      file_error_ = sys_error("read", layer_.path);
      return -1;
    }
    stored_.update(buf_.data(), static_cast<size_t>(n));
    return n;
  }

  /// The next block of decompressed bytes in plain_buf_, hashing them (compressed files only).
  ssize_t plain_more() {
    if (gzip_) return gzip_more();
    size_t size = 0;
    la_int64_t offset = 0;
    int r = archive_api().read_data_block(raw_.get(), &plain_buf_, &size, &offset);
    if (r == ARCHIVE_EOF) return 0;
    if (r < ARCHIVE_WARN) {
      if (!plain_error_)
        plain_error_ =
            make_error("unpack", layer_.path, archive_message(raw_.get(), "corrupt data"));
      return -1;
    }
    if (!record_) plain_.update(plain_buf_, size);
    return static_cast<ssize_t>(size);
  }

  /// plain_more() through ISA-L: inflates the file's next bytes into plain_out_.
  ssize_t gzip_more() {
    if (plain_error_) return -1;
    for (;;) {
      if (in_.empty() && !file_eof_) {
        ssize_t n = file_more();
        if (n < 0) return -1;
        file_eof_ = n == 0;
        in_ = std::string_view(buf_.data(), static_cast<size_t>(n));
      }
      bool last = file_eof_ && in_.empty();
      auto made = gzip_->inflate(&in_, plain_out_.data(), plain_out_.size());
      if (!made.ok()) {
        plain_error_ = make_error("unpack", layer_.path, made.error().detail);
        return -1;
      }
      if (*made > 0) {
        if (!record_) plain_.update(plain_out_.data(), *made);
        plain_buf_ = plain_out_.data();
        return static_cast<ssize_t>(*made);
      }
      if (!in_.empty()) return 0;  // bytes after the last member: the stream is over
      if (last) {
        if (gzip_->at_end()) return 0;
        plain_error_ = make_error("unpack", layer_.path, "truncated gzip data");
        return -1;
      }
    }
  }

  /// Reads the diff_id recorded on the open file, when the layer's record is to be used. The
  /// attribute is read from the fd whose bytes are hashed, so record and bytes are one
  /// file's. No record, or one not a digest, leaves the stream to be hashed.
  void read_record() {
    if (!layer_.use_diff_id_record || layer_.diff_id.empty()) return;
    char value[80] = {};
    ssize_t n = ::fgetxattr(fd_, kDiffIdRecordAttr, value, sizeof value - 1);
    if (n <= 0) return;  // none (ENODATA), or a file system without user attributes
    std::string recorded(value, static_cast<size_t>(n));
    if (validate_digest(recorded).ok()) record_ = std::move(recorded);
  }

  static la_ssize_t read_file(archive*, void* self, const void** out) {
    auto* s = static_cast<CheckedStream*>(self);
    *out = s->buf_.data();
    return s->file_more();
  }

  static la_ssize_t read_plain(archive* a, void* self, const void** out) {
    auto* s = static_cast<CheckedStream*>(self);
    if (!s->compressed_) return read_file(a, self, out);
    ssize_t n = s->plain_more();
    *out = s->plain_buf_;
    return n;
  }

  int fd_;
  const LayerInput& layer_;
  std::vector<char> buf_;
  bool compressed_ = false;
  ArchiveReader raw_;                 // the decompressing reader, for zstd (and gzip without ISA-L)
  std::optional<GzipInflater> gzip_;  // for gzip, when ISA-L is installed
  std::vector<char> plain_out_;       // what gzip_ decompressed
  std::string_view in_;               // the compressed bytes of buf_ gzip_ has yet to take
  bool file_eof_ = false;
  const void* plain_buf_ = nullptr;
  Sha256 stored_, plain_;
  std::string stored_digest_;
  std::optional<std::string> record_;  // the diff_id recorded on the file, when used
  std::optional<Error> file_error_;    // reading the file failed
  std::optional<Error> plain_error_;   // decompressing it failed
};

}  // namespace berth
