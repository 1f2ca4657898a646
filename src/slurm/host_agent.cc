#include "slurm/host_agent.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "slurm/host_tools.h"

namespace berth::slurm {
namespace {

/// Where the host's clients are looked up (the agent ignores the container's PATH).
constexpr const char* kHostPath[] = {"/usr/local/bin", "/usr/bin", "/bin"};

bool read_all(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

/// One request, in a child of the agent: runs the tool and reports its status.
[[noreturn]] void serve(int conn) {
  ::signal(SIGCHLD, SIG_DFL);
  uint64_t length = 0;
  int fds[3] = {-1, -1, -1};
  char control[CMSG_SPACE(sizeof fds)] = {};
  iovec iov{&length, sizeof length};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t got;
  do {
    got = ::recvmsg(conn, &msg, MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (got != static_cast<ssize_t>(sizeof length) || c == nullptr || c->cmsg_type != SCM_RIGHTS ||
      c->cmsg_len != CMSG_LEN(sizeof fds) || length > kMaxRequest)
    _exit(1);
  std::memcpy(fds, CMSG_DATA(c), sizeof fds);
  std::string request(length, '\0');
  if (!read_all(conn, request.data(), request.size())) _exit(1);

  std::vector<std::string> fields;
  for (size_t start = 0; start < request.size();) {
    size_t end = request.find('\0', start);
    if (end == std::string::npos) end = request.size();
    fields.push_back(request.substr(start, end - start));
    start = end + 1;
  }
  if (fields.size() < 3) _exit(1);
  const std::string& name = fields[0];
  const std::string& cwd = fields[1];
  size_t argc = std::strtoul(fields[2].c_str(), nullptr, 10);
  if (!is_host_tool(name) || argc < 1 || 3 + argc > fields.size()) _exit(1);
  std::vector<char*> argv, envp;
  for (size_t i = 3; i < 3 + argc; ++i) argv.push_back(fields[i].data());
  argv.push_back(nullptr);
  std::string agent_var = std::string(kAgentEnv) + "=";
  for (size_t i = 3 + argc; i < fields.size(); ++i)
    if (!fields[i].starts_with(agent_var)) envp.push_back(fields[i].data());  // not for steps
  envp.push_back(nullptr);
  std::string program;
  for (const char* dir : kHostPath) {
    std::string p = std::string(dir) + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) {
      program = p;
      break;
    }
  }
  std::string not_found = "berth: error: exec: \"" + name + "\": not found on the host\n";

  pid_t child = ::fork();
  if (child == 0) {
    if (::dup2(fds[0], 0) < 0 || ::dup2(fds[1], 1) < 0 || ::dup2(fds[2], 2) < 0) _exit(126);
    (void)::syscall(SYS_close_range, 3U, ~0U, 0U);  // ENOSYS: the rest are close-on-exec
    // The container's working directory, where the host has it; else the job's (the agent's).
    (void)!::chdir(cwd.c_str());
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (!program.empty()) ::execve(program.c_str(), argv.data(), envp.data());
    (void)!::write(2, not_found.data(), not_found.size());
    _exit(127);
  }
  for (int fd : fds) ::close(fd);
  if (child < 0) _exit(1);
  int status = 0;
  for (;;) {
    pid_t w = ::waitpid(child, &status, WNOHANG);
    if (w == child) break;
    pollfd p{conn, POLLIN, 0};
    if (::poll(&p, 1, 100) > 0) {
      unsigned char sig = 0;
      ssize_t n = ::read(conn, &sig, 1);
      if (n == 1 && sig > 0 && sig < NSIG) {
        ::kill(child, sig);
      } else if (n == 0) {
        ::kill(child, SIGTERM);  // the client is gone: so is the point of its tool
        while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
        }
        _exit(0);
      }
    }
  }
  int32_t code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  (void)!::write(conn, &code, sizeof code);
  _exit(0);
}

[[noreturn]] void agent_loop(int listener) {
  int null = ::open("/dev/null", O_RDWR);
  if (null >= 0) {
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(null, 2);
    if (null > 2) ::close(null);
  }
  ::signal(SIGCHLD, SIG_IGN);  // requests' children reap themselves
  for (;;) {
    int conn = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      _exit(1);
    }
    // Only the job's user: in a container whose other IDs are subordinate ones (Berth's
    // subids mode) a process running as one of those must not run Slurm's clients as the user.
    ucred peer{};
    socklen_t len = sizeof peer;
    if (::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || peer.uid != ::getuid()) {
      int32_t refused = kRefusedStatus;
      (void)!::write(conn, &refused, sizeof refused);
      ::close(conn);
      continue;
    }
    pid_t h = ::fork();
    if (h == 0) {
      ::close(listener);
      serve(conn);
    }
    ::close(conn);
  }
}

}  // namespace

std::string start_host_agent(const std::string& socket_path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof addr.sun_path)
    return "bind: " + socket_path + ": path too long for a unix socket";
  std::strcpy(addr.sun_path, socket_path.c_str());
  (void)::unlink(socket_path.c_str());  // a previous run's, on the same node and job
  int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) return std::string("socket: ") + std::strerror(errno);
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener, 64) != 0) {
    std::string p = "bind: " + socket_path + ": " + std::strerror(errno);
    ::close(listener);
    return p;
  }
  pid_t parent = ::getpid();
  pid_t agent = ::fork();
  if (agent == 0) {
    // It ends with the batch task (the script's process): nothing of it outlives the job.
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) _exit(0);
    (void)::prctl(PR_SET_NAME, kAgentProcessName);  // for ps; else it reads as slurmstepd
    agent_loop(listener);
  }
  int err = errno;
  ::close(listener);
  if (agent < 0) return std::string("fork: ") + std::strerror(err);
  return {};
}

}  // namespace berth::slurm
