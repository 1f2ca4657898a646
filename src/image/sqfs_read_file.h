// A squashfs image as libsquashfs reads it, read-only: our descriptor (so that an I/O error
// keeps its errno), the image at an offset of the file (a SIF file's partition, image/sif.h)
// and no longer than its extent. For berth's reader (image/unsquash.h, image/squash.h) and
// berth-squashfs (site/squashfs_fuse): header-only, as image/sqfs_errors.h.
#pragma once

#include <sqfs/error.h>
#include <sqfs/io.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>

namespace berth {

/// libsquashfs's file over `fd`'s bytes [offset, offset + size).
struct SqfsReadFile {
  sqfs_file_t base{};  // first: libsquashfs hands back its pointer
  int fd = -1;
  uint64_t offset = 0;
  uint64_t size = 0;
  std::atomic<int> err{0};  ///< the first errno seen

  SqfsReadFile(int f, uint64_t off, uint64_t s) : fd(f), offset(off), size(s) {
    base.base.destroy = [](sqfs_object_t*) {};  // ours, never libsquashfs's to free
    base.base.copy = nullptr;
    base.read_at = [](sqfs_file_t* f, sqfs_u64 at, void* buf, size_t n) -> int {
      auto* self = reinterpret_cast<SqfsReadFile*>(f);
      if (at > self->size || n > self->size - at) return SQFS_ERROR_OUT_OF_BOUNDS;
      auto* p = static_cast<char*>(buf);
      uint64_t pos = self->offset + at;
      while (n > 0) {
        ssize_t r = ::pread(self->fd, p, n, static_cast<off_t>(pos));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
          int zero = 0;
          self->err.compare_exchange_strong(zero, errno);
          return SQFS_ERROR_IO;
        }
        if (r == 0) return SQFS_ERROR_OUT_OF_BOUNDS;  // a truncated file
        p += r;
        n -= static_cast<size_t>(r);
        pos += static_cast<uint64_t>(r);
      }
      return 0;
    };
    base.write_at = [](sqfs_file_t*, sqfs_u64, const void*, size_t) -> int {
      return SQFS_ERROR_UNSUPPORTED;
    };
    base.get_size = [](const sqfs_file_t* f) -> sqfs_u64 {
      return reinterpret_cast<const SqfsReadFile*>(f)->size;
    };
    base.truncate = [](sqfs_file_t*, sqfs_u64) -> int { return SQFS_ERROR_UNSUPPORTED; };
  }
  SqfsReadFile(const SqfsReadFile&) = delete;
  SqfsReadFile& operator=(const SqfsReadFile&) = delete;
};

}  // namespace berth
