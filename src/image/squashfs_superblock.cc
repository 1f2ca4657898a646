#include "image/squashfs_superblock.h"

#include <iterator>

#include "image/sqfs_decompressor.h"

namespace berth {
namespace {

constexpr uint32_t kMagic = 0x73717368;  // "hsqs" on disk: squashfs is little-endian

uint16_t le16(std::string_view b, size_t off) {
  return static_cast<uint16_t>(static_cast<uint8_t>(b[off]) | static_cast<uint8_t>(b[off + 1])
                                                                  << 8);
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
    return make_error("read squashfs", path, squashfs_compressor_unsupported(sb.compression),
                      ErrorCode::kUnsupported);
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

}  // namespace berth
