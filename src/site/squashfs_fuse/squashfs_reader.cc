#include "site/squashfs_fuse/squashfs_reader.h"

#include <sqfs/block.h>
#include <sqfs/error.h>
#include <sqfs/xattr.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "image/sqfs_decompressor.h"
#include "image/sqfs_errors.h"

namespace berth::sqfuse {
namespace {

/// How many directory entries the listings kept may hold together: about 40 MB for names of
/// 100 bytes. Past it the kept listings are dropped (all of them: simple, and a walk that big
/// reads each directory about once anyway).
constexpr size_t kMaxListedEntries = 400000;
/// The st_blksize of a directory. glibc sizes opendir()'s buffer from it (32 KiB at least), and
/// the kernel asks the daemon for as many bytes of READDIRPLUS as getdents() has room for,
/// in a buffer of that size that it allocates and maps for each request: with the image's
/// block size (128 KiB) a walk of bench/sqwalk's image spent 2 ms of its 70 on that alone.
/// 32 KiB still hold about 190 entries with their attributes.
constexpr blksize_t kDirBlockSize = 4096;

}  // namespace

mode_t type_mode(uint16_t type) {
  switch (type) {
    case SQFS_INODE_DIR:
    case SQFS_INODE_EXT_DIR:
      return S_IFDIR;
    case SQFS_INODE_FILE:
    case SQFS_INODE_EXT_FILE:
      return S_IFREG;
    case SQFS_INODE_SLINK:
    case SQFS_INODE_EXT_SLINK:
      return S_IFLNK;
    case SQFS_INODE_BDEV:
    case SQFS_INODE_EXT_BDEV:
      return S_IFBLK;
    case SQFS_INODE_CDEV:
    case SQFS_INODE_EXT_CDEV:
      return S_IFCHR;
    case SQFS_INODE_FIFO:
    case SQFS_INODE_EXT_FIFO:
      return S_IFIFO;
    default:
      return S_IFSOCK;
  }
}

namespace {

/// A squashfs device number (the kernel's old 32-bit encoding) as a dev_t.
dev_t device_number(uint32_t devno) {
  return makedev((devno & 0xfff00) >> 8, (devno & 0xff) | ((devno >> 12) & 0xfff00));
}

}  // namespace

void SqfsFreer::operator()(void* p) const {
  sqfs_free(p);
}

int errno_of_sqfs(int code) {
  switch (code) {
    case 0:
      return 0;
    case SQFS_ERROR_ALLOC:
      return ENOMEM;
    case SQFS_ERROR_NO_ENTRY:
      return ENOENT;
    case SQFS_ERROR_NOT_DIR:
      return ENOTDIR;
    case SQFS_ERROR_NOT_FILE:
      return EISDIR;
    case SQFS_ERROR_ARG_INVALID:
      return EINVAL;
    default:
      return EIO;
  }
}

namespace {

/// libsquashfs's file `inner` (owned) from byte `offset` on: a SIF file's squashfs partition.
struct OffsetFile {
  sqfs_file_t base;  // first: libsquashfs hands back its pointer
  sqfs_file_t* inner;
  uint64_t offset;

