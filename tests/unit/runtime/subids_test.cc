// The subordinate-ID mode's pieces: the subuid parser and map arguments everywhere; the holder
// process, its pid file and walks inside its namespace only as an ordinary user with ranges and
// newuidmap (they skip as root, as in CI, and where the host lacks either).
#include "runtime/subids.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include "core/fs.h"
#include "runtime/root_emulation.h"
#include "test_util.h"

namespace berth {
namespace {

/// Every test of this binary that reaches the mode (a ContainerStore removal refused, an engine
/// run under auto) keeps its holder in a runtime folder of this process's own, killed at the
/// end: a test run leaves no process behind, and parallel test processes do not share one.
class SubidRuntimeFolder : public ::testing::Environment {
 public:
  void SetUp() override {
    if (::getenv("BERTH_RUNTIME_DIR") != nullptr) return;  // the caller chose one
    std::string tmpl = ::testing::TempDir();
    if (tmpl.empty() || tmpl.back() != '/') tmpl += '/';
    tmpl += "berth-unit-run-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) return;  // the default folder then: only litter
    dir_ = tmpl;
    ::setenv("BERTH_RUNTIME_DIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    if (dir_.empty()) return;
    if (pid_t p = live_subid_holder(dir_); p > 0) ::kill(p, SIGKILL);
    (void)remove_tree(dir_);  // best effort: a leftover is only litter
  }

 private:
  std::string dir_;
};
[[maybe_unused]] ::testing::Environment* const kSubidRuntimeFolder =
    ::testing::AddGlobalTestEnvironment(new SubidRuntimeFolder);

TEST(SubidRanges, FindsTheUsersFirstRangeByNameOrNumber) {
  const char* text =
      "# comment\n"
      "alice:100000:65536\n"
      "  bob:200000:1000  \n"
      "1001:300000:65536\n"
      "bob:400000:5\n";
  EXPECT_EQ(find_subid_range(text, "alice", 999), (SubidRange{100000, 65536}));
  EXPECT_EQ(find_subid_range(text, "bob", 999), (SubidRange{200000, 1000}));  // the first
  EXPECT_EQ(find_subid_range(text, "", 1001), (SubidRange{300000, 65536}));
  EXPECT_EQ(find_subid_range(text, "carol", 1002), std::nullopt);
  EXPECT_EQ(find_subid_range("", "alice", 1000), std::nullopt);
}

TEST(SubidRanges, SkipsGarbledLinesAndEmptyRanges) {
  EXPECT_EQ(find_subid_range("alice:100000:0\nalice:5:6\n", "alice", 1), (SubidRange{5, 6}));
  EXPECT_EQ(find_subid_range("alice:x:65536\nalice:1:2:3\nalice:-1:5\n", "alice", 1), std::nullopt);
  EXPECT_EQ(find_subid_range("#alice:1:2\n", "alice", 1), std::nullopt);
}

TEST(SubidRanges, MapArgumentsPutRootOnTheUserAndTheRangeAfter) {
  EXPECT_EQ(subid_map_args(1234, 1001, SubidRange{100000, 65536}),
            (std::vector<std::string>{"1234", "0", "1001", "1", "1", "100000", "65536"}));
}

TEST(SubidRanges, ModesAreNamed) {
  EXPECT_EQ(parse_root_emulation("subids"), RootEmulation::kSubids);
  EXPECT_EQ(parse_root_emulation("auto"), RootEmulation::kAuto);
  EXPECT_EQ(root_emulation_name(RootEmulation::kSubids), "subids");
  EXPECT_EQ(root_emulation_name(RootEmulation::kAuto), "auto");
  EXPECT_EQ(parse_root_emulation("Subids"), std::nullopt);
}

/// Sets an environment variable for one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* v = ::getenv(name)) old_ = v;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(SubidSetup, SaysWhatIsMissing) {
  if (::geteuid() == 0) {
    auto s = subid_setup();
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().message(),
              "map subordinate IDs root: berth runs as root: the container's IDs are the host's "
              "already");
    return;
  }
  TempDir tmp("subids");
  {
    ScopedEnv tool("BERTH_NEWUIDMAP", tmp / "missing");
    auto s = subid_setup();
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().message(),
              "engine BERTH_NEWUIDMAP=" + (tmp / "missing") + ": not an executable file");
  }
  std::string empty = tmp.write("subuid", "# nobody has ranges here\nsomeone-else:1:2\n");
  ScopedEnv uid_tool("BERTH_NEWUIDMAP", "/bin/true");
  ScopedEnv gid_tool("BERTH_NEWGIDMAP", "/bin/true");
  ScopedEnv ranges("BERTH_SUBUID", empty);
  auto s = subid_setup();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(s.error().message().starts_with("map subordinate IDs " + empty + ": no range for "))
      << s.error().message();
  std::string blank = tmp.write("blank", "\n");
  ScopedEnv no_ranges("BERTH_SUBUID", blank);
  s = subid_setup();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message(), "map subordinate IDs " + blank + ": no ranges in it");
}

