// Engine tests: run the static probe in a minimal root filesystem through
// run_userns(). They need an unprivileged user (the e2e tier runs them as
// one); as root they are skipped.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pty.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include "core/fs.h"
#include "runtime/container_spec.h"
#include "runtime/root_emulation.h"
#include "runtime/subids.h"
#include "test_util.h"

namespace berth {
namespace {

namespace fs = std::filesystem;

std::string probe_path() {
  const char* p = std::getenv("BERTH_PROBE");
  return p != nullptr ? p : BERTH_PROBE_PATH;
}

/// What one run printed and returned.
struct Ran {
  int code = -1;
  std::string out;    ///< the workload's stdout
  std::string error;  ///< RunOutcome.error's message, empty when none
};

/// Reads fd to EOF.
std::string drain(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

/// Runs `spec` in a forked copy of this process with stdout on a pipe, so
/// that the engine's signal handlers and the workload's output stay out of
/// the test process. `before` runs in the fork first (e.g. to add namespaces).
template <class Before>
pid_t start(const ContainerSpec& spec, int& out_fd, int& err_fd, Before before) {
  int out[2], err[2];
  if (::pipe(out) != 0 || ::pipe(err) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::close(out[0]);
    ::close(out[1]);
    ::close(err[0]);
    before();
    RunOutcome r = run_userns(spec);
    if (r.error) {
      std::string m = r.error->message();
      (void)!::write(err[1], m.data(), m.size());
    }
    ::_exit(r.exit_code);
  }
  ::close(out[1]);
  ::close(err[1]);
  out_fd = out[0];
  err_fd = err[0];
  return pid;
}

Ran finish(pid_t pid, int out_fd, int err_fd, const std::string& out = "") {
  Ran r;
  r.out = out + drain(out_fd);
  r.error = drain(err_fd);
  ::close(out_fd);
  ::close(err_fd);
  int status;
  ::waitpid(pid, &status, 0);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
  return r;
}

Ran run(const ContainerSpec& spec) {
  int o = -1, e = -1;
  pid_t pid = start(spec, o, e, [] {});
  return finish(pid, o, e);
}

class UsernsEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() == 0)
      GTEST_SKIP() << "engine tests need an unprivileged user and this process is root; "
                      "the e2e tier runs them as an unprivileged user";
    if (auto st = probe_user_namespaces(); !st)
      GTEST_SKIP() << "no user namespaces here: " << st.error().message();
    dir_ = tmp_.path;
    rootfs_ = dir_ + "/rootfs";
    fs::create_directories(rootfs_ + "/bin");
    fs::create_directories(rootfs_ + "/etc");
    fs::copy_file(probe_path(), rootfs_ + "/bin/probe");
    fs::permissions(rootfs_ + "/bin/probe", fs::perms(0755));
    spec_.rootfs = rootfs_;
    // The one-ID engine; the subordinate-ID mode (auto's choice where the user has ranges) has
    // tests of its own below.
    spec_.root_emulation = RootEmulation::kSeccomp;
    spec_.env = {"PATH=/usr/bin:/bin", "HOME=/root"};
  }
  ContainerSpec spec(std::vector<std::string> argv) {
    ContainerSpec s = spec_;
    s.argv = std::move(argv);
    return s;
  }

  TempDir tmp_{"engine"};
  std::string dir_, rootfs_;
  ContainerSpec spec_;
};

TEST_F(UsernsEngine, TrueExitsZero) {
  Ran r = run(spec({"probe", "true"}));
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.error, "");
}

TEST_F(UsernsEngine, ExitStatusPassesThrough) {
  EXPECT_EQ(run(spec({"probe", "exit", "3"})).code, 3);
  EXPECT_EQ(run(spec({"/bin/probe", "exit", "42"})).code, 42);
}

