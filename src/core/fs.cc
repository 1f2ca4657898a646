#include "core/fs.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <system_error>

namespace berth {

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) reset(o.release());
  return *this;
}

UniqueFd::~UniqueFd() { reset(); }

int UniqueFd::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);  // close errors on read-only or already-synced fds carry nothing
  fd_ = fd;
}

Result<UniqueFd> open_file(const std::string& path, int flags, int mode) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  if (fd < 0) return sys_error("open", path);
  return UniqueFd(fd);
}

Result<std::string> read_file(const std::string& path) {
  UniqueFd fd = BERTH_TRY(open_file(path, O_RDONLY));
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_error("read", path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

Status write_all(int fd, std::string_view data, const std::string& what) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_error("write", what);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

Status write_file_atomic(const std::string& path, std::string_view data, int mode,
                         Durability durability) {
  static std::atomic<unsigned> counter{0};
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                    std::to_string(counter.fetch_add(1));
  {
    UniqueFd fd = BERTH_TRY(open_file(tmp, O_WRONLY | O_CREAT | O_EXCL, mode));
    Status st = write_all(fd.get(), data, tmp);
    if (st.ok() && durability == Durability::kSynced && ::fsync(fd.get()) != 0)
      st = sys_error("fsync", tmp);
    if (!st.ok()) {
      ::unlink(tmp.c_str());
      return st;
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Error e = sys_error("rename", tmp + " -> " + path);
    ::unlink(tmp.c_str());
    return e;
  }
  return {};
}

Status make_dirs(const std::string& path, int mode) {
  if (path.empty()) return {};
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return {};
    return sys_error("mkdir", path, ENOTDIR);
  }
  auto slash = path.find_last_of('/');
  if (slash != std::string::npos && slash > 0) BERTH_CHECK(make_dirs(path.substr(0, slash), mode));
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST) return sys_error("mkdir", path);
  return {};
}

Status remove_tree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return sys_error("remove", path, ec.value());
  return {};
}

bool path_exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

std::string path_join(std::string_view a, std::string_view b) {
  std::string out(a);
  while (!out.empty() && out.back() == '/') out.pop_back();
  while (!b.empty() && b.front() == '/') b.remove_prefix(1);
  out += '/';
  out += b;
  return out;
}

namespace {
/// Opens `path` into `out` and flocks it; with wait=false a busy lock leaves `out` empty.
Status lock_impl(const std::string& path, FileLock::Mode mode, bool wait, UniqueFd& out) {
  out = BERTH_TRY(open_file(path, O_RDWR | O_CREAT, 0644));
  int op = (mode == FileLock::Mode::kShared ? LOCK_SH : LOCK_EX) | (wait ? 0 : LOCK_NB);
  while (::flock(out.get(), op) != 0) {
    if (errno == EINTR) continue;
    if (!wait && errno == EWOULDBLOCK) {
      out.reset();
      return {};
    }
    return sys_error("flock", path);
  }
  return {};
}
}  // namespace

Result<FileLock> FileLock::acquire(const std::string& path, Mode mode) {
  FileLock l;
  BERTH_CHECK(lock_impl(path, mode, true, l.fd_));
  return l;
}

Result<FileLock> FileLock::try_acquire(const std::string& path, Mode mode) {
  FileLock l;
  BERTH_CHECK(lock_impl(path, mode, false, l.fd_));
  return l;
}

}  // namespace berth
