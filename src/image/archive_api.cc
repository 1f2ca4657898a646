#include "image/archive_api.h"

#include "core/dynlib.h"

namespace berth {

const ArchiveApi& archive_api() {
  static const ArchiveApi a = [] {
    LazyLibrary& l = libarchive();
    return ArchiveApi{
        l.get(&::archive_read_free, "archive_read_free"),
        l.get(&::archive_error_string, "archive_error_string"),
        l.get(&::archive_read_new, "archive_read_new"),
        l.get(&::archive_read_support_filter_gzip, "archive_read_support_filter_gzip"),
        l.get(&::archive_read_support_filter_zstd, "archive_read_support_filter_zstd"),
        l.get(&::archive_read_support_filter_none, "archive_read_support_filter_none"),
        l.get(&::archive_read_support_format_tar, "archive_read_support_format_tar"),
        l.get(&::archive_read_support_format_raw, "archive_read_support_format_raw"),
        l.get(&::archive_read_open_fd, "archive_read_open_fd"),
        l.get(&::archive_read_open, "archive_read_open"),
        l.get(&::archive_read_next_header, "archive_read_next_header"),
        l.get(&::archive_entry_pathname, "archive_entry_pathname"),
        l.get(&::archive_entry_filetype, "archive_entry_filetype"),
        l.get(&::archive_entry_hardlink, "archive_entry_hardlink"),
        l.get(&::archive_entry_perm, "archive_entry_perm"),
        l.get(&::archive_entry_symlink, "archive_entry_symlink"),
        l.get(&::archive_entry_mtime_is_set, "archive_entry_mtime_is_set"),
        l.get(&::archive_entry_mtime, "archive_entry_mtime"),
        l.get(&::archive_entry_mtime_nsec, "archive_entry_mtime_nsec"),
        l.get(&::archive_read_data_block, "archive_read_data_block"),
        l.get(&::archive_entry_size, "archive_entry_size"),
        l.get(&::archive_entry_uid, "archive_entry_uid"),
        l.get(&::archive_entry_gid, "archive_entry_gid"),
        l.get(&::archive_write_new, "archive_write_new"),
        l.get(&::archive_write_free, "archive_write_free"),
        l.get(&::archive_write_set_format_pax_restricted,
              "archive_write_set_format_pax_restricted"),
        l.get(&::archive_write_set_bytes_in_last_block, "archive_write_set_bytes_in_last_block"),
        l.get(&::archive_write_open_fd, "archive_write_open_fd"),
        l.get(&::archive_write_header, "archive_write_header"),
        l.get(&::archive_write_data, "archive_write_data"),
        l.get(&::archive_write_close, "archive_write_close"),
        l.get(&::archive_entry_new, "archive_entry_new"),
        l.get(&::archive_entry_free, "archive_entry_free"),
        l.get(&::archive_entry_clear, "archive_entry_clear"),
        l.get(&::archive_entry_set_pathname, "archive_entry_set_pathname"),
        l.get(&::archive_entry_set_size, "archive_entry_set_size"),
        l.get(&::archive_entry_set_filetype, "archive_entry_set_filetype"),
        l.get(&::archive_entry_set_perm, "archive_entry_set_perm"),
        l.get(&::archive_entry_set_mtime, "archive_entry_set_mtime"),
        l.get(&::archive_entry_set_uid, "archive_entry_set_uid"),
        l.get(&::archive_entry_set_gid, "archive_entry_set_gid"),
        l.get(&::archive_entry_set_symlink, "archive_entry_set_symlink"),
        l.get(&::archive_entry_set_hardlink, "archive_entry_set_hardlink")};
  }();
  return a;
}

std::string archive_message(archive* a, const char* fallback) {
  const char* msg = archive_api().error_string(a);
  return msg ? msg : fallback;
}

namespace {

/// A new reader for `format`, plain or gzip/zstd compressed, not yet opened.
Result<ArchiveReader> new_reader(ArchiveFormat format, const char* op, const std::string& what) {
  const ArchiveApi& api = archive_api();
  ArchiveReader ar(api.read_new());
  if (!ar) return make_error(op, what, "out of memory");
  api.read_support_filter_gzip(ar.get());
  api.read_support_filter_zstd(ar.get());
  api.read_support_filter_none(ar.get());
  if (format == ArchiveFormat::kTar)
    api.read_support_format_tar(ar.get());
  else
    api.read_support_format_raw(ar.get());
  return ar;
}

}  // namespace

Result<ArchiveReader> open_archive_reader(int fd, ArchiveFormat format, const char* op,
                                          const std::string& what) {
  ArchiveReader ar = BERTH_TRY(new_reader(format, op, what));
  if (archive_api().read_open_fd(ar.get(), fd, size_t{1} << 20) != ARCHIVE_OK)
    return make_error(op, what, archive_message(ar.get()));
  return ar;
}

Result<ArchiveReader> open_archive_stream(void* client, archive_read_callback* read,
                                          ArchiveFormat format, const char* op,
                                          const std::string& what) {
  ArchiveReader ar = BERTH_TRY(new_reader(format, op, what));
  if (archive_api().read_open(ar.get(), client, nullptr, read, nullptr) != ARCHIVE_OK)
    return make_error(op, what, archive_message(ar.get()));
  return ar;
}

}  // namespace berth
