#include "image/diff_id_stream.h"

#include <utility>

#include "image/archive_api.h"

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

void DiffIdStream::run() {
  Status st = [&]() -> Status {
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