  static OffsetFile* self(const sqfs_file_t* f) {
    return reinterpret_cast<OffsetFile*>(const_cast<sqfs_file_t*>(f));
  }
  static sqfs_file_t* wrap(sqfs_file_t* inner, uint64_t offset) {
    auto* o = new (std::nothrow) OffsetFile{};
    if (!o) {
      sqfs_destroy(inner);
      return nullptr;
    }
    o->inner = inner;
    o->offset = offset;
    o->base.base.destroy = [](sqfs_object_t* obj) {
      auto* f = self(reinterpret_cast<sqfs_file_t*>(obj));
      sqfs_destroy(f->inner);
      delete f;
    };
    o->base.base.copy = nullptr;
    o->base.read_at = [](sqfs_file_t* f, sqfs_u64 at, void* buf, size_t n) {
      OffsetFile* o = self(f);
      return o->inner->read_at(o->inner, o->offset + at, buf, n);
    };
    o->base.write_at = [](sqfs_file_t*, sqfs_u64, const void*, size_t) {
      return static_cast<int>(SQFS_ERROR_UNSUPPORTED);
    };
    o->base.get_size = [](const sqfs_file_t* f) -> sqfs_u64 {
      OffsetFile* o = self(f);
      sqfs_u64 size = o->inner->get_size(o->inner);
      return size > o->offset ? size - o->offset : 0;
    };
    o->base.truncate = [](sqfs_file_t*, sqfs_u64) {
      return static_cast<int>(SQFS_ERROR_UNSUPPORTED);
    };
    return &o->base;
  }
};

}  // namespace

Result<std::unique_ptr<SquashfsReader>> SquashfsReader::open(const std::string& path,
                                                             const std::string& name,
                                                             uint64_t offset) {
  std::unique_ptr<SquashfsReader> r(new SquashfsReader());
  r->file_.reset(sqfs_open_file(path.c_str(), SQFS_FILE_OPEN_READ_ONLY));
  if (!r->file_) return sys_error("open", name);
  if (offset != 0) {
    r->file_.reset(OffsetFile::wrap(r->file_.release(), offset));
    if (!r->file_) return make_error("mount squashfs", name, sqfs_error_text(SQFS_ERROR_ALLOC));
  }
  auto fail = [&](const std::string& what, int code) {
    return make_error("mount squashfs", name,
                      "corrupt squashfs image: " + what + " (" + sqfs_error_text(code) + ")",
                      ErrorCode::kInvalidInput);
  };
  int rc = sqfs_super_read(&r->super_, r->file_.get());
  if (rc != 0) return fail("superblock", rc);
  sqfs_compressor_t* cmp = BERTH_TRY(make_squashfs_decompressor(
      r->super_, r->file_.get(), {sqfs_compressor_config_init, sqfs_compressor_create},
      "mount squashfs", name));
  r->cmp_.reset(cmp);

  // The bounds libsquashfs's own directory reader gives its two metadata readers.
  const sqfs_super_t& s = r->super_;
  uint64_t dir_limit = std::min({s.id_table_start, s.fragment_table_start, s.export_table_start});
  // The inode readers read `inode_file_` (InodeBlocks below), whose inode table starts at 0.
  r->inode_file_.file.read_at = read_inode_file;
  r->inode_file_.reader = r.get();
  r->inode_super_ = s;
  r->inode_super_.inode_table_start = 0;
  r->inodes_.reset(sqfs_meta_reader_create(&r->inode_file_.file, cmp, 0, ~0ULL));
  r->dir_inodes_.reset(sqfs_meta_reader_create(&r->inode_file_.file, cmp, 0, ~0ULL));
  r->dirs_.reset(sqfs_meta_reader_create(r->file_.get(), cmp, s.directory_table_start, dir_limit));
  r->data_.reset(sqfs_data_reader_create(r->file_.get(), s.block_size, cmp, 0));
  if (!r->inodes_ || !r->dir_inodes_ || !r->dirs_ || !r->data_)
    return fail("readers", SQFS_ERROR_ALLOC);
  if ((rc = sqfs_data_reader_load_fragment_table(r->data_.get(), &s)) != 0)
    return fail("fragment table", rc);
  if ((s.flags & SQFS_FLAG_NO_XATTRS) == 0 && s.xattr_id_table_start != ~0ULL) {
    r->xattrs_.reset(sqfs_xattr_reader_create(0));
    if (!r->xattrs_) return fail("readers", SQFS_ERROR_ALLOC);
    if ((rc = sqfs_xattr_reader_load(r->xattrs_.get(), &s, r->file_.get(), cmp)) != 0)
      return fail("xattr table", rc);
  }
  r->root_ref_ = s.root_inode_ref;
  r->max_blocks_ = std::max<size_t>(4, kCachedDataBytes / s.block_size);
  InodePtr root;
  if ((rc = r->inode(r->root_ref_, &root)) != 0 || type_mode(root->base.type) != S_IFDIR)
    return make_error("mount squashfs", name,
                      std::string("corrupt squashfs image: its root directory cannot be read (") +
                          (rc != 0 ? std::strerror(rc) : "not a directory") + ")",
                      ErrorCode::kInvalidInput);
  std::shared_ptr<const Listing> top;
  if ((rc = r->list(*root, r->root_ref_, &top)) != 0)
    return make_error("mount squashfs", name,
                      std::string("corrupt squashfs image: its root directory cannot be read (") +
                          std::strerror(rc) + ")",
                      ErrorCode::kInvalidInput);
  return r;
}

SquashfsReader::~SquashfsReader() {
  // libsquashfs objects refer to the file and the compressor: readers first.
  listings_.clear();
  blocks_.clear();
  xattrs_.reset();
  data_.reset();
  dirs_.reset();
  inodes_.reset();
  dir_inodes_.reset();
  cmp_.reset();
  file_.reset();
}

int SquashfsReader::inode(uint64_t ref, InodePtr* out) {
  return read_inode(inodes_.get(), ref, out);
}

int SquashfsReader::read_inode(sqfs_meta_reader_t* reader, uint64_t ref, InodePtr* out) {
  sqfs_inode_generic_t* raw = nullptr;
  // The block's position relative to the inode table, where `inode_file_` has it.
  uint64_t block = ref >> 16;
  if (block >= super_.directory_table_start - super_.inode_table_start) return EIO;
  int rc = sqfs_meta_reader_read_inode(reader, &inode_super_, block << kInodeFileShift,
                                       ref & 0xffff, &raw);
  if (rc != 0) return errno_of_sqfs(rc);
  out->reset(raw);
  return 0;
}

// InodeBlocks: the file libsquashfs's inode readers read. Block B of the inode table (B its
// position relative to the table, as inode references name it) is at B << kInodeFileShift,
// stored uncompressed (a metadata block header with the "uncompressed" bit, then its bytes),
// and the blocks that follow it in the image come after it, one per kSlot bytes: an inode
// that runs over the end of its block (a long symlink, a big file's block list) is read on
// from there, as from the image. Nothing is at the other offsets.
int SquashfsReader::read_inode_file(sqfs_file_t* file, sqfs_u64 offset, void* buffer, size_t size) {
  SquashfsReader& r = *reinterpret_cast<InodeFile*>(file)->reader;
  constexpr uint64_t kSlot = 2 + SQFS_META_BLOCK_SIZE;
  uint64_t block = offset >> kInodeFileShift;
  uint64_t within = offset & ((uint64_t{1} << kInodeFileShift) - 1);
  uint64_t location = r.super_.inode_table_start + block;
  int rc = 0;
  const InodeBlock* b = r.inode_block(location, &rc);
  for (uint64_t next = within / kSlot; b != nullptr && next > 0; --next)
    b = r.inode_block(b->location + b->stored, &rc);
  if (b == nullptr) return rc;
  uint64_t at = within % kSlot;
  auto* out = static_cast<sqfs_u8*>(buffer);
  // libsquashfs reads a header, then the bytes it announces: never across the two, or
  // past the block.
  if (at == 0 && size == 2) {
    uint16_t header = static_cast<uint16_t>(0x8000 | b->size);
    out[0] = static_cast<sqfs_u8>(header & 0xff);
    out[1] = static_cast<sqfs_u8>(header >> 8);
    return 0;
  }
  if (at < 2 || at - 2 + size > b->size) return SQFS_ERROR_OUT_OF_BOUNDS;
  std::memcpy(out, b->data.get() + (at - 2), size);
  return 0;
}

const SquashfsReader::InodeBlock* SquashfsReader::inode_block(uint64_t location, int* rc) {
  ++uses_;
  if (auto it = inode_block_at_.find(location); it != inode_block_at_.end()) {
    InodeBlock& b = inode_blocks_[it->second];
    b.last_use = uses_;
    return &b;
  }
  // The block as stored: its header, then at most a block's bytes, within the inode table.
  const uint64_t end = super_.directory_table_start;
  if (location < super_.inode_table_start || location + 2 > end) {
    *rc = SQFS_ERROR_OUT_OF_BOUNDS;
    return nullptr;
  }
  size_t want = static_cast<size_t>(std::min<uint64_t>(2 + SQFS_META_BLOCK_SIZE, end - location));
  packed_inode_block_.resize(2 + SQFS_META_BLOCK_SIZE);
  sqfs_file_t* f = file_.get();
  if (int err = f->read_at(f, location, packed_inode_block_.data(), want); err != 0) {
    *rc = err;
    return nullptr;
  }
  const uint16_t header =
      static_cast<uint16_t>(packed_inode_block_[0] | (packed_inode_block_[1] << 8));
  const size_t stored = header & 0x7fff;
  if (stored == 0 || stored > SQFS_META_BLOCK_SIZE || 2 + stored > want) {
    *rc = SQFS_ERROR_CORRUPTED;
    return nullptr;
  }
  size_t index;
  if (inode_blocks_.size() < kCachedInodeBlocks) {
    index = inode_blocks_.size();
    inode_blocks_.emplace_back().data.reset(new sqfs_u8[SQFS_META_BLOCK_SIZE]);
  } else {
    index = static_cast<size_t>(std::min_element(inode_blocks_.begin(), inode_blocks_.end(),
                                                 [](const InodeBlock& a, const InodeBlock& b) {
                                                   return a.last_use < b.last_use;
                                                 }) -
                                inode_blocks_.begin());
    inode_block_at_.erase(inode_blocks_[index].location);
  }
  InodeBlock& b = inode_blocks_[index];
  b.location = ~0ULL;  // until it holds the block
  const sqfs_u8* packed = packed_inode_block_.data() + 2;
  if ((header & 0x8000) != 0) {
    std::memcpy(b.data.get(), packed, stored);
    b.size = static_cast<uint32_t>(stored);
  } else {
    sqfs_compressor_t* c = cmp_.get();
    sqfs_s32 n =
        c->do_block(c, packed, static_cast<sqfs_u32>(stored), b.data.get(), SQFS_META_BLOCK_SIZE);
    if (n <= 0) {
      *rc = n < 0 ? n : SQFS_ERROR_CORRUPTED;
      return nullptr;
    }
    b.size = static_cast<uint32_t>(n);
  }
  ++inode_blocks_read_;
  b.location = location;
  b.stored = static_cast<uint32_t>(2 + stored);
  b.last_use = uses_;
  inode_block_at_[location] = index;
  return &b;
}

void SquashfsReader::attributes(const sqfs_inode_generic_t& inode, uid_t uid, gid_t gid,
                                struct stat* st) const {
  // Each field stat() reports is set here rather than after clearing the whole struct: a
  // readdir of a walk calls this once per entry (the padding is left as it was: nothing
  // reads it).
  st->st_dev = 0;
  st->st_ino = inode.base.inode_number;
  st->st_mode = type_mode(inode.base.type) | (inode.base.mode & 07777);
  st->st_uid = uid;
  st->st_gid = gid;
  st->st_rdev = 0;
  st->st_size = 0;
  const struct timespec when = {static_cast<time_t>(inode.base.mod_time), 0};
  st->st_atim = when;
  st->st_mtim = when;
  st->st_ctim = when;
  st->st_blksize = static_cast<blksize_t>(super_.block_size);
  st->st_nlink = 1;
  const auto& d = inode.data;
  switch (inode.base.type) {
    case SQFS_INODE_DIR:
      st->st_nlink = d.dir.nlink;
      st->st_size = d.dir.size;
      st->st_blksize = kDirBlockSize;
      break;
    case SQFS_INODE_EXT_DIR:
      st->st_nlink = d.dir_ext.nlink;
      st->st_size = d.dir_ext.size;
      st->st_blksize = kDirBlockSize;
      break;
    case SQFS_INODE_FILE:
      st->st_size = d.file.file_size;
      break;
    case SQFS_INODE_EXT_FILE:
      st->st_nlink = d.file_ext.nlink;
      st->st_size = static_cast<off_t>(d.file_ext.file_size);
      break;
    case SQFS_INODE_SLINK:
      st->st_nlink = d.slink.nlink;
      st->st_size = d.slink.target_size;
      break;
    case SQFS_INODE_EXT_SLINK:
      st->st_nlink = d.slink_ext.nlink;
      st->st_size = d.slink_ext.target_size;
      break;
    case SQFS_INODE_BDEV:
    case SQFS_INODE_CDEV:
      st->st_nlink = d.dev.nlink;
      st->st_rdev = device_number(d.dev.devno);
      break;
    case SQFS_INODE_EXT_BDEV:
    case SQFS_INODE_EXT_CDEV:
      st->st_nlink = d.dev_ext.nlink;
      st->st_rdev = device_number(d.dev_ext.devno);
      break;
    case SQFS_INODE_FIFO:
    case SQFS_INODE_SOCKET:
      st->st_nlink = d.ipc.nlink;
      break;
    case SQFS_INODE_EXT_FIFO:
    case SQFS_INODE_EXT_SOCKET:
      st->st_nlink = d.ipc_ext.nlink;
      break;
    default:
      break;
  }
  st->st_blocks = (st->st_size + 511) / 512;
}

int SquashfsReader::list(const sqfs_inode_generic_t& dir, uint64_t ref,
                         std::shared_ptr<const Listing>* out) {
  if (auto it = listings_.find(ref); it != listings_.end()) {
    *out = it->second;
    return 0;
  }
  if (type_mode(dir.base.type) != S_IFDIR) return ENOTDIR;
  sqfs_readdir_state_t state;
  int rc = sqfs_readdir_state_init(&state, &super_, &dir);
  if (rc != 0) return errno_of_sqfs(rc);
  auto listing = std::make_shared<Listing>();
  listing->self = dir.base.inode_number;
  listing->parent = dir.base.type == SQFS_INODE_EXT_DIR ? dir.data.dir_ext.parent_inode
                                                        : dir.data.dir.parent_inode;
  // Each entry takes at least 9 bytes of the listing (8 and a name), which has 3 of its own.
  sqfs_u64 bytes = 0;
  sqfs_inode_get_file_size(&dir, &bytes);
  listing->reserve(static_cast<size_t>(std::min<sqfs_u64>(bytes / 9, 1U << 16)));
  for (;;) {
    sqfs_dir_entry_t* ent = nullptr;
    sqfs_u32 inum = 0;
    sqfs_u64 iref = 0;
    rc = sqfs_meta_reader_readdir(dirs_.get(), &state, &ent, &inum, &iref);
    if (rc > 0) break;  // the end
    if (rc < 0) return errno_of_sqfs(rc);
    DirEntry e;
    e.name.assign(reinterpret_cast<const char*>(ent->name), ent->size + 1u);
    e.ref = iref;
    e.inode_number = inum;
    e.type = ent->type;
    sqfs_free(ent);
    // A name that the kernel would refuse (empty, "."/"..", with a '/' or a NUL) is corrupt.
    // One pass over the name's few bytes: a memchr per character (find_first_of) or per
    // character sought cost more than the loop (4% of the daemon's time in a walk).
    bool bad = e.name == "." || e.name == "..";
    for (char c : e.name) bad |= c == '/' || c == '\0';
    if (bad) return EIO;
    listing->push_back(std::move(e));
  }
  if (listed_entries_ + listing->size() > kMaxListedEntries) {
    listings_.clear();
    listed_entries_ = 0;
  }
  listed_entries_ += listing->size();
  listings_.emplace(ref, listing);
  *out = std::move(listing);
  return 0;
}

int SquashfsReader::listing(uint64_t ref, std::shared_ptr<const Listing>* out) {
  if (auto it = listings_.find(ref); it != listings_.end()) {
    *out = it->second;
    return 0;
  }
  InodePtr dir;
  if (int rc = read_inode(dir_inodes_.get(), ref, &dir); rc != 0) return rc;
  return list(*dir, ref, out);
}

int SquashfsReader::lookup(const sqfs_inode_generic_t& dir, uint64_t ref, std::string_view name,
                           DirEntry* out) {
  std::shared_ptr<const Listing> listing;
  if (int rc = list(dir, ref, &listing); rc != 0) return rc;
  return find_entry(*listing, name, out);
}

int SquashfsReader::lookup(uint64_t ref, std::string_view name, DirEntry* out) {
  std::shared_ptr<const Listing> kept;
  if (int rc = listing(ref, &kept); rc != 0) return rc;
  return find_entry(*kept, name, out);
}

int SquashfsReader::find_entry(const Listing& listing, std::string_view name, DirEntry* out) {
  // Squashfs sorts a directory's names bytewise (mksquashfs and libsquashfs both): a binary
  // search, and a scan should an image not be sorted.
  auto it = std::lower_bound(listing.begin(), listing.end(), name,
                             [](const DirEntry& e, std::string_view n) { return e.name < n; });
  if (it == listing.end() || it->name != name)
    it = std::find_if(listing.begin(), listing.end(),
                      [&](const DirEntry& e) { return e.name == name; });
  if (it == listing.end()) return ENOENT;
  *out = *it;
  return 0;
}

long SquashfsReader::read(const sqfs_inode_generic_t& file, uint64_t offset, char* buf,
                          size_t size) {
  std::vector<struct iovec> pieces;
  size_t done = 0;
  while (done < size) {  // read_pieces gives at most a cache's worth at a time
    long n = read_pieces(file, offset + done, size - done, &pieces);
    if (n < 0) return done > 0 ? static_cast<long>(done) : n;
    if (n == 0) break;
    for (const struct iovec& v : pieces) {
      std::memcpy(buf + done, v.iov_base, v.iov_len);
      done += v.iov_len;
    }
  }
  return static_cast<long>(done);
}

long SquashfsReader::read_pieces(const sqfs_inode_generic_t& file, uint64_t offset, size_t size,
                                 std::vector<struct iovec>* pieces) {
  pieces->clear();
  if (type_mode(file.base.type) != S_IFREG) return -EISDIR;
  sqfs_u64 file_size = 0;
  sqfs_inode_get_file_size(&file, &file_size);
  if (offset >= file_size) return 0;
  const uint64_t block_size = super_.block_size;
  size = static_cast<size_t>(std::min<uint64_t>(size, file_size - offset));
  // At most max_blocks_ - 1 blocks' worth: every block a call points into stays cached until
  // it returns (the least recently used is the one replaced). That is 3 MiB or more, at least
  // the 1 MiB the kernel asks for at most (a short read would be the file's end to it).
  size = static_cast<size_t>(std::min<uint64_t>(size, (max_blocks_ - 1) * block_size));
  // Bytes that are not a cached block's (a sparse block's zeros, a tail in a fragment block)
  // go to scratch_; the pieces pointing there are made at the end, once it stops growing.
  struct Piece {
    const sqfs_u8* data;  ///< null: at `at` in scratch_
    size_t at, length;
  };
  std::vector<Piece> found;
  size_t scratch_used = 0;
  auto to_scratch = [&](size_t length) {
    if (scratch_.size() < scratch_used + length) scratch_.resize(scratch_used + length);
    found.push_back({nullptr, scratch_used, length});
    scratch_used += length;
    return scratch_.data() + (scratch_used - length);
  };
  // The file's blocks lie one after the other from its start; its tail, when it has one that
  // is not a block of its own, is in a fragment block (libsquashfs keeps the last one read).
  const size_t blocks = sqfs_inode_get_file_block_count(&file);
  const auto* sizes = reinterpret_cast<const sqfs_u32*>(file.extra);
  sqfs_u64 location = 0;
  sqfs_inode_get_file_block_start(&file, &location);
  size_t done = 0;
  size_t located = 0;  // the block `location` is the start of
  while (done < size) {
    uint64_t pos = offset + done;
    size_t index = static_cast<size_t>(pos / block_size);
    if (index >= blocks) {
      char* tail = to_scratch(size - done);
      sqfs_s32 n =
          sqfs_data_reader_read(data_.get(), &file, pos, tail, static_cast<sqfs_u32>(size - done));
      if (n < 0) {
        if (done == 0) return -errno_of_sqfs(n);
        found.pop_back();
        break;
      }
      found.back().length = static_cast<size_t>(n);
      done += static_cast<size_t>(n);
      break;
    }
    for (; located < index; ++located) location += SQFS_ON_DISK_BLOCK_SIZE(sizes[located]);
    size_t within = static_cast<size_t>(pos - index * block_size);
    size_t length =
        static_cast<size_t>(std::min<uint64_t>(block_size, file_size - index * block_size));
    size_t take = std::min(size - done, length - within);
    if (SQFS_IS_SPARSE_BLOCK(sizes[index])) {
      std::memset(to_scratch(take), 0, take);
    } else {
      int rc = 0;
      const CachedBlock* block = data_block(file, index, location, &rc);
      if (block == nullptr) {
        if (done == 0) return -rc;
        break;
      }
      if (within >= block->size) break;  // a block shorter than the file says: a short read
      take = std::min(take, block->size - within);
      found.push_back({block->data + within, 0, take});
    }
    done += take;
  }
  for (const Piece& p : found) {
    if (p.length == 0) continue;
    const void* base = p.data != nullptr ? static_cast<const void*>(p.data)
                                         : static_cast<const void*>(scratch_.data() + p.at);
    pieces->push_back({const_cast<void*>(base), p.length});
  }
  return static_cast<long>(done);
}

void Unmapper::operator()(void* p) const {
  ::munmap(p, length);
}

const SquashfsReader::CachedBlock* SquashfsReader::data_block(const sqfs_inode_generic_t& file,
                                                              size_t index, uint64_t location,
                                                              int* rc) {
  ++uses_;
  for (CachedBlock& b : blocks_) {
    if (b.location == location) {
      b.last_use = uses_;
      return &b;
    }
  }
  const size_t block_size = super_.block_size;
  if (!arena_) {
    // 2 MiB-aligned, so that the kernel can back it with huge pages where it has them.
    constexpr size_t kHuge = size_t{2} << 20;
    size_t length = max_blocks_ * block_size + kHuge;
    void* p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      *rc = errno;
      return nullptr;
    }
    arena_ = std::unique_ptr<sqfs_u8, Unmapper>(static_cast<sqfs_u8*>(p), Unmapper{length});
    auto aligned = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
    // Only advice: without huge pages the slots fault in page by page.
    (void)::madvise(reinterpret_cast<void*>(aligned), max_blocks_ * block_size, MADV_HUGEPAGE);
    packed_.resize(block_size);
  }
  CachedBlock* slot;
  if (blocks_.size() < max_blocks_) {
    slot = &blocks_.emplace_back();
    constexpr size_t kHuge = size_t{2} << 20;
    auto base = (reinterpret_cast<uintptr_t>(arena_.get()) + kHuge - 1) & ~(kHuge - 1);
    slot->data = reinterpret_cast<sqfs_u8*>(base + (blocks_.size() - 1) * block_size);
  } else {
    slot = &*std::min_element(
        blocks_.begin(), blocks_.end(),
        [](const CachedBlock& a, const CachedBlock& b) { return a.last_use < b.last_use; });
  }
  slot->location = ~0ULL;  // until it holds the block
  // The block as stored, and its length once decompressed: a whole block, or the file's last
  // part (a file without fragment ends on a short block).
  const auto* sizes = reinterpret_cast<const sqfs_u32*>(file.extra);
  sqfs_u32 stored = SQFS_ON_DISK_BLOCK_SIZE(sizes[index]);
  sqfs_u64 file_size = 0;
  sqfs_inode_get_file_size(&file, &file_size);
  size_t length = static_cast<size_t>(
      std::min<uint64_t>(block_size, file_size - static_cast<uint64_t>(index) * block_size));
  if (stored > block_size) {
    *rc = EIO;
    return nullptr;
  }
  sqfs_file_t* f = file_.get();
  if (!SQFS_IS_BLOCK_COMPRESSED(sizes[index])) {
    if (stored != length || f->read_at(f, location, slot->data, stored) != 0) {
      *rc = EIO;
      return nullptr;
    }
  } else {
    if (f->read_at(f, location, packed_.data(), stored) != 0) {
      *rc = EIO;
      return nullptr;
    }
    sqfs_compressor_t* c = cmp_.get();
    sqfs_s32 n = c->do_block(c, packed_.data(), stored, slot->data, static_cast<sqfs_u32>(length));
    if (n <= 0 || static_cast<size_t>(n) != length) {
      *rc = EIO;
      return nullptr;
    }
  }
  ++blocks_decompressed_;
  slot->location = location;
  slot->size = length;
  slot->last_use = uses_;
  return slot;
}

