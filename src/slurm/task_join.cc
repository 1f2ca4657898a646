#include "slurm/task_join.h"

extern "C" {
#include <slurm/slurm.h>
}

#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/capability.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "runtime/root_emulation.h"
#include "slurm/slurm_compat.h"
#include "slurm/spank_plugin.h"

namespace berth::slurm {
namespace {

bool same_ns(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_ino == sb.st_ino &&
         sa.st_dev == sb.st_dev;
}

/// The container's environment merged into the task's, as pyxis does: the image's variables
/// win, except those --container-env names; LANG and LC_ALL come from the image only.
Problem merge_environment(spank_t sp, long pid) {
  const Options& o = g_state.opts;
  auto listed = [&](std::string_view n) {
    for (const std::string& e : o.env_names)
      if (e == n) return true;
    return false;
  };
  std::string text = read_file("/proc/" + std::to_string(pid) + "/environ");
  for (const char* n : {"LANG", "LANGUAGE", "LC_ALL"})
    if (!listed(n)) spank_unsetenv(sp, n);
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\0', start);
    if (end == std::string::npos) end = text.size();
    std::string kv = text.substr(start, end - start);
    start = end + 1;
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
    if (k == "HOSTNAME") continue;        // the node's name is the truth in a job
    if (launcher_variable(kv)) continue;  // the task's own rank, not the holder's
    spank_err_t e = spank_setenv(sp, k.c_str(), v.c_str(), listed(k) ? 0 : 1);
    if (e != ESPANK_SUCCESS && e != ESPANK_ENV_EXISTS)  // exists: a --container-env name
      return "env: cannot set " + k + ": " + spank_strerror(e);
  }
  // PMIx: the modules the server chose, as MCA parameters that a client in the image (maybe
  // an older PMIx) reads, unless the job set them (enroot's PMI hook does the same).
  for (auto [from, to] : {std::pair{"PMIX_PTL_MODULE", "PMIX_MCA_ptl"},
                          std::pair{"PMIX_SECURITY_MODE", "PMIX_MCA_psec"},
                          std::pair{"PMIX_GDS_MODULE", "PMIX_MCA_gds"}}) {
    char value[256];
    if (spank_getenv(sp, from, value, sizeof value) == ESPANK_SUCCESS)
      spank_setenv(sp, to, value, 0);
  }
  // PyTorch's launcher variables for PyTorch images: RANK and LOCAL_RANK as pyxis sets them,
  // WORLD_SIZE, MASTER_ADDR (the step's first node) and MASTER_PORT (the job's) as enroot's
  // PyTorch hook does, for torch.distributed's env:// (each only when not set already).
  char buf[64];
  if (spank_getenv(sp, "PYTORCH_VERSION", buf, sizeof buf) == ESPANK_SUCCESS) {
    uint32_t job = 0;
    if (spank_get_item(sp, S_JOB_ID, &job) == ESPANK_SUCCESS)
      spank_setenv(sp, "MASTER_PORT", std::to_string(master_port(job)).c_str(), 0);
    if (spank_getenv(sp, "SLURM_PROCID", buf, sizeof buf) == ESPANK_SUCCESS)
      spank_setenv(sp, "RANK", buf, 1);
    if (spank_getenv(sp, "SLURM_LOCALID", buf, sizeof buf) == ESPANK_SUCCESS)
      spank_setenv(sp, "LOCAL_RANK", buf, 1);
    if (spank_getenv(sp, "SLURM_NTASKS", buf, sizeof buf) == ESPANK_SUCCESS)
      spank_setenv(sp, "WORLD_SIZE", buf, 0);
    std::vector<char> nodes(65536);
    int len = static_cast<int>(nodes.size());
    if (spank_getenv(sp, "SLURM_STEP_NODELIST", nodes.data(), len) == ESPANK_SUCCESS ||
        spank_getenv(sp, "SLURM_JOB_NODELIST", nodes.data(), len) == ESPANK_SUCCESS) {
      // Slurm's own hostlist parser ("n[1-3],gpu07"), from the slurmstepd that loaded us.
      Hostlist hl = slurm_hostlist_create(nodes.data());
      if (hl != nullptr) {
        if (char* first = slurm_hostlist_shift(hl); first != nullptr) {
          spank_setenv(sp, "MASTER_ADDR", first, 0);
          std::free(first);
        }
        slurm_hostlist_destroy(hl);
      }
    }
  }
  return {};
}

/// The namespaces --container-unshare names, as pyxis's messages name them.
constexpr struct {
  const char* option;  ///< --container-unshare's word
  const char* ns;      ///< /proc/PID/ns/NAME
  const char* words;
} kUnshared[] = {{"net", "net", "network"}, {"ipc", "ipc", "IPC"}, {"uts", "uts", "UTS"}};

/// A step asking for namespaces of its own fails on a container that has not them (a running
/// named one, made without), as pyxis's does, rather than sharing the node's.
Problem check_unshared(const std::string& proc) {
  for (const std::string& asked : g_state.opts.unshare)
    for (const auto& u : kUnshared)
      if (asked == u.option && same_ns(std::string("/proc/self/ns/") + u.ns, proc + "/ns/" + u.ns))
        return std::string("--container-unshare=") + u.option +
               " requested but the container is not in a separate " + u.words + " namespace";
  return {};
}

}  // namespace