TEST_F(UsernsEngine, CommandNotFoundIs127) {
  Ran r = run(spec({"nosuchcmd"}));
  EXPECT_EQ(r.code, 127);
  EXPECT_EQ(r.error, "exec: \"nosuchcmd\": executable file not found in $PATH");
  r = run(spec({"/bin/nosuchcmd"}));
  EXPECT_EQ(r.code, 127);
  EXPECT_EQ(r.error, "exec: \"/bin/nosuchcmd\": No such file or directory");
}

TEST_F(UsernsEngine, NotExecutableIs126) {
  std::ofstream(rootfs_ + "/bin/data") << "not a program\n";
  fs::permissions(rootfs_ + "/bin/data", fs::perms(0644));
  Ran r = run(spec({"/bin/data"}));
  EXPECT_EQ(r.code, 126);
  EXPECT_EQ(r.error, "exec: \"/bin/data\": Permission denied");
  r = run(spec({"data"}));
  EXPECT_EQ(r.code, 126);
  EXPECT_EQ(r.error, "exec: \"data\": Permission denied");
}

TEST_F(UsernsEngine, RootByDefaultWithPasswdEntry) {
  Ran r = run(spec({"probe", "id"}));
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("uid=0\ngid=0\n"), std::string::npos) << r.out;
  EXPECT_EQ(slurp(rootfs_ + "/etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n");
  EXPECT_EQ(slurp(rootfs_ + "/etc/group"), "root:x:0:\n");
}

TEST_F(UsernsEngine, ImageUserIsMappedToCaller) {
  std::ofstream(rootfs_ + "/etc/passwd") << "root:x:0:0:root:/root:/bin/sh\n";
  fs::create_directories(dir_ + "/vol");
  ContainerSpec s = spec({"probe", "id"});
  s.uid = 1000;
  s.gid = 1001;
  s.user_name = "alice";
  s.home = "/home/alice";
  Ran r = run(s);
  EXPECT_EQ(r.code, 0) << r.error;
  EXPECT_NE(r.out.find("uid=1000\ngid=1001\n"), std::string::npos) << r.out;
  EXPECT_EQ(slurp(rootfs_ + "/etc/passwd"),
            "root:x:0:0:root:/root:/bin/sh\nalice:x:1000:1001:alice:/home/alice:/bin/sh\n");
  // A file written through a volume belongs to the caller on the host.
  s.argv = {"probe", "write", "/vol/f", "hello"};
  s.volumes = {{dir_ + "/vol", "/vol", false}};
  r = run(s);
  ASSERT_EQ(r.code, 0) << r.error;
  struct stat st;
  ASSERT_EQ(::stat((dir_ + "/vol/f").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ::getuid());
  EXPECT_EQ(st.st_gid, ::getgid());
  EXPECT_EQ(slurp(dir_ + "/vol/f"), "hello");
}

TEST_F(UsernsEngine, EnvIsExactlyTheSpecs) {
  ContainerSpec s = spec({"probe", "env"});
  s.env = {"PATH=/bin", "FOO=bar baz", "EMPTY="};
  Ran r = run(s);
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "env=PATH=/bin\nenv=FOO=bar baz\nenv=EMPTY=\n");
}

TEST_F(UsernsEngine, WorkingDirectoryIsCreated) {
  ContainerSpec s = spec({"probe", "cwd"});
  s.cwd = "/work/sub";
  Ran r = run(s);
  EXPECT_EQ(r.code, 0) << r.error;
  EXPECT_EQ(r.out, "cwd=/work/sub\n");
  EXPECT_TRUE(fs::is_directory(rootfs_ + "/work/sub"));
}

TEST_F(UsernsEngine, Hostname) {
  ContainerSpec s = spec({"probe", "hostname"});
  s.hostname = "berthbox";
  Ran r = run(s);
  EXPECT_EQ(r.code, 0) << r.error;
  EXPECT_EQ(r.out, "hostname=berthbox\n");
}

