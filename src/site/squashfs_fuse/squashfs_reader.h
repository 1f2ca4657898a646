// A squashfs image read the way a FUSE file system serves it (berth-squashfs, main.cc): inodes
// by their reference, directory listings, file data and symlink targets, through
// squashfs-tools-ng's libsquashfs, linked (the daemon is a program of its own: nothing to save
// by loading it late, as berth does in image/sqfs_api.h).
//
// Node ids. A squashfs inode reference (the inode's metadata block, relative to the inode
// table, << 16 | its offset in that block) names one inode for the life of the image, and every
// name of a hard-linked file carries the same one: it is the FUSE node id, plus 2 so that no id
// is 0 (no node) or 1 (FUSE_ROOT_ID), which the root takes instead. Nothing is remembered per
// node, so the kernel's FORGET needs no answer and the daemon's memory does not grow with the
// number of nodes the kernel holds.
//
// File data. The kernel asks for a file's pages in readahead windows that need not start on a
// squashfs block (an exec faults its pages in, in no particular order), so one block is asked
// for by several reads: a start's exec of a 2 MB static busybox decompressed 2.3 times the
// bytes it needed with libsquashfs's one-block cache. The reader keeps the most recently read
// data blocks (kCachedDataBytes in all), so that each is read and decompressed once.
//
// Not thread-safe: libsquashfs's readers each keep one decompressed block, and so does the
// data block cache (main.cc serves one request at a time, and says why).
#pragma once

#include <sqfs/compressor.h>
#include <sqfs/data_reader.h>
#include <sqfs/dir.h>
#include <sqfs/inode.h>
#include <sqfs/io.h>
#include <sqfs/meta_reader.h>
#include <sqfs/super.h>
#include <sqfs/xattr_reader.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"

namespace berth::sqfuse {

/// The FUSE node id of the root directory (fuse_lowlevel.h's FUSE_ROOT_ID).
constexpr uint64_t kRootNode = 1;

/// One directory entry: what a listing and a lookup need, without the inode itself.
struct DirEntry {
  std::string name;
  uint64_t ref = 0;           ///< the inode reference (node id: node_of())
  uint32_t inode_number = 0;  ///< st_ino
  uint16_t type = 0;          ///< SQFS_INODE_TYPE, basic form (the entry's own)
};
/// A directory's entries in the image's order (sorted by name, as squashfs stores them), with
/// the inode numbers of "." and "..": what a readdir needs, so that it reads no inode of the
/// directory itself once the listing is kept.
struct Listing : std::vector<DirEntry> {
  uint32_t self = 0;    ///< the directory's own inode number
  uint32_t parent = 0;  ///< its parent's
};
/// An inode's extended attributes, (full name, value) in the image's order.
using Xattrs = std::vector<std::pair<std::string, std::string>>;

/// Destroys a libsquashfs object.
struct SqfsDestroyer {
  void operator()(void* obj) const { sqfs_destroy(obj); }
};
/// Frees an inode libsquashfs returned.
struct SqfsFreer {
  void operator()(void* p) const;
};
using InodePtr = std::unique_ptr<sqfs_inode_generic_t, SqfsFreer>;
/// Unmaps memory the reader mapped (its data block cache).
struct Unmapper {
  size_t length = 0;
  void operator()(void* p) const;
};

/// An open squashfs image.
class SquashfsReader {
 public:
  /// Opens the image at `path` (a file, or /proc/self/fd/N) and reads what every request needs:
  /// the superblock, the compressor, the fragment table and the root inode. `name` is how
  /// messages call the image. A corrupt image is refused here, in one line, before anything is
  /// mounted. The image starts at byte `offset` of the file (a SIF file's partition).
  static Result<std::unique_ptr<SquashfsReader>> open(const std::string& path,
                                                      const std::string& name, uint64_t offset = 0);
  ~SquashfsReader();
  SquashfsReader(const SquashfsReader&) = delete;
  SquashfsReader& operator=(const SquashfsReader&) = delete;

  /// The node id of the inode at `ref` (kRootNode for the root).
  uint64_t node_of(uint64_t ref) const { return ref == root_ref_ ? kRootNode : ref + 2; }
  /// The inode reference of node id `node` (node_of's inverse).
  uint64_t ref_of(uint64_t node) const { return node == kRootNode ? root_ref_ : node - 2; }

