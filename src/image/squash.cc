#include "image/squash.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/core.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "core/clock.h"
#include "core/fs.h"
#include "core/json.h"
#include "image/layer_stream.h"
#include "image/rootfs_path.h"
#include "image/sqfs_api.h"
#include "image/squash_merge.h"
#include "image/squashfs_superblock.h"

namespace berth {

const SqfsApi& sqfs_api() {
  static const SqfsApi api;
  return api;
}

namespace {

const SqfsApi& sq() {
  return sqfs_api();
}
const ArchiveApi& ar() {
  return archive_api();
}

constexpr uint32_t kBlockSize = SQFS_DEFAULT_BLOCK_SIZE;  // 128 KiB, mksquashfs's default too
constexpr uint32_t kNoXattr = 0xFFFFFFFF;

// ---------------------------------------------------------------------------------------------
// The file libsquashfs writes and reads: our fd, so that an I/O error keeps its errno.

struct FdFile {
  sqfs_file_t base{};
  int fd = -1;
  std::atomic<uint64_t> size{0};
  std::atomic<int> err{0};  // the first errno seen

  explicit FdFile(int f, uint64_t initial_size = 0) : fd(f), size(initial_size) {
    base.base.destroy = [](sqfs_object_t*) {};  // owned by whoever made it, never by libsquashfs
    base.base.copy = nullptr;
    base.read_at = &read_at;
    base.write_at = &write_at;
    base.get_size = &get_size;
    base.truncate = &truncate;
  }
  FdFile(const FdFile&) = delete;
  FdFile& operator=(const FdFile&) = delete;

  static FdFile* self(sqfs_file_t* f) { return reinterpret_cast<FdFile*>(f); }
  void fail(int e) {
    int zero = 0;
    err.compare_exchange_strong(zero, e);
  }

  static int read_at(sqfs_file_t* f, sqfs_u64 off, void* buf, size_t n) {
    FdFile* s = self(f);
    auto* p = static_cast<char*>(buf);
    while (n > 0) {
      ssize_t r = ::pread(s->fd, p, n, static_cast<off_t>(off));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) {
        s->fail(errno);
        return SQFS_ERROR_IO;
      }
      if (r == 0) return SQFS_ERROR_OUT_OF_BOUNDS;  // past the end: a truncated file
      p += r;
      n -= static_cast<size_t>(r);
      off += static_cast<sqfs_u64>(r);
    }
    return 0;
  }

  static int write_at(sqfs_file_t* f, sqfs_u64 off, const void* buf, size_t n) {
    FdFile* s = self(f);
    const auto* p = static_cast<const char*>(buf);
    sqfs_u64 end = off + n;
    while (n > 0) {
      ssize_t r = ::pwrite(s->fd, p, n, static_cast<off_t>(off));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) {
        s->fail(errno);
        return SQFS_ERROR_IO;
      }
      p += r;
      n -= static_cast<size_t>(r);
      off += static_cast<sqfs_u64>(r);
    }
    uint64_t cur = s->size.load();
    while (cur < end && !s->size.compare_exchange_weak(cur, end)) {
    }
    return 0;
  }

  static sqfs_u64 get_size(const sqfs_file_t* f) {
    return reinterpret_cast<const FdFile*>(f)->size.load();
  }

  static int truncate(sqfs_file_t* f, sqfs_u64 sz) {
    FdFile* s = self(f);
    if (::ftruncate(s->fd, static_cast<off_t>(sz)) != 0) {
      s->fail(errno);
      return SQFS_ERROR_IO;
    }
    s->size = sz;
    return 0;
  }
};

// ---------------------------------------------------------------------------------------------
// The output file: unnamed until complete.

class OutputFile {
 public:
  static Result<OutputFile> create(const std::string& path) {
    OutputFile out;
    out.path_ = path;
    size_t slash = path.rfind('/');
    std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    out.fd_.reset(::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0644));
    if (!out.fd_.valid()) {
      int err = errno;
      // Not every file system has O_TMPFILE: a dot-file beside, removed on failure.
      if (err != EOPNOTSUPP && err != EISDIR && err != EINVAL)
        return sys_error("create", path, err);
      std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
      out.named_tmp_ = (slash == std::string::npos ? "" : path.substr(0, slash + 1)) + "." + base +
                       ".berth-tmp-" + std::to_string(::getpid());
      out.fd_.reset(::open(out.named_tmp_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
      if (!out.fd_.valid()) return sys_error("create", path);
    }
    // The create mode went through the umask: make it what a new file would get.
    mode_t mask = ::umask(0);
    ::umask(mask);
    (void)::fchmod(out.fd_.get(), 0644 & ~mask);  // cosmetic: the file is still ours to read
    return out;
  }

  OutputFile() = default;
  OutputFile(OutputFile&&) = default;
  OutputFile& operator=(OutputFile&&) = default;
  ~OutputFile() {
    if (!named_tmp_.empty() && !committed_) (void)::unlink(named_tmp_.c_str());  // best effort
  }

  int fd() const { return fd_.get(); }

  /// Syncs the data and gives the file its name (replacing a file of that name).
  Status commit() {
    if (::fsync(fd_.get()) != 0) return sys_error("fsync", path_);
    if (named_tmp_.empty()) {
      // linkat cannot replace: link under a temporary name, then rename over the target.
      size_t slash = path_.rfind('/');
      std::string base = slash == std::string::npos ? path_ : path_.substr(slash + 1);
      std::string tmp = (slash == std::string::npos ? "" : path_.substr(0, slash + 1)) + "." +
                        base + ".berth-tmp-" + std::to_string(::getpid());
      std::string proc = "/proc/self/fd/" + std::to_string(fd_.get());
      (void)::unlink(tmp.c_str());  // a leftover of an earlier run with our pid
      if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, tmp.c_str(), AT_SYMLINK_FOLLOW) != 0)
        return sys_error("link", path_);
      named_tmp_ = tmp;
    }
    if (::rename(named_tmp_.c_str(), path_.c_str()) != 0)
      return sys_error("rename", named_tmp_ + " -> " + path_);
    committed_ = true;
    return {};
  }

 private:
  std::string path_, named_tmp_;
  UniqueFd fd_;
  bool committed_ = false;
};