TEST_F(UsernsEngine, ReadOnlyAndReadWriteVolumes) {
  fs::create_directories(dir_ + "/rw");
  fs::create_directories(dir_ + "/ro");
  std::ofstream(dir_ + "/ro/in") << "data";
  std::ofstream(dir_ + "/file") << "single";
  ContainerSpec s = spec({"probe", "write", "/data/rw/out", "x"});
  s.volumes = {{dir_ + "/rw", "/data/rw", false},
               {dir_ + "/ro", "/data/ro", true},
               {dir_ + "/file", "/etc/single", true}};
  Ran r = run(s);
  EXPECT_EQ(r.code, 0) << r.error;
  EXPECT_EQ(slurp(dir_ + "/rw/out"), "x");
  s.argv = {"probe", "write", "/data/ro/out", "x"};
  EXPECT_EQ(run(s).code, 1);
  EXPECT_FALSE(fs::exists(dir_ + "/ro/out"));
  s.argv = {"probe", "cat", "/data/ro/in"};
  r = run(s);
  EXPECT_EQ(r.out, "data");
  // Root in the container cannot make a read-only volume writable again.
  s.argv = {"probe", "remount", "/data/ro"};
  EXPECT_EQ(run(s).code, 1);
  s.argv = {"probe", "cat", "/etc/single"};
  EXPECT_EQ(run(s).out, "single");
  EXPECT_TRUE(fs::is_regular_file(rootfs_ + "/etc/single"));
}

TEST_F(UsernsEngine, ReadOnlyVolumeKeepsLockedFlags) {
  // A nosuid,nodev,noexec tmpfs made in an outer user namespace: in the
  // container's namespace those flags are locked, and a read-only remount
  // that dropped them would fail with EPERM.
  fs::create_directories(dir_ + "/locked");
  ContainerSpec s = spec({"probe", "cat", "/locked/in"});
  s.volumes = {{dir_ + "/locked", "/locked", true}};
  uid_t uid = ::getuid();
  gid_t gid = ::getgid();
  std::string locked = dir_ + "/locked";
  int o = -1, e = -1;
  pid_t pid = start(s, o, e, [&] {
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) ::_exit(90);
    auto put = [](const char* f, const std::string& t) {
      int fd = ::open(f, O_WRONLY);
      return fd >= 0 && ::write(fd, t.data(), t.size()) == static_cast<ssize_t>(t.size());
    };
    if (!put("/proc/self/setgroups", "deny") ||
        !put("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1") ||
        !put("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1"))
      ::_exit(91);
    if (::mount("tmpfs", locked.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
      ::_exit(92);
    std::ofstream(locked + "/in") << "locked";
  });
  Ran r = finish(pid, o, e);
  EXPECT_EQ(r.code, 0) << r.error;
  EXPECT_EQ(r.out, "locked");
}

TEST_F(UsernsEngine, MissingVolumeSourceIs125) {
  ContainerSpec s = spec({"probe", "true"});
  s.volumes = {{dir_ + "/absent", "/x", false}};
  Ran r = run(s);
  EXPECT_EQ(r.code, 125);
  EXPECT_EQ(r.error, "mount volume " + dir_ + "/absent:/x: bind source path does not exist");
}

TEST_F(UsernsEngine, SymlinkedTargetStaysInsideRoot) {
  // /mnt -> /outside in the image: the volume lands in the root's /outside.
  fs::create_symlink("/outside", rootfs_ + "/mnt");
  fs::create_symlink("../../../../..", rootfs_ + "/up");
  fs::create_directories(dir_ + "/vol");
  ContainerSpec s = spec({"probe", "ls", "/mnt/v"});
  s.volumes = {{dir_ + "/vol", "/mnt/v", false}, {dir_ + "/vol", "/up/w", false}};
  Ran r = run(s);
  EXPECT_EQ(r.code, 0) << r.error;
  EXPECT_TRUE(fs::is_directory(rootfs_ + "/outside/v"));
  EXPECT_TRUE(fs::is_directory(rootfs_ + "/w"));
}

TEST_F(UsernsEngine, DefaultMounts) {
  Ran r = run(spec({"probe", "mounts"}));
  ASSERT_EQ(r.code, 0) << r.error;
  for (const char* m : {" / rw", " /proc ", " /dev rw,nosuid", " /dev/null ", " /dev/pts ",
                        " /dev/shm ", " /sys ro", " /tmp "})
    EXPECT_NE(r.out.find(m), std::string::npos) << m << " missing in\n" << r.out;
  r = run(spec({"probe", "ls", "/dev"}));
  for (const char* n : {"null", "zero", "full", "random", "urandom", "tty", "pts", "ptmx", "shm",
                        "fd", "stdin", "stdout", "stderr"})
    EXPECT_NE(r.out.find(std::string("name=") + n + "\n"), std::string::npos) << n;
  // stdin is /dev/null unless asked for.
  r = run(spec({"probe", "cat", "/dev/stdin"}));
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "");
}

