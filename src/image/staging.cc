#include "image/staging.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/dir.h"
#include "core/sha256.h"
#include "image/gc.h"
#include "image/store.h"

namespace berth {

namespace {

constexpr char kPrefix[] = "stage-";

}  // namespace

struct StagedWriter::State {
  StagedFile file;
  UniqueFd fd;
  Sha256 hash;
};

StagedWriter::StagedWriter() : s_(std::make_unique<State>()) {}
StagedWriter::StagedWriter(StagedWriter&&) noexcept = default;
StagedWriter& StagedWriter::operator=(StagedWriter&&) noexcept = default;
StagedWriter::~StagedWriter() = default;

Status StagedWriter::write(const char* data, size_t len) {
  BERTH_CHECK(write_all(s_->fd.get(), std::string_view(data, len), s_->file.path));
  s_->hash.update(data, len);
  s_->file.size += static_cast<int64_t>(len);
  return {};
}

Result<StagedFile> StagedWriter::finish() {
  if (::close(s_->fd.release()) != 0) return sys_error("close", s_->file.path);
  s_->file.digest = s_->hash.digest();
  return s_->file;
}

Result<Staging> Staging::create(const Store& store) {
  std::string tmp = path_join(store.root(), "tmp");
  (void)sweep_staging(store, false);  // best effort: abandoned folders are gc's too
  // Made under a name the sweep above ignores, and renamed once its lock is held, so that
  // no other process can take this folder for an abandoned one.
  std::string pattern = path_join(tmp, ".new-XXXXXX");
  if (::mkdtemp(pattern.data()) == nullptr) return sys_error("mkdtemp", pattern);
  Staging s;
  s.lock_ = BERTH_TRY(FileLock::acquire(path_join(pattern, "lock")));
  s.dir_ = path_join(tmp, kPrefix + pattern.substr(pattern.size() - 6));
  if (::rename(pattern.c_str(), s.dir_.c_str()) != 0) {
    Error e = sys_error("rename", pattern + " -> " + s.dir_);
    (void)remove_tree(pattern);  // best effort: the rename error is the one to report
    s.dir_.clear();
    return e;
  }
  return s;
}

Staging::Staging(Staging&& o) noexcept
    : dir_(std::exchange(o.dir_, std::string())), lock_(std::move(o.lock_)), next_(o.next_) {}

Staging::~Staging() {
  if (!dir_.empty()) (void)remove_tree(dir_);  // best effort: the next staging sweeps it
}

std::string Staging::new_path() {
  return path_join(dir_, "f" + std::to_string(next_++));
}

Result<StagedWriter> Staging::begin() {
  StagedWriter w;
  w.s_->file.path = new_path();
  w.s_->fd = BERTH_TRY(open_file(w.s_->file.path, O_WRONLY | O_CREAT | O_EXCL, 0644));
  return w;
}

Result<StagedFile> Staging::stage_fd(int fd, const std::string& what) {
  StagedWriter w = BERTH_TRY(begin());
  std::string buf(size_t{1} << 20, '\0');
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_error("read", what);
    }
    if (n == 0) break;
    BERTH_CHECK(w.write(buf.data(), static_cast<size_t>(n)));
  }
  return w.finish();
}

Result<std::vector<ImageRecord>> publish_staged(Store& store, const StagedImage& image) {
  std::vector<ImageRecord> out, replaced;
  {
    FileLock pin = BERTH_TRY(store.pin());  // no rmi or gc may delete a blob found present
    for (const StagedFile& f : image.files) BERTH_CHECK(store.adopt_blob(f.digest, f.path));
    for (const auto& [digest, bytes] : image.made)
      if (!store.has_blob(digest)) BERTH_CHECK(store.put_blob(digest, bytes));
    for (const std::string& name : image.names) {
      ImageRecord rec = image.record;
      rec.name = name;
      rec.pulled = now_rfc3339();
      rec.registry = "";  // from an archive, not a registry
      std::optional<ImageRecord> old;
      BERTH_CHECK(store.add_image(rec, &old));
      if (old) replaced.push_back(std::move(*old));
      out.push_back(std::move(rec));
    }
  }
  release_replaced(store, replaced);  // the pin is released: the old images' blobs may go
  return out;
}

}  // namespace berth