// ---------------------------------------------------------------------------------------------
// Compressor settings.

struct CompressorChoice {
  const char* name;
  SQFS_COMPRESSOR id;
  int min_level, max_level;  // 0, 0: no levels
};

constexpr CompressorChoice kCompressors[] = {
    {"lz4", SQFS_COMP_LZ4, 0, 0},
    {"zstd", SQFS_COMP_ZSTD, SQFS_ZSTD_MIN_LEVEL, SQFS_ZSTD_MAX_LEVEL},
    {"gzip", SQFS_COMP_GZIP, SQFS_GZIP_MIN_LEVEL, SQFS_GZIP_MAX_LEVEL},
};

const CompressorChoice* find_compressor(std::string_view name) {
  for (const CompressorChoice& c : kCompressors)
    if (name == c.name) return &c;
  return nullptr;
}

// libsquashfs 1.2's lz4 keeps a "compressed" metadata block even when it came out larger than
// its input (4 bytes of id table as 5); squashfs-tools 4.5's unsquashfs refuses such a block as
// corrupt (the kernel and squashfuse read it). mksquashfs stores those blocks uncompressed, and
// so does Berth: every compressor's do_block is wrapped to answer "could not compress" (0, the
// library's own convention) when the output is not smaller. Copies for worker threads copy the
// wrapper with the struct.
using DoBlock = sqfs_s32 (*)(sqfs_compressor_t*, const sqfs_u8*, sqfs_u32, sqfs_u8*, sqfs_u32);
std::atomic<DoBlock> g_do_block[8];  // the library's own do_block, by compressor id

sqfs_s32 do_block_no_growth(sqfs_compressor_t* cmp, const sqfs_u8* in, sqfs_u32 size, sqfs_u8* out,
                            sqfs_u32 outsize) {
  sqfs_compressor_config_t cfg;
  cmp->get_configuration(cmp, &cfg);
  DoBlock orig = g_do_block[cfg.id & 7].load();
  sqfs_s32 r = orig(cmp, in, size, out, outsize);
  return r >= 0 && static_cast<sqfs_u32>(r) >= size ? 0 : r;
}

void keep_blocks_from_growing(sqfs_compressor_t* cmp, SQFS_COMPRESSOR id) {
  g_do_block[id & 7].store(cmp->do_block);
  cmp->do_block = &do_block_no_growth;
}

unsigned default_workers() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return 1;
}

// ---------------------------------------------------------------------------------------------
// The squashfs being written: libsquashfs's writer objects, the data blocks, the tables.

uint32_t clamp_time(int64_t t) {
  return static_cast<uint32_t>(std::clamp<int64_t>(t, 0, int64_t{UINT32_MAX}));
}

class Builder {
 public:
  Builder(int fd, std::string what) : file_(fd), what_(std::move(what)) {}
  Builder(const Builder&) = delete;
  Builder& operator=(const Builder&) = delete;

  Status open(const SquashOptions& opts) {
    const CompressorChoice* c = find_compressor(opts.compressor);
    sqfs_compressor_config_t cfg;
    int r = sq().compressor_config_init(&cfg, c->id, kBlockSize, 0);
    if (r != 0) return fail("compressor", r);
    if (opts.level != 0) cfg.level = static_cast<sqfs_u32>(opts.level);
    sqfs_compressor_t* cmp = nullptr;
    if ((r = sq().compressor_create(&cfg, &cmp)) != 0) return fail("compressor", r);
    cmp_.reset(cmp);
    keep_blocks_from_growing(cmp, c->id);
    cfg.flags |= SQFS_COMP_FLAG_UNCOMPRESS;  // for reading fragment blocks back to deduplicate
    if ((r = sq().compressor_create(&cfg, &cmp)) != 0) return fail("compressor", r);
    uncmp_.reset(cmp);

    made_ = opts.made ? clamp_time(*opts.made) : clamp_time(::time(nullptr));
    if ((r = sq().super_init(&super_, kBlockSize, made_, c->id)) != 0)
      return fail("super block", r);
    if ((r = sq().super_write(&super_, &file_.base)) != 0) return fail("super block", r);
    r = cmp_->write_options(cmp_.get(), &file_.base);
    if (r < 0) return fail("compressor options", r);
    if (r > 0) super_.flags |= SQFS_FLAG_COMPRESSOR_OPTIONS;

    blkwr_.reset(sq().block_writer_create(&file_.base, SQFS_DEVBLK_SIZE, 0));
    frag_.reset(sq().frag_table_create(0));
    ids_.reset(sq().id_table_create(0));
    im_.reset(sq().meta_writer_create(&file_.base, cmp_.get(), 0));
    dm_.reset(sq().meta_writer_create(&file_.base, cmp_.get(), SQFS_META_WRITER_KEEP_IN_MEMORY));
    if (!blkwr_ || !frag_ || !ids_ || !im_ || !dm_) return fail("writer", SQFS_ERROR_ALLOC);
    dirw_.reset(sq().dir_writer_create(dm_.get(), 0));
    if (!dirw_) return fail("writer", SQFS_ERROR_ALLOC);

    unsigned workers = opts.workers != 0 ? opts.workers : default_workers();
    sqfs_block_processor_desc_t desc{};
    desc.size = sizeof desc;
    desc.max_block_size = kBlockSize;
    desc.num_workers = workers;
    desc.max_backlog = workers * 10;
    desc.cmp = cmp_.get();
    desc.wr = blkwr_.get();
    desc.tbl = frag_.get();
    desc.file = &file_.base;
    desc.uncmp = uncmp_.get();
    sqfs_block_processor_t* proc = nullptr;
    if ((r = sq().block_processor_create_ex(&desc, &proc)) != 0) return fail("block processor", r);
    proc_.reset(proc);
    return {};
  }

