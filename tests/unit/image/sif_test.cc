#include "image/sif.h"

#include <gtest/gtest.h>
#include <lzo/lzo1x.h>
#include <sqfs/error.h>

#include <cstring>
#include <string>
#include <vector>

#include "image/sqfs_decompressor.h"

namespace berth {
namespace {

void put32(std::string& b, size_t off, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[off + i] = static_cast<char>(v >> (8 * i));
}
void put64(std::string& b, size_t off, uint64_t v) {
  for (int i = 0; i < 8; ++i) b[off + i] = static_cast<char>(v >> (8 * i));
}

/// A SIF global header: `total` descriptors at 128.
std::string header(uint64_t total) {
  std::string h(kSifHeaderSize, '\0');
  std::memcpy(h.data(), "#!/usr/bin/env run-singularity\n", 31);
  std::memcpy(h.data() + 32, "SIF_MAGIC", 10);
  std::memcpy(h.data() + 42, "01", 3);
  put64(h, 88, total);
  put64(h, 96, 128);
  put64(h, 104, total * kSifDescriptorSize);
  return h;
}

/// One descriptor: a partition of `fstype`, `parttype`, `size` bytes at `offset`.
std::string partition(int32_t fstype, int32_t parttype, uint64_t offset, uint64_t size,
                      bool used = true, int32_t type = 0x4004) {
  std::string d(kSifDescriptorSize, '\0');
  put32(d, 0, static_cast<uint32_t>(type));
  d[4] = used ? 1 : 0;
  put64(d, 17, offset);
  put64(d, 25, size);
  put32(d, 201, static_cast<uint32_t>(fstype));
  put32(d, 205, static_cast<uint32_t>(parttype));
  return d;
}

TEST(Sif, RecognisesTheMagic) {
  EXPECT_TRUE(is_sif(header(1)));
  EXPECT_FALSE(is_sif(std::string(128, 'x')));
  EXPECT_FALSE(is_sif("hsqs"));
}

TEST(Sif, FindsThePrimarySystemPartition) {
  std::string table = partition(1, 2, 0, 0, true, 0x4001) +  // a definition file
                      partition(1, 3, 4096, 100) +           // a data partition
                      partition(1, 2, 8192, 500, false) +    // a free slot
                      partition(1, 2, 8192, 1000);
  auto p = sif_system_partition(table, 4, 9192, "img.sif");
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->offset, 8192u);
  EXPECT_EQ(p->size, 1000u);
  EXPECT_TRUE(p->sif);
}

TEST(Sif, RefusesInOneLineNamingSif) {
  auto msg = [](const auto& r) { return r.ok() ? std::string("ok") : r.error().message(); };
  EXPECT_EQ(msg(sif_descriptor_table(header(48).substr(0, 100), 100, "img.sif")),
            "read squashfs img.sif: SIF file is truncated: 100 bytes, shorter than its global "
            "header");
  std::string h = header(48);
  std::memcpy(h.data() + 42, "02", 3);
  EXPECT_EQ(msg(sif_descriptor_table(h, 100000, "img.sif")),
            "read squashfs img.sif: SIF file version \"02\": only 01 is supported");
  EXPECT_EQ(msg(sif_descriptor_table(header(48), 5000, "img.sif")),
            "read squashfs img.sif: SIF file is corrupt or truncated: its descriptor table (48 "
            "at offset 128) does not fit its 5000 bytes");
  EXPECT_EQ(msg(sif_system_partition(partition(1, 3, 0, 10), 1, 100, "img.sif")),
            "read squashfs img.sif: SIF file has no squashfs system partition");
  EXPECT_EQ(msg(sif_system_partition(partition(5, 2, 0, 10), 1, 100, "img.sif")),
            "read squashfs img.sif: SIF file's system partition is encrypted squashfs: only "
            "squashfs is supported");
  EXPECT_EQ(msg(sif_system_partition(partition(1, 2, 50, 60), 1, 100, "img.sif")),
            "read squashfs img.sif: SIF file is truncated: its squashfs system partition (60 "
            "bytes at offset 50) ends past its 100 bytes");
}

TEST(Sif, ImageConfigSourcesTheEnvScriptsAndRunsTheRunscript) {
  auto c = sif_image_config(true,
                            "#!/bin/sh\nexport PATH=\"/usr/bin:/bin\"\n"
                            "export LANG=\"${LANG:-\"C.UTF-8\"}\"\n",
                            "# custom\nexport A=1\nB='two words'\nexport C=\"$A-x\"\n"
                            "export D=`date`\nexport PATH=/opt/bin\nnot an assignment\n");
  ASSERT_TRUE(c);
  EXPECT_EQ(*c, nlohmann::json::parse(R"({"Entrypoint": ["/bin/sh", "-c", )" +
                                      nlohmann::json(kSifEnvScript).dump() + R"(, "sif"],
      "Cmd": ["/.singularity.d/runscript"],
      "Env": ["PATH=/opt/bin", "LANG=C.UTF-8", "A=1", "B=two words"]})"));
  auto no_runscript = sif_image_config(false, std::nullopt, "export A=1\n");
  ASSERT_TRUE(no_runscript);
  EXPECT_FALSE(no_runscript->contains("Cmd"));
  EXPECT_FALSE(sif_image_config(false, std::nullopt, std::nullopt));
}

TEST(SqfsDecompressor, LzoDecompressesWhatLzo1x999Compressed) {
  ASSERT_EQ(lzo_init(), LZO_E_OK);
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "line " + std::to_string(i % 37) + " of the image\n";
  std::vector<unsigned char> packed(text.size() + text.size() / 16 + 64 + 3);
  std::vector<unsigned char> work(LZO1X_999_MEM_COMPRESS);
  lzo_uint n = packed.size();
  ASSERT_EQ(lzo1x_999_compress(reinterpret_cast<const unsigned char*>(text.data()), text.size(),
                               packed.data(), &n, work.data()),
            LZO_E_OK);
  sqfs_compressor_t* cmp = sqfs_lzo_decompressor_create(131072);
  ASSERT_NE(cmp, nullptr);
  std::vector<sqfs_u8> out(text.size());
  EXPECT_EQ(cmp->do_block(cmp, packed.data(), static_cast<sqfs_u32>(n), out.data(),
                          static_cast<sqfs_u32>(out.size())),
            static_cast<sqfs_s32>(text.size()));
  EXPECT_EQ(std::string(out.begin(), out.end()), text);
  // Too small an output: 0, the interface's "buffer too small"; garbage: corrupt.
  EXPECT_EQ(cmp->do_block(cmp, packed.data(), static_cast<sqfs_u32>(n), out.data(), 100), 0);
  std::vector<sqfs_u8> junk(64, 0xff);
  EXPECT_LT(cmp->do_block(cmp, junk.data(), 64, out.data(), static_cast<sqfs_u32>(out.size())), 0);
  sqfs_compressor_config_t cfg;
  cmp->get_configuration(cmp, &cfg);
  EXPECT_EQ(cfg.id, SQFS_COMP_LZO);
  EXPECT_EQ(cfg.opt.lzo.algorithm, SQFS_LZO1X_999);
  auto* copy = reinterpret_cast<sqfs_compressor_t*>(cmp->base.copy(&cmp->base));
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->do_block(copy, packed.data(), static_cast<sqfs_u32>(n), out.data(),
                           static_cast<sqfs_u32>(out.size())),
            static_cast<sqfs_s32>(text.size()));
  sqfs_destroy(copy);
  sqfs_destroy(cmp);
}

