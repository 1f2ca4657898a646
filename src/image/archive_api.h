// The libarchive functions Berth uses, resolved on first use (see core/dynlib.h).
// Internal to src/image: the unpacker, the tar writer and the archive readers share it.
#pragma once

#include <archive.h>
#include <archive_entry.h>

#include <memory>
#include <string>

#include "core/error.h"

namespace berth {

struct ArchiveApi {
  // Reading.
  decltype(&::archive_read_free) read_free;
  decltype(&::archive_error_string) error_string;
  decltype(&::archive_read_new) read_new;
  decltype(&::archive_read_support_filter_gzip) read_support_filter_gzip;
  decltype(&::archive_read_support_filter_zstd) read_support_filter_zstd;
  decltype(&::archive_read_support_filter_none) read_support_filter_none;
  decltype(&::archive_read_support_format_tar) read_support_format_tar;
  decltype(&::archive_read_support_format_raw) read_support_format_raw;
  decltype(&::archive_read_open_fd) read_open_fd;
  decltype(&::archive_read_open) read_open;
  decltype(&::archive_read_next_header) read_next_header;
  decltype(&::archive_entry_pathname) entry_pathname;
  decltype(&::archive_entry_filetype) entry_filetype;
  decltype(&::archive_entry_hardlink) entry_hardlink;
  decltype(&::archive_entry_perm) entry_perm;
  decltype(&::archive_entry_symlink) entry_symlink;
  decltype(&::archive_entry_mtime_is_set) entry_mtime_is_set;
  decltype(&::archive_entry_mtime) entry_mtime;
  decltype(&::archive_entry_mtime_nsec) entry_mtime_nsec;
  decltype(&::archive_read_data_block) read_data_block;
  decltype(&::archive_entry_size) entry_size;
  decltype(&::archive_entry_uid) entry_uid;
  decltype(&::archive_entry_gid) entry_gid;
  // Writing.
  decltype(&::archive_write_new) write_new;
  decltype(&::archive_write_free) write_free;
  decltype(&::archive_write_set_format_pax_restricted) write_set_format_pax_restricted;
  decltype(&::archive_write_set_bytes_in_last_block) write_set_bytes_in_last_block;
  decltype(&::archive_write_open_fd) write_open_fd;
  decltype(&::archive_write_header) write_header;
  decltype(&::archive_write_data) write_data;
  decltype(&::archive_write_close) write_close;
  decltype(&::archive_entry_new) entry_new;
  decltype(&::archive_entry_free) entry_free;
  decltype(&::archive_entry_clear) entry_clear;
  decltype(&::archive_entry_set_pathname) entry_set_pathname;
  decltype(&::archive_entry_set_size) entry_set_size;
  decltype(&::archive_entry_set_filetype) entry_set_filetype;
  decltype(&::archive_entry_set_perm) entry_set_perm;
  decltype(&::archive_entry_set_mtime) entry_set_mtime;
  decltype(&::archive_entry_set_uid) entry_set_uid;
  decltype(&::archive_entry_set_gid) entry_set_gid;
  decltype(&::archive_entry_set_symlink) entry_set_symlink;
  decltype(&::archive_entry_set_hardlink) entry_set_hardlink;
};

/// The functions, loading libarchive the first time.
const ArchiveApi& archive_api();

struct ArchiveReadFree {
  void operator()(archive* a) const { archive_api().read_free(a); }
};
/// An archive opened for reading, freed on destruction.
using ArchiveReader = std::unique_ptr<archive, ArchiveReadFree>;

/// What a reader takes: tar entries, or the decompressed bytes as one raw entry.
enum class ArchiveFormat { kTar, kRaw };

/// A reader of `fd` (not owned) for `format`, plain or gzip/zstd compressed; on failure the
/// error is "`op` `what`: libarchive's message".
Result<ArchiveReader> open_archive_reader(int fd, ArchiveFormat format, const char* op,
                                          const std::string& what);

/// A reader of what `read` returns for `client` (libarchive's read callback), as
/// open_archive_reader() does for an fd.
Result<ArchiveReader> open_archive_stream(void* client, archive_read_callback* read,
                                          ArchiveFormat format, const char* op,
                                          const std::string& what);

/// libarchive's message for the last failure on `a`, else `fallback`.
std::string archive_message(archive* a, const char* fallback = "unreadable archive");

}  // namespace berth