TEST_F(UsernsEngine, ReadOnlyRootfs) {
  ContainerSpec s = spec({"probe", "write", "/new", "x"});
  s.writable_rootfs = false;
  EXPECT_EQ(run(s).code, 1);
  EXPECT_FALSE(fs::exists(rootfs_ + "/new"));
  s.argv = {"probe", "write", "/tmp/new", "x"};
  EXPECT_EQ(run(s).code, 0);
}

TEST_F(UsernsEngine, PidNamespaceInitReapsOrphans) {
  ContainerSpec s = spec({"probe", "pid"});
  s.pid_namespace = true;
  Ran r = run(s);
  EXPECT_EQ(r.code, 0) << r.error;
  EXPECT_EQ(r.out, "pid=2\nppid=1\n");
  s.argv = {"probe", "zombies"};
  r = run(s);
  EXPECT_EQ(r.out, "zombies=0\n");
  s.argv = {"probe", "exit", "7"};
  EXPECT_EQ(run(s).code, 7);
  s.argv = {"nosuchcmd"};
  r = run(s);
  EXPECT_EQ(r.code, 127);
  EXPECT_EQ(r.error, "exec: \"nosuchcmd\": executable file not found in $PATH");
}

/// Starts `probe signals`, waits for "ready", sends `sigs` to the engine's process.
Ran signal_run(const ContainerSpec& s, std::initializer_list<int> sigs) {
  int o = -1, e = -1;
  pid_t pid = start(s, o, e, [] {});
  std::string out;
  char c;
  while (out.find("ready\n") == std::string::npos && ::read(o, &c, 1) == 1) out += c;
  for (int sig : sigs) {
    ::kill(pid, sig);
    ::usleep(100 * 1000);
  }
  return finish(pid, o, e, out);
}

TEST_F(UsernsEngine, SignalsAreForwarded) {
  Ran r = signal_run(spec({"probe", "signals", "10"}), {SIGUSR1, SIGHUP, SIGTERM});
  EXPECT_EQ(r.code, 128 + SIGTERM);
  EXPECT_EQ(r.out, "ready\nsignal=10\nsignal=1\nsignal=15\n");
}

TEST_F(UsernsEngine, SignalsAreForwardedThroughInit) {
  ContainerSpec s = spec({"probe", "signals", "10"});
  s.pid_namespace = true;
  Ran r = signal_run(s, {SIGUSR2, SIGINT, SIGTERM});
  EXPECT_EQ(r.code, 128 + SIGTERM);
  EXPECT_EQ(r.out, "ready\nsignal=12\nsignal=2\nsignal=15\n");
}

