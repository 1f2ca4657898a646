// The small core modules: strings, environment lists, directory listings, ELF reading,
// JSON field reads, paths made inside a root, the scope guard and the forwarded-signal table.
#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "core/dir.h"
#include "core/elf.h"
#include "core/env_list.h"
#include "core/fs.h"
#include "core/helper_path.h"
#include "core/json.h"
#include "core/root_path.h"
#include "core/scope_guard.h"
#include "core/signals.h"
#include "core/strings.h"
#include "test_util.h"

namespace berth {
namespace {

using Views = std::vector<std::string_view>;
using Strings = std::vector<std::string>;

TEST(HelperPath, BesideTheBinaryFirstThenTheInstallsHelperFolder) {
  EXPECT_EQ(helper_candidates("/opt/b/bin", "berth-squashfs"),
            (Strings{"/opt/b/bin/berth-squashfs", "/opt/b/bin/../libexec/berth/berth-squashfs"}));
  EXPECT_EQ(
      helper_candidates("/usr/bin/", "berth-slurm-client"),
      (Strings{"/usr/bin/berth-slurm-client", "/usr/bin/../libexec/berth/berth-slurm-client"}));
  EXPECT_EQ(helper_candidates("", "x"), (Strings{"x", "../libexec/berth/x"}));
}

TEST(Strings, TrimDropsAsciiSpaceAtBothEnds) {
  EXPECT_EQ(trim("  a b \t\r\n"), "a b");
  EXPECT_EQ(trim("\v\fx\f"), "x");
  EXPECT_EQ(trim("   "), "");
  EXPECT_EQ(trim(""), "");
  EXPECT_EQ(trim("x"), "x");
  std::string s = " mid ";
  EXPECT_EQ(trim(s).data(), s.data() + 1);  // a view into the argument
}

TEST(Strings, LowerOnlyTouchesAsciiLetters) {
  EXPECT_EQ(lower("GPU-AbC-09_Z"), "gpu-abc-09_z");
  EXPECT_EQ(lower("\xC3\x89t\xC3\xA9"), "\xC3\x89t\xC3\xA9");  // UTF-8 "Été": bytes kept
}

TEST(Strings, SplitKeepsEveryPiece) {
  EXPECT_EQ(split("a::b", ':'), (Views{"a", "", "b"}));
  EXPECT_EQ(split("", ':'), (Views{""}));
  EXPECT_EQ(split(":", ':'), (Views{"", ""}));
  EXPECT_EQ(split("one", ':'), (Views{"one"}));
}

TEST(Strings, SplitLinesEndsAtTheFinalNewline) {
  EXPECT_EQ(split_lines("a\n\nb\n"), (Views{"a", "", "b"}));
  EXPECT_EQ(split_lines("a\nb"), (Views{"a", "b"}));
  EXPECT_EQ(split_lines("\n"), (Views{""}));
  EXPECT_EQ(split_lines(""), Views{});
}

TEST(Strings, SplitTrimmedTrimsEachPieceAndKeepsEmptyOnes) {
  EXPECT_EQ(split_trimmed(" 0, 1 ,,GPU-x ", ','), (Strings{"0", "1", "", "GPU-x"}));
  EXPECT_EQ(split_trimmed("", ','), (Strings{""}));
}

TEST(Strings, IsLowerHex) {
  EXPECT_TRUE(is_lower_hex("0123456789abcdef"));
  EXPECT_TRUE(is_lower_hex(""));
  EXPECT_FALSE(is_lower_hex("ABCDEF"));
  EXPECT_FALSE(is_lower_hex("abcg"));
  EXPECT_FALSE(is_lower_hex("ab:cd"));
}

TEST(Strings, BasenameOf) {
  EXPECT_EQ(basename_of("/usr/lib/libcuda.so.1"), "libcuda.so.1");
  EXPECT_EQ(basename_of("libcuda.so"), "libcuda.so");
  EXPECT_EQ(basename_of("/dir/"), "");
  EXPECT_EQ(basename_of(""), "");
}

TEST(Strings, IsUnderIsStrictAndComponentWise) {
  EXPECT_TRUE(is_under("/run/berth/x", "/run/berth"));
  EXPECT_FALSE(is_under("/run/berth", "/run/berth"));
  EXPECT_FALSE(is_under("/run/berthx", "/run/berth"));
  EXPECT_FALSE(is_under("/run", "/run/berth"));
  EXPECT_TRUE(is_at_or_under("/run/berth", "/run/berth"));
  EXPECT_TRUE(is_at_or_under("/run/berth/a/b", "/run/berth"));
  EXPECT_FALSE(is_at_or_under("/run/berthx", "/run/berth"));
}

TEST(EnvList, NameIsTheTextBeforeTheFirstEquals) {
  EXPECT_EQ(env_name("A=b=c"), "A");
  EXPECT_EQ(env_name("BARE"), "BARE");
  EXPECT_EQ(env_name("=x"), "");
}

TEST(EnvList, LookupTakesTheLastValueAndABareNameUnsets) {
  Strings env = {"A=1", "AB=2", "A=3", "EMPTY=", "GONE=x", "GONE"};
  EXPECT_EQ(env_lookup(env, "A"), "3");
  EXPECT_EQ(env_lookup(env, "AB"), "2");
  EXPECT_EQ(env_lookup(env, "EMPTY"), "");
  EXPECT_EQ(env_lookup(env, "GONE"), std::nullopt);
  EXPECT_EQ(env_lookup(env, "MISSING"), std::nullopt);
  EXPECT_EQ(env_lookup(env, "A="), std::nullopt);
}

TEST(EnvList, SetReplacesInPlaceOrAppends) {
  Strings env = {"PATH=/bin", "HOME=/root"};
  set_env(env, "HOME=/home/u");
  set_env(env, "TERM=xterm");
  set_env(env, "PATHX=1");
  EXPECT_EQ(env, (Strings{"PATH=/bin", "HOME=/home/u", "TERM=xterm", "PATHX=1"}));
}

TEST(EnvList, SplitPathKeepsEmptyEntries) {
  EXPECT_EQ(split_path("/a:/b::/c:"), (Strings{"/a", "/b", "", "/c", ""}));
  EXPECT_EQ(split_path(""), (Strings{""}));
  EXPECT_STREQ(kDefaultPath, "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
}

TEST(Dir, ListDirIsSortedAndLeavesOutDots) {
  TempDir t("dir");
  t.write("b", "");
  t.write("a", "");
  ASSERT_EQ(::mkdir((t / "c").c_str(), 0755), 0);
  EXPECT_EQ(list_dir(t.path), (Strings{"a", "b", "c"}));
  EXPECT_EQ(list_dir(t / "missing"), Strings{});
  EXPECT_EQ(list_dir(t / "a"), Strings{});  // not a folder
}

TEST(Dir, ListDirAtGivesTypesAndErrno) {
  TempDir t("dir");
  t.write("f", "x");
  ASSERT_EQ(::mkdir((t / "d").c_str(), 0755), 0);
  UniqueFd fd(::open(t.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  std::vector<DirEntry> entries;
  ASSERT_EQ(list_dir_at(fd.get(), entries), 0);
  ASSERT_EQ(entries.size(), 2u);
  for (const DirEntry& e : entries) {
    if (e.type == DT_UNKNOWN) continue;  // some file systems do not fill d_type
    EXPECT_EQ(e.type, e.name == "d" ? DT_DIR : DT_REG) << e.name;
  }
  UniqueFd file(::open((t / "f").c_str(), O_RDONLY | O_CLOEXEC));
  EXPECT_EQ(list_dir_at(file.get(), entries), ENOTDIR);
}

TEST(Dir, ListDirInRootStaysInTheRoot) {
  TempDir t("dir");
  t.write("outside/secret", "");
  t.write("root/etc/b", "");
  t.write("root/etc/a", "");
  ASSERT_EQ(::symlink("/etc", (t / "root/link").c_str()), 0);  // absolute: the root's /etc
  ASSERT_EQ(::symlink("../..", (t / "root/up").c_str()), 0);   // ".." stops at the root
  std::string root = t / "root";
  EXPECT_EQ(list_dir_in_root(root, "/etc"), (Strings{"a", "b"}));
  EXPECT_EQ(list_dir_in_root(root, "/link"), (Strings{"a", "b"}));
  EXPECT_EQ(list_dir_in_root(root, "/up"), (Strings{"etc", "link", "up"}));
  EXPECT_EQ(list_dir_in_root(root, "/../outside"), Strings{});
  EXPECT_EQ(list_dir_in_root(t / "no-root", "/"), Strings{});
}

TEST(Json, StringFieldNeverThrows) {
  auto j = nlohmann::json::parse(R"({"a":"x","n":1,"z":null})");
  EXPECT_EQ(string_field(j, "a"), "x");
  EXPECT_EQ(string_field(j, "n"), "");
  EXPECT_EQ(string_field(j, "z"), "");
  EXPECT_EQ(string_field(j, "missing"), "");
  EXPECT_EQ(string_field(nlohmann::json::array({"a"}), "a"), "");
  EXPECT_EQ(string_field(nlohmann::json("a"), "a"), "");
}

TEST(ScopeGuard, RunsOnceAtScopeEndUnlessDismissed) {
  int runs = 0;
  {
    auto g = on_scope_exit([&runs] { ++runs; });
    EXPECT_EQ(runs, 0);
  }
  EXPECT_EQ(runs, 1);
  {
    auto g = on_scope_exit([&runs] { ++runs; });
    g.dismiss();
  }
  EXPECT_EQ(runs, 1);
}

TEST(Signals, TheTableAndForwardingToAChild) {
  EXPECT_EQ(kForwardedSignalCount, 6u);
  sigset_t set;
  sigemptyset(&set);
  add_forwarded_signals(&set);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2})
    EXPECT_EQ(sigismember(&set, sig), 1) << sig;
  EXPECT_EQ(sigismember(&set, SIGKILL), 0);
  EXPECT_EQ(sigismember(&set, SIGCHLD), 0);

  struct sigaction before;
  ASSERT_EQ(::sigaction(SIGUSR1, nullptr, &before), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::pause();  // until a signal's default action ends it
    ::_exit(0);
  }
  ForwardedActions old;
  forward_signals_to(child, &old);
  ASSERT_EQ(::raise(SIGUSR1), 0);  // this process survives it: the child gets it
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  stop_forwarding(old);
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGUSR1);
  struct sigaction after;
  ASSERT_EQ(::sigaction(SIGUSR1, nullptr, &after), 0);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
  EXPECT_EQ(after.sa_flags & SA_SIGINFO, before.sa_flags & SA_SIGINFO);
}

}  // namespace
}  // namespace berth