  /// Streams one regular file's data: begin, append..., end.
  Status begin_file(MergeInode* inode) {
    int r = sq().block_processor_begin_file(proc_.get(), &inode->file, nullptr, 0);
    return r == 0 ? Status{} : fail("write data", r);
  }
  Status append(const void* data, size_t n) {
    int r = sq().block_processor_append(proc_.get(), data, n);
    return r == 0 ? Status{} : fail("write data", r);
  }
  Status end_file() {
    int r = sq().block_processor_end_file(proc_.get());
    return r == 0 ? Status{} : fail("write data", r);
  }
  /// Appends `n` zero bytes (a hole of a sparse file, or a short archive member).
  Status append_zeros(uint64_t n) {
    static const char kZeros[65536] = {};
    while (n > 0) {
      size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, sizeof kZeros));
      BERTH_CHECK(append(kZeros, chunk));
      n -= chunk;
    }
    return {};
  }

  /// Waits for the data blocks, writes inodes, directories and tables, then the super block.
  Status finish(MergeTree& tree, SquashStats& stats) {
    int r = sq().block_processor_finish(proc_.get());
    if (r != 0) return fail("write data", r);
    std::vector<MergeTree::Node*> order;  // directories and inodes in the order they are written
    uint32_t count = 0;
    number(tree.root(), order, count);
    tree.root().inode->number = ++count;
    ++tree.root().inode->nlink;  // the root has no name in a parent, but ".." is itself
    order.push_back(&tree.root());
    super_.inode_count = count;
    stats.inodes = count;

    super_.inode_table_start = file_.size.load();
    std::unordered_map<const MergeInode*, MergeTree::Node*> parent_of;
    for (MergeTree::Node* n : order) {
      if (n->is_dir())
        for (auto& [name, child] : n->children)
          if (child->is_dir()) parent_of[child->inode] = n;
    }
    for (MergeTree::Node* n : order) {
      MergeTree::Node* parent = n->is_dir() ? parent_of[n->inode] : nullptr;
      uint32_t parent_no = parent ? parent->inode->number : count + 1;  // root: as mksquashfs
      BERTH_CHECK(write_inode(*n, parent_no));
    }
    if ((r = sq().meta_writer_flush(im_.get())) != 0) return fail("inode table", r);
    if ((r = sq().meta_writer_flush(dm_.get())) != 0) return fail("directory table", r);
    super_.root_inode_ref = tree.root().inode->ref;
    super_.directory_table_start = file_.size.load();
    if ((r = sq().meta_write_write_to_file(dm_.get())) != 0) return fail("directory table", r);
    if ((r = sq().frag_table_write(frag_.get(), &file_.base, &super_, cmp_.get())) != 0)
      return fail("fragment table", r);
    if ((r = sq().id_table_write(ids_.get(), &file_.base, &super_, cmp_.get())) != 0)
      return fail("id table", r);
    super_.bytes_used = file_.size.load();
    if ((r = sq().super_write(&super_, &file_.base)) != 0) return fail("super block", r);
    // Pad to the device block size, as mksquashfs does (loop devices want whole blocks).
    uint64_t pad = (SQFS_DEVBLK_SIZE - super_.bytes_used % SQFS_DEVBLK_SIZE) % SQFS_DEVBLK_SIZE;
    if (pad > 0) {
      std::vector<char> zeros(pad);
      if ((r = file_.base.write_at(&file_.base, super_.bytes_used, zeros.data(), pad)) != 0)
        return fail("write", r);
    }
    stats.size = file_.size.load();
    return {};
  }

  /// The file system's time (its super block's, and /.berth's): SquashOptions::made, else now.
  uint32_t made() const { return made_; }

  /// An error from libsquashfs's code `r` while doing `what`: errno when the file failed.
  Error fail(std::string_view what, int r) const {
    if (int e = file_.err.load()) return sys_error("write", what_, e);
    return make_error("squash", what_, fmt::format("{}: {}", what, sqfs_error_text(r)));
  }

 private:
  /// Numbers inodes as squashfs-tools-ng does: a directory's subdirectories first (depth
  /// first), then its entries, so every inode is written before the directory naming it.
  static void number(MergeTree::Node& dir, std::vector<MergeTree::Node*>& order, uint32_t& count) {
    for (auto& [name, child] : dir.children)
      if (child->is_dir()) number(*child, order, count);
    for (auto& [name, child] : dir.children) {
      if (child->inode == nullptr) continue;  // a node holding only whiteout marks
      ++child->inode->nlink;
      if (child->is_dir()) ++dir.inode->nlink;  // its ".."
      if (child->inode->number != 0) continue;  // a hard link to an inode already numbered
      child->inode->number = ++count;
      order.push_back(child.get());
    }
  }

  Status write_inode(MergeTree::Node& n, uint32_t parent_no) {
    MergeInode& ino = *n.inode;
    SqfsInodePtr inode;
    int r = 0;
    if (n.is_dir()) {
      if ((r = sq().dir_writer_begin(dirw_.get(), 0)) != 0) return fail("directory", r);
      for (auto& [name, child] : n.children) {
        if (child->inode == nullptr) continue;
        const MergeInode& c = *child->inode;
        r = sq().dir_writer_add_entry(dirw_.get(), name.c_str(), c.number, c.ref,
                                      static_cast<sqfs_u16>(c.mode));
        if (r != 0) return fail("directory", r);
      }
      if ((r = sq().dir_writer_end(dirw_.get())) != 0) return fail("directory", r);
      inode.reset(sq().dir_writer_create_inode(dirw_.get(), 0, kNoXattr, parent_no));
      if (!inode) return fail("directory", SQFS_ERROR_ALLOC);
      uint32_t nlink = ino.nlink + 1;  // its name in the parent, its ".", its subdirectories' ".."
      if (inode->base.type == SQFS_INODE_DIR)
        inode->data.dir.nlink = nlink;
      else
        inode->data.dir_ext.nlink = nlink;
    } else if (S_ISREG(ino.mode)) {
      inode.reset(ino.file);
      ino.file = nullptr;
      if (!inode) return fail("file", SQFS_ERROR_INTERNAL);
      if (ino.nlink > 1 || inode->base.type == SQFS_INODE_EXT_FILE) {
        if ((r = sq().inode_make_extended(inode.get())) != 0) return fail("file", r);
        inode->data.file_ext.nlink = ino.nlink;
        sq().inode_set_xattr_index(inode.get(), kNoXattr);
      }
    } else {
      size_t extra = S_ISLNK(ino.mode) ? ino.target.size() : 0;
      auto* raw =
          static_cast<sqfs_inode_generic_t*>(std::calloc(1, sizeof(sqfs_inode_generic_t) + extra));
      if (raw == nullptr) return fail("inode", SQFS_ERROR_ALLOC);
      inode.reset(raw);  // calloc'd: libsquashfs's free() is the same C library's
      if (S_ISLNK(ino.mode)) {
        raw->base.type = SQFS_INODE_SLINK;
        raw->data.slink.nlink = ino.nlink;
        raw->data.slink.target_size = static_cast<sqfs_u32>(extra);
        raw->payload_bytes_available = raw->payload_bytes_used = static_cast<sqfs_u32>(extra);
        // Squashfs stores a symlink's target without a terminating NUL (its length is target_size).
        // NOLINTNEXTLINE(bugprone-not-null-terminated-result)
        std::memcpy(raw->extra, ino.target.data(), extra);
      } else {  // FIFO
        raw->base.type = SQFS_INODE_FIFO;
        raw->data.ipc.nlink = ino.nlink;
      }
    }
    inode->base.mode = static_cast<sqfs_u16>(ino.mode);
    inode->base.mod_time = ino.mtime;
    inode->base.inode_number = ino.number;
    if ((r = sq().id_table_id_to_index(ids_.get(), ino.uid, &inode->base.uid_idx)) != 0 ||
        (r = sq().id_table_id_to_index(ids_.get(), ino.gid, &inode->base.gid_idx)) != 0)
      return fail("id table", r);
    sqfs_u64 block = 0;
    sqfs_u32 offset = 0;
    sq().meta_writer_get_position(im_.get(), &block, &offset);
    ino.ref = (block << 16) | offset;
    if ((r = sq().meta_writer_write_inode(im_.get(), inode.get())) != 0) return fail("inode", r);
    return {};
  }

  FdFile file_;
  std::string what_;
  uint32_t made_ = 0;
  sqfs_super_t super_{};
  SqfsPtr<sqfs_compressor_t> cmp_, uncmp_;
  SqfsPtr<sqfs_block_writer_t> blkwr_;
  SqfsPtr<sqfs_frag_table_t> frag_;
  SqfsPtr<sqfs_id_table_t> ids_;
  SqfsPtr<sqfs_meta_writer_t> im_, dm_;
  SqfsPtr<sqfs_dir_writer_t> dirw_;
  SqfsPtr<sqfs_block_processor_t> proc_;  // last: destroyed first, while the rest still exist
};

