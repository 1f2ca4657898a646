// The squashfs writer (image/squash_writer.h): the output file, the compressors and the
// Builder's writing of data blocks, inodes, directories and tables.
#include "image/squash_writer.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <unordered_map>
#include <utility>
#include <vector>

namespace berth::squash_internal {
namespace {

constexpr uint32_t kNoXattr = 0xFFFFFFFF;

constexpr CompressorChoice kCompressors[] = {
    {"lz4", SQFS_COMP_LZ4, 0, 0},
    {"zstd", SQFS_COMP_ZSTD, SQFS_ZSTD_MIN_LEVEL, SQFS_ZSTD_MAX_LEVEL},
    {"gzip", SQFS_COMP_GZIP, SQFS_GZIP_MIN_LEVEL, SQFS_GZIP_MAX_LEVEL},
};

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

/// Frees the file inodes the block processor made for entries that were later replaced.
void free_unwritten(MergeTree& tree) {
  for (MergeInode& i : tree.inodes()) {
    if (i.file != nullptr) sq().free(i.file);
    i.file = nullptr;
  }
}

}  // namespace

uint32_t clamp_time(int64_t t) {
  return static_cast<uint32_t>(std::clamp<int64_t>(t, 0, int64_t{UINT32_MAX}));
}

Result<OutputFile> OutputFile::create(const std::string& path) {
  OutputFile out;
  out.path_ = path;
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  out.fd_.reset(::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0644));
  if (!out.fd_.valid()) {
    int err = errno;
    // Not every file system has O_TMPFILE: a dot-file beside, removed on failure.
    if (err != EOPNOTSUPP && err != EISDIR && err != EINVAL) return sys_error("create", path, err);
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

OutputFile::~OutputFile() {
  if (!named_tmp_.empty() && !committed_) (void)::unlink(named_tmp_.c_str());  // best effort
}

Status OutputFile::commit() {
  if (::fsync(fd_.get()) != 0) return sys_error("fsync", path_);
  if (named_tmp_.empty()) {
    // linkat cannot replace: link under a temporary name, then rename over the target.
    size_t slash = path_.rfind('/');
    std::string base = slash == std::string::npos ? path_ : path_.substr(slash + 1);
    std::string tmp = (slash == std::string::npos ? "" : path_.substr(0, slash + 1)) + "." + base +
                      ".berth-tmp-" + std::to_string(::getpid());
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

const CompressorChoice* find_compressor(std::string_view name) {
  for (const CompressorChoice& c : kCompressors)
    if (name == c.name) return &c;
  return nullptr;
}

Status Builder::open(const SquashOptions& opts) {
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
  if ((r = sq().super_init(&super_, kBlockSize, made_, c->id)) != 0) return fail("super block", r);
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

Status Builder::begin_file(MergeInode* inode) {
  int r = sq().block_processor_begin_file(proc_.get(), &inode->file, nullptr, 0);
  return r == 0 ? Status{} : fail("write data", r);
}

Status Builder::append(const void* data, size_t n) {
  int r = sq().block_processor_append(proc_.get(), data, n);
  return r == 0 ? Status{} : fail("write data", r);
}

Status Builder::end_file() {
  int r = sq().block_processor_end_file(proc_.get());
  return r == 0 ? Status{} : fail("write data", r);
}

Status Builder::append_zeros(uint64_t n) {
  static const char kZeros[65536] = {};
  while (n > 0) {
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, sizeof kZeros));
    BERTH_CHECK(append(kZeros, chunk));
    n -= chunk;
  }
  return {};
}

Status Builder::finish(MergeTree& tree, SquashStats& stats) {
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

Error Builder::fail(std::string_view what, int r) const {
  if (int e = file_.err.load()) return sys_error("write", what_, e);
  return make_error("squash", what_, fmt::format("{}: {}", what, sqfs_error_text(r)));
}

void Builder::number(MergeTree::Node& dir, std::vector<MergeTree::Node*>& order, uint32_t& count) {
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

Status Builder::write_inode(MergeTree::Node& n, uint32_t parent_no) {
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

}  // namespace berth::squash_internal