  /// The inode at `ref`; 0, or an errno (EIO for a corrupt table).
  int inode(uint64_t ref, InodePtr* out);
  /// The attributes of `inode` as stat() reports them, owned by `uid`:`gid`.
  void attributes(const sqfs_inode_generic_t& inode, uid_t uid, gid_t gid, struct stat* st) const;
  /// The entries of directory `dir` (at `ref`), read once and then kept (up to a bounded
  /// number of entries for all directories together); 0 or an errno (ENOTDIR, EIO).
  int list(const sqfs_inode_generic_t& dir, uint64_t ref, std::shared_ptr<const Listing>* out);
  /// The listing of the directory at `ref`: the one kept, else read (its inode, then list());
  /// 0 or an errno.
  int listing(uint64_t ref, std::shared_ptr<const Listing>* out);
  /// The entry `name` of directory `dir` (at `ref`): found (0), ENOENT, or another errno.
  int lookup(const sqfs_inode_generic_t& dir, uint64_t ref, std::string_view name, DirEntry* out);
  /// The same for the directory at `ref`, its inode read only when its listing is not kept.
  int lookup(uint64_t ref, std::string_view name, DirEntry* out);
  /// Up to `size` bytes of regular file `file` from `offset` into `buf`: the count read (0 at
  /// the end), or a negative errno. Whole blocks come from the data block cache.
  long read(const sqfs_inode_generic_t& file, uint64_t offset, char* buf, size_t size);
  /// The same bytes, not copied: `pieces` points into the reader's cached blocks (or a buffer
  /// of its own), valid until its next call. At most a cache's worth (max_blocks_ - 1 blocks)
  /// per call: the count may be less than asked before the end.
  long read_pieces(const sqfs_inode_generic_t& file, uint64_t offset, size_t size,
                   std::vector<struct iovec>* pieces);
  /// A symlink's target; empty for other inodes.
  static std::string_view symlink_target(const sqfs_inode_generic_t& inode);
  /// Whether the image has an xattr table at all.
  bool has_xattrs() const { return xattrs_ != nullptr; }
  /// The extended attributes of `inode`; 0 or an errno.
  int xattrs(const sqfs_inode_generic_t& inode, Xattrs* out);

  /// The superblock (statfs).
  const sqfs_super_t& super() const { return super_; }

  /// How many decompressed data bytes the reader keeps: 32 blocks of the default 128 KiB
  /// (and never fewer than 4 blocks).
  static constexpr size_t kCachedDataBytes = size_t{4} << 20;
  /// How many data blocks were decompressed so far (for the tests).
  uint64_t blocks_decompressed() const { return blocks_decompressed_; }
  /// How many inode table blocks were read and decompressed so far (for the tests).
  uint64_t inode_blocks_read() const { return inode_blocks_read_; }
  /// How many inode table blocks the reader keeps decompressed (2 MiB of them).
  static constexpr size_t kCachedInodeBlocks = 256;

 private:
  SquashfsReader() = default;

  /// One decompressed data block, named by where it is in the image: two files' blocks at one
  /// place are the same bytes (mksquashfs shares duplicate files' blocks).
  struct CachedBlock {
    uint64_t location = 0;
    sqfs_u8* data = nullptr;  ///< its slot in arena_
    size_t size = 0;
    uint64_t last_use = 0;
  };

  /// The inode at `ref` through `reader`; 0 or an errno.
  int read_inode(sqfs_meta_reader_t* reader, uint64_t ref, InodePtr* out);
  /// The entry `name` of `listing`: 0 or ENOENT.
  static int find_entry(const Listing& listing, std::string_view name, DirEntry* out);
  /// Block `index` of `file` (not a sparse one), at `location`, from the cache or read; null
  /// with *rc set on failure.
  const CachedBlock* data_block(const sqfs_inode_generic_t& file, size_t index, uint64_t location,
                                int* rc);

