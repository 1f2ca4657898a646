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

}  // namespace
}  // namespace berth
