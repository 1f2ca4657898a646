// berth-squashfs IMAGE MOUNTPOINT: Berth's FUSE file system for squashfs images, started in the
// foreground by the squashfs mount's keeper (site/squashfs_mount.h) and stopped with SIGTERM,
// on which it unmounts (through fusermount3, as libfuse does for a user) and exits. It replaces
// Debian's squashfuse_ll, which answers no READDIRPLUS: from a fresh mount the kernel then
// sends one LOOKUP per entry of every directory walked, about 16 us each; with READDIRPLUS
// (asked for on every readdir, not left to the kernel's heuristic) a directory's entries come
// with their attributes (a directory of 100 entries in one request), and the walk makes no
// lookups at all.
//
// The image never changes under the mount, so every entry, attribute, negative lookup, file's
// pages and symlink target is cached by the kernel for as long as it likes (directory
// listings too, once the tree is read a second time: on_opendir says why not before).
// Every file is reported as owned by the user who mounted it, as a rootless unpack of the same
// image would be (an image of root's files would otherwise show uid 0, which the container's
// user namespace cannot map: its root would lack CAP_DAC_OVERRIDE over the image). The kernel
// checks permissions from those attributes (default_permissions): no ACCESS requests.
//
// A program of its own rather than `berth` re-executed: it links libfuse3 and libsquashfs
// (about 90 kB of code between them; statically, glibc included, where the archives are
// installed: nothing for the loader to do) instead of loading berth's 3 MB with every library
// berth defers, and berth itself does not link libfuse3. It is started once per image and node,
// so the difference is small either way; keeping libfuse out of berth's start is what counts.
//
// One request at a time (fuse_session_loop): libsquashfs's readers are not thread-safe, every
// request is short CPU work on an image whose pages are cached, and a walk's time is the
// kernel's (perf: dentry and inode set-up), not the daemon's. Measured against libfuse's
// multi-threaded loop with one lock around every handler (2 CPUs, shared with other work; five
// fresh mounts each, `find MNT -xdev` over the 15,445 entries of bench/sqwalk's image): four
// walkers at once took 156-351 ms single-threaded against 287-1,739 ms multi-threaded, one
// walker 74-375 ms against 102-657 ms: the threads only add wake-ups.
#define FUSE_USE_VERSION 34
#include <fuse_lowlevel.h>
#include <malloc.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "site/squashfs_fuse/squashfs_reader.h"

namespace berth::sqfuse {
namespace {

/// How long the kernel may keep entries and attributes: the image is immutable.
constexpr double kForever = 365.0 * 24 * 3600;
/// The largest read asked of the daemon (fuse's own ceiling, 256 pages).
constexpr unsigned kMaxRead = 1U << 20;

struct Daemon {
  std::unique_ptr<SquashfsReader> image;
  uid_t uid = 0;
  gid_t gid = 0;
  bool no_open = false;           ///< the kernel opens files without asking (on_init)
  bool can_stop_opendir = false;  ///< ... and would open directories so (on_opendir)
  /// The directories whose whole listing a readdir has served (found its end): node ids.
  std::unordered_set<uint64_t> listed;
  std::vector<char> buffer;          ///< readdir replies (one request at a time)
  std::vector<struct iovec> pieces;  ///< a read's reply
  uint64_t file_ref = ~0ULL;         ///< the file the last read read, and its inode
  InodePtr file;
};

Daemon& daemon_of(fuse_req_t req) {
  return *static_cast<Daemon*>(fuse_req_userdata(req));
}

void on_init(void* userdata, struct fuse_conn_info* conn) {
  if ((conn->capable & FUSE_CAP_READDIRPLUS) != 0) {
    conn->want |= FUSE_CAP_READDIRPLUS;
    conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;  // every readdir a plus: a walk stats what it lists
  }
  if ((conn->capable & FUSE_CAP_CACHE_SYMLINKS) != 0) conn->want |= FUSE_CAP_CACHE_SYMLINKS;
  // Zero-message opens: once OPEN answers ENOSYS, the kernel opens files by itself, keeping
  // their pages cached (FOPEN_KEEP_CACHE is its default then), and sends no RELEASE either: a
  // start makes one round trip fewer per file it opens. Nothing is kept per open file: reads
  // and readdirs find their inode by node id. Directories: see on_opendir.
  Daemon& d = *static_cast<Daemon*>(userdata);
  d.no_open = (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) != 0;
  d.can_stop_opendir = (conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT) != 0;
  // libfuse sizes the kernel's largest request (max_pages) from max_write: 1 MiB reads.
  conn->max_write = kMaxRead;
}

/// The entry for `ref`, its inode read; 0 or an errno.
int make_entry(Daemon& d, uint64_t ref, struct fuse_entry_param* e) {
  InodePtr inode;
  if (int rc = d.image->inode(ref, &inode); rc != 0) return rc;
  // Every field set (attributes() clears the rest of st): no memset of the whole entry, which
  // a readdir of 15,000 entries would pay for 15,000 times.
  e->ino = d.image->node_of(ref);
  e->generation = 1;
  d.image->attributes(*inode, d.uid, d.gid, &e->attr);
  e->attr_timeout = kForever;
  e->entry_timeout = kForever;
  return 0;
}

void on_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Daemon& d = daemon_of(req);
  DirEntry found;
  int rc = d.image->lookup(d.image->ref_of(parent), name, &found);
  struct fuse_entry_param e;
  if (rc == ENOENT) {  // a negative entry, kept as long as any other
    std::memset(&e, 0, sizeof e);
    e.entry_timeout = kForever;
    fuse_reply_entry(req, &e);
    return;
  }
  if (rc == 0) rc = make_entry(d, found.ref, &e);
  if (rc != 0) {
    fuse_reply_err(req, rc);
    return;
  }
  fuse_reply_entry(req, &e);
}

void on_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* /*fi*/) {
  Daemon& d = daemon_of(req);
  InodePtr inode;
  if (int rc = d.image->inode(d.image->ref_of(ino), &inode); rc != 0) {
    fuse_reply_err(req, rc);
    return;
  }
  struct stat st;
  d.image->attributes(*inode, d.uid, d.gid, &st);
  fuse_reply_attr(req, &st, kForever);
}

