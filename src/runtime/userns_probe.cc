// probe_user_namespaces(): can this user create a user namespace here?
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "core/fs.h"
#include "runtime/container_spec.h"

namespace berth {
namespace {

/// Reads a small integer sysctl; -1 when the file is absent or unreadable.
long read_sysctl(const char* path) {
  auto text = read_file(path);
  if (!text) return -1;  // absent on kernels without the knob: not a refusal
  try {
    return std::stol(*text);
  } catch (...) {
    return -1;  // unparsable: treat as absent, the real unshare() below decides
  }
}

}  // namespace

Status probe_user_namespaces() {
  static const std::string kHint =
      "ask the administrator to enable unprivileged user namespaces, or use a fallback engine "
      "(--engine=proot)";
  if (read_sysctl("/proc/sys/kernel/unprivileged_userns_clone") == 0)
    return make_error(
               "probe", "user namespaces",
               "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone=0)")
        .with_hint(kHint);
  if (read_sysctl("/proc/sys/user/max_user_namespaces") == 0)
    return make_error("probe", "user namespaces",
                      "user namespaces are disabled (user.max_user_namespaces=0)")
        .with_hint(kHint);
  // The knobs can allow it while a seccomp filter or LSM still refuses: try for real, in a
  // child so that this process stays in its namespaces.
  int fds[2];
  if (pipe(fds) != 0) return sys_error("pipe", "user namespace probe");
  pid_t pid = fork();
  if (pid < 0) return sys_error("fork", "user namespace probe");
  if (pid == 0) {
    int err = unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0 ? 0 : errno;
    (void)!write(fds[1], &err, sizeof err);  // the parent treats a short read as failure
    _exit(0);
  }
  close(fds[1]);
  int err = -1;
  ssize_t n = read(fds[0], &err, sizeof err);
  close(fds[0]);
  int status;
  waitpid(pid, &status, 0);
  if (n != sizeof err) return make_error("probe", "user namespaces", "the probe process failed");
  if (err != 0) return sys_error("unshare", "user namespace", err).with_hint(kHint);
  return {};
}

}  // namespace berth
