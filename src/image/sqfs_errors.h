// libsquashfs's error codes (sqfs/error.h) in words, for the image writer and reader
// (image/sqfs_api.h) and for berth-squashfs (site/squashfs_fuse), which links libsquashfs
// directly: header-only, so that both take the same words without sharing a library.
#pragma once

#include <sqfs/error.h>

namespace berth {

/// libsquashfs's SQFS_ERROR code in words ("out of memory", "corrupt or truncated squashfs").
inline const char* sqfs_error_text(int code) {
  switch (code) {
    case SQFS_ERROR_ALLOC:
      return "out of memory";
    case SQFS_ERROR_IO:
      return "input/output error";
    case SQFS_ERROR_COMPRESSOR:
      return "compressor failure";
    case SQFS_ERROR_CORRUPTED:
    case SQFS_ERROR_OUT_OF_BOUNDS:
      return "corrupt or truncated squashfs";
    case SQFS_ERROR_UNSUPPORTED:
      return "unsupported squashfs feature or compressor";
    case SQFS_ERROR_OVERFLOW:
      return "too large for squashfs";
    case SFQS_ERROR_SUPER_MAGIC:
      return "not a squashfs image (no squashfs magic number)";
    case SFQS_ERROR_SUPER_VERSION:
      return "unsupported squashfs version";
    case SQFS_ERROR_SUPER_BLOCK_SIZE:
      return "invalid squashfs block size";
    case SQFS_ERROR_NOT_DIR:
      return "not a directory";
    case SQFS_ERROR_NO_ENTRY:
      return "no such entry";
    case SQFS_ERROR_LINK_LOOP:
      return "hard link loop";
    case SQFS_ERROR_NOT_FILE:
      return "not a regular file";
    case SQFS_ERROR_ARG_INVALID:
      return "invalid argument";
    case SQFS_ERROR_SEQUENCE:
      return "call out of sequence";
    default:
      return "internal libsquashfs error";
  }
}

}  // namespace berth