void on_readlink(fuse_req_t req, fuse_ino_t ino) {
  Daemon& d = daemon_of(req);
  InodePtr inode;
  if (int rc = d.image->inode(d.image->ref_of(ino), &inode); rc != 0) {
    fuse_reply_err(req, rc);
    return;
  }
  std::string_view target = SquashfsReader::symlink_target(*inode);
  if (target.empty()) {
    fuse_reply_err(req, EINVAL);
    return;
  }
  fuse_reply_readlink(req, std::string(target).c_str());
}

void on_open(fuse_req_t req, fuse_ino_t /*ino*/, struct fuse_file_info* fi) {
  if ((fi->flags & O_ACCMODE) != O_RDONLY) {
    fuse_reply_err(req, EROFS);
    return;
  }
  Daemon& d = daemon_of(req);
  if (d.no_open) {
    fuse_reply_err(req, ENOSYS);  // on_init says why
    return;
  }
  fi->keep_cache = 1;  // the pages stay valid from one open to the next
  fuse_reply_open(req, fi);
}

void on_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
             struct fuse_file_info* /*fi*/) {
  Daemon& d = daemon_of(req);
  uint64_t ref = d.image->ref_of(ino);
  if (ref != d.file_ref) {  // a file's reads come in a row: its inode is read once
    d.file_ref = ~0ULL;
    if (int rc = d.image->inode(ref, &d.file); rc != 0) {
      fuse_reply_err(req, rc);
      return;
    }
    d.file_ref = ref;
  }
  // Straight from the reader's cached blocks: no copy of the data on the way out.
  long n = d.image->read_pieces(*d.file, static_cast<uint64_t>(off),
                                std::min<size_t>(size, kMaxRead), &d.pieces);
  if (n < 0) {
    fuse_reply_err(req, static_cast<int>(-n));
    return;
  }
  fuse_reply_iov(req, d.pieces.data(), static_cast<int>(d.pieces.size()));
}

// Directory listings: the kernel can keep them (FOPEN_CACHE_DIR), but filling that cache costs
// it a page-cache lookup and a copy per entry (3-4 ms of a cold walk of bench/sqwalk's 15,445
// entries), more than an OPENDIR and a RELEASEDIR per directory cost (the walk is 1-2 ms
// faster without the cache), and a start reads most directories once. So a directory is
// opened without the cache until some directory is opened again after a whole listing of it:
// the tree is being read a second time (another container on the same mount, a second `ls`),
// and from then on OPENDIR answers ENOSYS, which makes the kernel open every directory by
// itself, listings cached (its default then), without a message: zero-message opens for good.
// The price: that second reading lists each directory from the daemon once more.
void on_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  Daemon& d = daemon_of(req);
  if (!d.can_stop_opendir) {  // an old kernel: cached listings, one OPENDIR per open
    fi->keep_cache = 1;
    fi->cache_readdir = 1;
  } else if (d.listed.count(ino) != 0) {
    fuse_reply_err(req, ENOSYS);
    return;
  }
  fuse_reply_open(req, fi);
}