/// Frees the file inodes the block processor made for entries that were later replaced.
void free_unwritten(MergeTree& tree) {
  for (MergeInode& i : tree.inodes()) {
    if (i.file != nullptr) sq().free(i.file);
    i.file = nullptr;
  }
}

/// Adds /.berth/image.json, as the newest of all layers, so that no layer can replace it.
Status add_metadata(MergeTree& tree, Builder& b, int layer, std::string_view metadata,
                    SquashStats& stats) {
  if (metadata.empty()) return {};
  uint32_t now = b.made();
  MergeInode dir;
  dir.mode = S_IFDIR | 0755;
  dir.mtime = now;
  std::string_view path = kSquashMetadataPath;
  std::string_view parent = path.substr(0, path.rfind('/'));
  tree.set_dir_meta(layer, parent, dir);
  MergeInode file;
  file.mode = S_IFREG | 0644;
  file.mtime = now;
  MergeInode* ino = tree.add(layer, path, file);
  BERTH_CHECK(b.begin_file(ino));
  BERTH_CHECK(b.append(metadata.data(), metadata.size()));
  BERTH_CHECK(b.end_file());
  ++stats.files;
  stats.bytes += metadata.size();
  return {};
}

// ---------------------------------------------------------------------------------------------
// Layers, newest first.

class LayerSquasher {
 public:
  LayerSquasher(MergeTree& tree, Builder& b, SquashStats& stats)
      : tree_(tree), b_(b), stats_(stats) {}

  Status layer(int index, const LayerInput& layer) {
    index_ = index;
    layer_ = &layer;
    names_.clear();
    shadowed_files_.clear();
    wanted_.clear();
    BERTH_CHECK(read_layer(
        [this](archive* a, archive_entry* e, std::string_view raw) { return entry(a, e, raw); }));
    if (!wanted_.empty()) {
      // Hard links whose target a newer layer hides: the target's data is needed after all,
      // once, under the link's name. Read the layer again for those files only.
      BERTH_CHECK(read_layer([this](archive* a, archive_entry* e, std::string_view raw) {
        return wanted_entry(a, e, raw);
      }));
      for (auto& [target, w] : wanted_)
        if (w.inode->file == nullptr)
          return refuse(fmt::format("entry \"{}\": link to \"{}\": no such file in the layer",
                                    w.raw, target));
    }
    return {};
  }

  /// Hard links to files of older layers, resolved against the merged tree.
  Status resolve_cross_links() {
    for (const CrossLink& l : cross_) {
      if (l.has_data) continue;  // given the data of the older file it named (entry())
      MergeTree::Node* t = tree_.find(l.target);
      MergeTree::Node* n = tree_.find(l.name);
      if (n == nullptr || n->inode != l.placeholder) continue;  // replaced in its own layer
      if (t == nullptr || t->inode == nullptr || t->is_dir() || t->inode == l.placeholder) {
        return make_error(
            "squash", l.layer,
            fmt::format("entry \"{}\": link to \"{}\": no such file", l.raw, l.target));
      }
      if (t->entry_layer > l.index) {
        return make_error(
                   "squash", l.layer,
                   fmt::format(
                       "entry \"{}\" links to \"{}\", which a newer layer replaced: squash cannot "
                       "merge that yet",
                       l.raw, l.target))
            .with_hint("use berth unpack, or rebuild the image");
      }
      tree_.link(l.index, l.name, t->inode);
    }
    return {};
  }

 private:
  using EntryFn = std::function<Status(archive*, archive_entry*, std::string_view)>;

  struct Wanted {
    MergeInode* inode;
    std::string raw;  // the link's entry name, for errors
  };
  struct CrossLink {
    int index;
    std::string layer, name, target, raw;
    MergeInode* placeholder;
    bool decided = false;   // an older layer's entry at `target` was met (newest first)
    bool has_data = false;  // ...and was hidden by a layer newer than the link's: its data
                            // went into the placeholder, as `berth unpack` keeps it
  };

  Error refuse(std::string detail) const {
    return make_error("squash", layer_->path, std::move(detail));
  }

