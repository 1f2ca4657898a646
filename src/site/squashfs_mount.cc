// The shared squashfs mount and its keeper; the design is in squashfs_mount.h.
#include "site/squashfs_mount.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/env_list.h"
#include "core/helper_path.h"
#include "core/strings.h"

namespace berth {
namespace {

/// Where the keeper finds what it inherited (squashfs_mount.h).
constexpr int kReportFd = 3;
constexpr int kImageFd = 4;
/// How long a mount may take to appear before the start gives up.
constexpr int kMountTimeoutMs = 20000;
/// How long a stopped daemon may take to unmount and exit before it is killed.
constexpr int kStopTimeoutMs = 5000;

bool executable(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

Result<std::string> find_program(const char* name, const char* package) {
  for (const std::string& dir : split_path(env_or("PATH", "") + ":/usr/bin:/bin")) {
    if (dir.empty() || dir.front() != '/') continue;
    std::string candidate = path_join(dir, name);
    if (executable(candidate)) return candidate;
  }
  return make_error("mount squashfs", name, "not installed", ErrorCode::kUnsupported)
      .with_hint(std::string("install the Debian package '") + package + "'");
}

void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

enum class MountState { kAbsent, kMounted, kDead, kBroken };

/// What is at `mnt`: nothing mounted (same device as its parent `dir`), a live mount (its
/// device in *dev), a FUSE mount whose daemon is gone (ENOTCONN), or one whose daemon cannot
/// answer for the root directory (errno kept: a corrupt image's inode table). `mnt` exists.
MountState mount_state(const std::string& mnt, dev_t parent_dev, dev_t* dev) {
  struct stat st;
  if (::stat(mnt.c_str(), &st) != 0) {
    if (errno == ENOTCONN || errno == ECONNABORTED) return MountState::kDead;
    // Even ENOENT: the directory was made before any daemon started, so it is the daemon
    // that cannot find its root (berth-squashfs refuses such an image before it mounts; this
    // is for one that fails later).
    return MountState::kBroken;
  }
  if (dev != nullptr) *dev = st.st_dev;
  return st.st_dev != parent_dev ? MountState::kMounted : MountState::kAbsent;
}

/// `fusermount3 -u -z -q -- MNT`: lazily unmounts a mount of ours; its status is not needed
/// (a mount already gone is fine), only that it finished.
void lazy_unmount(const std::string& fusermount, const std::string& mnt) {
  pid_t pid = ::fork();
  if (pid == 0) {
    const char* argv[] = {fusermount.c_str(), "-u", "-z", "-q", "--", mnt.c_str(), nullptr};
    ::execv(argv[0], const_cast<char**>(argv));
    ::_exit(127);
  }
  if (pid < 0) return;  // nothing to wait for; the next start retries the unmount
  int status;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

/// What the daemon's log says, for the error when it failed: its own one-line message
/// ("berth-squashfs: corrupt squashfs image: ..."), or else the first line (libfuse's).
std::string daemon_complaint(const std::string& log) {
  auto text = read_file(log);
  if (!text.ok()) return "the squashfs daemon failed";
  constexpr std::string_view kOwn = "berth-squashfs: ";
  std::string first;
  for (std::string_view line : split_lines(*text)) {
    line = trim(line);
    if (line.substr(0, kOwn.size()) == kOwn) return std::string(line.substr(kOwn.size(), 300));
    if (first.empty() && !line.empty()) first = line.substr(0, 300);
  }
  return "the squashfs daemon failed" + (first.empty() ? std::string() : ": " + first);
}

/// Everything the keeper needs, prepared before it is forked.
struct KeeperArgs {
  std::string mnt, keydir, users_lock, create_lock, log, fusermount;
  dev_t parent_dev = 0;
  std::vector<std::string> argv, env;  ///< the daemon's
};

extern "C" void keeper_wake(int) {}  // interrupts the blocking flock; the loop looks why

/// Writes the keeper's word to the start ("" is success) and closes the report pipe.
void report(const std::string& failure) {
  std::string msg = failure.empty() ? "ok" : "E" + failure;
  (void)!::write(kReportFd, msg.data(), msg.size());  // the start reads EOF as "died"
  ::close(kReportFd);
}

/// Waits up to `ms` for `pid` to exit; true when it did (or is not ours any more).
bool wait_exit(pid_t pid, long ms) {
  for (long waited = 0;; waited += 5) {
    int status;
    pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid || (got < 0 && errno == ECHILD)) return true;
    if (waited >= ms) return false;
    sleep_ms(5);
  }
}

/// The keeper: starts the daemon, reports, waits for the last user, stops the daemon.
[[noreturn]] void keeper_main(const KeeperArgs& a) {
  signal(SIGPIPE, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  int users = ::open(a.users_lock.c_str(), O_RDWR | O_CLOEXEC);
  int create = ::open(a.create_lock.c_str(), O_RDWR | O_CLOEXEC);
  int log = ::open(a.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (users < 0 || create < 0 || log < 0) {
    report(std::string("open ") + a.keydir + ": " + std::strerror(errno));
    ::_exit(1);
  }
  // The daemon writes a byte on `ready` once its mount is made, or closes it by exiting: no
  // polling of the mount point while it starts.
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) {
    report(std::string("pipe: ") + std::strerror(errno));
    ::_exit(1);
  }
  std::vector<std::string> daemon_args = a.argv;
  daemon_args.insert(daemon_args.begin() + 1, {"--ready-fd", std::to_string(ready[1])});
  std::vector<char*> argv, envp;
  for (const std::string& s : daemon_args) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  for (const std::string& s : a.env) envp.push_back(const_cast<char*>(s.c_str()));
  envp.push_back(nullptr);
  pid_t keeper = ::getpid();
  pid_t daemon = ::fork();
  if (daemon == 0) {
    // The daemon dies with the keeper, whatever kills it: on SIGTERM it unmounts.
    if (::prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) != 0 || ::getppid() != keeper) ::_exit(1);
    ::dup2(log, STDERR_FILENO);
    if (::fcntl(ready[1], F_SETFD, 0) != 0) ::_exit(1);  // inherited across the exec
    ::execve(argv[0], argv.data(), envp.data());
    (void)!::write(STDERR_FILENO, "exec failed\n", 12);
    ::_exit(127);
  }
  if (daemon < 0) {
    report(std::string("fork: ") + std::strerror(errno));
    ::_exit(1);
  }
  ::close(ready[1]);
  dev_t mine = 0;
  struct timespec begun;
  ::clock_gettime(CLOCK_MONOTONIC, &begun);
  for (;;) {
    struct timespec now;
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    long waited = (now.tv_sec - begun.tv_sec) * 1000 + (now.tv_nsec - begun.tv_nsec) / 1000000;
    struct pollfd p = {ready[0], POLLIN, 0};
    int n =
        waited >= kMountTimeoutMs ? 0 : ::poll(&p, 1, static_cast<int>(kMountTimeoutMs - waited));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      ::kill(daemon, SIGTERM);
      if (!wait_exit(daemon, kStopTimeoutMs)) ::kill(daemon, SIGKILL);
      report("the squashfs daemon did not mount within " + std::to_string(kMountTimeoutMs / 1000) +
             " s");
      ::_exit(1);
    }
    char byte;
    ssize_t got = n > 0 ? ::read(ready[0], &byte, 1) : -1;
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      // Closed without a word: the daemon failed (its reason is in the log) and exits.
      int status;
      while (::waitpid(daemon, &status, 0) < 0 && errno == EINTR) {
      }
      std::string why = daemon_complaint(a.log);
      if (mount_state(a.mnt, a.parent_dev, nullptr) == MountState::kDead)
        lazy_unmount(a.fusermount, a.mnt);
      report(why);
      ::_exit(1);
    }
    MountState state = mount_state(a.mnt, a.parent_dev, &mine);
    if (state == MountState::kMounted) break;
    // Mounted, but the daemon cannot serve the root directory (ENOENT, EIO), or gave up on the
    // connection (ENOTCONN); or, where nothing is mounted, a daemon that is not berth-squashfs.
    std::string why = std::strerror(errno);
    ::kill(daemon, SIGTERM);  // it unmounts on the way out
    if (!wait_exit(daemon, kStopTimeoutMs)) ::kill(daemon, SIGKILL);
    if (state == MountState::kAbsent) {
      report("the squashfs daemon reported a mount on " + a.mnt + " that is not there");
      ::_exit(1);
    }
    lazy_unmount(a.fusermount, a.mnt);
    report("corrupt squashfs image: its root directory cannot be read (" + why + ")");
    ::_exit(1);
  }
  ::close(ready[0]);
  report("");