/// readdir and readdirplus: entry i of ".", "..", then the listing, from offset `off` (the
/// index of the next entry), as many as fit in `size` bytes.
void read_dir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus) {
  Daemon& d = daemon_of(req);
  std::shared_ptr<const Listing> listing;
  // Kept: the directory's inode and entries are read once; a walk's second readdir of each
  // directory (the one that finds its end) reads nothing.
  if (int rc = d.image->listing(d.image->ref_of(ino), &listing); rc != 0) {
    fuse_reply_err(req, rc);
    return;
  }
  const Listing& entries = *listing;
  if (off >= 0 && static_cast<size_t>(off) >= entries.size() + 2) d.listed.insert(ino);  // its end
  size = std::min<size_t>(size, kMaxRead);
  if (d.buffer.size() < size) d.buffer.resize(size);
  char* buf = d.buffer.data();
  size_t used = 0;
  for (size_t i = off < 0 ? 0 : static_cast<size_t>(off); i < entries.size() + 2; ++i) {
    struct fuse_entry_param e;
    if (i < 2 || !plus) std::memset(&e, 0, sizeof e);  // make_entry() sets all of it
    const char* name;
    if (i < 2) {  // "." and "..": no attributes beyond the number and type (ino 0: no entry)
      name = i == 0 ? "." : "..";
      e.attr.st_ino = i == 0 ? entries.self : entries.parent;
      e.attr.st_mode = S_IFDIR;
    } else {
      const DirEntry& ent = entries[i - 2];
      name = ent.name.c_str();
      if (plus) {
        if (int rc = make_entry(d, ent.ref, &e); rc != 0) {
          if (used == 0) {
            fuse_reply_err(req, rc);
            return;
          }
          break;  // what fits so far; the next call reports the error
        }
      } else {
        e.attr.st_ino = ent.inode_number;
        e.attr.st_mode = type_mode(ent.type);
      }
    }
    auto next = static_cast<off_t>(i + 1);
    size_t need = plus ? fuse_add_direntry_plus(req, buf + used, size - used, name, &e, next)
                       : fuse_add_direntry(req, buf + used, size - used, name, &e.attr, next);
    if (need > size - used) break;  // not added: the next call starts with it
    used += need;
  }
  fuse_reply_buf(req, buf, used);
}

void on_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                struct fuse_file_info* /*fi*/) {
  read_dir(req, ino, size, off, false);
}

void on_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info* /*fi*/) {
  read_dir(req, ino, size, off, true);
}

/// The extended attributes of node `ino`, or false after replying with an error.
bool node_xattrs(fuse_req_t req, fuse_ino_t ino, Xattrs* out) {
  Daemon& d = daemon_of(req);
  if (!d.image->has_xattrs()) {
    // No xattr table: ENOSYS tells the kernel to stop asking (an exec asks for
    // security.capability), and every later call gets EOPNOTSUPP without a round trip.
    fuse_reply_err(req, ENOSYS);
    return false;
  }
  InodePtr inode;
  int rc = d.image->inode(d.image->ref_of(ino), &inode);
  if (rc == 0) rc = d.image->xattrs(*inode, out);
  if (rc != 0) fuse_reply_err(req, rc);
  return rc == 0;
}

/// Replies with `value`: its size when `size` is 0, ERANGE when it does not fit.
void reply_sized(fuse_req_t req, const std::string& value, size_t size) {
  if (size == 0)
    fuse_reply_xattr(req, value.size());
  else if (size < value.size())
    fuse_reply_err(req, ERANGE);
  else
    fuse_reply_buf(req, value.data(), value.size());
}

void on_getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  Xattrs all;
  if (!node_xattrs(req, ino, &all)) return;
  for (const auto& [key, value] : all) {
    if (key == name) {
      reply_sized(req, value, size);
      return;
    }
  }
  fuse_reply_err(req, ENODATA);
}

void on_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  Xattrs all;
  if (!node_xattrs(req, ino, &all)) return;
  std::string names;
  for (const auto& kv : all) names.append(kv.first).push_back('\0');
  reply_sized(req, names, size);
}

void on_statfs(fuse_req_t req, fuse_ino_t /*ino*/) {
  const sqfs_super_t& s = daemon_of(req).image->super();
  struct statvfs st;
  std::memset(&st, 0, sizeof st);
  st.f_bsize = s.block_size;
  st.f_frsize = s.block_size;
  st.f_blocks = (s.bytes_used + s.block_size - 1) / s.block_size;
  st.f_files = s.inode_count;
  st.f_namemax = 256;
  st.f_flag = ST_RDONLY;
  fuse_reply_statfs(req, &st);
}

