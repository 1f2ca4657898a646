#include "image/image_archive.h"

#include "core/sha256.h"

namespace berth {

std::string archive_blob_name(std::string_view digest) {
  return "blobs/sha256/" + std::string(digest_hex(digest));
}

}  // namespace berth
