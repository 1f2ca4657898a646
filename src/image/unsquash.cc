#include "image/unsquash.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>

#include "core/fs.h"
#include "image/sif.h"
#include "image/sqfs_api.h"
#include "image/sqfs_decompressor.h"
#include "image/sqfs_read_file.h"
#include "image/squashfs_superblock.h"

namespace berth {
namespace {

const SqfsApi& sq() {
  return sqfs_api();
}

struct TreeDestroy {
  void operator()(sqfs_tree_node_t* n) const { sq().dir_tree_destroy(n); }
};

bool is_dir(uint16_t t) {
  return t == SQFS_INODE_DIR || t == SQFS_INODE_EXT_DIR;
}
bool is_file(uint16_t t) {
  return t == SQFS_INODE_FILE || t == SQFS_INODE_EXT_FILE;
}

class Extractor {
 public:
  Extractor(const std::string& file, sqfs_data_reader_t* data, SqfsReadFile* in)
      : file_(file), data_(data), in_(in) {}

  /// Fills directory `fd` (at `rel` below the target, "" for the target) with `dir`'s children.
  Status fill(int fd, const std::string& rel, const sqfs_tree_node_t& dir) {
    for (const sqfs_tree_node_t* n = dir.children; n != nullptr; n = n->next) {
      std::string name = reinterpret_cast<const char*>(n->name);
      if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos)
        return make_error("read squashfs", file_,
                          fmt::format("entry '{}' in /{} is not a file name", name, rel),
                          ErrorCode::kInvalidInput);
      std::string path = rel;
      if (!path.empty()) path += '/';
      path += name;
      BERTH_CHECK(make(fd, name, path, *n));
    }
    return {};
  }

  UnsquashStats stats;
  int root_fd = -1;
  uint32_t block_size = 0;
  uint64_t budget = 0;        ///< bytes the extraction may still write
  uint64_t budget_total = 0;  ///< the bound, for the error
  std::string budget_what;    ///< what the bound is, for the error

 private:
  Error entry_error(Op op, const std::string& path, int e) const {
    return sys_error(op, file_ + ":/" + path, e);
  }

  Status times(int fd, const char* name, const sqfs_inode_generic_t& inode, int flags,
               const std::string& path) {
    struct timespec t[2] = {{inode.base.mod_time, 0}, {inode.base.mod_time, 0}};
    int r = name == nullptr ? ::futimens(fd, t) : ::utimensat(fd, name, t, flags);
    if (r != 0) return entry_error("change", path, errno);
    return {};
  }

  /// Writes the data of the file `inode` (`size` bytes) to `fd`, a block at a time: a block
  /// the image records as sparse is not read, and one of zeros is not written, both left a
  /// hole (the file gets its size at the end), so that a sparse file stays sparse. What is
  /// written counts against `budget`.
  Status write_data(int fd, const sqfs_inode_generic_t& inode, sqfs_u64 size,
                    const std::string& path) {
    size_t blocks = sqfs_inode_get_file_block_count(&inode);
    for (sqfs_u64 off = 0; off < size;) {
      auto want = static_cast<sqfs_u32>(std::min<sqfs_u64>(block_size, size - off));
      size_t index = static_cast<size_t>(off / block_size);
      // A block's size word 0: a sparse block (squashfs stores nothing for it).
      if (index < blocks && (inode.extra[index] & 0x00ffffff) == 0) {
        off += want;
        continue;
      }
      sqfs_s32 got = sq().data_reader_read(data_, &inode, off, buf_.data(), want);
      if (got <= 0) {
        if (int e = in_->err.load()) return entry_error("read", path, e);
        return make_error("read squashfs", file_ + ":/" + path,
                          got == 0 ? "shorter than its size" : sqfs_error_text(got),
                          ErrorCode::kInvalidInput);
      }
      auto n = static_cast<size_t>(got);
      bool zeros = buf_[0] == 0 && std::memcmp(buf_.data(), buf_.data() + 1, n - 1) == 0;
      if (!zeros) {
        if (n > budget)
          return make_error("write", file_ + ":/" + path,
                            fmt::format("the extraction would write more than {} bytes, {}",
                                        budget_total, budget_what),
                            ErrorCode::kOther);
        budget -= n;
        const char* p = buf_.data();
        for (size_t left = n; left > 0;) {
          ssize_t w = ::pwrite(fd, p, left, static_cast<off_t>(off + (n - left)));
          if (w < 0 && errno == EINTR) continue;
          if (w < 0) return entry_error("write", path, errno);
          left -= static_cast<size_t>(w);
          p += w;
        }
      }
      off += n;
    }
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0) return entry_error("truncate", path, errno);
    return {};
  }

