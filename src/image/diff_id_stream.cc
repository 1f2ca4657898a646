#include "image/diff_id_stream.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "core/sha256.h"
#include "image/archive_api.h"
#include "image/inflate.h"

namespace berth {

DiffIdStream::DiffIdStream(std::string what) : what_(std::move(what)) {
  thread_ = std::thread([this] { run(); });
}

DiffIdStream::~DiffIdStream() {
  if (thread_.joinable()) (void)finish();
}

void DiffIdStream::feed(const char* data, size_t len) {
  while (len > 0) {
    if (pending_.bytes.empty()) pending_ = queue_.take_buffer(kChunk);
    size_t n = std::min(len, pending_.bytes.size() - pending_.size);
    std::memcpy(pending_.bytes.data() + pending_.size, data, n);
    pending_.size += n;
    data += n;
    len -= n;
    if (pending_.size == pending_.bytes.size()) {
      (void)queue_.push(std::move(pending_));  // false once the thread stopped: finish() says why
      pending_ = Chunk{};
    }
  }
}

Result<std::string> DiffIdStream::finish() {
  if (!finished_) {
    finished_ = true;
    (void)queue_.push(std::move(pending_));
    pending_ = Chunk{};
    queue_.close();
  }
  if (thread_.joinable()) thread_.join();
  if (error_) return *error_;
  return digest_;
}

long DiffIdStream::next_chunk(const void** out) {
  if (replay_current_) {  // the first chunk, which run() looked at, goes to libarchive too
    replay_current_ = false;
    *out = current_->bytes.data();
    return static_cast<long>(current_->size);
  }
  if (current_) queue_.recycle(std::move(*current_));
  current_ = queue_.pop();
  if (!current_) {  // closed: the end of the stream
    *out = nullptr;
    return 0;
  }
  *out = current_->bytes.data();
  return static_cast<long>(current_->size);
}

long DiffIdStream::read_cb(::archive*, void* self, const void** out) {
  return static_cast<DiffIdStream*>(self)->next_chunk(out);
}

Result<std::string> DiffIdStream::inflate_digest(std::string_view in) {
  // The inflated bytes go to a thread of their own to be hashed: hashing them takes about as
  // long as inflating them, and the largest layer of an image is most of a pull's time.
  ChunkQueue plain;
  Sha256 hash;
  std::thread hasher([&] {
    while (auto c = plain.pop()) {
      hash.update(c->bytes.data(), c->size);
      plain.recycle(std::move(*c));
    }
  });
  Status st = [&]() -> Status {
    GzipInflater gzip;
    Chunk out = plain.take_buffer(kChunk);
    bool eof = false;
    for (;;) {
      if (in.empty() && !eof) {
        const void* p = nullptr;
        long n = next_chunk(&p);
        eof = n == 0;
        in = std::string_view(static_cast<const char*>(p), static_cast<size_t>(n));
      }
      bool last = eof && in.empty();
      auto made = gzip.inflate(&in, out.bytes.data(), out.bytes.size());
      if (!made.ok()) return make_error("verify", what_, made.error().detail);
      if (*made > 0) {
        out.size = *made;
        (void)plain.push(std::move(out));  // only this thread cancels, below
        out = plain.take_buffer(kChunk);
        continue;
      }
      if (!in.empty()) return {};  // bytes after the last member: the stream is over
      if (last) {
        if (!gzip.at_end()) return make_error("verify", what_, "truncated gzip data");
        return {};
      }
    }
  }();
  if (st.ok()) {
    plain.close();
  } else {
    plain.cancel();
  }
  hasher.join();
  if (!st.ok()) return std::move(st).error();
  return hash.digest();
}

void DiffIdStream::run() {
  Status st = [&]() -> Status {
    // gzip through ISA-L when it is installed; the first chunk tells (a chunk of one byte
    // goes to libarchive, which is as right, only slower).
    const void* first = nullptr;
    long n = next_chunk(&first);
    const auto* head = static_cast<const unsigned char*>(first);
    if (n >= 2 && head[0] == 0x1f && head[1] == 0x8b && fast_gzip_available()) {
      digest_ = BERTH_TRY(inflate_digest(
          std::string_view(static_cast<const char*>(first), static_cast<size_t>(n))));
      return {};
    }
    replay_current_ = n > 0;
    ArchiveReader ar = BERTH_TRY(
        open_archive_stream(this, &DiffIdStream::read_cb, ArchiveFormat::kRaw, "verify", what_));
    auto fail = [&] {
      return make_error("verify", what_, archive_message(ar.get(), "corrupt compressed data"));
    };
    digest_ = BERTH_TRY(read_raw_digest(ar.get(), fail));
    return {};
  }();
  if (!st.ok()) error_ = std::move(st).error();
  queue_.cancel();  // the feeder stops waiting; what it still hands over is dropped
}

}  // namespace berth