std::string_view SquashfsReader::symlink_target(const sqfs_inode_generic_t& inode) {
  const char* target = reinterpret_cast<const char*>(inode.extra);
  if (inode.base.type == SQFS_INODE_SLINK) return {target, inode.data.slink.target_size};
  if (inode.base.type == SQFS_INODE_EXT_SLINK) return {target, inode.data.slink_ext.target_size};
  return {};
}

int SquashfsReader::xattrs(const sqfs_inode_generic_t& inode, Xattrs* out) {
  out->clear();
  sqfs_u32 index = 0xffffffff;
  if (!xattrs_ || sqfs_inode_get_xattr_index(&inode, &index) != 0 || index == 0xffffffff) return 0;
  sqfs_xattr_id_t desc;
  int rc = sqfs_xattr_reader_get_desc(xattrs_.get(), index, &desc);
  if (rc == 0) rc = sqfs_xattr_reader_seek_kv(xattrs_.get(), &desc);
  for (sqfs_u32 i = 0; rc == 0 && i < desc.count; ++i) {
    sqfs_xattr_entry_t* key = nullptr;
    sqfs_xattr_value_t* value = nullptr;
    if ((rc = sqfs_xattr_reader_read_key(xattrs_.get(), &key)) != 0) break;
    std::unique_ptr<sqfs_xattr_entry_t, SqfsFreer> key_owner(key);
    if ((rc = sqfs_xattr_reader_read_value(xattrs_.get(), key, &value)) != 0) break;
    std::unique_ptr<sqfs_xattr_value_t, SqfsFreer> value_owner(value);
    // libsquashfs gives the whole name ("user.x", prefix included), NUL-terminated.
    out->emplace_back(reinterpret_cast<const char*>(key->key),
                      std::string(reinterpret_cast<const char*>(value->value), value->size));
  }
  return errno_of_sqfs(rc);
}

}  // namespace berth::sqfuse
