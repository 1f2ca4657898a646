#include "runtime/exec.h"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/capability.h>
#include <linux/close_range.h>

#include <cstdlib>
#include <cstring>

#include "core/fs.h"
#include "core/signals.h"
#include "runtime/child.h"
#include "runtime/launcher.h"
#include "runtime/pty_relay.h"
#include "runtime/root_emulation.h"

namespace berth {
namespace {

/// The namespaces a container of the userns engine may have, the user namespace first: joining
/// it gives the capabilities the others need.
constexpr struct {
  const char* name;
  int type;
} kNamespaces[] = {{"user", CLONE_NEWUSER}, {"mnt", CLONE_NEWNS},  {"uts", CLONE_NEWUTS},
                   {"net", CLONE_NEWNET},   {"ipc", CLONE_NEWIPC}, {"pid", CLONE_NEWPID}};

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

/// Whether `target` runs under a seccomp filter (/proc/PID/status "Seccomp: 2"): in a
/// container of the userns engine, that is the root-emulation filter its run installed (or,
/// in one run with --root-emulation=none, a filter the workload installed itself, which then
/// gives the exec'd command root emulation it did not ask for: harmless, it only fakes).
bool has_seccomp_filter(const std::string& proc) {
  auto text = read_file(proc + "/status");
  return text.ok() && text->find("\nSeccomp:\t2\n") != std::string::npos;
}

}  // namespace

bool in_own_user_namespace(pid_t target) {
  std::string theirs = "/proc/" + std::to_string(target) + "/ns/user";
  return ::access(theirs.c_str(), F_OK) == 0 && !same_file("/proc/self/ns/user", theirs);
}

namespace {

/// One line of a uid_map or gid_map: first id inside, first id outside, how many.
struct IdRange {
  unsigned long inside = 0, outside = 0, count = 0;
};

Result<std::vector<IdRange>> id_ranges(const std::string& path) {
  std::string text = BERTH_TRY(read_file(path));
  std::vector<IdRange> out;
  IdRange r;
  const char* p = text.c_str();
  while (std::sscanf(p, " %lu %lu %lu", &r.inside, &r.outside, &r.count) == 3) {
    out.push_back(r);
    p = std::strchr(p, '\n');
    if (p == nullptr) break;
    ++p;
  }
  return out;
}

/// The id inside `target`'s user namespace that the caller's `id` (outside) maps to.
Result<unsigned long> mapped_id(pid_t target, const char* file, unsigned long me) {
  std::string path = "/proc/" + std::to_string(target) + "/" + file;
  for (const IdRange& r : BERTH_TRY(id_ranges(path)))
    if (me >= r.outside && me - r.outside < r.count) return r.inside + (me - r.outside);
  return make_error("read", path, "your user is not mapped in the container");
}

}  // namespace

Result<uid_t> mapped_uid(pid_t target) {
  return static_cast<uid_t>(BERTH_TRY(mapped_id(target, "uid_map", ::getuid())));
}

Result<gid_t> mapped_gid(pid_t target) {
  return static_cast<gid_t>(BERTH_TRY(mapped_id(target, "gid_map", ::getgid())));
}

bool maps_uid(pid_t target, uid_t uid) {
  auto ranges = id_ranges("/proc/" + std::to_string(target) + "/uid_map");
  if (!ranges.ok()) return false;
  for (const IdRange& r : *ranges)
    if (uid >= r.inside && uid - r.inside < r.count) return true;
  return false;
}

Result<std::vector<std::string>> process_environment(pid_t target) {
  std::string path = "/proc/" + std::to_string(target) + "/environ";
  std::string text = BERTH_TRY(read_file(path));
  std::vector<std::string> env;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\0', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) env.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return env;
}

RunOutcome exec_in_container(const ExecSpec& spec) {
  auto failed = [](Error e) { return RunOutcome{125, std::move(e)}; };
  std::string proc = "/proc/" + std::to_string(spec.target);
  // Opened before the fork, so that a failure is one line from here.
  std::vector<std::pair<UniqueFd, const char*>> ns;
  for (const auto& n : kNamespaces) {
    std::string theirs = proc + "/ns/" + n.name;
    if (same_file("/proc/self/ns/" + std::string(n.name), theirs)) continue;  // not a new one
    auto fd = open_file(theirs, O_RDONLY);
    if (!fd.ok()) return failed(std::move(fd).error());
    ns.emplace_back(std::move(fd).value(), n.name);
  }
  auto root = open_file(proc + "/root", O_RDONLY | O_DIRECTORY);
  if (!root.ok()) return failed(std::move(root).error());
  auto devnull = open_file("/dev/null", O_RDONLY);
  if (!devnull.ok()) return failed(std::move(devnull).error());
  // The command gets the same root emulation as the container's workload.
  bool emulate_root = has_seccomp_filter(proc) && root_emulation_supported();

  // The child allocates nothing: every string it needs is ready here.
  std::vector<char*> argv, envp;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const char* path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  for (const std::string& e : spec.env) {
    envp.push_back(const_cast<char*>(e.c_str()));
    if (e.starts_with("PATH=")) path = e.c_str() + 5;
  }
  envp.push_back(nullptr);
  ChildContext ctx;
  ctx.argv = argv;
  ctx.envp = envp;
  ctx.path = path;
  bool join_pid = false;
  for (const auto& [fd, name] : ns) join_pid = join_pid || std::strcmp(name, "pid") == 0;

  // -t: the command becomes the terminal's foreground group (as `run -t` makes the workload),
  // so that ^C, job control and the terminal's reads reach it. SIGTTOU stays blocked until it
  // has taken the terminal, and here until this process has taken it back.
  int tty_fd = spec.tty ? foreground_terminal() : -1;
  // A container whose /dev/pts is its own cannot name the caller's terminal (`tty` would say
  // "not a tty"): the command gets a pty of that devpts, and this process copies between them.
  ContainerPty pty;
  if (tty_fd >= 0 && !terminal_visible_in(root->get(), tty_fd)) {
    auto made = open_container_pty(root->get(), tty_fd);
    if (!made.ok()) return failed(std::move(made).error());
    pty = std::move(made).value();
  }
  int pty_slave = pty.slave.get();
  sigset_t ttou, old_mask;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  ::sigprocmask(SIG_BLOCK, &ttou, &old_mask);

  int report_fds[2];
  if (::pipe2(report_fds, O_CLOEXEC) != 0) {
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    return failed(sys_error("pipe", "exec"));
  }
  UniqueFd report_r(report_fds[0]), report_w(report_fds[1]);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    return failed(sys_error("fork", "exec"));
  }
  if (pid == 0) {
    int out = report_w.get();
    // Every step from fork to exec; returns only on failure, reported below, once.
    auto enter_and_exec = [&](ChildFailure& f) -> ChildStep {
      if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || ::getppid() != parent)
        return step_failed(f, 125, errno, "set the parent death signal", "");
      for (const auto& [fd, name] : ns) {
        if (::setns(fd.get(), 0) != 0) return step_failed(f, 125, errno, "setns", name);
      }
      if (::fchdir(root->get()) != 0 || ::chroot(".") != 0)
        return step_failed(f, 125, errno, "chdir", "/", "the container's root");
      if (::chdir(spec.cwd.c_str()) != 0)
        return step_failed(f, 125, errno, "chdir to working directory", spec.cwd.c_str());
      if (join_pid) {
        // A PID namespace is entered by the next child only: that child runs the command,
        // this one passes signals on and its status back.
        pid_t inner = ::fork();
        if (inner < 0) return step_failed(f, 125, errno, "fork", "exec");
        if (inner > 0) {
          report_w.reset();
          forward_signals_to(inner, nullptr);
          int status = 0;
          while (::waitpid(inner, &status, 0) < 0 && errno == EINTR) {
          }
          if (WIFSIGNALED(status)) {
            reset_forwarded_signals();
            ::kill(::getpid(), WTERMSIG(status));
          }
          ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
        }
        (void)::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
      }
      if (pty_slave >= 0) {
        // The container's pty: a session of its own whose controlling terminal it is, on all
        // three standard descriptors (the process that execs: with a PID namespace, the inner).
        if (::setsid() < 0 || ::ioctl(pty_slave, TIOCSCTTY, 0) != 0)
          return step_failed(f, 125, errno, "open", "the container's pty", "TIOCSCTTY");
        for (int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO})
          if (::dup2(pty_slave, fd) < 0) return step_failed(f, 125, errno, "dup2", "the pty");
      } else {
        take_terminal(tty_fd);  // the process that execs: with a PID namespace, the inner one
      }
      ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
      // -t without -i: stdin is the terminal (as run -t gives it), else /dev/null.
      if (pty_slave < 0 && !spec.stdin_open &&
          ::dup2(tty_fd >= 0 ? tty_fd : devnull->get(), STDIN_FILENO) < 0)
        return step_failed(f, 125, errno, "dup2", "/dev/null");
      // -u of a user the container does not map: a user namespace of the command's own, in
      // the container's, maps it onto the container's user (the kernel lets a process map its
      // own ids in a namespace it made). Its capabilities there end at exec (a uid other than 0).
      if (!spec.nested_uid_map.empty()) {
        if (::unshare(CLONE_NEWUSER) != 0)
          return step_failed(f, 125, errno, "unshare", "user namespace", "for exec -u");
        BERTH_CHILD_CHECK(
            write_single_id_maps(spec.nested_uid_map.c_str(), spec.nested_gid_map.c_str(), f));
      }
      // As the workload: without CAP_SYS_ADMIN a root command cannot undo the mount plan.
      if (::prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0) != 0)
        return step_failed(f, 125, errno, "drop capability", "CAP_SYS_ADMIN");
      if (emulate_root && install_root_emulation() != 0)
        return step_failed(f, 125, errno, "root emulation", "seccomp filter");
      // -u of a user the container maps (subordinate IDs): set here, after the steps above
      // that need the capabilities a uid other than 0 loses.
      if (spec.uid >= 0) {
        auto gid = static_cast<gid_t>(spec.gid);
        if (::setgroups(1, &gid) != 0 || ::setresgid(gid, gid, gid) != 0)
          return step_failed(f, 125, errno, "map identity", "exec -u", "setresgid");
        auto uid = static_cast<uid_t>(spec.uid);
        if (::setresuid(uid, uid, uid) != 0)
          return step_failed(f, 125, errno, "map identity", "exec -u", "setresuid");
      }
      (void)::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);  // ENOSYS: a harmless leak
      keep_across_exec(spec.kept_fds);  // a launcher's (runtime/launcher.h)
      reset_forwarded_signals();
      return exec_workload(ctx, f);
    };
    ChildFailure f;
    (void)enter_and_exec(f);  // it failed: f says how
    report_child_failure(out, f);
  }
  ForwardedActions old_actions;
  forward_signals_to(pid, &old_actions);
  report_w.reset();
  pty.slave.reset();  // the command's now: the pty ends when its last holder closes it
  ChildFailure failure;
  size_t got = read_child_report(report_r.get(), &failure);
  if (pty.master.valid()) relay_pty(pty.master.get(), tty_fd, spec.stdin_open, pid);
  int status = wait_child(pid);
  stop_forwarding(old_actions);
  if (tty_fd >= 0) (void)::tcsetpgrp(tty_fd, ::getpgrp());  // best effort: the command is over
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  return child_outcome(status, failure, got, spec.argv.empty() ? "" : spec.argv.front());
}

}  // namespace berth