Problem join(spank_t sp, long pid) {
  const Options& o = g_state.opts;
  std::string proc = "/proc/" + std::to_string(pid);
  if (Problem p = check_unshared(proc); !p.empty()) return p;
  struct Ns {
    const char* name;
    int fd;
  } ns[] = {{"user", -1}, {"mnt", -1}, {"cgroup", -1}, {"uts", -1}, {"ipc", -1}, {"net", -1}};
  auto close_all = [&] {
    for (auto& n : ns)
      if (n.fd >= 0) ::close(n.fd);
  };
  for (auto& n : ns) {
    std::string theirs = proc + "/ns/" + n.name;
    if (same_ns("/proc/self/ns/" + std::string(n.name), theirs)) continue;
    n.fd = ::open(theirs.c_str(), O_RDONLY | O_CLOEXEC);
    if (n.fd < 0) {
      int e = errno;
      close_all();
      return "open: " + theirs + ": " + errno_text(e);
    }
  }
  int root = ::open((proc + "/root").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int cwd = ::open((proc + "/cwd").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0 || cwd < 0) {
    int e = errno;
    close_all();
    return "open: " + proc + "/root: " + errno_text(e);
  }
  if (Problem p = merge_environment(sp, pid); !p.empty()) return p;
  Problem p;
  for (auto& n : ns) {
    if (n.fd >= 0 && p.empty() && ::setns(n.fd, 0) != 0)
      p = std::string("setns: ") + n.name + ": " + errno_text(errno);
  }
  close_all();
  if (p.empty() && (::fchdir(root) != 0 || ::chroot(".") != 0))
    p = "chdir: /: the container's root: " + errno_text(errno);
  if (p.empty()) {
    if (!o.workdir.empty()) {
      // After chroot the working directory is the root: a relative PATH is the root's.
      if (::chdir(o.workdir.c_str()) != 0)
        p = "chdir to working directory: " + o.workdir + ": " + errno_text(errno);
    } else if (::fchdir(cwd) != 0) {
      p = "chdir to working directory: " + errno_text(errno);
    }
  }
  ::close(root);
  ::close(cwd);
  if (!p.empty()) return p;
  // The holder's root emulation (berth run's seccomp filter: set*id and chown succeed without
  // effect), which setns does not carry: the task installs it as the holder has it, as pyxis
  // installs enroot's filter in every task.
  if (read_file(proc + "/status").find("\nSeccomp:\t2") != std::string::npos &&
      berth::install_root_emulation() != 0)
    return "root emulation: seccomp: " + errno_text(errno);
  char buf[4096];
  if (::getcwd(buf, sizeof buf) != nullptr) spank_setenv(sp, "PWD", buf, 1);
  // With --container-remap-root the task is uid 0 in the container's user namespace and keeps
  // every capability that namespace gives, CAP_SYS_ADMIN included, as enroot's remapped root
  // does: `mount` and, with --container-unshare=uts, `hostname` work. It grants nothing over
  // the host: the namespace maps only the user's own uid and gid, and what it may then undo
  // (a read-only bind) are mounts of its own. Without remap-root the task is the user, with no
  // capability after exec; the bounding set loses CAP_SYS_ADMIN as under `berth run`.
  if (!o.remap_root.value_or(false) && ::prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0) != 0)
    return "drop capability: CAP_SYS_ADMIN: " + errno_text(errno);
  return {};
}

}  // namespace berth::slurm
