// The squashfs writer the image's squashes share (internal to src/image): the output file,
// unnamed until it is whole (OutputFile), libsquashfs's file over our descriptor (FdFile, which
// the reader uses too), the compressors Berth builds with, and the Builder that streams file
// data into data blocks and writes inodes, directories and tables in the end; write_squashfs()
// runs one fill of a MergeTree (image/squash_merge.h) through them. What fills it: the layers
// of an image (squash_layers.cc) or a directory tree (squash_tree.cc).
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/fs.h"
#include "image/archive_api.h"
#include "image/sqfs_api.h"
#include "image/squash.h"
#include "image/squash_merge.h"

namespace berth::squash_internal {

inline const SqfsApi& sq() {
  return sqfs_api();
}
inline const ArchiveApi& ar() {
  return archive_api();
}

/// The data block size: 128 KiB, mksquashfs's default too.
inline constexpr uint32_t kBlockSize = SQFS_DEFAULT_BLOCK_SIZE;

/// A time in Unix seconds as squashfs keeps it: clamped to 0..2^32-1.
uint32_t clamp_time(int64_t t);

/// The file libsquashfs writes and reads: our fd, so that an I/O error keeps its errno.
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

/// The output file: unnamed until complete.
class OutputFile {
 public:
  static Result<OutputFile> create(const std::string& path);

  OutputFile() = default;
  OutputFile(OutputFile&&) = default;
  OutputFile& operator=(OutputFile&&) = default;
  ~OutputFile();

  int fd() const { return fd_.get(); }

  /// Syncs the data and gives the file its name (replacing a file of that name).
  Status commit();

 private:
  std::string path_, named_tmp_;
  UniqueFd fd_;
  bool committed_ = false;
};

/// A compressor Berth builds with, and its levels.
struct CompressorChoice {
  const char* name;
  SQFS_COMPRESSOR id;
  int min_level, max_level;  // 0, 0: no levels
};

/// The compressor named `name` (lz4, zstd, gzip); nullptr for another.
const CompressorChoice* find_compressor(std::string_view name);

/// The squashfs being written: libsquashfs's writer objects, the data blocks, the tables.
class Builder {
 public:
  Builder(int fd, std::string what) : file_(fd), what_(std::move(what)) {}
  Builder(const Builder&) = delete;
  Builder& operator=(const Builder&) = delete;

  /// Sets up the compressors (`opts`), the super block and libsquashfs's writer objects.
  Status open(const SquashOptions& opts);

  /// Streams one regular file's data: begin, append..., end.
  Status begin_file(MergeInode* inode);
  Status append(const void* data, size_t n);
  Status end_file();
  /// Appends `n` zero bytes (a hole of a sparse file, or a short archive member).
  Status append_zeros(uint64_t n);

  /// Waits for the data blocks, writes inodes, directories and tables, then the super block.
  Status finish(MergeTree& tree, SquashStats& stats);

  /// The file system's time (its super block's, and /.berth's): SquashOptions::made, else now.
  uint32_t made() const { return made_; }

  /// An error from libsquashfs's code `r` while doing `what`: errno when the file failed.
  Error fail(std::string_view what, int r) const;

 private:
  /// Numbers inodes as squashfs-tools-ng does: a directory's subdirectories first (depth
  /// first), then its entries, so every inode is written before the directory naming it.
  static void number(MergeTree::Node& dir, std::vector<MergeTree::Node*>& order, uint32_t& count);

  Status write_inode(MergeTree::Node& n, uint32_t parent_no);

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

/// Adds /.berth/image.json, as the newest of all layers (`layer`), so that no layer can
/// replace it; nothing when `metadata` is empty.
Status add_metadata(MergeTree& tree, Builder& b, int layer, std::string_view metadata,
                    SquashStats& stats);

/// Runs `fill` into a new squashfs at `output`, published only when whole.
Result<SquashStats> write_squashfs(
    const SquashOptions& opts, const std::string& output,
    const std::function<Status(MergeTree&, Builder&, SquashStats&)>& fill);

}  // namespace berth::squash_internal