  Status make(int pfd, const std::string& name, const std::string& path,
              const sqfs_tree_node_t& n) {
    const sqfs_inode_generic_t& inode = *n.inode;
    uint16_t type = inode.base.type;
    mode_t perm = inode.base.mode & 0777;  // rootless: no set-id bits, as unpack drops them
    const char* nm = name.c_str();
    if (is_dir(type)) {
      if (::mkdirat(pfd, nm, 0700) != 0) return entry_error("mkdir", path, errno);
      UniqueFd sub(::openat(pfd, nm, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub.valid()) return entry_error("open", path, errno);
      ++stats.entries;
      BERTH_CHECK(fill(sub.get(), path, n));
      if (::fchmod(sub.get(), perm | 0700) != 0) return entry_error("chmod", path, errno);
      return times(sub.get(), nullptr, inode, 0, path);
    }
    if (is_file(type)) {
      // A hard link: a second name of an inode made already (every name of it carries the same
      // inode number). Its first name is a path of directories this extraction made.
      if (auto it = links_.find(inode.base.inode_number); it != links_.end()) {
        if (::linkat(root_fd, it->second.c_str(), pfd, nm, 0) != 0)
          return entry_error("link", path, errno);
        ++stats.entries;
        return {};
      }
      UniqueFd out(::openat(pfd, nm, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (!out.valid()) return entry_error("open", path, errno);
      sqfs_u64 size = 0;
      sq().inode_get_file_size(&inode, &size);
      BERTH_CHECK(write_data(out.get(), inode, size, path));
      stats.bytes += size;
      if (::fchmod(out.get(), perm) != 0) return entry_error("chmod", path, errno);
      BERTH_CHECK(times(out.get(), nullptr, inode, 0, path));
      if (inode.base.inode_number != 0) links_[inode.base.inode_number] = path;
      ++stats.entries;
      return {};
    }
    if (type == SQFS_INODE_SLINK || type == SQFS_INODE_EXT_SLINK) {
      size_t len = type == SQFS_INODE_SLINK ? inode.data.slink.target_size
                                            : inode.data.slink_ext.target_size;
      std::string target(reinterpret_cast<const char*>(inode.extra), len);
      if (::symlinkat(target.c_str(), pfd, nm) != 0) return entry_error("symlink", path, errno);
      ++stats.entries;
      return times(pfd, nm, inode, AT_SYMLINK_NOFOLLOW, path);
    }
    if (type == SQFS_INODE_FIFO || type == SQFS_INODE_EXT_FIFO) {
      if (::mkfifoat(pfd, nm, 0600) != 0) return entry_error("mkfifo", path, errno);
      if (::fchmodat(pfd, nm, perm, 0) != 0) return entry_error("chmod", path, errno);
      ++stats.entries;
      return times(pfd, nm, inode, 0, path);
    }
    // Device nodes cannot be made rootless (the runtime binds the host's); sockets are left
    // out as unpack leaves them.
    ++stats.skipped_devices;
    return {};
  }

  std::string file_;
  std::string buf_ = std::string(1 << 20, '\0');  ///< one block (block sizes are 1 MiB at most)
  sqfs_data_reader_t* data_;
  SqfsReadFile* in_;
  std::map<uint32_t, std::string> links_;  ///< inode number -> its first name's path
};

Result<UnsquashStats> extract(const std::string& file, const std::string& target, uint64_t limit,
                              const std::string& limit_what) {
  UniqueFd fd = BERTH_TRY(open_file(file, O_RDONLY));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return sys_error("stat", file);
  if (!S_ISREG(st.st_mode)) return make_error("read squashfs", file, "not a regular file");
  // The whole file, or a SIF file's squashfs partition (image/sif.h).
  SquashfsExtent at = BERTH_TRY(locate_squashfs(fd.get(), static_cast<uint64_t>(st.st_size), file));
  BERTH_CHECK(read_squashfs_superblock(fd.get(), at, file));
  SqfsReadFile in(fd.get(), at.offset, at.size);
  auto fail = [&](std::string_view what, int r) -> Error {
    if (int e = in.err.load()) return sys_error("read", file, e);
    return make_error("read squashfs", file,
                      fmt::format("{}{}: {}", at.sif ? "SIF file's squashfs partition: " : "", what,
                                  sqfs_error_text(r)),
                      ErrorCode::kInvalidInput);
  };
  sqfs_super_t super{};
  int r = sq().super_read(&super, &in.base);
  if (r != 0) return fail("super block", r);
  SqfsPtr<sqfs_compressor_t> cmp(BERTH_TRY(make_squashfs_decompressor(
      super, &in.base, {sq().compressor_config_init, sq().compressor_create}, "read squashfs",
      file)));
  SqfsPtr<sqfs_id_table_t> ids(sq().id_table_create(0));
  if (!ids) return fail("id table", SQFS_ERROR_ALLOC);
  if ((r = sq().id_table_read(ids.get(), &in.base, &super, cmp.get())) != 0)
    return fail("id table", r);
  SqfsPtr<sqfs_dir_reader_t> dr(sq().dir_reader_create(&super, cmp.get(), &in.base, 0));
  if (!dr) return fail("directory reader", SQFS_ERROR_ALLOC);
  SqfsPtr<sqfs_data_reader_t> data(
      sq().data_reader_create(&in.base, super.block_size, cmp.get(), 0));
  if (!data) return fail("data reader", SQFS_ERROR_ALLOC);
  if ((r = sq().data_reader_load_fragment_table(data.get(), &super)) != 0)
    return fail("fragment table", r);
  sqfs_tree_node_t* raw_tree = nullptr;
  if ((r = sq().dir_reader_get_full_hierarchy(dr.get(), ids.get(), nullptr, 0, &raw_tree)) != 0)
    return fail("directory tree", r);
  std::unique_ptr<sqfs_tree_node_t, TreeDestroy> tree(raw_tree);
  if (!is_dir(tree->inode->base.type))
    return make_error("read squashfs", file, "the root is not a directory",
                      ErrorCode::kInvalidInput);

  if (::mkdir(target.c_str(), 0700) != 0) return sys_error("mkdir", target);
  UniqueFd root(::open(target.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root.valid()) return sys_error("open", target);
  Extractor x(file, data.get(), &in);
  x.root_fd = root.get();
  x.block_size = super.block_size;
  x.budget = x.budget_total = limit;
  x.budget_what = limit_what;
  BERTH_CHECK(x.fill(root.get(), "", *tree));
  if (::fchmod(root.get(), (tree->inode->base.mode & 0777) | 0700) != 0)
    return sys_error("chmod", target);
  struct timespec t[2] = {{tree->inode->base.mod_time, 0}, {tree->inode->base.mod_time, 0}};
  if (::futimens(root.get(), t) != 0) return sys_error("change", target);
  return x.stats;
}

}  // namespace

Result<UnsquashStats> unsquash(const std::string& file, const std::string& target, uint64_t limit) {
  struct stat st;
  if (::lstat(target.c_str(), &st) == 0) return make_error("mkdir", target, "exists already");
  // The free space of the file system the target is made on (an unprivileged user's share),
  // or the limit given when it is lower.
  size_t slash = target.find_last_of('/');
  std::string parent = slash == std::string::npos ? std::string("./") : target.substr(0, slash + 1);
  struct statvfs vfs;
  if (::statvfs(parent.c_str(), &vfs) != 0) return sys_error("stat", parent);
  uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  std::string what = "the free space of " + parent;
  if (limit > 0 && limit < free_bytes) {
    what = "the configured extract_limit_mb";
  } else {
    limit = free_bytes;
  }
  auto r = extract(file, target, limit, what);
  if (!r.ok() && ::lstat(target.c_str(), &st) == 0) (void)remove_tree(target);  // best effort
  return r;
}

}  // namespace berth
