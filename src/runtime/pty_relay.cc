#include "runtime/pty_relay.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>

#include "core/root_path.h"
#include "core/write_fully.h"

namespace berth {

bool terminal_visible_in(int root_fd, int tty_fd) {
  char name[64];
  struct stat mine {
  }, theirs{};
  if (::ttyname_r(tty_fd, name, sizeof name) != 0 || ::fstat(tty_fd, &mine) != 0) return false;
  UniqueFd there(open_in_root(root_fd, name, O_PATH));
  return there.valid() && ::fstat(there.get(), &theirs) == 0 && theirs.st_rdev == mine.st_rdev &&
         theirs.st_dev == mine.st_dev && theirs.st_ino == mine.st_ino;
}

Result<ContainerPty> open_container_pty(int root_fd, int tty_fd) {
  ContainerPty pty;
  // The container's /dev/ptmx (a link to pts/ptmx of its own devpts), resolved in its root.
  pty.master.reset(open_in_root(root_fd, "/dev/ptmx", O_RDWR | O_NOCTTY));
  if (!pty.master.valid())
    return sys_error("open", "/dev/ptmx", errno).with_context("exec -t: the container's devpts");
  int unlock = 0;
  if (::ioctl(pty.master.get(), TIOCSPTLCK, &unlock) != 0)
    return sys_error("open", "/dev/ptmx", errno).with_context("exec -t: unlock the pty");
  pty.slave.reset(::ioctl(pty.master.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!pty.slave.valid())
    return sys_error("open", "/dev/ptmx", errno).with_context("exec -t: the pty's other end");
  // The command sees the caller's terminal settings and size.
  struct termios modes {};
  if (::tcgetattr(tty_fd, &modes) == 0) (void)::tcsetattr(pty.slave.get(), TCSANOW, &modes);
  struct winsize size {};
  if (::ioctl(tty_fd, TIOCGWINSZ, &size) == 0) (void)::ioctl(pty.slave.get(), TIOCSWINSZ, &size);
  return pty;
}

namespace {

/// Whether `pid` has ended, leaving it to be reaped (WNOWAIT).
bool ended(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == pid;
}

}  // namespace

void relay_pty(int master, int tty_fd, bool input, pid_t pid) {
  struct termios saved {};
  bool raw = false;
  if (input && ::tcgetattr(tty_fd, &saved) == 0) {
    struct termios r = saved;
    ::cfmakeraw(&r);
    raw = ::tcsetattr(tty_fd, TCSADRAIN, &r) == 0;
  }
  struct winsize last {};
  (void)::ioctl(tty_fd, TIOCGWINSZ, &last);
  char buf[16384];
  bool reading_input = input;
  bool done = false;
  while (!done) {
    struct pollfd fds[2] = {{master, POLLIN, 0}, {STDIN_FILENO, POLLIN, 0}};
    // A timeout, so that a resized window and an ended command are seen without signals.
    int n = ::poll(fds, reading_input ? 2 : 1, 100);
    if (n < 0 && errno != EINTR) break;  // nothing to copy from any more
    struct winsize now {};
    if (::ioctl(tty_fd, TIOCGWINSZ, &now) == 0 &&
        (now.ws_row != last.ws_row || now.ws_col != last.ws_col)) {
      (void)::ioctl(master, TIOCSWINSZ, &now);  // the pty's side sends SIGWINCH
      last = now;
    }
    if (n > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      ssize_t got = ::read(master, buf, sizeof buf);
      if (got > 0) {
        if (!write_fully(STDOUT_FILENO, buf, static_cast<size_t>(got))) break;  // stdout gone
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        break;  // EIO: every process holding the pty's other end has closed it
      }
    }
    if (reading_input && n > 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      ssize_t got = ::read(STDIN_FILENO, buf, sizeof buf);
      if (got > 0) {
        (void)write_fully(master, buf, static_cast<size_t>(got));  // an ended command: EIO
      } else if (got == 0 || errno != EINTR) {
        reading_input = false;  // the caller's input ended: the command reads no more of it
      }
    }
    if (ended(pid)) {
      // What the command wrote last is still in the pty: copy it, without waiting.
      int flags = ::fcntl(master, F_GETFL);
      if (flags >= 0) (void)::fcntl(master, F_SETFL, flags | O_NONBLOCK);
      ssize_t got;
      while ((got = ::read(master, buf, sizeof buf)) > 0)
        if (!write_fully(STDOUT_FILENO, buf, static_cast<size_t>(got))) break;
      done = true;
    }
  }
  if (raw) (void)::tcsetattr(tty_fd, TCSADRAIN, &saved);
}

}  // namespace berth
