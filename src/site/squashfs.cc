#include "site/squashfs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "core/json.h"
#include "core/root_path.h"
#include "core/sha256.h"
#include "image/image_config.h"

namespace berth {
namespace {

constexpr uint32_t kMagic = 0x73717368;  // "hsqs" on disk: squashfs is little-endian

uint16_t le16(std::string_view b, size_t off) {
  return static_cast<uint16_t>(static_cast<uint8_t>(b[off]) |
                               static_cast<uint8_t>(b[off + 1]) << 8);
}
uint32_t le32(std::string_view b, size_t off) {
  return static_cast<uint32_t>(le16(b, off)) | static_cast<uint32_t>(le16(b, off + 2)) << 16;
}
uint64_t le64(std::string_view b, size_t off) {
  return static_cast<uint64_t>(le32(b, off)) | static_cast<uint64_t>(le32(b, off + 4)) << 32;
}

Error corrupt(const std::string& path, const std::string& what) {
  return make_error("read squashfs", path, "corrupt squashfs image: " + what,
                    ErrorCode::kIntegrity);
}

}  // namespace

std::string_view squashfs_compressor_name(uint16_t id) {
  static constexpr std::string_view kNames[] = {"unknown", "gzip", "lzma", "lzo",
                                                "xz",      "lz4",  "zstd"};
  return id < std::size(kNames) ? kNames[id] : kNames[0];
}

Result<SquashfsSuperblock> check_squashfs_superblock(std::string_view head, uint64_t file_size,
                                                     const std::string& path) {
  if (head.size() < 4 || le32(head, 0) != kMagic)
    return make_error("read squashfs", path, "not a squashfs image (no squashfs magic number)",
                      ErrorCode::kInvalidInput);
  if (head.size() < kSquashfsSuperblockSize || file_size < kSquashfsSuperblockSize)
    return make_error("read squashfs", path,
                      "truncated squashfs image: " + std::to_string(file_size) +
                          " bytes, shorter than its superblock",
                      ErrorCode::kIntegrity);
  SquashfsSuperblock sb;
  sb.inodes = le32(head, 4);
  sb.block_size = le32(head, 12);
  sb.compression = le16(head, 20);
  uint16_t block_log = le16(head, 22);
  uint16_t major = le16(head, 28), minor = le16(head, 30);
  uint64_t root_inode = le64(head, 32);
  sb.bytes_used = le64(head, 40);
  uint64_t id_table = le64(head, 48);
  uint64_t inode_table = le64(head, 64);
  uint64_t directory_table = le64(head, 72);
  if (major != 4 || minor != 0)
    return make_error("read squashfs", path,
                      "squashfs version " + std::to_string(major) + "." + std::to_string(minor) +
                          ": only 4.0 can be mounted",
                      ErrorCode::kUnsupported);
  if (sb.block_size < 4096 || sb.block_size > (1u << 20) ||
      (sb.block_size & (sb.block_size - 1)) != 0 || (1u << (block_log & 31)) != sb.block_size)
    return corrupt(path, "block size " + std::to_string(sb.block_size) + " (log " +
                             std::to_string(block_log) + ")");
  if (sb.compression == 0 || sb.compression > 6)
    return corrupt(path, "unknown compressor " + std::to_string(sb.compression));
  if (sb.bytes_used > file_size)
    return make_error("read squashfs", path,
                      "truncated squashfs image: it says " + std::to_string(sb.bytes_used) +
                          " bytes, the file has " + std::to_string(file_size),
                      ErrorCode::kIntegrity);
  if (sb.bytes_used < kSquashfsSuperblockSize || inode_table < kSquashfsSuperblockSize ||
      inode_table >= directory_table || directory_table >= sb.bytes_used ||
      id_table >= sb.bytes_used || inode_table + (root_inode >> 16) >= directory_table ||
      sb.inodes == 0)
    return corrupt(path, "tables outside the image");
  return sb;
}

Result<SquashfsFile> open_squashfs(const std::string& path) {
  SquashfsFile f;
  f.path = path;
  f.fd = BERTH_TRY(open_file(path, O_RDONLY));
  if (::fstat(f.fd.get(), &f.st) != 0) return sys_error("stat", path);
  if (!S_ISREG(f.st.st_mode))
    return make_error("read squashfs", path, "not a regular file", ErrorCode::kInvalidInput);
  char head[kSquashfsSuperblockSize];
  ssize_t n;
  do {
    n = ::pread(f.fd.get(), head, sizeof head, 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return sys_error("read", path);
  f.superblock = BERTH_TRY(check_squashfs_superblock(
      std::string_view(head, static_cast<size_t>(n)), static_cast<uint64_t>(f.st.st_size), path));
  return f;
}

std::string squashfs_key(const struct stat& st) {
  std::string id = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
                   std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
                   std::to_string(st.st_mtim.tv_nsec) + ":" + std::to_string(st.st_ctim.tv_sec) +
                   "." + std::to_string(st.st_ctim.tv_nsec);
  return std::string(digest_hex(sha256_digest(id)).substr(0, 20));
}

Result<nlohmann::json> read_squashfs_image_config(int root_fd, const std::string& image,
                                                  bool* found) {
  *found = false;
  std::string text = BERTH_TRY(read_file_in_root(root_fd, "/.berth/image.json"));
  if (text.empty()) return nlohmann::json::object();
  std::string what = image + ":/.berth/image.json";
  nlohmann::json j = BERTH_TRY(parse_json(text, what));
  if (!j.is_object())
    return make_error("read image metadata", what, "not a JSON object", ErrorCode::kInvalidInput);
  auto version = j.find("schemaVersion");
  if (version == j.end() || !version->is_number_integer() || version->get<int64_t>() != 1)
    return make_error("read image metadata", what, "schemaVersion must be 1",
                      ErrorCode::kUnsupported);
  *found = true;
  auto config = j.find("config");
  if (config == j.end() || config->is_null()) return nlohmann::json::object();
  ImageConfig parsed = BERTH_TRY(parse_image_config(to_text(*config), what));
  return parsed.config;
}

}  // namespace berth
