#include "image/layer_stream.h"

#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include "image/layer_file.h"

namespace berth {

CheckedStream::CheckedStream(int fd, const LayerInput& layer) : fd_(fd), layer_(layer) {}

CheckedStream::~CheckedStream() {
  queue_.cancel();
  if (thread_.joinable()) thread_.join();
  file_queue_.cancel();
  if (reader_.joinable()) reader_.join();
}

Result<ArchiveReader> CheckedStream::open_tar() {
  char head[8] = {};
  ssize_t n = ::pread(fd_, head, sizeof head, 0);
  if (n < 0) return sys_error("read", layer_.path);
  Compression c = BERTH_TRY(sniff_compression(std::string_view(head, n), layer_.path));
  compressed_ = c != Compression::kNone;
  if (compressed_) {
    read_record();
    buf_.resize(kChunk);
    reader_ = std::thread([this] { read_all(); });
  }
  if (c == Compression::kGzip && fast_gzip_available()) {
    gzip_.emplace();
  } else if (compressed_) {
    // Opened here, where its errors are open_tar()'s; the thread reads from it afterwards.
    raw_ = BERTH_TRY(open_archive_stream(this, &CheckedStream::read_file, ArchiveFormat::kRaw,
                                         "unpack", layer_.path));
    archive_entry* e = nullptr;
    if (archive_api().read_next_header(raw_.get(), &e) != ARCHIVE_OK)
      return make_error("unpack", layer_.path, archive_message(raw_.get()));
  }
  thread_ = std::thread([this] { produce(); });
  return open_archive_stream(this, &CheckedStream::read_plain, ArchiveFormat::kTar, "unpack",
                             layer_.path);
}

void CheckedStream::produce() {
  Status st = produce_plain();
  if (!st.ok()) stream_error_ = std::move(st).error();
  queue_.close();
  // The rest of the file, hashed: what follows the compressed stream, or what a failure or the
  // tar reader's cancelling left (read_all() goes on reading, without handing it on).
  if (compressed_) {
    file_queue_.cancel();
  } else if (!file_error_) {
    while (file_more(buf_.data(), buf_.size()) > 0) {
    }
  }
}

void CheckedStream::read_all() {
  bool handing_on = true;
  for (;;) {
    if (!handing_on) {
      if (file_more(buf_.data(), buf_.size()) <= 0) break;
      continue;
    }
    Chunk c = file_queue_.take_buffer(kChunk);
    ssize_t n = file_more(c.bytes.data(), c.bytes.size());
    if (n <= 0) break;
    c.size = static_cast<size_t>(n);
    handing_on = file_queue_.push(std::move(c));
  }
  file_queue_.close();
}

ssize_t CheckedStream::next_input(const char** out) {
  if (input_) file_queue_.recycle(std::move(*input_));
  input_ = file_queue_.pop();
  if (!input_) {
    *out = nullptr;
    // file_error_ is read_all()'s, set before it closed the queue.
    if (file_error_) {
      input_failed_ = true;
      return -1;
    }
    return 0;
  }
  *out = input_->bytes.data();
  return static_cast<ssize_t>(input_->size);
}

Status CheckedStream::produce_plain() {
  if (gzip_) return produce_gzip();
  if (raw_) return produce_raw();
  if (buf_.empty()) buf_.resize(kChunk);  // for produce()'s last read (of nothing)
  return produce_uncompressed();
}

ssize_t CheckedStream::file_more(char* to, size_t cap) {
  ssize_t n;
  do n = ::read(fd_, to, cap);
  while (n < 0 && errno == EINTR);
  if (n < 0) {
    file_error_ = sys_error("read", layer_.path);
    return -1;
  }
  stored_.update(to, static_cast<size_t>(n));
  return n;
}

bool CheckedStream::push(Chunk chunk) {
  if (compressed_ && !record_) plain_.update(chunk.bytes.data(), chunk.size);
  return queue_.push(std::move(chunk));
}

Status CheckedStream::produce_uncompressed() {
  for (;;) {
    Chunk c = queue_.take_buffer(kChunk);
    ssize_t n = file_more(c.bytes.data(), c.bytes.size());
    if (n < 0) return *file_error_;
    if (n == 0) return {};
    c.size = static_cast<size_t>(n);
    if (!push(std::move(c))) return {};  // cancelled: produce() reads the rest
  }
}

Status CheckedStream::produce_gzip() {
  std::string_view in;  // the bytes of input_ the inflater has yet to take
  bool eof = false;
  Chunk out = queue_.take_buffer(kChunk);
  for (;;) {
    if (in.empty() && !eof) {
      const char* p = nullptr;
      ssize_t n = next_input(&p);
      if (n < 0) return *file_error_;
      eof = n == 0;
      in = std::string_view(p, static_cast<size_t>(n));
    }
    bool last = eof && in.empty();
    auto made = gzip_->inflate(&in, out.bytes.data(), out.bytes.size());
    if (!made.ok()) {
      plain_error_ = make_error("unpack", layer_.path, made.error().detail);
      return *plain_error_;
    }
    if (*made > 0) {
      out.size = *made;
      if (!push(std::move(out))) return {};
      out = queue_.take_buffer(kChunk);
      continue;
    }
    if (!in.empty()) return {};  // bytes after the last member: the stream is over
    if (last) {
      if (gzip_->at_end()) return {};
      plain_error_ = make_error("unpack", layer_.path, "truncated gzip data");
      return *plain_error_;
    }
  }
}

Status CheckedStream::produce_raw() {
  for (;;) {
    const void* block = nullptr;
    size_t size = 0;
    la_int64_t offset = 0;
    int r = archive_api().read_data_block(raw_.get(), &block, &size, &offset);
    if (r == ARCHIVE_EOF) return {};
    if (r < ARCHIVE_WARN) {
      if (input_failed_) return *file_error_;
      plain_error_ = make_error("unpack", layer_.path, archive_message(raw_.get(), "corrupt data"));
      return *plain_error_;
    }
    if (size == 0) continue;
    Chunk c = queue_.take_buffer(size);
    std::memcpy(c.bytes.data(), block, size);
    c.size = size;
    if (!push(std::move(c))) return {};
  }
}

la_ssize_t CheckedStream::read_file(archive*, void* self, const void** out) {
  auto* s = static_cast<CheckedStream*>(self);
  const char* p = nullptr;
  ssize_t n = s->next_input(&p);
  *out = p;
  return n;
}

la_ssize_t CheckedStream::read_plain(archive*, void* self, const void** out) {
  auto* s = static_cast<CheckedStream*>(self);
  if (s->current_) s->queue_.recycle(std::move(*s->current_));
  s->current_ = s->queue_.pop();
  if (!s->current_) {
    *out = nullptr;
    if (!s->stream_error_) return 0;  // the end of the tar bytes
    if (!s->failure_) s->failure_ = s->stream_error_;
    return -1;
  }
  *out = s->current_->bytes.data();
  return static_cast<la_ssize_t>(s->current_->size);
}

void CheckedStream::stop() {
  bool started = thread_.joinable() || reader_.joinable();
  if (thread_.joinable()) thread_.join();
  file_queue_.cancel();  // when open_tar() failed before produce() started: no one else does
  if (reader_.joinable()) reader_.join();
  if (!started) {  // open_tar() failed before any thread started: the file is read here
    if (buf_.empty()) buf_.resize(kChunk);
    while (!file_error_ && file_more(buf_.data(), buf_.size()) > 0) {
    }
  }
}

Status CheckedStream::finish() {
  while (auto c = queue_.pop()) queue_.recycle(std::move(*c));  // what the tar reader left
  stop();
  if (file_error_) return *file_error_;
  if (plain_error_) return *plain_error_;
  BERTH_CHECK(compare_stored());
  // The record only after the file's digest matched: it vouches for those bytes alone.
  std::string plain = !compressed_ ? stored_digest_ : record_ ? *record_ : plain_.digest();
  if (!layer_.diff_id.empty() && plain != layer_.diff_id)
    return make_error("verify", layer_.path,
                      "the uncompressed layer hashes to " + plain + ", not the diff_id " +
                          layer_.diff_id + " the image config lists");
  return {};
}

Status CheckedStream::check_file() {
  queue_.cancel();
  stop();
  if (file_error_) return *file_error_;
  return compare_stored();
}

Status CheckedStream::compare_stored() {
  stored_digest_ = stored_.digest();  // finishes the hash: called once
  const std::string& stored = stored_digest_;
  if (layer_.digest.empty() || stored == layer_.digest) return {};
  return make_error("verify", layer_.path,
                    "the layer file hashes to " + stored + ", not " + layer_.digest)
      .with_hint("the file changed after it was stored: pull the image again");
}

/// Reads the diff_id recorded on the open file, when the layer's record is to be used. The
/// attribute is read from the fd whose bytes are hashed, so record and bytes are one file's.
/// No record, or one not a digest, leaves the stream to be hashed.
void CheckedStream::read_record() {
  if (!layer_.use_diff_id_record || layer_.diff_id.empty()) return;
  char value[80] = {};
  ssize_t n = ::fgetxattr(fd_, kDiffIdRecordAttr, value, sizeof value - 1);
  if (n <= 0) return;  // none (ENODATA), or a file system without user attributes
  std::string recorded(value, static_cast<size_t>(n));
  if (validate_digest(recorded).ok()) record_ = std::move(recorded);
}

}  // namespace berth
