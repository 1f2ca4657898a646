#include "image/archive_api.h"

#include "core/dynlib.h"

namespace berth {

const ArchiveApi& archive_api() {
  static const ArchiveApi api;
  return api;
}

std::string archive_message(archive* a, const char* fallback) {
  const char* msg = archive_api().error_string(a);
  return msg ? msg : fallback;
}

namespace {

/// A new reader for `format`, plain or gzip/zstd compressed, not yet opened.
Result<ArchiveReader> new_reader(ArchiveFormat format, Op op, const std::string& what) {
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

Result<ArchiveReader> open_archive_reader(int fd, ArchiveFormat format, Op op,
                                          const std::string& what) {
  ArchiveReader ar = BERTH_TRY(new_reader(format, op, what));
  if (archive_api().read_open_fd(ar.get(), fd, size_t{1} << 20) != ARCHIVE_OK)
    return make_error(op, what, archive_message(ar.get()));
  return ar;
}

Result<ArchiveReader> open_archive_stream(void* client, archive_read_callback* read,
                                          ArchiveFormat format, Op op, const std::string& what) {
  ArchiveReader ar = BERTH_TRY(new_reader(format, op, what));
  if (archive_api().read_open(ar.get(), client, nullptr, read, nullptr) != ARCHIVE_OK)
    return make_error(op, what, archive_message(ar.get()));
  return ar;
}

}  // namespace berth
