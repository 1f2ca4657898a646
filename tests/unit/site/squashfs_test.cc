// The squashfs superblock check, the image metadata reader and the mount key: pure parts of
// `berth run FILE.sqsh` (the mount itself is covered end to end, tests/e2e/test_squashfs_run.py).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "core/fs.h"
#include "runtime/identity.h"
#include "site/squashfs.h"
#include "site/squashfs_mount.h"
#include "test_util.h"

namespace berth {
namespace {

void put16(std::string& b, size_t off, uint16_t v) {
  b[off] = static_cast<char>(v & 0xff);
  b[off + 1] = static_cast<char>(v >> 8);
}
void put32(std::string& b, size_t off, uint32_t v) {
  put16(b, off, static_cast<uint16_t>(v & 0xffff));
  put16(b, off + 2, static_cast<uint16_t>(v >> 16));
}
void put64(std::string& b, size_t off, uint64_t v) {
  put32(b, off, static_cast<uint32_t>(v & 0xffffffff));
  put32(b, off + 4, static_cast<uint32_t>(v >> 32));
}

/// A well-formed superblock of a 4096-byte lz4 image (what mksquashfs -comp lz4 writes).
std::string superblock() {
  std::string b(kSquashfsSuperblockSize, '\0');
  std::memcpy(b.data(), "hsqs", 4);
  put32(b, 4, 18);       // inodes
  put32(b, 12, 131072);  // block size
  put16(b, 20, 5);       // lz4
  put16(b, 22, 17);      // block log
  put16(b, 28, 4);       // version 4.0
  put64(b, 32, 0x20);    // root inode
  put64(b, 40, 4000);    // bytes used
  put64(b, 48, 3900);    // id table
  put64(b, 64, 1000);    // inode table
  put64(b, 72, 2000);    // directory table
  return b;
}

std::string message(const std::string& head, uint64_t size) {
  auto r = check_squashfs_superblock(head, size, "img.sqsh");
  return r.ok() ? "ok" : r.error().message();
}

TEST(SquashfsSuperblock, AcceptsAWellFormedImagePaddedOrNot) {
  auto r = check_squashfs_superblock(superblock(), 4000, "img.sqsh");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->block_size, 131072u);
  EXPECT_EQ(squashfs_compressor_name(r->compression), "lz4");
  EXPECT_EQ(r->bytes_used, 4000u);
  EXPECT_EQ(message(superblock(), 4096), "ok");  // mksquashfs pads to 4 KiB
}

TEST(SquashfsSuperblock, RefusesWhatIsNotSquashfs) {
  EXPECT_EQ(message("", 0),
            "read squashfs img.sqsh: not a squashfs image (no squashfs magic number)");
  EXPECT_EQ(message("\x7f"
                    "ELF and more",
                    4000),
            "read squashfs img.sqsh: not a squashfs image (no squashfs magic number)");
  std::string big_endian = superblock();
  std::memcpy(big_endian.data(), "sqsh", 4);
  EXPECT_EQ(check_squashfs_superblock(big_endian, 4000, "x").error().code,
            ErrorCode::kInvalidInput);
}

TEST(SquashfsSuperblock, RefusesTruncatedImages) {
  EXPECT_EQ(message(superblock().substr(0, 50), 50),
            "read squashfs img.sqsh: truncated squashfs image: 50 bytes, shorter than its "
            "superblock");
  auto r = check_squashfs_superblock(superblock(), 3999, "img.sqsh");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(),
            "read squashfs img.sqsh: truncated squashfs image: it says 4000 bytes, the file has "
            "3999");
  EXPECT_EQ(r.error().code, ErrorCode::kIntegrity);
}

