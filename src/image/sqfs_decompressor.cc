#include "image/sqfs_decompressor.h"

#include <lzo/lzo1x.h>
#include <sqfs/block.h>
#include <sqfs/error.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "image/sqfs_errors.h"
#include "image/squashfs_superblock.h"

namespace berth {
namespace {

/// squashfs-tools' lzo options (lzo_wrapper.h), two little-endian 32-bit words in an
/// uncompressed metadata block right after the superblock, written only when not the default.
constexpr uint32_t kLzoDefaultAlgorithm = SQFS_LZO1X_999;
constexpr uint32_t kLzoDefaultLevel = 8;

struct LzoDecompressor {
  sqfs_compressor_t base;  // first: libsquashfs casts between the two
  uint32_t block_size;
  uint32_t algorithm;
  uint32_t level;
};

uint32_t le32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

void lzo_destroy(sqfs_object_t* obj) {
  std::free(obj);  // NOLINT(cppcoreguidelines-no-malloc): made by lzo_new(), plain data
}

sqfs_object_t* lzo_copy(const sqfs_object_t* orig);

LzoDecompressor* lzo_new() {
  // calloc: the object is plain data, and libsquashfs destroys it through base.destroy.
  auto* l = static_cast<LzoDecompressor*>(std::calloc(1, sizeof(LzoDecompressor)));  // NOLINT
  return l;
}

void lzo_get_configuration(const sqfs_compressor_t* cmp, sqfs_compressor_config_t* cfg) {
  const auto* l = reinterpret_cast<const LzoDecompressor*>(cmp);
  std::memset(cfg, 0, sizeof *cfg);
  cfg->id = SQFS_COMP_LZO;
  cfg->flags = SQFS_COMP_FLAG_UNCOMPRESS;
  cfg->block_size = l->block_size;
  cfg->level = l->level;
  cfg->opt.lzo.algorithm = static_cast<sqfs_u16>(l->algorithm);
}

int lzo_write_options(sqfs_compressor_t*, sqfs_file_t*) {
  return SQFS_ERROR_UNSUPPORTED;  // a decompressor only
}

/// Reads the options block after the superblock. Lenient on purpose: the values steer only
/// the compression, and the kernel's squashfs reads any lzo image without looking at them.
int lzo_read_options(sqfs_compressor_t* cmp, sqfs_file_t* file) {
  auto* l = reinterpret_cast<LzoDecompressor*>(cmp);
  unsigned char block[2 + 8];
  int r = file->read_at(file, kSquashfsSuperblockSize, block, sizeof block);
  if (r != 0) return r;
  uint16_t header = static_cast<uint16_t>(block[0] | block[1] << 8);
  if ((header & 0x7fff) == 8 && (header & 0x8000) != 0) {
    l->algorithm = le32(block + 2);
    l->level = le32(block + 6);
    return 0;
  }
  // A compressed options block (squashfs-tools never writes one): decompress it.
  uint16_t stored = header & 0x7fff;
  if ((header & 0x8000) != 0 || stored == 0 || stored > SQFS_META_BLOCK_SIZE)
    return SQFS_ERROR_CORRUPTED;
  unsigned char packed[SQFS_META_BLOCK_SIZE];
  if ((r = file->read_at(file, kSquashfsSuperblockSize + 2, packed, stored)) != 0) return r;
  unsigned char opts[SQFS_META_BLOCK_SIZE];
  lzo_uint n = sizeof opts;
  if (lzo1x_decompress_safe(packed, stored, opts, &n, nullptr) != LZO_E_OK || n != 8)
    return SQFS_ERROR_CORRUPTED;
  l->algorithm = le32(opts);
  l->level = le32(opts + 4);
  return 0;
}

sqfs_s32 lzo_do_block(sqfs_compressor_t*, const sqfs_u8* in, sqfs_u32 size, sqfs_u8* out,
                      sqfs_u32 outsize) {
  lzo_uint n = outsize;
  int r = lzo1x_decompress_safe(in, size, out, &n, nullptr);
  if (r == LZO_E_OUTPUT_OVERRUN) return 0;  // the interface's "output buffer too small"
  if (r != LZO_E_OK) return SQFS_ERROR_CORRUPTED;
  return static_cast<sqfs_s32>(n);
}

void lzo_init_object(LzoDecompressor* l) {
  l->base.base.destroy = lzo_destroy;
  l->base.base.copy = lzo_copy;
  l->base.get_configuration = lzo_get_configuration;
  l->base.write_options = lzo_write_options;
  l->base.read_options = lzo_read_options;
  l->base.do_block = lzo_do_block;
}

sqfs_object_t* lzo_copy(const sqfs_object_t* orig) {
  LzoDecompressor* l = lzo_new();
  if (!l) return nullptr;
  std::memcpy(l, orig, sizeof *l);
  return &l->base.base;
}

}  // namespace

sqfs_compressor_t* sqfs_lzo_decompressor_create(uint32_t block_size) {
  // lzo_init() checks that the library was built for this ABI; once per process.
  static const bool ready = lzo_init() == LZO_E_OK;
  if (!ready) return nullptr;
  LzoDecompressor* l = lzo_new();
  if (!l) return nullptr;
  lzo_init_object(l);
  l->block_size = block_size;
  l->algorithm = kLzoDefaultAlgorithm;
  l->level = kLzoDefaultLevel;
  return &l->base;
}

std::string squashfs_compressor_unsupported(uint16_t id, const std::string& why) {
  std::string_view name = squashfs_compressor_name(id);
  std::string named = name == "unknown" ? std::to_string(id) + " (unknown)" : std::string(name);
  return "squashfs compressor " + named + " is not supported: " +
         (why.empty() ? std::string("Berth reads ") + kSquashfsReadableCompressors : why);
}

Result<sqfs_compressor_t*> make_squashfs_decompressor(const sqfs_super_t& super, sqfs_file_t* file,
                                                      const SqfsCompressorFunctions& fns, Op op,
                                                      const std::string& path) {
  uint16_t id = super.compression_id;
  std::string name(squashfs_compressor_name(id));
  if (id == SQFS_COMP_LZO) {
    sqfs_compressor_t* cmp = sqfs_lzo_decompressor_create(super.block_size);
    if (!cmp)
      return make_error(
          op, path, "squashfs compressor lzo: " + std::string(sqfs_error_text(SQFS_ERROR_ALLOC)));
    if ((super.flags & SQFS_FLAG_COMPRESSOR_OPTIONS) != 0) {
      int r = cmp->read_options(cmp, file);
      if (r != 0) {
        sqfs_destroy(cmp);
        return make_error(
            op, path, "squashfs compressor lzo: its options: " + std::string(sqfs_error_text(r)),
            ErrorCode::kIntegrity);
      }
    }
    return cmp;
  }
  if (name == "unknown")
    return make_error(op, path, squashfs_compressor_unsupported(id), ErrorCode::kUnsupported);
  sqfs_compressor_config_t cfg;
  int r = fns.config_init(&cfg, static_cast<SQFS_COMPRESSOR>(id), super.block_size,
                          SQFS_COMP_FLAG_UNCOMPRESS);
  sqfs_compressor_t* cmp = nullptr;
  if (r == 0) r = fns.create(&cfg, &cmp);
  if (r == SQFS_ERROR_UNSUPPORTED)
    return make_error(op, path,
                      squashfs_compressor_unsupported(id, "this libsquashfs was built without it"),
                      ErrorCode::kUnsupported);
  if (r != 0)
    return make_error(op, path, "squashfs compressor " + name + ": " + sqfs_error_text(r));
  return cmp;
}

}  // namespace berth
