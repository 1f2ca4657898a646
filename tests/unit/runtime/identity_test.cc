#include "runtime/identity.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>

#include "core/fs.h"
#include "test_util.h"

namespace berth {
namespace {

namespace fs = std::filesystem;

struct PasswdCase {
  std::string before;
  uid_t uid;
  gid_t gid;
  std::string name, home;
  std::string after;
};

TEST(Identity, PasswdWithUser) {
  const std::string base = "root:x:0:0:root:/root:/bin/bash\nbin:x:1:1:bin:/bin:/sbin/nologin\n";
  const PasswdCase cases[] = {
      // present by uid: unchanged
      {base, 0, 0, "root", "/root", base},
      {base, 1, 1, "other", "/x", base},
      // missing: appended
      {base, 1000, 1000, "alice", "/home/alice",
       base + "alice:x:1000:1000:alice:/home/alice:/bin/sh\n"},
      // name taken by another uid: a made-up name
      {base, 1000, 100, "bin", "/h", base + "user1000:x:1000:100:user1000:/h:/bin/sh\n"},
      // no name, no home
      {base, 4242, 4242, "", "", base + "user4242:x:4242:4242:user4242:/:/bin/sh\n"},
      // empty file; root's home defaults to /root
      {"", 0, 0, "root", "", "root:x:0:0:root:/root:/bin/sh\n"},
      // no trailing newline, comments and blank lines
      {"# c\n\nroot:x:0:0::/root:/bin/sh", 5, 5, "u", "/u",
       "# c\n\nroot:x:0:0::/root:/bin/sh\nu:x:5:5:u:/u:/bin/sh\n"},
      // a uid that only prefixes another does not count
      {"a:x:10000:1::/:/bin/sh\n", 1000, 1, "b", "/",
       "a:x:10000:1::/:/bin/sh\nb:x:1000:1:b:/:/bin/sh\n"},
  };
  for (const PasswdCase& c : cases)
    EXPECT_EQ(passwd_with_user(c.before, c.uid, c.gid, c.name, c.home), c.after) << c.name;
}

TEST(Identity, GroupWithGroup) {
  const std::string base = "root:x:0:\nusers:x:100:alice,bob\n";
  EXPECT_EQ(group_with_group(base, 100, "x"), base);
  EXPECT_EQ(group_with_group(base, 1000, "alice"), base + "alice:x:1000:\n");
  EXPECT_EQ(group_with_group(base, 1000, "users"), base + "group1000:x:1000:\n");
  EXPECT_EQ(group_with_group("", 7, ""), "group7:x:7:\n");
}

class IdentityFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path;
    root_ = dir_ + "/root";
    fs::create_directories(root_);
  }
  Status ensure(const ContainerSpec& s) {
    UniqueFd fd(::open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    return ensure_identity(fd.get(), s);
  }
  TempDir tmp_{"identity"};
  std::string dir_, root_;
};

TEST_F(IdentityFiles, CreatesEtcWhenMissing) {
  ContainerSpec s;
  ASSERT_TRUE(ensure(s));
  EXPECT_EQ(slurp(root_ + "/etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n");
  EXPECT_EQ(slurp(root_ + "/etc/group"), "root:x:0:\n");
  ASSERT_TRUE(ensure(s));  // idempotent
  EXPECT_EQ(slurp(root_ + "/etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n");
}

TEST_F(IdentityFiles, WorksFromTheCallersCopyOfTheFiles) {
  // berth run read both files to resolve the user: the engine appends to what it was given
  // (here: the user is already there), without reading them again.
  fs::create_directories(root_ + "/etc");
  { std::ofstream(root_ + "/etc/passwd") << "root:x:0:0:root:/root:/bin/sh\n"; }
  { std::ofstream(root_ + "/etc/group") << "root:x:0:\n"; }
  ContainerSpec s;
  s.uid = 1234;
  s.gid = 1234;
  s.user_name = "u";
  s.passwd = "root:x:0:0:root:/root:/bin/sh\nu:x:1234:1234::/:/bin/sh\n";
  s.group = "root:x:0:\nu:x:1234:\n";
  ASSERT_TRUE(ensure(s));
  EXPECT_EQ(slurp(root_ + "/etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n");
  EXPECT_EQ(slurp(root_ + "/etc/group"), "root:x:0:\n");
  s.passwd.reset();  // unset: the files are read, and the user appended
  s.group.reset();
  ASSERT_TRUE(ensure(s));
  EXPECT_EQ(slurp(root_ + "/etc/passwd"),
            "root:x:0:0:root:/root:/bin/sh\nu:x:1234:1234:u:/:/bin/sh\n");
}

TEST_F(IdentityFiles, AbsoluteSymlinkStaysInsideRoot) {
  // /etc -> /outside in the image: written to the root's /outside, not the host's.
  fs::create_directories(root_ + "/outside");
  fs::create_symlink("/outside", root_ + "/etc");
  ContainerSpec s;
  s.uid = 1234;
  s.gid = 1234;
  s.user_name = "u";
  s.home = "/home/u";
  ASSERT_TRUE(ensure(s));
  EXPECT_EQ(slurp(root_ + "/outside/passwd"), "u:x:1234:1234:u:/home/u:/bin/sh\n");
  EXPECT_EQ(slurp(root_ + "/outside/group"), "u:x:1234:\n");
}

TEST_F(IdentityFiles, PasswdThatIsNotAPlainSmallFileIsRefusedWithoutWaiting) {
  // A FIFO without a writer once made every run wait forever; a huge file is not read.
  fs::create_directories(root_ + "/etc");
  ASSERT_EQ(::mkfifo((root_ + "/etc/passwd").c_str(), 0644), 0);
  auto result = std::async(std::launch::async, [this] { return ensure(ContainerSpec{}); });
  if (result.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    ADD_FAILURE() << "reading a FIFO /etc/passwd blocked";
    std::_Exit(1);  // the blocked reader cannot be joined
  }
  Status st = result.get();
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().message(), "read /etc/passwd: not a regular file");

  fs::remove(root_ + "/etc/passwd");
  { std::ofstream(root_ + "/etc/passwd") << "root:x:0:0:root:/root:/bin/sh\n"; }
  ASSERT_EQ(::truncate((root_ + "/etc/group").c_str(), 0), -1);  // no group file yet
  std::ofstream(root_ + "/etc/group").close();
  ASSERT_EQ(::truncate((root_ + "/etc/group").c_str(), off_t{1} << 32), 0);  // 4 GiB, sparse
  st = ensure(ContainerSpec{});
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().message(),
            "read /etc/group: file too large (4294967296 bytes; at most 16 MiB)");
}

}  // namespace
}  // namespace berth