TEST_F(UsernsEngine, KilledWorkloadIs128PlusSignal) {
  // SIGKILL cannot be forwarded: kill the workload itself, the engine's only child.
  ContainerSpec s = spec({"probe", "signals", "10"});
  int o = -1, e = -1;
  pid_t pid = start(s, o, e, [] {});
  std::string out;
  char c;
  while (out.find("ready\n") == std::string::npos && ::read(o, &c, 1) == 1) out += c;
  std::string children =
      slurp("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  pid_t workload = std::atoi(children.c_str());
  ASSERT_GT(workload, 0);
  ::kill(workload, SIGKILL);
  Ran r = finish(pid, o, e, out);
  EXPECT_EQ(r.code, 128 + SIGKILL);
  EXPECT_EQ(r.error, "");
}

TEST_F(UsernsEngine, StdinPassesThroughWhenOpen) {
  ContainerSpec s = spec({"probe", "cat", "/dev/stdin"});
  s.stdin_open = true;
  int o = -1, e = -1;
  pid_t pid = start(s, o, e, [] {
    int in[2];
    if (::pipe(in) != 0 || ::write(in[1], "hello", 5) != 5) ::_exit(90);
    ::close(in[1]);
    ::dup2(in[0], STDIN_FILENO);
  });
  Ran r = finish(pid, o, e);
  EXPECT_EQ(r.code, 0) << r.error;
  EXPECT_EQ(r.out, "hello");
}

TEST_F(UsernsEngine, TtyMakesWorkloadForeground) {
  for (bool pidns : {false, true}) {
    ContainerSpec s = spec({"probe", "tty"});
    s.tty = true;
    s.stdin_open = true;
    s.pid_namespace = pidns;
    int o = -1, e = -1;
    pid_t pid = start(s, o, e, [] {
      // A new session with a pseudo-terminal as controlling terminal and stdin.
      int master, slave;
      if (::openpty(&master, &slave, nullptr, nullptr, nullptr) != 0) ::_exit(90);
      if (::setsid() < 0 || ::ioctl(slave, TIOCSCTTY, 0) != 0) ::_exit(91);
      ::dup2(slave, STDIN_FILENO);
    });
    Ran r = finish(pid, o, e);
    EXPECT_EQ(r.code, 0) << r.error;
    // The caller's terminal is found under the container's /dev/pts, as `tty` looks for it.
    EXPECT_EQ(r.out.rfind("tty=1\nforeground=1\nttyname=/dev/pts/", 0), 0u)
        << r.out << "pid namespace " << pidns;
  }
}

/// Refuses new user namespaces in this process with a seccomp filter, as
/// some container platforms and hardened hosts do.
void refuse_user_namespaces() {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 1, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_unshare, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_NEWUSER, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {static_cast<unsigned short>(std::size(f)), f};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
    ::_exit(90);
}

TEST_F(UsernsEngine, NoUserNamespacesIs125WithProbeError) {
  int o = -1, e = -1;
  pid_t pid = start(spec({"probe", "true"}), o, e, refuse_user_namespaces);
  Ran r = finish(pid, o, e);
  EXPECT_EQ(r.code, 125);
  EXPECT_EQ(r.error, "unshare user namespace: Operation not permitted");
}

TEST_F(UsernsEngine, StartupIsFast) {
  ContainerSpec s = spec({"/bin/probe", "true"});
  auto t0 = std::chrono::steady_clock::now();
  constexpr int kRuns = 50;
  for (int i = 0; i < kRuns; ++i) ASSERT_EQ(run_userns(s).exit_code, 0);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
      kRuns;
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kRuns; ++i) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::execl(probe_path().c_str(), "probe", "true", nullptr);
      ::_exit(127);
    }
    ::waitpid(pid, nullptr, 0);
  }
  double bare =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
      kRuns;
  std::printf("run_userns(probe true): %.2f ms per run; fork+exec bare: %.2f ms\n", ms, bare);
}

// Root emulation (runtime/root_emulation.h): with the filter, what a package manager tries as
// root succeeds and changes nothing; without it, the one mapped ID refuses as before.

std::map<std::string, std::string> probe_kv(const std::string& out) {
  std::map<std::string, std::string> kv;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return kv;
}

