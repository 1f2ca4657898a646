// image/unsquash.h: a squashfs file extracted into a directory, as a rootless unpack lays it out.
#include "image/unsquash.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "core/fs.h"
#include "image/squash.h"
#include "test_util.h"

namespace berth {
namespace {

class Unsquash : public ::testing::Test {
 protected:
  TempDir tmp_{"unsquash"};
  std::string image_ = tmp_ / "image.sqsh";

  void SetUp() override {
    std::string root = tmp_ / "root";
    tmp_.write("root/etc/motd", "hello\n");
    tmp_.write("root/bin/tool", "#!/bin/sh\n", 0755);
    ASSERT_EQ(::chmod((root + "/bin/tool").c_str(), 04755), 0);
    ASSERT_EQ(::link((root + "/etc/motd").c_str(), (root + "/etc/motd2").c_str()), 0);
    // A symlink out of the root: kept verbatim, never followed while extracting.
    ASSERT_EQ(::symlink("../../../../etc", (root + "/out").c_str()), 0);
    ASSERT_EQ(::mkfifo((root + "/fifo").c_str(), 0640), 0);
    ASSERT_EQ(::mkdir((root + "/ro").c_str(), 0555), 0);
    struct timespec t[2] = {{1600000000, 0}, {1600000000, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, (root + "/etc/motd").c_str(), t, 0), 0);
    auto s = squash_tree(root, R"({"config":{"config":{"Env":["A=1"]}}})", {"gzip", 1}, image_,
                         ::geteuid(), ::getegid());
    ASSERT_TRUE(s.ok()) << s.error().message();
  }
};

TEST_F(Unsquash, LaysTheFileOutAsARootlessUnpackWould) {
  std::string out = tmp_ / "out";
  auto s = unsquash(image_, out);
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->skipped_devices, 0u);
  struct stat a, b;
  ASSERT_EQ(::stat((out + "/etc/motd").c_str(), &a), 0);
  ASSERT_EQ(::stat((out + "/etc/motd2").c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);  // one inode, two names
  EXPECT_EQ(a.st_nlink, 2u);
  EXPECT_EQ(a.st_mtim.tv_sec, 1600000000);
  EXPECT_EQ(a.st_uid, ::geteuid());
  EXPECT_EQ(read_file(out + "/etc/motd").value(), "hello\n");
  ASSERT_EQ(::stat((out + "/bin/tool").c_str(), &a), 0);
  EXPECT_EQ(a.st_mode & 07777, 0755u);  // set-id bits dropped
  ASSERT_EQ(::lstat((out + "/out").c_str(), &a), 0);
  EXPECT_TRUE(S_ISLNK(a.st_mode));
  char target[64] = {};
  ASSERT_GT(::readlink((out + "/out").c_str(), target, sizeof target - 1), 0);
  EXPECT_STREQ(target, "../../../../etc");
  ASSERT_EQ(::lstat((out + "/fifo").c_str(), &a), 0);
  EXPECT_TRUE(S_ISFIFO(a.st_mode));
  EXPECT_EQ(a.st_mode & 0777, 0640u);
  ASSERT_EQ(::stat((out + "/ro").c_str(), &a), 0);
  EXPECT_EQ(a.st_mode & 0777, 0755u);  // u+rwx added, as unpack adds it
  EXPECT_NE(read_file(out + "/.berth/image.json").value().find("A=1"), std::string::npos);
}

TEST_F(Unsquash, AnExistingTargetIsRefused) {
  std::string out = tmp_ / "out";
  ASSERT_EQ(::mkdir(out.c_str(), 0700), 0);
  auto s = unsquash(image_, out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message(), "mkdir " + out + ": exists already");
}

TEST_F(Unsquash, ACorruptFileFailsInOneLineAndLeavesNothing) {
  std::string bad = tmp_ / "bad.sqsh";
  std::string text = read_file(image_).value();
  text.resize(200);  // shorter than its super block says
  tmp_.write("bad.sqsh", text);
  std::string out = tmp_ / "out";
  auto s = unsquash(bad, out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message().find('\n'), std::string::npos);
  EXPECT_NE(s.error().message().find(bad), std::string::npos) << s.error().message();
  struct stat st;
  EXPECT_NE(::lstat(out.c_str(), &st), 0);
}

TEST_F(Unsquash, SparseFilesStaySparse) {
  std::string root = tmp_ / "sparse-root";
  tmp_.write("sparse-root/data", "");
  std::string data = root + "/data";
  constexpr off_t kSize = 64 << 20;
  ASSERT_EQ(::truncate(data.c_str(), kSize), 0);
  {
    UniqueFd fd(::open(data.c_str(), O_WRONLY | O_CLOEXEC));
    ASSERT_EQ(::pwrite(fd.get(), "middle", 6, kSize / 2), 6);
  }
  std::string image = tmp_ / "sparse.sqsh";
  auto s = squash_tree(root, "{}", {"lz4", 0}, image, ::geteuid(), ::getegid());
  ASSERT_TRUE(s.ok()) << s.error().message();
  std::string out = tmp_ / "sparse-out";
  auto u = unsquash(image, out);
  ASSERT_TRUE(u.ok()) << u.error().message();
  struct stat st;
  ASSERT_EQ(::stat((out + "/data").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, kSize);
  EXPECT_LE(st.st_blocks * 512, 1 << 20);  // one block written, the rest holes
  std::string text = read_file(out + "/data").value();
  EXPECT_EQ(text.substr(kSize / 2, 6), "middle");
  EXPECT_EQ(text.find_first_not_of('\0'), static_cast<size_t>(kSize / 2));
}

TEST_F(Unsquash, WritesNoMoreThanItsBoundAndLeavesNothing) {
  std::string root = tmp_ / "big-root";
  std::string noise;
  uint32_t x = 12345;
  for (int i = 0; i < (3 << 20); ++i) {
    x = x * 1103515245 + 12345;
    noise += static_cast<char>(x >> 16);
  }
  tmp_.write("big-root/noise", noise);
  std::string image = tmp_ / "big.sqsh";
  auto s = squash_tree(root, "{}", {"lz4", 0}, image, ::geteuid(), ::getegid());
  ASSERT_TRUE(s.ok()) << s.error().message();
  std::string out = tmp_ / "big-out";
  auto u = unsquash(image, out, 1 << 20);
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.error().message(), "write " + image +
                                     ":/noise: the extraction would write more than 1048576 "
                                     "bytes, the configured extract_limit_mb");
  struct stat st;
  EXPECT_NE(::lstat(out.c_str(), &st), 0);
  // Within the bound (and within the free space when none is given): extracted.
  EXPECT_TRUE(unsquash(image, out).ok());
}

}  // namespace
}  // namespace berth
