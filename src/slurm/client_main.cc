// berth-slurm-client: `srun` (and the other names in host_tools.h) inside an
// `sbatch --container-image` batch container. It asks the plugin's agent on the host to run the
// host's own tool with this argv, environment, working directory and stdin/stdout/stderr, passes
// signals on, and exits with the tool's status. Linked statically: it runs in any image.

#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/write_fully.h"
#include "slurm/host_tools.h"

extern char** environ;

namespace {

int g_sock = -1;

void forward(int sig) {
  auto byte = static_cast<unsigned char>(sig);
  (void)!::write(g_sock, &byte, 1);
}

/// One line, `berth: error: exec: "NAME": WHAT[: ERRNO]`, and `status` (127: not here, as a
/// shell's "not found"; 126: here but it cannot run).
[[noreturn]] void fail(const std::string& name, const std::string& what, int err, int status) {
  std::string line = "berth: error: exec: \"" + name + "\": " + what;
  if (err != 0) line += std::string(": ") + std::strerror(err);
  line += "\n";
  (void)!::write(STDERR_FILENO, line.data(), line.size());
  std::exit(status);
}

}  // namespace

int main(int argc, char** argv) {
  std::string name = argv[0];
  if (size_t slash = name.rfind('/'); slash != std::string::npos) name = name.substr(slash + 1);
  if (!berth::slurm::is_host_tool(name)) fail(name, "not one of Slurm's clients", 0, 127);
  const char* path = std::getenv(berth::slurm::kAgentEnv);
  if (path == nullptr)
    fail(name,
         std::string(berth::slurm::kAgentEnv) +
             " is not set (only the batch script of sbatch --container-image reaches Slurm)",
         0, 127);

  std::string request = name;
  request.push_back('\0');
  char cwd[4096];
  request += ::getcwd(cwd, sizeof cwd) != nullptr ? cwd : "/";
  request.push_back('\0');
  request += std::to_string(argc);
  request.push_back('\0');
  for (int i = 0; i < argc; ++i) {
    request += argv[i];
    request.push_back('\0');
  }
  for (char** e = environ; *e != nullptr; ++e) {
    request += *e;
    request.push_back('\0');
  }

  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (std::strlen(path) >= sizeof addr.sun_path)
    fail(name, std::string("the agent's socket path is too long: ") + path, 0, 126);
  std::strcpy(addr.sun_path, path);
  g_sock = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (g_sock < 0 || ::connect(g_sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    fail(name, std::string("cannot reach the agent on the host (") + path + ")", errno, 126);

  uint64_t length = request.size();
  int fds[3] = {0, 1, 2};
  char control[CMSG_SPACE(sizeof fds)] = {};
  iovec iov{&length, sizeof length};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof fds);
  std::memcpy(CMSG_DATA(c), fds, sizeof fds);
  ssize_t sent;
  do {
    sent = ::sendmsg(g_sock, &msg, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent != static_cast<ssize_t>(sizeof length) ||
      !berth::write_fully(g_sock, request.data(), request.size()))
    fail(name, std::string("cannot reach the agent on the host (") + path + ")", errno, 126);

  struct sigaction sa = {};
  sa.sa_handler = forward;
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCONT, SIGTSTP})
    ::sigaction(sig, &sa, nullptr);

  int32_t status = 0;
  size_t got = 0;
  while (got < sizeof status) {
    ssize_t n = ::read(g_sock, reinterpret_cast<char*>(&status) + got, sizeof status - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      fail(name, "the agent on the host ended before " + name + " did", n < 0 ? errno : 0, 126);
    got += static_cast<size_t>(n);
  }
  if (status == berth::slurm::kRefusedStatus)
    fail(name,
         "the agent on the host serves only the job's user, not uid " + std::to_string(::getuid()) +
             " of this container",
         0, 126);
  return status;
}