TEST_F(UsernsEngine, RootEmulationMakesSetIdChownAndDeviceNodesSucceedWithoutEffect) {
  std::ofstream(rootfs_ + "/file") << "x";
  ContainerSpec s = spec({"probe", "rootops", "/file"});
  EXPECT_EQ(ContainerSpec{}.root_emulation, RootEmulation::kAuto);  // the default
  Ran r = run(s);
  ASSERT_EQ(r.code, 0) << r.error << r.out;
  auto kv = probe_kv(r.out);
  for (const char* call :
       {"setgroups", "setresgid", "setresuid", "setuid", "chown", "mknod_chr", "mknod_fifo"})
    EXPECT_EQ(kv[call], "ok") << call << "\n" << r.out;
  EXPECT_EQ(kv["uid"], "0");      // the IDs did not change
  EXPECT_EQ(kv["owner"], "0:0");  // nor did the file's owner
  EXPECT_EQ(kv["dev"], "0");      // no device node was made
  EXPECT_EQ(kv["fifo"], "1");     // a FIFO is made as usual
  struct stat st;
  ASSERT_EQ(::stat((rootfs_ + "/file").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ::geteuid());  // on the host: still the user's
}

TEST_F(UsernsEngine, WithoutRootEmulationTheMappedIdRefusesAsBefore) {
  std::ofstream(rootfs_ + "/file") << "x";
  ContainerSpec s = spec({"probe", "rootops", "/file"});
  s.root_emulation = RootEmulation::kNone;
  Ran r = run(s);
  ASSERT_EQ(r.code, 0) << r.error << r.out;
  auto kv = probe_kv(r.out);
  EXPECT_EQ(kv["setgroups"], "EPERM");   // /proc/self/setgroups is "deny"
  EXPECT_EQ(kv["setresuid"], "EINVAL");  // 42 is not mapped
  EXPECT_EQ(kv["chown"], "EINVAL");
  EXPECT_NE(kv["mknod_chr"], "ok");
  EXPECT_EQ(kv["fifo"], "1");
}

/// Refuses seccomp filters (seccomp(2), prctl PR_SET_SECCOMP) with EINVAL, as a kernel built
/// without CONFIG_SECCOMP_FILTER does.
void refuse_seccomp_filters() {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_seccomp, 3, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_prctl, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PR_SET_SECCOMP, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EINVAL),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {static_cast<unsigned short>(std::size(f)), f};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
    ::_exit(90);
}

TEST_F(UsernsEngine, RootEmulationTheKernelRefusesIsOneLineAnd125) {
  int o = -1, e = -1;
  pid_t pid = start(spec({"probe", "true"}), o, e, refuse_seccomp_filters);
  Ran r = finish(pid, o, e);
  EXPECT_EQ(r.code, 125);
  EXPECT_EQ(r.error, "root emulation seccomp filter: Invalid argument");
  ContainerSpec s = spec({"probe", "true"});
  s.root_emulation = RootEmulation::kNone;  // what the hint says
  pid = start(s, o, e, refuse_seccomp_filters);
  EXPECT_EQ(finish(pid, o, e).code, 0);
}

// The subordinate-ID mode (runtime/subids.h): the same calls are real. Only as an ordinary user
// with ranges and newuidmap; each test's holder lives in its own runtime folder.
class UsernsEngineSubids : public UsernsEngine {
 protected:
  void SetUp() override {
    UsernsEngine::SetUp();
    if (IsSkipped()) return;
    if (auto s = subid_setup(); !s.ok())
      GTEST_SKIP() << "no subordinate IDs: " << s.error().message();
    if (const char* v = ::getenv("BERTH_RUNTIME_DIR")) old_dir_ = v;
    ::setenv("BERTH_RUNTIME_DIR", run_dir_.path.c_str(), 1);
    dir_set_ = true;
  }
  void TearDown() override {
    if (!dir_set_) return;
    if (pid_t p = live_subid_holder(run_dir_.path); p > 0) ::kill(p, SIGKILL);
    if (old_dir_)
      ::setenv("BERTH_RUNTIME_DIR", old_dir_->c_str(), 1);
    else
      ::unsetenv("BERTH_RUNTIME_DIR");
  }
  TempDir run_dir_{"subids-run"};
  std::optional<std::string> old_dir_;
  bool dir_set_ = false;
};