  /// Reads every entry of the layer through the unpacker's checks (see image/layer_stream.h).
  Status read_layer(const EntryFn& fn) {
    UniqueFd fd = BERTH_TRY(open_file(layer_->path, O_RDONLY));
    CheckedStream stream(fd.get(), *layer_);
    Status st = [&]() -> Status {
      ArchiveReader a = BERTH_TRY(stream.open_tar());
      stream_ = &stream;
      for (;;) {
        archive_entry* e = nullptr;
        int r = ar().read_next_header(a.get(), &e);
        if (r == ARCHIVE_EOF) break;
        if (r == ARCHIVE_RETRY) continue;
        if (r < ARCHIVE_WARN) return archive_err(a.get(), {});
        const char* raw = ar().entry_pathname(e);
        if (raw == nullptr) return refuse("entry without a name");
        BERTH_CHECK(fn(a.get(), e, raw));
      }
      return {};
    }();
    if (!st.ok()) {
      Status file = stream.check_file();  // a changed file explains a failure best
      return file.ok() ? st : file;
    }
    return stream.finish();
  }

  Error archive_err(archive* a, std::string_view raw) const {
    const Error* below = stream_->failure();
    if (below && below->sys_errno != 0) return *below;
    std::string msg = below ? below->detail : archive_message(a);
    if (raw.empty()) return make_error("squash", layer_->path, msg);
    return make_error("squash", layer_->path, fmt::format("entry \"{}\": {}", raw, msg));
  }

  static MergeInode meta_of(archive_entry* e, mode_t type) {
    MergeInode m;
    m.mode = type | (ar().entry_perm(e) & 07777);
    m.uid = static_cast<uint32_t>(ar().entry_uid(e));
    m.gid = static_cast<uint32_t>(ar().entry_gid(e));
    m.mtime = ar().entry_mtime_is_set(e) ? clamp_time(ar().entry_mtime(e)) : 0;
    return m;
  }

  Status entry(archive* a, archive_entry* e, std::string_view raw) {
    EntryName kind = normalize_entry_name(raw, name_);
    if (kind == EntryName::kEscapes)
      return refuse(fmt::format("entry \"{}\" escapes the root", raw));
    mode_t type = ar().entry_filetype(e);
    const char* hardlink = ar().entry_hardlink(e);
    if (kind == EntryName::kRoot) {
      if (type == AE_IFDIR && hardlink == nullptr &&
          tree_.offer(index_, "", true, false) == Verdict::kDirMeta)
        tree_.set_dir_meta(index_, "", meta_of(e, S_IFDIR));
      return {};
    }
    size_t slash = name_.rfind('/');
    std::string_view parent =
        slash == std::string::npos ? std::string_view() : std::string_view(name_).substr(0, slash);
    std::string_view base =
        std::string_view(name_).substr(slash == std::string::npos ? 0 : slash + 1);
    if (base.starts_with(".wh.")) {
      if (base == ".wh..wh..opq") {
        tree_.opaque(index_, parent);
        return {};
      }
      if (base.starts_with(".wh..wh.")) return {};  // other aufs metadata: nothing to apply
      std::string_view victim = base.substr(4);
      if (victim.empty() || victim == "." || victim == "..")
        return refuse(fmt::format("entry \"{}\" is an invalid whiteout", raw));
      tree_.whiteout(index_, name_.substr(0, name_.size() - base.size()) + std::string(victim));
      return {};
    }
    if (hardlink == nullptr && (type == AE_IFCHR || type == AE_IFBLK)) {
      ++stats_.skipped_devices;  // as the unpacker: the runtime binds the host's device nodes
      return {};
    }
    if (hardlink == nullptr && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK &&
        type != AE_IFIFO)
      return {};  // sockets and unknown types carry nothing worth keeping

    bool is_dir = hardlink == nullptr && type == AE_IFDIR;
    bool is_symlink = hardlink == nullptr && type == AE_IFLNK;
    Verdict v = BERTH_TRY(offer_through_links(e, raw, is_dir, is_symlink));
    bool plain_file = hardlink == nullptr && type == AE_IFREG;
    if (MergeInode* ino = older_link_target(v, plain_file)) {
      ++stats_.shadowed;  // hidden under its own name, kept under a newer layer's link
      MergeInode m = meta_of(e, S_IFREG);
      ino->mode = m.mode;
      ino->uid = m.uid;
      ino->gid = m.gid;
      ino->mtime = m.mtime;
      return write_data(a, e, raw, ino);
    }
    if (v == Verdict::kShadowed) {
      ++stats_.shadowed;
      if (plain_file) shadowed_files_.insert(name_);
      return {};  // its data is skipped by the next header read, never decompressed into a file
    }
    if (hardlink != nullptr) return add_hardlink(raw, hardlink);
    if (is_dir) {
      tree_.set_dir_meta(index_, name_, meta_of(e, S_IFDIR));
      return {};
    }
    if (v == Verdict::kDirMeta) return {};  // (only directories get kDirMeta)
    if (is_symlink) {
      const char* target = ar().entry_symlink(e);
      if (target == nullptr)
        return refuse(fmt::format("entry \"{}\" is a symlink without a target", raw));
      MergeInode m = meta_of(e, S_IFLNK);
      m.target = target;  // verbatim, as the unpacker stores it
      names_[name_] = tree_.add(index_, name_, m);
      return {};
    }
    if (type == AE_IFIFO) {
      names_[name_] = tree_.add(index_, name_, meta_of(e, S_IFIFO));
      return {};
    }
    MergeInode* ino = tree_.add(index_, name_, meta_of(e, S_IFREG));
    names_[name_] = ino;
    return write_data(a, e, raw, ino);
  }