const struct fuse_lowlevel_ops kOps = [] {
  struct fuse_lowlevel_ops ops;
  std::memset(&ops, 0, sizeof ops);
  ops.init = on_init;
  ops.lookup = on_lookup;
  ops.getattr = on_getattr;
  ops.readlink = on_readlink;
  ops.open = on_open;
  ops.read = on_read;
  ops.opendir = on_opendir;
  ops.readdir = on_readdir;
  ops.readdirplus = on_readdirplus;
  ops.statfs = on_statfs;
  ops.getxattr = on_getxattr;
  ops.listxattr = on_listxattr;
  return ops;
}();

/// Mounts `image` on `mountpoint` and serves it until SIGTERM (or an unmount); the exit status.
int serve(const std::string& image, uint64_t offset, const std::string& mountpoint, int ready_fd) {
  Daemon d;
  auto opened = SquashfsReader::open(image, image, offset);
  if (!opened.ok()) {
    // One line for the keeper, which reports it after "mount squashfs FILE: " (the subject
    // here is only /proc/self/fd/N).
    const Error& e = opened.error();
    std::fprintf(stderr, "berth-squashfs: %s\n",
                 e.sys_errno != 0 ? e.message().c_str() : e.detail.c_str());
    return 1;
  }
  d.image = std::move(*opened);
  d.uid = ::getuid();
  d.gid = ::getgid();
  const char* argv[] = {"berth-squashfs", "-o",
                        "ro,default_permissions,fsname=berth-squashfs,subtype=squashfs"};
  struct fuse_args args = FUSE_ARGS_INIT(3, const_cast<char**>(argv));
  struct fuse_session* se = fuse_session_new(&args, &kOps, sizeof kOps, &d);
  if (se == nullptr) {
    fuse_opt_free_args(&args);
    return 1;  // libfuse said why on stderr
  }
  int status = 1;
  if (fuse_set_signal_handlers(se) == 0) {
    if (fuse_session_mount(se, mountpoint.c_str()) == 0) {
      if (ready_fd >= 0) {  // the keeper waits for this byte (or for the end of the pipe)
        (void)!::write(ready_fd, "m", 1);
        ::close(ready_fd);
      }
      // Ended by an unmount (0) or by SIGTERM, the keeper's stop (libfuse 3.14 returns the
      // signal's number): a clean exit either way; a failure is a negative errno.
      int rc = fuse_session_loop(se);
      status = rc >= 0 || rc == -EINTR ? 0 : 1;
      fuse_session_unmount(se);
    }
    fuse_remove_signal_handlers(se);
  }
  fuse_session_destroy(se);
  fuse_opt_free_args(&args);  // libfuse copies the arguments it parses
  return status;
}

}  // namespace
}  // namespace berth::sqfuse

int main(int argc, char** argv) {
  // Each fragment block libsquashfs decompresses (a file's tail) is a malloc of a whole block
  // (128 KiB): from the heap, kept there once freed, rather than an mmap per block that faults
  // its 32 pages in and an munmap when it is freed.
  mallopt(M_MMAP_THRESHOLD, 16 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  // --ready-fd N: write one byte on descriptor N once the mount is made (the keeper's signal).
  int ready_fd = -1;
  if (argc >= 5 && std::strcmp(argv[1], "--ready-fd") == 0) {
    char* end = nullptr;
    long fd = std::strtol(argv[2], &end, 10);
    if (end == argv[2] || *end != '\0' || fd < 3 || fd > 1 << 20) {
      std::fprintf(stderr, "berth-squashfs: --ready-fd: not a descriptor: %s\n", argv[2]);
      return 2;
    }
    ready_fd = static_cast<int>(fd);
    argc -= 2;
    argv += 2;
  }
  // --offset N: the squashfs image starts at byte N of IMAGE (a SIF file's partition).
  uint64_t offset = 0;
  if (argc >= 5 && std::strcmp(argv[1], "--offset") == 0) {
    char* end = nullptr;
    errno = 0;
    unsigned long long n = std::strtoull(argv[2], &end, 10);
    if (end == argv[2] || *end != '\0' || errno != 0 || argv[2][0] == '-') {
      std::fprintf(stderr, "berth-squashfs: --offset: not a byte offset: %s\n", argv[2]);
      return 2;
    }
    offset = n;
    argc -= 2;
    argv += 2;
  }
  if (argc != 3 || argv[1][0] == '-') {
    std::fprintf(stderr,
                 "usage: berth-squashfs [--ready-fd N] [--offset N] IMAGE MOUNTPOINT (runs in "
                 "the foreground)\n");
    return 2;
  }
  return berth::sqfuse::serve(argv[1], offset, argv[2], ready_fd);
}