  // Wait for the last user. SIGCHLD (the daemon died) interrupts the flock; a once-a-second
  // alarm covers a SIGCHLD that came just before it.
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = keeper_wake;  // no SA_RESTART: flock returns EINTR
  ::sigaction(SIGCHLD, &sa, nullptr);
  ::sigaction(SIGALRM, &sa, nullptr);
  struct itimerval tick = {{1, 0}, {1, 0}};
  ::setitimer(ITIMER_REAL, &tick, nullptr);
  bool daemon_gone = false;
  for (;;) {
    if (::flock(users, LOCK_EX) == 0) break;
    int status;
    if (::waitpid(daemon, &status, WNOHANG) == daemon) {
      daemon_gone = true;
      break;
    }
  }
  if (!daemon_gone) {
    // No user left, and none can come while this process holds users.lock exclusively.
    ::kill(daemon, SIGTERM);
    if (!wait_exit(daemon, kStopTimeoutMs)) {
      ::kill(daemon, SIGKILL);
      wait_exit(daemon, kStopTimeoutMs);
    }
  } else {
    // Users may be left, on a dead mount; take it away from under any start's check.
    while (::flock(create, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  dev_t now = 0;
  MountState state = mount_state(a.mnt, a.parent_dev, &now);
  if (state == MountState::kDead || state == MountState::kBroken ||
      (state == MountState::kMounted && now == mine))
    lazy_unmount(a.fusermount, a.mnt);
  ::_exit(0);
}

/// Forks the keeper (detached: its own session, and not a child of this process) and waits
/// for its word. This process has started no thread yet (`berth run` mounts before it starts
/// anything), so the forked copy may allocate.
Status start_keeper(const SquashfsFile& image, const KeeperArgs& args) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return sys_error("pipe", "squashfs keeper");
  UniqueFd report_r(fds[0]), report_w(fds[1]);
  pid_t middle = ::fork();
  if (middle < 0) return sys_error("fork", "squashfs keeper");
  if (middle == 0) {
    ::setsid();
    pid_t keeper = ::fork();
    if (keeper != 0) ::_exit(keeper < 0 ? 1 : 0);
    // Only what the keeper needs survives: the report pipe on 3 (close-on-exec, so that the
    // daemon does not hold it), the image on 4 (inherited by the daemon, which mounts
    // /proc/self/fd/4), /dev/null on 0-2. The start's lock descriptors must go: a flock
    // belongs to the open file, and the keeper's copy would hold the start's lock for ever.
    int rep = ::fcntl(report_w.get(), F_DUPFD_CLOEXEC, 64);
    int img = ::fcntl(image.fd.get(), F_DUPFD, 64);
    if (rep < 0 || img < 0 || ::dup2(rep, kReportFd) < 0 || ::dup2(img, kImageFd) < 0) ::_exit(1);
    ::fcntl(kReportFd, F_SETFD, FD_CLOEXEC);
    ::syscall(SYS_close_range, kImageFd + 1, ~0U, 0);
    int null_fd = ::open("/dev/null", O_RDWR);
    if (null_fd >= 0) {
      ::dup2(null_fd, STDIN_FILENO);
      ::dup2(null_fd, STDOUT_FILENO);
      ::dup2(null_fd, STDERR_FILENO);
      if (null_fd > kImageFd) ::close(null_fd);
    }
    keeper_main(args);
  }
  report_w.reset();
  int status;
  while (::waitpid(middle, &status, 0) < 0 && errno == EINTR) {
  }
  std::string word;
  char buf[512];
  for (;;) {
    ssize_t n = ::read(report_r.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    word.append(buf, static_cast<size_t>(n));
  }
  if (word == "ok") return {};
  if (word.empty())
    return make_error("mount squashfs", image.path, "the mount's keeper died before it was ready");
  return make_error("mount squashfs", image.path, word.substr(1));
}

}  // namespace

Result<SquashfsTools> find_squashfs_tools() {
  SquashfsTools t;
  t.fusermount = BERTH_TRY(find_program("fusermount3", "fuse3"));
  if (const char* v = ::getenv("BERTH_SQUASHFS_DAEMON"); v != nullptr && *v != '\0') {
    if (!executable(v))
      return make_error("mount squashfs", std::string("BERTH_SQUASHFS_DAEMON=") + v,
                        "not an executable file");
    t.daemon = v;
    return t;
  }
  char exe[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return sys_error("readlink", "/proc/self/exe");
  exe[n] = '\0';
  std::string dir(exe, static_cast<size_t>(n));
  dir.erase(dir.rfind('/'));
  std::vector<std::string> candidates = helper_candidates(dir, "berth-squashfs");
  for (const std::string& candidate : candidates) {
    if (executable(candidate)) {
      t.daemon = candidate;
      return t;
    }
  }
  return make_error("mount squashfs", candidates.front(),
                    "Berth's squashfs daemon is missing beside the berth binary and in " +
                        path_join(dir, std::string(kHelperDirFromBin)),
                    ErrorCode::kNotFound)
      .with_hint(
          "build it with berth (cmake --build) and install the two together "
          "(cmake --install)");
}

Result<SquashfsMount> acquire_squashfs_mount(const SquashfsFile& image, const std::string& base) {
  std::string keydir = path_join(base, squashfs_key(image.st));
  SquashfsMount m;
  m.root = path_join(keydir, "mnt");
  m.scratch = path_join(keydir, "scratch");
  BERTH_CHECK(make_dirs(m.root, 0700));
  BERTH_CHECK(make_dirs(m.scratch, 0700));
  struct stat parent;
  if (::stat(keydir.c_str(), &parent) != 0) return sys_error("stat", keydir);

  std::string users_lock = path_join(keydir, "users.lock");
  FileLock create = BERTH_TRY(FileLock::acquire(path_join(keydir, "create.lock")));
  m.hold = BERTH_TRY(FileLock::acquire(users_lock, FileLock::Mode::kShared));
  MountState state = mount_state(m.root, parent.st_dev, nullptr);
  if (state == MountState::kMounted) return m;
  SquashfsTools tools = BERTH_TRY(find_squashfs_tools());
  if (state == MountState::kDead || state == MountState::kBroken) {
    lazy_unmount(tools.fusermount, m.root);  // a daemon killed outright left it
    if (mount_state(m.root, parent.st_dev, nullptr) != MountState::kAbsent)
      return make_error("mount squashfs", m.root, "a dead mount of this image cannot be removed")
          .with_hint("fusermount3 -u -z " + m.root);
  }
  KeeperArgs a;
  a.mnt = m.root;
  a.keydir = keydir;
  a.users_lock = users_lock;
  a.create_lock = path_join(keydir, "create.lock");
  a.log = path_join(keydir, "daemon.log");
  a.fusermount = tools.fusermount;
  a.parent_dev = parent.st_dev;
  // berth-squashfs runs in the foreground and reports every file as this user's (its own uid
  // and gid); libfuse finds fusermount3 on PATH.
  a.argv = {tools.daemon, "/proc/self/fd/" + std::to_string(kImageFd), m.root};
  if (image.extent.offset != 0)  // a SIF file's partition (image/sif.h)
    a.argv.insert(a.argv.begin() + 1, {"--offset", std::to_string(image.extent.offset)});
  a.env = {"PATH=" + env_or("PATH", "/usr/bin:/bin")};
  BERTH_CHECK(start_keeper(image, a));
  m.started = true;
  return m;
}

}  // namespace berth