  /// offer() of name_, following symlinks as `berth unpack` does: an entry below a symlink of
  /// its own layer goes where the link leads; a symlink an older layer puts where newer layers
  /// only put entries below first takes those entries to where it leads.
  Result<Verdict> offer_through_links(archive_entry* e, std::string_view raw, bool is_dir,
                                      bool is_symlink) {
    for (int hops = 0;; ++hops) {
      Verdict v = tree_.offer(index_, name_, is_dir, is_symlink);
      if (v != Verdict::kConflict) return v;
      if (hops == kMaxLinkHops)
        return refuse(fmt::format("entry \"{}\" goes through too many symlinks", raw));
      if (size_t through = tree_.symlink_on_path(index_, name_)) {
        std::string link = name_.substr(0, through);
        std::string to = BERTH_TRY(link_target(raw, link, tree_.find(link)->inode->target));
        name_ = to + (to.empty() ? name_.substr(through + 1) : name_.substr(through));
        continue;
      }
      if (!is_symlink)
        return refuse(fmt::format("entry \"{}\": a file where this layer puts files below it",
                                  raw));
      const char* target = ar().entry_symlink(e);
      if (target == nullptr)
        return refuse(fmt::format("entry \"{}\" is a symlink without a target", raw));
      std::string to = BERTH_TRY(link_target(raw, name_, target));
      if (to == name_ || to.starts_with(name_ + "/"))
        return refuse(fmt::format("entry \"{}\" goes through too many symlinks", raw));
      // Every step to the target must be a directory (or nothing yet) in the merged tree.
      for (size_t end = 0; end != std::string::npos && !to.empty();) {
        end = to.find('/', end == 0 ? 0 : end + 1);
        MergeTree::Node* on = tree_.find(to.substr(0, end));
        if (on != nullptr && on->inode != nullptr && !on->is_dir())
          return refuse(fmt::format("entry \"{}\": its target \"{}\" is not a directory in the "
                                    "merged layers",
                                    raw, target));
      }
      tree_.move_below(name_, to);
      move_paths(name_, to);
    }
  }

  /// Where a symlink at `link` (a normalised path) to `target` leads, normalised, within the
  /// root: "" for the root itself. Refused as the unpacker refuses them (open_beneath()): an
  /// absolute target, or one that climbs out of the root.
  Result<std::string> link_target(std::string_view raw, std::string_view link,
                                  std::string_view target) const {
    auto escapes = [&] {
      return refuse(fmt::format("entry \"{}\" escapes the root: it goes through a symlink outside",
                                raw));
    };
    if (target.starts_with('/')) return escapes();
    size_t slash = link.rfind('/');
    std::vector<std::string_view> parts;
    std::string_view dir = slash == std::string_view::npos ? "" : link.substr(0, slash);
    std::string joined = std::string(dir) + "/" + std::string(target);
    std::string_view rest = joined;
    while (!rest.empty()) {
      size_t cut = rest.find('/');
      std::string_view comp = rest.substr(0, cut);
      rest = cut == std::string_view::npos ? "" : rest.substr(cut + 1);
      if (comp.empty() || comp == ".") continue;
      if (comp == "..") {
        if (parts.empty()) return escapes();
        parts.pop_back();
        continue;
      }
      parts.push_back(comp);
    }
    std::string out;
    for (std::string_view p : parts) out += (out.empty() ? "" : "/") + std::string(p);
    return out;
  }

  /// Paths recorded under `from` now live under `to` (MergeTree::move_below()).
  void move_paths(const std::string& from, const std::string& to) {
    auto moved = [&](std::string& p) {
      if (p.size() > from.size() && p.starts_with(from) && p[from.size()] == '/')
        p = to.empty() ? p.substr(from.size() + 1) : to + p.substr(from.size());
    };
    for (CrossLink& l : cross_) {
      moved(l.name);
      moved(l.target);
    }
  }

  /// The first entry at name_ of a layer older than links to it from newer layers decides
  /// what they link to (layers come newest first). When a layer newer than the link hides it,
  /// the link keeps its data anyway, as `berth unpack` does: the placeholder inode to write
  /// the data into (nullptr when there is none to write).
  MergeInode* older_link_target(Verdict v, bool plain_file) {
    MergeInode* data = nullptr;
    for (CrossLink& l : cross_) {
      if (l.decided || l.index <= index_ || l.target != name_) continue;
      l.decided = true;
      if (v != Verdict::kShadowed || !plain_file) continue;  // resolve_cross_links() links it
      MergeTree::Node* n = tree_.find(l.name);
      if (n == nullptr || n->inode != l.placeholder) continue;  // replaced in its own layer
      l.has_data = true;
      if (data == nullptr)
        data = l.placeholder;
      else
        tree_.link(l.index, l.name, data);
    }
    return data;
  }

  Status add_hardlink(std::string_view raw, const char* target) {
    std::string tname;
    if (normalize_entry_name(target, tname) != EntryName::kPath)
      return refuse(fmt::format("entry \"{}\" escapes the root: it links to \"{}\"", raw, target));
    if (tname == name_) return {};  // a link to itself: the file is already there
    if (auto it = names_.find(tname); it != names_.end()) {
      tree_.link(index_, name_, it->second);
      names_[name_] = it->second;
      return {};
    }
    MergeInode placeholder;
    placeholder.mode = S_IFREG | 0644;
    MergeInode* ino = tree_.add(index_, name_, placeholder);
    names_[name_] = ino;
    if (shadowed_files_.count(tname) != 0) {
      // The target's own name is hidden by a newer layer, but this name is not.
      auto [it, fresh] = wanted_.try_emplace(tname, Wanted{ino, std::string(raw)});
      if (!fresh) tree_.link(index_, name_, it->second.inode);
      return {};
    }
    cross_.push_back({index_, layer_->path, name_, tname, std::string(raw), ino});
    return {};
  }

  Status wanted_entry(archive* a, archive_entry* e, std::string_view raw) {
    if (ar().entry_hardlink(e) != nullptr || ar().entry_filetype(e) != AE_IFREG) return {};
    if (normalize_entry_name(raw, name_) != EntryName::kPath) return {};
    auto it = wanted_.find(name_);
    if (it == wanted_.end() || it->second.inode->file != nullptr) return {};
    MergeInode& ino = *it->second.inode;
    MergeInode m = meta_of(e, S_IFREG);
    ino.mode = m.mode;
    ino.uid = m.uid;
    ino.gid = m.gid;
    ino.mtime = m.mtime;
    return write_data(a, e, raw, &ino);
  }

