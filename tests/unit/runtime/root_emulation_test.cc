// The root-emulation filter installed in a forked copy of this process (no_new_privs lets an
// unprivileged process install one; as root it works the same), and its apt drop-in.
#include "runtime/root_emulation.h"

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "core/fs.h"
#include "test_util.h"

namespace berth {
namespace {

namespace fs = std::filesystem;

/// Runs `body` in a fork under the filter; its exit status (0: every check held), or 100+
/// when the filter could not be installed.
template <class Body>
int under_filter(Body body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ::_exit(100);
    if (install_root_emulation() != 0) ::_exit(101);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200 + WTERMSIG(status);
}

class RootEmulationFilter : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!root_emulation_supported()) GTEST_SKIP() << "no filter for this architecture";
  }
  TempDir tmp_{"rootemu"};
};

TEST_F(RootEmulationFilter, IsSmallAndNamed) {
  EXPECT_GT(root_emulation_filter_length(), 10U);
  EXPECT_LT(root_emulation_filter_length(), 128U);
  EXPECT_EQ(parse_root_emulation("seccomp"), RootEmulation::kSeccomp);
  EXPECT_EQ(parse_root_emulation("none"), RootEmulation::kNone);
  EXPECT_EQ(parse_root_emulation("fake"), std::nullopt);
  EXPECT_EQ(root_emulation_name(RootEmulation::kSeccomp), "seccomp");
  EXPECT_EQ(root_emulation_name(RootEmulation::kNone), "none");
}

#if defined(__x86_64__)
// Every call number of both architectures, through the program itself: exactly the listed
// calls are faked, mknod only for devices, x32 and unknown architectures untouched.
TEST_F(RootEmulationFilter, EveryCallNumberGetsTheRightVerdict) {
  const uint64_t none[6] = {};
  const uint64_t chr_at1[6] = {0, S_IFCHR | 0600, 0, 0, 0, 0};
  const uint64_t fifo_at1[6] = {0, S_IFIFO | 0600, 0, 0, 0, 0};
  const uint64_t blk_at2[6] = {0, 0, S_IFBLK | 0600, 0, 0, 0};
  const uint64_t reg_at2[6] = {0, 0, S_IFREG | 0600, 0, 0, 0};
  struct Arch {
    uint32_t audit;
    std::set<uint32_t> fake;
    uint32_t mknod, mknodat;
  };
  const Arch archs[] = {
      {AUDIT_ARCH_X86_64,
       {92, 93, 94, 260, 105, 106, 113, 114, 117, 119, 122, 123, 116},  // chown .. setgroups
       133,
       259},
      {AUDIT_ARCH_I386,
       {182, 95,  16,  298, 23,  46,  70,  71,  164, 170, 138, 139, 81,  // 16-bit IDs
        212, 207, 198, 213, 214, 203, 204, 208, 210, 215, 216, 206},     // 32-bit IDs
       14,
       297},
  };
  using V = RootEmulationVerdict;
  for (const Arch& a : archs) {
    for (uint32_t nr = 0; nr < 1024; ++nr) {
      SCOPED_TRACE(testing::Message()
                   << "arch " << std::hex << a.audit << std::dec << " nr " << nr);
      if (nr == a.mknod) {
        EXPECT_EQ(root_emulation_verdict(a.audit, nr, chr_at1), V::kFake);
        EXPECT_EQ(root_emulation_verdict(a.audit, nr, fifo_at1), V::kAllow);
      } else if (nr == a.mknodat) {
        EXPECT_EQ(root_emulation_verdict(a.audit, nr, blk_at2), V::kFake);
        EXPECT_EQ(root_emulation_verdict(a.audit, nr, reg_at2), V::kAllow);
      } else {
        EXPECT_EQ(root_emulation_verdict(a.audit, nr, none),
                  a.fake.count(nr) != 0 ? V::kFake : V::kAllow);
      }
    }
  }
  EXPECT_EQ(root_emulation_verdict(AUDIT_ARCH_X86_64, 0x40000000U | 92, none), V::kAllow);  // x32
  EXPECT_EQ(root_emulation_verdict(AUDIT_ARCH_AARCH64, 146, none), V::kAllow);  // not this host's
}
#endif

TEST_F(RootEmulationFilter, SetIdCallsSucceedAndChangeNothing) {
  uid_t uid = ::getuid();
  gid_t gid = ::getgid();
  EXPECT_EQ(under_filter([&] {
              gid_t groups[1] = {4242};
              if (::setgroups(1, groups) != 0) return 1;
              if (::setresgid(4242, 4242, 4242) != 0) return 2;
              if (::setresuid(4242, 4242, 4242) != 0) return 3;
              if (::setuid(4243) != 0 || ::setgid(4243) != 0) return 4;
              if (::setreuid(4244, 4244) != 0 || ::setregid(4244, 4244) != 0) return 5;
              if (::getuid() != uid || ::geteuid() != uid || ::getgid() != gid) return 6;
              return 0;
            }),
            0);
}