TEST(SqfsDecompressor, NamesACompressorItCannotRead) {
  EXPECT_EQ(squashfs_compressor_unsupported(9),
            "squashfs compressor 9 (unknown) is not supported: Berth reads gzip, lzma, lzo, xz, "
            "lz4 and zstd");
  EXPECT_EQ(squashfs_compressor_unsupported(2, "this libsquashfs was built without it"),
            "squashfs compressor lzma is not supported: this libsquashfs was built without it");
}

TEST(SqfsDecompressor, ALibsquashfsWithoutTheCompressorIsNamed) {
  sqfs_super_t super{};
  super.compression_id = SQFS_COMP_XZ;
  super.block_size = 131072;
  SqfsCompressorFunctions fns{
      [](sqfs_compressor_config_t*, SQFS_COMPRESSOR, size_t, sqfs_u16) { return 0; },
      [](const sqfs_compressor_config_t*, sqfs_compressor_t**) {
        return static_cast<int>(SQFS_ERROR_UNSUPPORTED);
      }};
  auto r = make_squashfs_decompressor(super, nullptr, fns, "read squashfs", "img.sqsh");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(),
            "read squashfs img.sqsh: squashfs compressor xz is not supported: this libsquashfs "
            "was built without it");
  EXPECT_EQ(r.error().code, ErrorCode::kUnsupported);
}

}  // namespace
}  // namespace berth