TEST_F(UsernsEngineSubids, SetIdAndChownAreRealAndTheHostSeesSubordinateIds) {
  std::ofstream(rootfs_ + "/file") << "x";
  ContainerSpec s = spec({"probe", "rootops", "/file"});
  s.root_emulation = RootEmulation::kAuto;  // subids here
  Ran r = run(s);
  ASSERT_EQ(r.code, 0) << r.error << r.out;
  auto kv = probe_kv(r.out);
  EXPECT_EQ(kv["setgroups"], "ok") << r.out;
  EXPECT_EQ(kv["setresgid"], "ok");
  EXPECT_EQ(kv["setresuid"], "ok");
  EXPECT_EQ(kv["uid"], "42");  // really switched
  EXPECT_EQ(kv["gid"], "42");
  EXPECT_EQ(kv["chown"], "EPERM");  // as uid 42, of root's file: the kernel's own answer
  auto setup = subid_setup();
  ASSERT_TRUE(setup.ok());
  pid_t holder = live_subid_holder(run_dir_.path);
  ASSERT_GT(holder, 0);
  // The workload's chown as root inside lands on a subordinate ID on the host.
  s.argv = {"/bin/sh", "-c", "chown 42:42 /file"};
  if (fs::exists(rootfs_ + "/bin/sh")) {
    ASSERT_EQ(run(s).code, 0);
    struct stat st;
    ASSERT_EQ(::stat((rootfs_ + "/file").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, setup->uids.start + 41);
  }
  // Runs after the first reuse the holder.
  ASSERT_EQ(run(spec({"probe", "true"})).code, 0);
  EXPECT_EQ(live_subid_holder(run_dir_.path), holder);
}

TEST_F(UsernsEngineSubids, AContainerUserIsSwitchedToAndAPidNamespaceWorks) {
  ContainerSpec s = spec({"probe", "id"});
  s.root_emulation = RootEmulation::kSubids;
  s.uid = 1000;
  s.gid = 1000;
  s.pid_namespace = true;
  Ran r = run(s);
  ASSERT_EQ(r.code, 0) << r.error << r.out;
  auto kv = probe_kv(r.out);
  EXPECT_EQ(kv["uid"], "1000") << r.out;
  EXPECT_EQ(kv["gid"], "1000");
  // With auto, a container user other than root keeps the one-ID mapping.
  s.root_emulation = RootEmulation::kAuto;
  s.pid_namespace = false;
  r = run(s);
  ASSERT_EQ(r.code, 0) << r.error << r.out;
  EXPECT_EQ(probe_kv(r.out)["uid"], "1000");
  s.argv = {"probe", "exit", "7"};
  s.root_emulation = RootEmulation::kSubids;
  s.pid_namespace = true;
  EXPECT_EQ(run(s).code, 7);  // the status comes back through the init and its relay
}

TEST_F(UsernsEngine, RootEmulationTurnsAptsSandboxUserOffOnlyWhereAptIs) {
  ContainerSpec s = spec({"probe", "true"});
  ASSERT_EQ(run(s).code, 0);
  EXPECT_FALSE(fs::exists(rootfs_ + "/etc/apt"));  // no apt: nothing written
  fs::create_directories(rootfs_ + "/etc/apt/apt.conf.d");
  s.root_emulation = RootEmulation::kNone;
  ASSERT_EQ(run(s).code, 0);
  EXPECT_FALSE(fs::exists(rootfs_ + kAptDropIn));
  s.root_emulation = RootEmulation::kSeccomp;
  ASSERT_EQ(run(s).code, 0);
  std::ifstream in(rootfs_ + kAptDropIn);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), kAptDropInText);
  ASSERT_EQ(run(s).code, 0);  // a second run finds it there
  // A tree the user may not write runs without it.
  fs::remove(rootfs_ + kAptDropIn);
  fs::permissions(rootfs_ + "/etc/apt/apt.conf.d", fs::perms(0555));
  Ran r = run(s);
  EXPECT_EQ(r.code, 0) << r.error;
  EXPECT_FALSE(fs::exists(rootfs_ + kAptDropIn));
  fs::permissions(rootfs_ + "/etc/apt/apt.conf.d", fs::perms(0755));
}

}  // namespace
}  // namespace berth