  sqfs_super_t super_{};
  uint64_t root_ref_ = 0;
  std::unique_ptr<sqfs_file_t, SqfsDestroyer> file_;
  std::unique_ptr<sqfs_compressor_t, SqfsDestroyer> cmp_;
  /// The inode table's metadata blocks, each decompressed once and kept (up to
  /// kCachedInodeBlocks, the least recently used replaced). libsquashfs's meta readers keep
  /// only the block they read last, and a walk goes through the table three times over (a
  /// directory's entries' inodes, then each subdirectory's own inode and its entries': the 62
  /// blocks of bench/sqwalk's image were decompressed 188 times, two pread()s each): the
  /// readers below read this cache instead, through `inode_file_`, a file of its own made of
  /// the cached blocks stored uncompressed (InodeBlocks in the .cc says how it is laid out).
  struct InodeBlock {
    uint64_t location = 0;  ///< where the block is in the image (its header)
    uint32_t stored = 0;    ///< its length there, header included: the next block follows
    uint32_t size = 0;      ///< its length decompressed
    uint64_t last_use = 0;
    std::unique_ptr<sqfs_u8[]> data;
  };
  /// The cached block at `location` in the image, read and decompressed if it is not kept;
  /// null with *rc set (an SQFS_ERROR) for a corrupt one.
  const InodeBlock* inode_block(uint64_t location, int* rc);
  /// sqfs_file_t's read_at for `inode_file_`.
  static int read_inode_file(sqfs_file_t* file, sqfs_u64 offset, void* buffer, size_t size);
  /// Where `inode_file_` keeps block B of the inode table: at B << kInodeFileShift (room for
  /// an inode running over 2,000 blocks; B is below 2^32, as in an inode reference).
  static constexpr unsigned kInodeFileShift = 24;
  struct InodeFile {
    sqfs_file_t file;  ///< first: libsquashfs passes &file back to read_inode_file
    SquashfsReader* reader;
  } inode_file_{};
  std::vector<InodeBlock> inode_blocks_;
  std::map<uint64_t, size_t> inode_block_at_;  ///< location -> index in inode_blocks_
  std::vector<sqfs_u8> packed_inode_block_;    ///< a block as stored, before decompression
  sqfs_super_t inode_super_{};  ///< super_ with the inode table at 0 of `inode_file_`
  std::unique_ptr<sqfs_meta_reader_t, SqfsDestroyer> inodes_;
  /// The inode table again, for the directories listing() reads: each reader keeps the block
  /// it read last, and a readdir reads its entries' inodes in the table's order, which the
  /// jump to the directory's own inode (stored after them) would break. With the blocks kept
  /// decompressed above, the jump would cost a copy of the block rather than its
  /// decompression: the second reader now saves only that copy.
  std::unique_ptr<sqfs_meta_reader_t, SqfsDestroyer> dir_inodes_;
  std::unique_ptr<sqfs_meta_reader_t, SqfsDestroyer> dirs_;
  std::unique_ptr<sqfs_data_reader_t, SqfsDestroyer> data_;
  std::unique_ptr<sqfs_xattr_reader_t, SqfsDestroyer> xattrs_;  ///< null: no xattr table
  std::map<uint64_t, std::shared_ptr<const Listing>> listings_;
  size_t listed_entries_ = 0;
  std::vector<CachedBlock> blocks_;  ///< at most max_blocks_, the least recently used replaced
  /// The cached blocks' memory, max_blocks_ slots of a block each, mapped on first use with
  /// transparent huge pages asked for: one fault per 2 MiB rather than one per 4 KiB page.
  std::unique_ptr<sqfs_u8, Unmapper> arena_;
  std::vector<sqfs_u8> packed_;  ///< a block as stored, before decompression
  std::vector<char> scratch_;    ///< read_pieces's bytes that are not a cached block's
  size_t max_blocks_ = 4;
  uint64_t uses_ = 0;
  uint64_t blocks_decompressed_ = 0;
  uint64_t inode_blocks_read_ = 0;
};

/// The file-type bits (S_IFDIR, ...) of an SQFS_INODE_TYPE: squashfs keeps only the permission
/// bits in an inode's mode.
mode_t type_mode(uint16_t type);
/// An errno for a libsquashfs error code (EIO for a corrupt image, ENOMEM, ...).
int errno_of_sqfs(int code);
/// A libsquashfs error code in words.
const char* sqfs_error_words(int code);

}  // namespace berth::sqfuse
