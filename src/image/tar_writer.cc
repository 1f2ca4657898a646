#include "image/tar_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "core/dir.h"
#include "core/fs.h"
#include "image/archive_api.h"

namespace berth {

namespace {

constexpr size_t kCopyBlock = size_t{1} << 20;

struct EntryFree {
  void operator()(archive_entry* e) const { archive_api().entry_free(e); }
};
using EntryPtr = std::unique_ptr<archive_entry, EntryFree>;

/// The sorted names in directory `fd`, "." and ".." left out.
Result<std::vector<std::string>> sorted_entries(int fd, const std::string& path) {
  std::vector<DirEntry> entries;
  if (int err = list_dir_at(fd, entries)) return sys_error("readdir", path, err);
  std::vector<std::string> out;
  out.reserve(entries.size());
  for (DirEntry& e : entries) out.push_back(std::move(e.name));
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

struct TarWriter::State {
  archive* ar = nullptr;
  std::string what;
  std::map<std::pair<dev_t, ino_t>, std::string> links;  // first name of each multi-link file
  bool owner_view = false;  // set_owner_view(): IDs as a rootless container sees them
  uid_t view_uid = 0;
  gid_t view_gid = 0;

  ~State() {
    if (ar) archive_api().write_free(ar);
  }
  Error err(const std::string& name) const {
    const char* msg = archive_api().error_string(ar);
    return make_error("write", what,
                      "entry \"" + name + "\": " + (msg ? msg : "cannot write the archive"));
  }
  /// Writes a header from `st` (type, mode, owner, mtime, size for regular files).
  Status header(const std::string& name, const struct stat& st, const char* symlink,
                const char* hardlink);
  Status copy_data(const std::string& name, int fd, const std::string& path);
  Status walk(int dirfd, const std::string& host, const std::string& prefix);
};

Status TarWriter::State::header(const std::string& name, const struct stat& st, const char* symlink,
                                const char* hardlink) {
  const ArchiveApi& a = archive_api();
  EntryPtr e(a.entry_new());
  a.entry_set_pathname(e.get(), name.c_str());
  a.entry_set_perm(e.get(), st.st_mode & 07777);
  constexpr int64_t kOverflowId = 65534;  // /proc/sys/kernel/overflowuid's default
  a.entry_set_uid(e.get(), !owner_view ? st.st_uid : st.st_uid == view_uid ? 0 : kOverflowId);
  a.entry_set_gid(e.get(), !owner_view ? st.st_gid : st.st_gid == view_gid ? 0 : kOverflowId);
  a.entry_set_mtime(e.get(), st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  if (hardlink) {
    a.entry_set_filetype(e.get(), AE_IFREG);
    a.entry_set_hardlink(e.get(), hardlink);
    a.entry_set_size(e.get(), 0);
  } else if (S_ISLNK(st.st_mode)) {
    a.entry_set_filetype(e.get(), AE_IFLNK);
    a.entry_set_symlink(e.get(), symlink);
  } else if (S_ISDIR(st.st_mode)) {
    a.entry_set_filetype(e.get(), AE_IFDIR);
  } else if (S_ISFIFO(st.st_mode)) {
    a.entry_set_filetype(e.get(), AE_IFIFO);
  } else {
    a.entry_set_filetype(e.get(), AE_IFREG);
    a.entry_set_size(e.get(), st.st_size);
  }
  if (a.write_header(ar, e.get()) != ARCHIVE_OK) return err(name);
  return {};
}

Status TarWriter::State::copy_data(const std::string& name, int fd, const std::string& path) {
  std::string buf(kCopyBlock, '\0');
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_error("read", path);
    }
    if (n == 0) return {};
    if (archive_api().write_data(ar, buf.data(), static_cast<size_t>(n)) != n) return err(name);
  }
}

Status TarWriter::State::walk(int dirfd, const std::string& host, const std::string& prefix) {
  for (const std::string& base : BERTH_TRY(sorted_entries(dirfd, host))) {
    std::string name = prefix + base, hpath = path_join(host, base);
    struct stat st;
    if (::fstatat(dirfd, base.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      return sys_error("stat", hpath);
    if (S_ISLNK(st.st_mode)) {
      std::string target(static_cast<size_t>(st.st_size) + 1, '\0');
      ssize_t n = ::readlinkat(dirfd, base.c_str(), target.data(), target.size());
      if (n < 0) return sys_error("readlink", hpath);
      target.resize(static_cast<size_t>(n));
      BERTH_CHECK(header(name, st, target.c_str(), nullptr));
    } else if (S_ISDIR(st.st_mode)) {
      BERTH_CHECK(header(name, st, nullptr, nullptr));
      UniqueFd sub(::openat(dirfd, base.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub.valid()) return sys_error("open", hpath);
      BERTH_CHECK(walk(sub.get(), hpath, name + "/"));
    } else if (S_ISREG(st.st_mode)) {
      if (st.st_nlink > 1) {
        auto [it, first] = links.emplace(std::make_pair(st.st_dev, st.st_ino), name);
        if (!first) {
          BERTH_CHECK(header(name, st, nullptr, it->second.c_str()));
          continue;
        }
      }
      UniqueFd fd(open_readable_at(dirfd, base.c_str(), st));
      if (!fd.valid()) return sys_error("open", hpath);
      BERTH_CHECK(header(name, st, nullptr, nullptr));
      BERTH_CHECK(copy_data(name, fd.get(), hpath));
    } else if (S_ISFIFO(st.st_mode)) {
      BERTH_CHECK(header(name, st, nullptr, nullptr));
    }
    // Sockets and device nodes: a rootless root filesystem holds none worth keeping.
  }
  return {};
}

Result<TarWriter> TarWriter::open(int fd, std::string what) {
  const ArchiveApi& a = archive_api();
  TarWriter w;
  w.s_ = std::make_unique<State>();
  w.s_->what = std::move(what);
  w.s_->ar = a.write_new();
  if (!w.s_->ar) return make_error("write", w.s_->what, "out of memory");
  if (a.write_set_format_pax_restricted(w.s_->ar) != ARCHIVE_OK ||
      a.write_set_bytes_in_last_block(w.s_->ar, 1) != ARCHIVE_OK ||
      a.write_open_fd(w.s_->ar, fd) != ARCHIVE_OK)
    return w.s_->err("");
  return w;
}

TarWriter::TarWriter(TarWriter&&) noexcept = default;
TarWriter& TarWriter::operator=(TarWriter&&) noexcept = default;
TarWriter::~TarWriter() = default;

Status TarWriter::add_bytes(const std::string& name, std::string_view data, int mode) {
  struct stat st {};
  st.st_mode = S_IFREG | static_cast<mode_t>(mode);
  st.st_size = static_cast<off_t>(data.size());
  BERTH_CHECK(s_->header(name, st, nullptr, nullptr));
  if (!data.empty() && archive_api().write_data(s_->ar, data.data(), data.size()) !=
                           static_cast<ssize_t>(data.size()))
    return s_->err(name);
  return {};
}

Status TarWriter::add_file(const std::string& name, const std::string& path, int mode) {
  UniqueFd fd = BERTH_TRY(open_file(path, O_RDONLY));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return sys_error("stat", path);
  struct stat hdr {};
  hdr.st_mode = S_IFREG | static_cast<mode_t>(mode);
  hdr.st_size = st.st_size;
  BERTH_CHECK(s_->header(name, hdr, nullptr, nullptr));
  return s_->copy_data(name, fd.get(), path);
}

Status TarWriter::add_dir(const std::string& name, int mode) {
  struct stat st {};
  st.st_mode = S_IFDIR | static_cast<mode_t>(mode);
  return s_->header(name, st, nullptr, nullptr);
}

Status TarWriter::add_tree(const std::string& root, const std::string& prefix) {
  UniqueFd fd = BERTH_TRY(open_file(root, O_RDONLY | O_DIRECTORY));
  return s_->walk(fd.get(), root, prefix);
}

void TarWriter::set_owner_view(uid_t host_uid, gid_t host_gid) {
  s_->owner_view = true;
  s_->view_uid = host_uid;
  s_->view_gid = host_gid;
}

Status TarWriter::finish() {
  if (archive_api().write_close(s_->ar) != ARCHIVE_OK) return s_->err("end of archive");
  return {};
}

}  // namespace berth
