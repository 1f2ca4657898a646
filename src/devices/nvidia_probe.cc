#include "devices/nvidia_probe.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace berth {

Version probe_cuda_driver_version(const std::string& host_path, std::string* note) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    *note = "pipe: " + std::string(strerror(errno));
    return {};
  }
  pid_t pid = fork();
  if (pid < 0) {
    *note = "fork: " + std::string(strerror(errno));
    close(fds[0]);
    close(fds[1]);
    return {};
  }
  if (pid == 0) {
    // Child: Berth is single-threaded when it discovers, so dlopen after fork is safe.
    close(fds[0]);
    alarm(5);
    int v = -1;
    if (void* h = dlopen(host_path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      using Fn = int (*)(int*);
      if (auto fn = reinterpret_cast<Fn>(dlsym(h, "cuDriverGetVersion"))) {
        int out = 0;
        if (fn(&out) == 0) v = out;
      } else {
        v = -2;
      }
    }
    ssize_t w = write(fds[1], &v, sizeof v);
    _exit(w == sizeof v ? 0 : 1);
  }
  close(fds[1]);
  int v = -1;
  ssize_t n;
  do n = read(fds[0], &v, sizeof v);
  while (n < 0 && errno == EINTR);
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (n != sizeof v) {
    *note = WIFSIGNALED(status)
                ? "probing libcuda failed: killed by signal " + std::to_string(WTERMSIG(status))
                : "probing libcuda failed";
    return {};
  }
  if (v == -2)
    *note = "libcuda has no cuDriverGetVersion";
  else if (v < 0)
    *note = "libcuda could not be loaded or cuDriverGetVersion failed";
  return cuda_version_from_int(v);
}

}  // namespace berth
