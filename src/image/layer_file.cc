#include "image/layer_file.h"

#include <fcntl.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/sha256.h"
#include "image/archive_api.h"

namespace berth {

Result<Compression> sniff_compression(std::string_view head, const std::string& what) {
  if (head.starts_with("\x1f\x8b")) return Compression::kGzip;
  if (head.starts_with("\x28\xb5\x2f\xfd")) return Compression::kZstd;
  if (head.starts_with("BZh"))
    return make_error("read", what, "bzip2 compression is not supported")
        .with_hint("decompress it first (bunzip2), or use gzip or zstd");
  if (head.starts_with(std::string_view("\xfd"
                                        "7zXZ\0",
                                        6)))
    return make_error("read", what, "xz compression is not supported")
        .with_hint("decompress it first (unxz), or use gzip or zstd");
  return Compression::kNone;
}

std::string_view oci_layer_media_type(Compression c) {
  switch (c) {
    case Compression::kGzip:
      return media::kOciLayerGzip;
    case Compression::kZstd:
      return media::kOciLayerZstd;
    case Compression::kNone:
      break;
  }
  return media::kOciLayerTar;
}

Result<LayerFileInfo> inspect_layer_file(const std::string& path, const std::string& digest,
                                         const std::string& what_in) {
  const std::string& what = what_in.empty() ? path : what_in;
  LayerFileInfo info;
  {
    UniqueFd fd = BERTH_TRY(open_file(path, O_RDONLY));
    char head[8] = {};
    ssize_t n = ::read(fd.get(), head, sizeof head);
    if (n < 0) return sys_error("read", path);
    info.compression = BERTH_TRY(sniff_compression(std::string_view(head, n), what));
  }
  if (info.compression == Compression::kNone) {
    info.diff_id = digest.empty() ? BERTH_TRY(sha256_file(path)) : digest;
    return info;
  }
  UniqueFd fd = BERTH_TRY(open_file(path, O_RDONLY));
  ArchiveReader ar =
      BERTH_TRY(open_archive_reader(fd.get(), ArchiveFormat::kRaw, "decompress", what));
  auto fail = [&]() { return make_error("decompress", what, archive_message(ar.get())); };
  info.diff_id = BERTH_TRY(read_raw_digest(ar.get(), fail));
  return info;
}

}  // namespace berth