  Status write_data(archive* a, archive_entry* e, std::string_view raw, MergeInode* ino) {
    BERTH_CHECK(b_.begin_file(ino));
    const void* buf = nullptr;
    size_t size = 0;
    la_int64_t offset = 0;
    uint64_t at = 0;
    for (;;) {
      int r = ar().read_data_block(a, &buf, &size, &offset);
      if (r == ARCHIVE_EOF) break;
      if (r < ARCHIVE_WARN) return archive_err(a, raw);
      if (static_cast<uint64_t>(offset) > at) {  // a hole of a sparse member
        BERTH_CHECK(b_.append_zeros(static_cast<uint64_t>(offset) - at));
        at = static_cast<uint64_t>(offset);
      }
      BERTH_CHECK(b_.append(buf, size));
      at += size;
      stats_.bytes += size;
    }
    int64_t want = ar().entry_size(e);
    if (want > 0 && at < static_cast<uint64_t>(want))
      BERTH_CHECK(b_.append_zeros(static_cast<uint64_t>(want) - at));
    ++stats_.files;
    return b_.end_file();
  }

  MergeTree& tree_;
  Builder& b_;
  SquashStats& stats_;
  int index_ = 0;
  const LayerInput* layer_ = nullptr;
  const CheckedStream* stream_ = nullptr;
  std::string name_;
  std::unordered_map<std::string, MergeInode*> names_;  // this layer's kept non-directories
  std::unordered_set<std::string> shadowed_files_;      // this layer's hidden regular files
  std::map<std::string, Wanted> wanted_;                // hidden files that links still need
  std::vector<CrossLink> cross_;                        // links to older layers' files
  static constexpr int kMaxLinkHops = 40;               // the kernel's own limit
};

// ---------------------------------------------------------------------------------------------
// A directory tree (a container's root filesystem).

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

/// Runs `fill` into a new squashfs at `output`, published only when whole.
Result<SquashStats> write_squashfs(
    const SquashOptions& opts, const std::string& output,
    const std::function<Status(MergeTree&, Builder&, SquashStats&)>& fill) {
  BERTH_CHECK(check_squash_options(opts));
  OutputFile out = BERTH_TRY(OutputFile::create(output));
  SquashStats stats;
  MergeTree tree;
  Status st = [&]() -> Status {
    Builder b(out.fd(), output);
    BERTH_CHECK(b.open(opts));
    BERTH_CHECK(fill(tree, b, stats));
    return b.finish(tree, stats);
  }();
  free_unwritten(tree);
  if (!st.ok()) return std::move(st).error();
  BERTH_CHECK(out.commit());
  return stats;
}

}  // namespace

Result<SquashStats> copy_squash_file(const std::string& from, const std::string& output) {
  SquashInfo info = BERTH_TRY(read_squash_info(from));
  UniqueFd in = BERTH_TRY(open_file(from, O_RDONLY));
  OutputFile out = BERTH_TRY(OutputFile::create(output));
  std::string buf(1 << 20, '\0');
  for (;;) {
    ssize_t n = ::read(in.get(), buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_error("read", from);
    }
    if (n == 0) break;
    BERTH_CHECK(write_all(out.fd(), std::string_view(buf.data(), static_cast<size_t>(n)), output));
  }
  BERTH_CHECK(out.commit());
  SquashStats stats;
  stats.inodes = info.inodes;
  stats.size = info.file_size;
  return stats;
}

nlohmann::ordered_json squash_metadata(const std::string& reference, const std::string& digest,
                                       const nlohmann::json& config) {
  nlohmann::ordered_json m;
  m["schemaVersion"] = 1;
  m["reference"] = reference;
  m["digest"] = digest;
  m["config"] = config;
  return m;
}

Status check_squash_options(const SquashOptions& opts) {
  const CompressorChoice* c = find_compressor(opts.compressor);
  if (c == nullptr)
    return make_error("squash", opts.compressor, "unknown compressor", ErrorCode::kInvalidInput)
        .with_hint("use --compressor lz4, zstd or gzip");
  if (opts.level != 0 && c->max_level == 0)
    return make_error("squash", opts.compressor, "this compressor has no levels",
                      ErrorCode::kInvalidInput)
        .with_hint("leave out --level, or use zstd (1-22) or gzip (1-9)");
  if (opts.level != 0 && (opts.level < c->min_level || opts.level > c->max_level))
    return make_error(
        "squash", opts.compressor,
        fmt::format("level {} is out of range {}-{}", opts.level, c->min_level, c->max_level),
        ErrorCode::kInvalidInput);
  return {};
}

Result<SquashOptions> parse_squash_options(std::string_view text) {
  auto bad = [&](const std::string& what) {
    return make_error("squash", std::string(text), what, ErrorCode::kInvalidInput)
        .with_hint("squash options are mksquashfs's: -comp lz4|zstd|gzip, "
                   "-Xcompression-level N, -processors N");
  };
  std::vector<std::string> words;
  for (size_t i = 0; i < text.size();) {
    size_t end = text.find_first_of(" \t\n", i);
    if (end == std::string_view::npos) end = text.size();
    if (end > i) words.emplace_back(text.substr(i, end - i));
    i = end + 1;
  }
  SquashOptions opts;
  bool comp = false, level = false, processors = false;
  auto number = [&](size_t i, int most, int* out) -> Status {
    if (i + 1 >= words.size()) return bad(words[i] + " needs a number");
    const std::string& n = words[i + 1];
    long v = 0;
    if (n.empty() || n.size() > 4 || n.find_first_not_of("0123456789") != std::string::npos ||
        (v = std::stol(n)) < 1 || v > most)
      return bad(fmt::format("{} {}: not a whole number of 1 to {}", words[i], n, most));
    *out = static_cast<int>(v);
    return {};
  };
  for (size_t i = 0; i < words.size(); i += 2) {
    const std::string& w = words[i];
    bool* seen = w == "-comp" ? &comp : w == "-Xcompression-level" ? &level
                                    : w == "-processors"       ? &processors
                                                               : nullptr;
    if (seen == nullptr)
      return bad("\"" + w + "\" is not an option Berth's squash takes (-comp, "
                 "-Xcompression-level, -processors)");
    if (*seen) return bad(w + " is given twice");
    *seen = true;
    if (w == "-comp") {
      if (i + 1 >= words.size()) return bad("-comp needs a compressor (lz4, zstd or gzip)");
      opts.compressor = words[i + 1];
      if (find_compressor(opts.compressor) == nullptr)
        return bad("-comp " + opts.compressor + ": not a compressor Berth builds with (lz4, "
                   "zstd or gzip)");
    } else if (w == "-Xcompression-level") {
      BERTH_CHECK(number(i, 99, &opts.level));
    } else {
      int n = 0;
      BERTH_CHECK(number(i, 1024, &n));
      opts.workers = static_cast<unsigned>(n);
    }
  }
  if (Status st = check_squash_options(opts); !st.ok())
    return bad(st.error().subject + ": " + st.error().detail);
  return opts;
}

