#include "image/diff_id_stream.h"

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
  if (len == 0) return;
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_ || queued_ < kMaxQueued; });
  if (done_) return;
  queue_.emplace_back(data, len);
  queued_ += len;
  cv_.notify_all();
}

Result<std::string> DiffIdStream::finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  if (error_) return *error_;
  return digest_;
}

long DiffIdStream::next_chunk(const void** out) {
  if (replay_current_) {  // the first chunk, which run() looked at, goes to libarchive too
    replay_current_ = false;
    *out = current_.data();
    return static_cast<long>(current_.size());
  }
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return closed_ || !queue_.empty(); });
  if (queue_.empty()) return 0;  // closed: the end of the stream
  current_ = std::move(queue_.front());
  queue_.pop_front();
  queued_ -= current_.size();
  cv_.notify_all();
  *out = current_.data();
  return static_cast<long>(current_.size());
}

long DiffIdStream::read_cb(::archive*, void* self, const void** out) {
  return static_cast<DiffIdStream*>(self)->next_chunk(out);
}

Result<std::string> DiffIdStream::inflate_digest(std::string_view in) {
  GzipInflater gzip;
  Sha256 hash;
  std::vector<char> out(size_t{1} << 20);
  bool eof = false;
  for (;;) {
    if (in.empty() && !eof) {
      const void* p = nullptr;
      long n = next_chunk(&p);
      eof = n == 0;
      in = std::string_view(static_cast<const char*>(p), static_cast<size_t>(n));
    }
    bool last = eof && in.empty();
    auto made = gzip.inflate(&in, out.data(), out.size());
    if (!made.ok()) return make_error("verify", what_, made.error().detail);
    if (*made > 0) {
      hash.update(out.data(), *made);
      continue;
    }
    if (!in.empty()) break;  // bytes after the last member: the stream is over
    if (last) {
      if (!gzip.at_end()) return make_error("verify", what_, "truncated gzip data");
      break;
    }
  }
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
  std::lock_guard<std::mutex> lock(mu_);
  if (!st.ok()) error_ = std::move(st).error();
  done_ = true;
  queue_.clear();
  queued_ = 0;
  cv_.notify_all();
}

}  // namespace berth