/// The holder's tests: an ordinary user with ranges and the helpers, in a runtime folder of
/// the test's own (its holder killed at the end).
class SubidHolder : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() == 0) GTEST_SKIP() << "as root the mode is off (the IDs are the host's)";
    auto s = subid_setup();
    if (!s.ok()) GTEST_SKIP() << "no subordinate IDs here: " << s.error().message();
    setup_ = *s;
  }
  void TearDown() override {
    if (pid_t p = live_subid_holder(tmp_.path); p > 0) ::kill(p, SIGKILL);
  }
  TempDir tmp_{"subids"};
  SubidSetup setup_;
};

ino_t inode_of(int fd) {
  struct stat st;
  return ::fstat(fd, &st) == 0 ? st.st_ino : 0;
}

TEST_F(SubidHolder, IsStartedOnceFoundAfterAndRemadeWhenGone) {
  EXPECT_FALSE(live_subid_namespace(tmp_.path).valid());
  auto ns = subid_namespace(tmp_.path, setup_);
  ASSERT_TRUE(ns.ok()) << ns.error().message();
  pid_t first = live_subid_holder(tmp_.path);
  ASSERT_GT(first, 0);
  auto again = subid_namespace(tmp_.path, setup_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(inode_of(again->get()), inode_of(ns->get()));
  EXPECT_EQ(live_subid_holder(tmp_.path), first);
  // The holder holds nothing of its maker's but the namespace: stdio on /dev/null.
  char link[64] = {};
  std::string fd1 = "/proc/" + std::to_string(first) + "/fd/1";
  ASSERT_GT(::readlink(fd1.c_str(), link, sizeof link - 1), 0);
  EXPECT_STREQ(link, "/dev/null");
  // Killed (or a reboot): the pid file no longer names a live holder; the next use remakes it.
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  for (int i = 0; i < 200 && live_subid_namespace(tmp_.path).valid(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_FALSE(live_subid_namespace(tmp_.path).valid());
  auto remade = subid_namespace(tmp_.path, setup_);
  ASSERT_TRUE(remade.ok()) << remade.error().message();
  EXPECT_NE(live_subid_holder(tmp_.path), first);
  EXPECT_NE(inode_of(remade->get()), inode_of(ns->get()));
}

TEST_F(SubidHolder, APidFileNamingAnotherProcessIsNotTrusted) {
  // This very process, with its true start time: its user namespace is not the user's own.
  auto stat = read_file("/proc/self/stat");
  ASSERT_TRUE(stat.ok());
  tmp_.write("subids.pid", std::to_string(::getpid()) + " 1\n");
  EXPECT_FALSE(live_subid_namespace(tmp_.path).valid());
  tmp_.write("subids.pid", "garbage\n");
  EXPECT_FALSE(live_subid_namespace(tmp_.path).valid());
  auto ns = subid_namespace(tmp_.path, setup_);  // replaced by a real one
  ASSERT_TRUE(ns.ok()) << ns.error().message();
  EXPECT_GT(live_subid_holder(tmp_.path), 0);
}

TEST_F(SubidHolder, WalksRunAsRootOfTheFullMappingAndReportTheirErrors) {
  auto ns = subid_namespace(tmp_.path, setup_);
  ASSERT_TRUE(ns.ok()) << ns.error().message();
  std::string maps = tmp_ / "maps";
  Status st = in_subid_namespace(ns->get(), [&]() -> Status {
    if (::getuid() != 0) return make_error("walk", "uid", "not root inside");
    // A file of a subordinate ID, then the walk's own error.
    std::string file = tmp_ / "owned";
    BERTH_CHECK(write_file_atomic(file, "x"));
    if (::chown(file.c_str(), 42, 42) != 0) return sys_error("walk", file);
    BERTH_CHECK(write_file_atomic(maps, BERTH_TRY(read_file("/proc/self/uid_map"))));
    return sys_error("walk", "the end", EXDEV);
  });
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(), "walk the end: Invalid cross-device link");
  EXPECT_EQ(st.error().sys_errno, EXDEV);
  struct stat owned;
  ASSERT_EQ(::stat((tmp_ / "owned").c_str(), &owned), 0);
  EXPECT_EQ(owned.st_uid, setup_.uids.start + 41);  // 42 inside: the range's 42nd ID
  auto text = read_file(maps);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find(std::to_string(setup_.uids.start)), std::string::npos) << *text;
  // A folder of that ID, 0700 with a file in it: refused here, removed through the namespace.
  ASSERT_TRUE(in_subid_namespace(ns->get(), [&]() -> Status {
                BERTH_CHECK(make_dirs(tmp_ / "tree/partial", 0700));
                BERTH_CHECK(write_file_atomic(tmp_ / "tree/partial/x", "x"));
                if (::chown((tmp_ / "tree/partial/x").c_str(), 42, 42) != 0 ||
                    ::chown((tmp_ / "tree/partial").c_str(), 42, 42) != 0)
                  return sys_error("walk", "chown");
                return {};
              }).ok());
  EXPECT_FALSE(remove_tree(tmp_ / "tree").ok());
  ScopedEnv dir("BERTH_RUNTIME_DIR", tmp_.path);  // remove_tree_mapped finds this holder
  Status removed = remove_tree_mapped(tmp_ / "tree");
  EXPECT_TRUE(removed.ok()) << removed.error().message();
  EXPECT_FALSE(path_exists(tmp_ / "tree"));
  EXPECT_TRUE(remove_tree_mapped(tmp_ / "owned").ok());
}

}  // namespace
}  // namespace berth