namespace berth {
namespace {

TEST(Elf, OneReaderForSonameAndInterpreter) {
  auto sh = read_elf_info("/bin/sh");
  ASSERT_TRUE(sh) << sh.error().message();
  EXPECT_EQ(sh->elf_class, 64);
  EXPECT_EQ(sh->machine, host_elf_machine());
  EXPECT_TRUE(sh->interpreter.starts_with("/lib")) << sh->interpreter;
  UniqueFd fd(::open("/bin/sh", O_RDONLY | O_CLOEXEC));
  auto interp = elf_interpreter(fd.get(), "/bin/sh");
  ASSERT_TRUE(interp) << interp.error().message();
  EXPECT_EQ(*interp, sh->interpreter);

  auto probe = read_elf_info(BERTH_PROBE_PATH);  // static: no loader, no SONAME
  ASSERT_TRUE(probe) << probe.error().message();
  EXPECT_EQ(probe->interpreter, "");
  EXPECT_EQ(probe->soname, "");
}

TEST(Elf, TruncatedAndForeignObjectsAreNamed) {
  TempDir t("elf");
  auto sh = read_file("/bin/sh");
  ASSERT_TRUE(sh);
  std::string cut = t.write("cut", sh->substr(0, 20));
  UniqueFd fd(::open(cut.c_str(), O_RDONLY | O_CLOEXEC));
  EXPECT_EQ(elf_interpreter(fd.get(), "/cut").error().message(), "exec /cut: truncated ELF header");
  std::string other = *sh;
  other[EI_CLASS] = ELFCLASS32;
  std::string p32 = t.write("p32", other);
  UniqueFd fd32(::open(p32.c_str(), O_RDONLY | O_CLOEXEC));
  EXPECT_EQ(elf_interpreter(fd32.get(), "/p32").error().message(),
            "exec /p32: not a 64-bit executable for this machine");
  UniqueFd dir(::open(t.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  EXPECT_EQ(elf_interpreter(dir.get(), "/d").error().message(), "exec /d: not an ELF executable");
}

// make_path_in_root: one step when the parent exists, the walk otherwise; both stay in the root.
TEST(RootPath, MakesAnEntryInAnExistingDirectory) {
  TempDir t("rootpath");
  ASSERT_EQ(::mkdir((t.path + "/dev").c_str(), 0755), 0);
  UniqueFd root(::open(t.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  ASSERT_EQ(make_path_in_root(root.get(), "/dev/null", true), 0);
  ASSERT_EQ(make_path_in_root(root.get(), "/dev/pts", false), 0);
  struct stat st;
  ASSERT_EQ(::lstat((t.path + "/dev/null").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  ASSERT_EQ(::lstat((t.path + "/dev/pts").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  // Existing entries are left as they are.
  EXPECT_EQ(make_path_in_root(root.get(), "/dev/null", true), 0);
  EXPECT_EQ(make_path_in_root(root.get(), "/dev/pts/", false), 0);
}

TEST(RootPath, MakesMissingParentsAndFollowsDanglingLinksInsideTheRoot) {
  TempDir t("rootpath");
  UniqueFd root(::open(t.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  ASSERT_EQ(make_path_in_root(root.get(), "/a/b/c", true), 0);
  struct stat st;
  ASSERT_EQ(::lstat((t.path + "/a/b/c").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  // An absolute link in the image names a path in the root, never on the host.
  ASSERT_EQ(::symlink("/run/real", (t.path + "/link").c_str()), 0);
  ASSERT_EQ(make_path_in_root(root.get(), "/link", true), 0);
  ASSERT_EQ(::lstat((t.path + "/run/real").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  ASSERT_EQ(::symlink("/elsewhere", (t.path + "/dir").c_str()), 0);
  ASSERT_EQ(make_path_in_root(root.get(), "/dir/x", false), 0);
  ASSERT_EQ(::lstat((t.path + "/elsewhere/x").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
}

TEST(CopyTree, KeepsOtherOwnersWhereTheCopierMay) {
  // As root (or root of a user namespace with subordinate IDs: clone's walk), a copy keeps each
  // file's owner and its set-ID bits; rootless with one ID, every file is the user's anyway.
  if (::geteuid() != 0) GTEST_SKIP() << "only root can give files to other IDs";
  TempDir tmp("copy-owner");
  std::string from = tmp / "from";
  ASSERT_TRUE(make_dirs(from + "/partial", 0700).ok());
  std::string file = tmp.write("from/partial/f", "x");
  std::string tool = tmp.write("from/tool", "#!/bin/sh\n", 04755);
  ASSERT_EQ(::chown(file.c_str(), 42, 43), 0);
  ASSERT_EQ(::chown((from + "/partial").c_str(), 42, 0), 0);
  ASSERT_EQ(::chown(tool.c_str(), 7, 7), 0);
  ASSERT_EQ(::chmod(tool.c_str(), 04755), 0);  // chown cleared it
  ASSERT_TRUE(copy_tree(from, tmp / "to").ok());
  struct stat st;
  ASSERT_EQ(::stat((tmp / "to/partial/f").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 42U);
  EXPECT_EQ(st.st_gid, 43U);
  ASSERT_EQ(::stat((tmp / "to/partial").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 42U);
  EXPECT_EQ(st.st_mode & 07777, 0700U);
  ASSERT_EQ(::stat((tmp / "to/tool").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 7U);
  EXPECT_EQ(st.st_mode & 07777, 04755U);  // the mode set after the owner: set-ID bits kept
}

}  // namespace
}  // namespace berth