TEST_F(RootEmulationFilter, ChownSucceedsAndLeavesTheOwner) {
  std::string file = tmp_.path + "/f";
  std::ofstream(file) << "x";
  struct stat before;
  ASSERT_EQ(::stat(file.c_str(), &before), 0);
  EXPECT_EQ(under_filter([&] {
              if (::chown(file.c_str(), 4242, 4242) != 0) return 1;
              if (::lchown(file.c_str(), 4242, 4242) != 0) return 2;
              if (::fchownat(AT_FDCWD, file.c_str(), 4242, 4242, 0) != 0) return 3;
              int fd = ::open(file.c_str(), O_RDONLY);
              if (fd < 0 || ::fchown(fd, 4242, 4242) != 0) return 4;
              return 0;
            }),
            0);
  struct stat after;
  ASSERT_EQ(::stat(file.c_str(), &after), 0);
  EXPECT_EQ(after.st_uid, before.st_uid);
  EXPECT_EQ(after.st_gid, before.st_gid);
}

TEST_F(RootEmulationFilter, DeviceNodesAreFakedOtherNodesMade) {
  std::string dev = tmp_.path + "/null", fifo = tmp_.path + "/fifo";
  EXPECT_EQ(under_filter([&] {
              if (::mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) return 1;
              if (::mknodat(AT_FDCWD, dev.c_str(), S_IFBLK | 0600, makedev(7, 0)) != 0) return 2;
              if (::mknod(fifo.c_str(), S_IFIFO | 0600, 0) != 0) return 3;
              return 0;
            }),
            0);
  EXPECT_FALSE(fs::exists(fs::symlink_status(dev)));
  EXPECT_TRUE(fs::is_fifo(fifo));
}

TEST_F(RootEmulationFilter, OtherCallsRunAsBefore) {
  EXPECT_EQ(under_filter([&] {
              // A failing call still fails, with its own errno.
              if (::open("/nonexistent/berth", O_RDONLY) != -1 || errno != ENOENT) return 1;
              if (::getpid() <= 0) return 2;
              return 0;
            }),
            0);
}

TEST(RootEmulationAptDropIn, WrittenOnceWhereAptIsAndResolvedInsideTheRoot) {
  TempDir tmp("rootemu-apt");
  std::string root = tmp.path + "/root";
  fs::create_directories(root + "/etc");
  UniqueFd fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  ASSERT_TRUE(prepare_root_emulation(fd.get()).ok());  // no apt: nothing
  EXPECT_FALSE(fs::exists(root + "/etc/apt"));

  // A symlink leading out of the root is followed inside it: nothing lands outside.
  fs::create_directories(tmp.path + "/outside/apt.conf.d");
  fs::create_directories(root + "/etc/apt");
  fs::create_symlink(tmp.path + "/outside/apt.conf.d", root + "/etc/apt/apt.conf.d");
  ASSERT_TRUE(prepare_root_emulation(fd.get()).ok());
  EXPECT_TRUE(fs::is_empty(tmp.path + "/outside/apt.conf.d"));

  fs::remove(root + "/etc/apt/apt.conf.d");
  fs::create_directories(root + "/etc/apt/apt.conf.d");
  ASSERT_TRUE(prepare_root_emulation(fd.get()).ok());
  std::ifstream in(root + kAptDropIn);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), kAptDropInText);
  std::ofstream(root + kAptDropIn) << "// the user's edit\n";
  ASSERT_TRUE(prepare_root_emulation(fd.get()).ok());  // an existing file is left alone
  std::ifstream again(root + kAptDropIn);
  std::stringstream kept;
  kept << again.rdbuf();
  EXPECT_EQ(kept.str(), "// the user's edit\n");
  retire_root_emulation(fd.get());  // the subids mode: only Berth's own text goes
  EXPECT_TRUE(fs::exists(root + kAptDropIn));
  std::ofstream(root + kAptDropIn, std::ios::trunc) << kAptDropInText;
  retire_root_emulation(fd.get());
  EXPECT_FALSE(fs::exists(root + kAptDropIn));
  EXPECT_TRUE(fs::exists(root + "/etc/apt/apt.conf.d"));
  retire_root_emulation(fd.get());  // none: nothing to do
}

}  // namespace
}  // namespace berth
