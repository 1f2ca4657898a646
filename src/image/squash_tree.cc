// squash_tree() (image/squash.h): a directory tree (a container's root filesystem) walked into
// one squashfs, through the merge tree (image/squash_merge.h) and the Builder
// (image/squash_writer.h); the host user's files written as root's.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/fs.h"
#include "image/squash.h"
#include "image/squash_writer.h"

namespace berth {
namespace {

using namespace squash_internal;

class TreeSquasher {
 public:
  TreeSquasher(MergeTree& tree, Builder& b, SquashStats& stats, uid_t host_uid, gid_t host_gid)
      : tree_(tree), b_(b), stats_(stats), host_uid_(host_uid), host_gid_(host_gid) {}

  Status walk(int dirfd, const std::string& path, const std::string& what) {
    int fd = ::dup(dirfd);
    if (fd < 0) return sys_error("dup", what);
    DIR* d = ::fdopendir(fd);
    if (d == nullptr) {
      ::close(fd);
      return sys_error("opendir", what);
    }
    std::unique_ptr<DIR, int (*)(DIR*)> guard(d, ::closedir);
    std::vector<std::string> names;
    errno = 0;
    while (struct dirent* de = ::readdir(d)) {
      std::string_view n(de->d_name);
      if (n != "." && n != "..") names.emplace_back(n);
    }
    if (errno != 0) return sys_error("readdir", what);
    for (const std::string& n : names) {
      std::string rel = path.empty() ? n : path_join(path, n);
      std::string full = path_join(what, n);
      struct stat st;
      if (::fstatat(dirfd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
        return sys_error("stat", full);
      MergeInode m;
      m.mode = st.st_mode & (S_IFMT | 07777);
      m.uid = st.st_uid == host_uid_ ? 0 : st.st_uid;
      m.gid = st.st_gid == host_gid_ ? 0 : st.st_gid;
      m.mtime = clamp_time(st.st_mtim.tv_sec);
      if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
        ++stats_.skipped_devices;
        continue;
      }
      if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode) &&
          !S_ISFIFO(st.st_mode))
        continue;  // sockets
      // Only Berth's own /.berth/image.json (a newer "layer") can hide an entry here.
      Verdict v = tree_.offer(0, rel, S_ISDIR(st.st_mode), S_ISLNK(st.st_mode));
      if (S_ISDIR(st.st_mode)) {
        if (v == Verdict::kAdd || v == Verdict::kDirMeta) tree_.set_dir_meta(0, rel, m);
        UniqueFd sub(::openat(dirfd, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!sub.valid()) return sys_error("open", full);
        BERTH_CHECK(walk(sub.get(), rel, full));
        continue;
      }
      if (v != Verdict::kAdd) continue;
      if (st.st_nlink > 1 && !S_ISDIR(st.st_mode)) {
        auto key = std::make_pair(st.st_dev, st.st_ino);
        if (auto it = links_.find(key); it != links_.end()) {
          tree_.link(0, rel, it->second);
          continue;
        }
      }
      MergeInode* ino = nullptr;
      if (S_ISLNK(st.st_mode)) {
        std::string target(static_cast<size_t>(st.st_size) + 1, '\0');
        ssize_t len = ::readlinkat(dirfd, n.c_str(), target.data(), target.size());
        if (len < 0) return sys_error("readlink", full);
        target.resize(static_cast<size_t>(len));
        m.target = target;
        ino = tree_.add(0, rel, m);
      } else if (S_ISFIFO(st.st_mode)) {
        ino = tree_.add(0, rel, m);
      } else {
        ino = tree_.add(0, rel, m);
        BERTH_CHECK(copy_file(dirfd, n, full, ino));
      }
      if (st.st_nlink > 1) links_[std::make_pair(st.st_dev, st.st_ino)] = ino;
    }
    return {};
  }

 private:
  Status copy_file(int dirfd, const std::string& name, const std::string& what, MergeInode* ino) {
    UniqueFd fd(::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid()) return sys_error("open", what);
    BERTH_CHECK(b_.begin_file(ino));
    std::vector<char> buf(size_t{1} << 20);
    for (;;) {
      ssize_t n = ::read(fd.get(), buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return sys_error("read", what);
      if (n == 0) break;
      BERTH_CHECK(b_.append(buf.data(), static_cast<size_t>(n)));
      stats_.bytes += static_cast<uint64_t>(n);
    }
    ++stats_.files;
    return b_.end_file();
  }

  MergeTree& tree_;
  Builder& b_;
  SquashStats& stats_;
  uid_t host_uid_;
  gid_t host_gid_;
  std::map<std::pair<dev_t, ino_t>, MergeInode*> links_;
};

}  // namespace

Result<SquashStats> squash_tree(const std::string& root, std::string_view metadata,
                                const SquashOptions& opts, const std::string& output,
                                uid_t host_uid, gid_t host_gid) {
  UniqueFd rootfd = BERTH_TRY(open_file(root, O_RDONLY | O_DIRECTORY));
  return write_squashfs(opts, output,
                        [&](MergeTree& tree, Builder& b, SquashStats& stats) -> Status {
                          BERTH_CHECK(add_metadata(tree, b, 1, metadata, stats));
                          struct stat st;
                          if (::fstat(rootfd.get(), &st) != 0) return sys_error("stat", root);
                          MergeInode m;
                          m.mode = S_IFDIR | (st.st_mode & 07777);
                          m.mtime = clamp_time(st.st_mtim.tv_sec);
                          tree.set_dir_meta(0, "", m);
                          TreeSquasher s(tree, b, stats, host_uid, host_gid);
                          return s.walk(rootfd.get(), "", root);
                        });
}

}  // namespace berth