TEST(SquashfsSuperblock, RefusesCorruptFields) {
  std::string b = superblock();
  put16(b, 22, 12);
  EXPECT_EQ(message(b, 4000),
            "read squashfs img.sqsh: corrupt squashfs image: block size 131072 (log 12)");
  b = superblock();
  put32(b, 12, 3000);
  EXPECT_EQ(message(b, 4000),
            "read squashfs img.sqsh: corrupt squashfs image: block size 3000 (log 17)");
  b = superblock();
  put16(b, 20, 9);
  EXPECT_EQ(message(b, 4000),
            "read squashfs img.sqsh: squashfs compressor 9 (unknown) is not supported: Berth reads "
            "gzip, lzma, lzo, xz, lz4 and zstd");
  b = superblock();
  put64(b, 72, 500);  // directory table before the inode table
  EXPECT_EQ(message(b, 4000),
            "read squashfs img.sqsh: corrupt squashfs image: tables outside the image");
  b = superblock();
  put64(b, 48, 5000);  // id table past the image's end, even in a longer file
  EXPECT_EQ(message(b, 8000),
            "read squashfs img.sqsh: corrupt squashfs image: tables outside the image");
  b = superblock();
  put16(b, 28, 3);
  auto r = check_squashfs_superblock(b, 4000, "img.sqsh");
  EXPECT_EQ(r.error().message(),
            "read squashfs img.sqsh: squashfs version 3.0: only 4.0 can be mounted");
  EXPECT_EQ(r.error().code, ErrorCode::kUnsupported);
}

TEST(SquashfsKey, FollowsTheFileVersion) {
  struct stat a = {};
  a.st_dev = 1;
  a.st_ino = 2;
  a.st_size = 3;
  a.st_mtim.tv_sec = 4;
  struct stat b = a;
  EXPECT_EQ(squashfs_key(a), squashfs_key(b));
  EXPECT_EQ(squashfs_key(a), "1-2-3-4.0-0.0");
  b.st_mtim.tv_nsec = 1;
  EXPECT_NE(squashfs_key(a), squashfs_key(b));
  b = a;
  b.st_ino = 7;
  EXPECT_NE(squashfs_key(a), squashfs_key(b));
}

class SquashfsImageConfig : public ::testing::Test {
 protected:
  Result<nlohmann::json> read(bool* found) {
    UniqueFd root(::open(dir_.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    return read_squashfs_image_config(root.get(), "img.sqsh", found);
  }
  void write(const std::string& text) { dir_.write(".berth/image.json", text); }
  TempDir dir_{"sqsh"};
};

TEST_F(SquashfsImageConfig, AbsentFileMeansNoConfig) {
  bool found = true;
  auto r = read(&found);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(found);
  EXPECT_EQ(*r, nlohmann::json::object());
}

TEST_F(SquashfsImageConfig, ReadsTheImageConfigsConfigObject) {
  write(R"({"schemaVersion":1,"reference":"x:1","digest":"sha256:00",
            "config":{"architecture":"amd64","os":"linux",
                      "config":{"Cmd":["sh"],"Env":["A=b"],"WorkingDir":"/w"},
                      "rootfs":{"type":"layers","diff_ids":[]}}})");
  bool found = false;
  auto r = read(&found);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(found);
  EXPECT_EQ((*r)["WorkingDir"], "/w");
  EXPECT_EQ((*r)["Cmd"][0], "sh");
}

TEST_F(SquashfsImageConfig, RefusesAnotherSchemaVersionOrBadJson) {
  bool found = false;
  write(R"({"schemaVersion":2,"config":{}})");
  EXPECT_EQ(read(&found).error().message(),
            "read image metadata img.sqsh:/.berth/image.json: schemaVersion must be 1");
  write("{not json");
  EXPECT_EQ(read(&found).error().message().substr(0, 35), "parse img.sqsh:/.berth/image.json: ");
}

TEST(IdentityAdditions, AreWhatEnsureIdentityWouldAppend) {
  TempDir dir("identity");
  dir.write("etc/passwd", "root:x:0:0:root:/root:/bin/sh");
  dir.write("etc/group", "root:x:0:\n");
  UniqueFd root(::open(dir.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  ContainerSpec spec;
  spec.uid = 4321;
  spec.gid = 4321;
  auto add = identity_additions(root.get(), spec);
  ASSERT_TRUE(add.ok());
  EXPECT_EQ(add->passwd, "\nuser4321:x:4321:4321:user4321:/:/bin/sh\n");
  EXPECT_EQ(add->group, "group4321:x:4321:\n");
  spec.uid = 0;
  spec.gid = 0;
  add = identity_additions(root.get(), spec);
  EXPECT_EQ(add->passwd, "");
  EXPECT_EQ(add->group, "");
}

}  // namespace
}  // namespace berth
