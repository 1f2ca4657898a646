// The libarchive functions Berth uses, resolved on first use (see core/dynlib.h).
// Internal to src/image: the unpacker, the tar writer and the archive readers share it.
#pragma once

#include <archive.h>
#include <archive_entry.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/dynlib.h"
#include "core/error.h"
#include "core/sha256.h"

namespace berth {

/// The functions, each resolved by its own name when the struct is built (see core/dynlib.h).
struct ArchiveApi {
  // Reading.
  BERTH_LAZY_FUNCTION(libarchive(), read_free, archive_read_free);
  BERTH_LAZY_FUNCTION(libarchive(), error_string, archive_error_string);
  BERTH_LAZY_FUNCTION(libarchive(), read_new, archive_read_new);
  BERTH_LAZY_FUNCTION(libarchive(), read_support_filter_gzip, archive_read_support_filter_gzip);
  BERTH_LAZY_FUNCTION(libarchive(), read_support_filter_zstd, archive_read_support_filter_zstd);
  BERTH_LAZY_FUNCTION(libarchive(), read_support_filter_none, archive_read_support_filter_none);
  BERTH_LAZY_FUNCTION(libarchive(), read_support_format_tar, archive_read_support_format_tar);
  BERTH_LAZY_FUNCTION(libarchive(), read_support_format_raw, archive_read_support_format_raw);
  BERTH_LAZY_FUNCTION(libarchive(), read_open_fd, archive_read_open_fd);
  BERTH_LAZY_FUNCTION(libarchive(), read_open, archive_read_open);
  BERTH_LAZY_FUNCTION(libarchive(), read_next_header, archive_read_next_header);
  BERTH_LAZY_FUNCTION(libarchive(), entry_pathname, archive_entry_pathname);
  BERTH_LAZY_FUNCTION(libarchive(), entry_filetype, archive_entry_filetype);
  BERTH_LAZY_FUNCTION(libarchive(), entry_hardlink, archive_entry_hardlink);
  BERTH_LAZY_FUNCTION(libarchive(), entry_perm, archive_entry_perm);
  BERTH_LAZY_FUNCTION(libarchive(), entry_symlink, archive_entry_symlink);
  BERTH_LAZY_FUNCTION(libarchive(), entry_mtime_is_set, archive_entry_mtime_is_set);
  BERTH_LAZY_FUNCTION(libarchive(), entry_mtime, archive_entry_mtime);
  BERTH_LAZY_FUNCTION(libarchive(), entry_mtime_nsec, archive_entry_mtime_nsec);
  BERTH_LAZY_FUNCTION(libarchive(), read_data_block, archive_read_data_block);
  BERTH_LAZY_FUNCTION(libarchive(), entry_size, archive_entry_size);
  BERTH_LAZY_FUNCTION(libarchive(), entry_uid, archive_entry_uid);
  BERTH_LAZY_FUNCTION(libarchive(), entry_gid, archive_entry_gid);
  // Writing.
  BERTH_LAZY_FUNCTION(libarchive(), write_new, archive_write_new);
  BERTH_LAZY_FUNCTION(libarchive(), write_free, archive_write_free);
  BERTH_LAZY_FUNCTION(libarchive(), write_set_format_pax_restricted,
                      archive_write_set_format_pax_restricted);
  BERTH_LAZY_FUNCTION(libarchive(), write_set_bytes_in_last_block,
                      archive_write_set_bytes_in_last_block);
  BERTH_LAZY_FUNCTION(libarchive(), write_open_fd, archive_write_open_fd);
  BERTH_LAZY_FUNCTION(libarchive(), write_header, archive_write_header);
  BERTH_LAZY_FUNCTION(libarchive(), write_data, archive_write_data);
  BERTH_LAZY_FUNCTION(libarchive(), write_close, archive_write_close);
  BERTH_LAZY_FUNCTION(libarchive(), entry_new, archive_entry_new);
  BERTH_LAZY_FUNCTION(libarchive(), entry_free, archive_entry_free);
  BERTH_LAZY_FUNCTION(libarchive(), entry_clear, archive_entry_clear);
  BERTH_LAZY_FUNCTION(libarchive(), entry_set_pathname, archive_entry_set_pathname);
  BERTH_LAZY_FUNCTION(libarchive(), entry_set_size, archive_entry_set_size);
  BERTH_LAZY_FUNCTION(libarchive(), entry_set_filetype, archive_entry_set_filetype);
  BERTH_LAZY_FUNCTION(libarchive(), entry_set_perm, archive_entry_set_perm);
  BERTH_LAZY_FUNCTION(libarchive(), entry_set_mtime, archive_entry_set_mtime);
  BERTH_LAZY_FUNCTION(libarchive(), entry_set_uid, archive_entry_set_uid);
  BERTH_LAZY_FUNCTION(libarchive(), entry_set_gid, archive_entry_set_gid);
  BERTH_LAZY_FUNCTION(libarchive(), entry_set_symlink, archive_entry_set_symlink);
  BERTH_LAZY_FUNCTION(libarchive(), entry_set_hardlink, archive_entry_set_hardlink);
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
Result<ArchiveReader> open_archive_reader(int fd, ArchiveFormat format, Op op,
                                          const std::string& what);

/// A reader of what `read` returns for `client` (libarchive's read callback), as
/// open_archive_reader() does for an fd.
Result<ArchiveReader> open_archive_stream(void* client, archive_read_callback* read,
                                          ArchiveFormat format, Op op, const std::string& what);

/// libarchive's message for the last failure on `a`, else `fallback`.
std::string archive_message(archive* a, const char* fallback = "unreadable archive");

/// Reads the rest of the entry `a` is at, block by block, to its end: each block goes to
/// `each(const char* data, size_t size, int64_t offset)`, which returns a Status (offset: where
/// the block belongs in the entry; a sparse entry leaves holes). The first failure of `each`
/// ends it and is returned; when libarchive fails, `failed()` gives the Error.
template <typename Each, typename Failed>
Status read_data_blocks(archive* a, Each&& each, Failed&& failed) {
  const ArchiveApi& api = archive_api();
  for (;;) {
    const void* buf = nullptr;
    size_t size = 0;
    la_int64_t offset = 0;
    int r = api.read_data_block(a, &buf, &size, &offset);
    if (r == ARCHIVE_EOF) return {};
    if (r < ARCHIVE_WARN) return failed();
    BERTH_CHECK(each(static_cast<const char*>(buf), size, static_cast<int64_t>(offset)));
  }
}

/// The digest ("sha256:<hex>") of the one entry a raw reader `a` holds (ArchiveFormat::kRaw:
/// a decompressed layer, so its diff ID); `failed()` gives the Error where libarchive fails.
template <typename Failed>
Result<std::string> read_raw_digest(archive* a, Failed&& failed) {
  archive_entry* e = nullptr;
  if (archive_api().read_next_header(a, &e) != ARCHIVE_OK) return failed();
  Sha256 hash;
  auto add = [&hash](const char* data, size_t size, int64_t) -> Status {
    hash.update(data, size);
    return {};
  };
  BERTH_CHECK(read_data_blocks(a, add, failed));
  return hash.digest();
}

}  // namespace berth