std::optional<int64_t> reproducible_time(const nlohmann::json& config) {
  // The reproducible-builds convention first: a build system pins every time it makes.
  if (const char* epoch = std::getenv("SOURCE_DATE_EPOCH"); epoch != nullptr && *epoch != '\0') {
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(epoch, &end, 10);
    if (errno == 0 && *end == '\0' && v >= 0) return v;
  }
  if (config.is_object()) {
    if (auto it = config.find("created"); it != config.end() && it->is_string()) {
      int64_t t = parse_rfc3339(it->get<std::string>());
      if (t >= 0) return t;
    }
  }
  return std::nullopt;
}

Result<SquashStats> squash_layers(const std::vector<LayerInput>& layers, std::string_view metadata,
                                  const SquashOptions& opts, const std::string& output) {
  return write_squashfs(opts, output,
                        [&](MergeTree& tree, Builder& b, SquashStats& stats) -> Status {
                          int newest = static_cast<int>(layers.size());
                          BERTH_CHECK(add_metadata(tree, b, newest, metadata, stats));
                          LayerSquasher s(tree, b, stats);
                          for (int i = newest - 1; i >= 0; --i)
                            BERTH_CHECK(s.layer(i, layers[static_cast<size_t>(i)]));
                          return s.resolve_cross_links();
                        });
}

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

// ---------------------------------------------------------------------------------------------
// Reading back.

Result<SquashInfo> read_squash_info(const std::string& path) {
  UniqueFd fd = BERTH_TRY(open_file(path, O_RDONLY));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return sys_error("stat", path);
  if (!S_ISREG(st.st_mode)) return make_error("read squashfs", path, "not a regular file");
  FdFile file(fd.get(), static_cast<uint64_t>(st.st_size));
  auto fail = [&](std::string_view what, int r) -> Error {
    if (int e = file.err.load()) return sys_error("read", path, e);
    return make_error("read squashfs", path, fmt::format("{}: {}", what, sqfs_error_text(r)),
                      ErrorCode::kInvalidInput);
  };
  SquashInfo info;
  info.file_size = static_cast<uint64_t>(st.st_size);
  // The superblock check `berth run FILE.sqsh` makes, so that both say the same of one file.
  char head[kSquashfsSuperblockSize];
  ssize_t got;
  do {
    got = ::pread(fd.get(), head, sizeof head, 0);
  } while (got < 0 && errno == EINTR);
  if (got < 0) return sys_error("read", path);
  BERTH_CHECK(check_squashfs_superblock(std::string_view(head, static_cast<size_t>(got)),
                                        info.file_size, path));
  sqfs_super_t super{};
  int r = sq().super_read(&super, &file.base);
  if (r != 0) return fail("super block", r);
  const char* cname =
      sq().compressor_name_from_id(static_cast<SQFS_COMPRESSOR>(super.compression_id));
  info.compressor = cname ? cname : fmt::format("unknown ({})", super.compression_id);
  info.block_size = super.block_size;
  info.inodes = super.inode_count;
  info.mtime = super.modification_time;
  info.bytes_used = super.bytes_used;

  sqfs_compressor_config_t cfg;
  if ((r = sq().compressor_config_init(&cfg, static_cast<SQFS_COMPRESSOR>(super.compression_id),
                                       super.block_size, SQFS_COMP_FLAG_UNCOMPRESS)) != 0)
    return fail("compressor " + info.compressor, r);
  sqfs_compressor_t* raw_cmp = nullptr;
  if ((r = sq().compressor_create(&cfg, &raw_cmp)) != 0)
    return fail("compressor " + info.compressor, r);
  SqfsPtr<sqfs_compressor_t> cmp(raw_cmp);
  SqfsPtr<sqfs_dir_reader_t> dr(sq().dir_reader_create(&super, cmp.get(), &file.base, 0));
  if (!dr) return fail("directory reader", SQFS_ERROR_ALLOC);
  sqfs_inode_generic_t* raw_inode = nullptr;
  if ((r = sq().dir_reader_get_root_inode(dr.get(), &raw_inode)) != 0) return fail("root inode", r);
  SqfsInodePtr root(raw_inode);
  raw_inode = nullptr;
  std::string mpath(kSquashMetadataPath);
  r = sq().dir_reader_find_by_path(dr.get(), root.get(), mpath.c_str(), &raw_inode);
  if (r == SQFS_ERROR_NO_ENTRY || r == SQFS_ERROR_NOT_DIR) return info;  // not made by Berth
  if (r != 0) return fail("/" + mpath, r);
  SqfsInodePtr inode(raw_inode);
  if (inode->base.type != SQFS_INODE_FILE && inode->base.type != SQFS_INODE_EXT_FILE) return info;
  sqfs_u64 size = 0;
  sq().inode_get_file_size(inode.get(), &size);
  if (size > kJsonMaxBytes)
    return make_error("read squashfs", path, "/" + mpath + " is larger than 16 MiB",
                      ErrorCode::kInvalidInput);
  SqfsPtr<sqfs_data_reader_t> data(
      sq().data_reader_create(&file.base, super.block_size, cmp.get(), 0));
  if (!data) return fail("data reader", SQFS_ERROR_ALLOC);
  if ((r = sq().data_reader_load_fragment_table(data.get(), &super)) != 0)
    return fail("fragment table", r);
  std::string text(size, '\0');
  sqfs_s32 n =
      sq().data_reader_read(data.get(), inode.get(), 0, text.data(), static_cast<sqfs_u32>(size));
  if (n < 0) return fail("/" + mpath, n);
  text.resize(static_cast<size_t>(n));
  info.metadata = BERTH_TRY(parse_json(text, path + ":/" + mpath));
  return info;
}

}  // namespace berth
