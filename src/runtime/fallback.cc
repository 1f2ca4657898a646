// What the fallback engines share before a run: refusing what they cannot honour, resolving
// the workload inside the rootfs, preparing the rootfs, the library search path.
#include "runtime/fallback.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "core/env_list.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/root_path.h"
#include "runtime/identity.h"

namespace berth {
Status refuse_unsupported(const ContainerSpec& spec, const Engine& engine) {
  std::string name = engine.name;
  if (!engine.devices && !spec.device_edits.empty())
    return make_error("run", "--gpus/--device", "the " + name + " engine cannot inject devices")
        .with_hint("--gpus needs the " + engines_with(&Engine::devices) + " engine");
  for (const Volume& v : spec.volumes)
    if ((v.flags != 0 || v.propagation != 0) && !engine.tmpfs)
      return make_error("mount", "volume " + v.host + ":" + v.container,
                        "the " + name + " engine cannot set mount flags or propagation")
          .with_hint("use the " + engines_with(&Engine::tmpfs) + " engine, or drop them");
  for (const Volume& v : spec.volumes)
    if (v.read_only && !engine.read_only_volumes)
      return make_error("mount", "volume " + v.host + ":" + v.container + ":ro",
                        "the " + name + " engine cannot make a volume read-only")
          .with_hint("use the " + engines_with(&Engine::read_only_volumes) +
                     " engine, or drop :ro");
  if (spec.pid_namespace && !engine.pid_namespace)
    log::warn("the {} engine has no PID namespace: --pid-ns ignored", name);
  if (!spec.tmpfs.empty() && !engine.tmpfs)
    return make_error("mount", "tmpfs " + spec.tmpfs.front().container,
                      "the " + name + " engine cannot mount a tmpfs")
        .with_hint("--tmpfs needs the " + engines_with(&Engine::tmpfs) + " engine");
  if (spec.ipc_namespace && !engine.ipc_namespace)
    log::warn("the {} engine has no IPC namespace of its own: --ipc private ignored", name);
  if (!spec.hostname.empty() && !engine.hostname)
    log::warn("the {} engine cannot set the host name: --hostname ignored", name);
  return {};
}

std::string spec_path(const ContainerSpec& spec) {
  return env_lookup(spec.env, "PATH").value_or(kDefaultPath);
}

Result<std::string> resolve_command(const ContainerSpec& spec, int* exit_code, PathView view,
                                    const std::vector<HostBind>& binds) {
  *exit_code = 125;
  if (spec.argv.empty()) return make_error("run", spec.rootfs, "no command given");
  UniqueFd root = BERTH_TRY(open_file(spec.rootfs, O_PATH | O_DIRECTORY));
  const std::string& file = spec.argv.front();
  std::string quoted = "\"" + file + "\"";  // exec: "name": ...
  // What execve would say about one candidate: 0 when it is a regular executable file.
  auto check = [&](const std::string& path) -> int {
    auto bound = std::find_if(binds.begin(), binds.end(),
                              [&path](const HostBind& b) { return b.container == path; });
    UniqueFd fd(bound != binds.end() ? ::open(bound->host.c_str(), O_PATH | O_CLOEXEC)
                : view == PathView::kInRoot
                    ? open_in_root(root.get(), path.c_str(), O_PATH)
                    : ::openat(root.get(), path.c_str() + 1, O_PATH | O_CLOEXEC));
    if (!fd.valid()) return errno;
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) return errno;
    if (S_ISDIR(st.st_mode)) return EACCES;
    if (!S_ISREG(st.st_mode) || (st.st_mode & 0111) == 0) return EACCES;
    return 0;
  };
  if (file.find('/') != std::string::npos) {
    std::string path = file.front() == '/' ? file : path_join(spec.cwd, file);
    int err = check(path);
    if (err == 0) return path;
    *exit_code = err == ENOENT || err == ENOTDIR ? 127 : 126;
    return sys_error("exec:", quoted, err);
  }
  bool denied = false;
  for (std::string dir : split_path(spec_path(spec))) {
    if (dir.empty() || dir.front() != '/') dir = path_join(spec.cwd, dir);
    std::string candidate = path_join(dir, file);
    int err = check(candidate);
    if (err == 0) return candidate;
    if (err == EACCES) denied = true;
  }
  *exit_code = denied ? 126 : 127;
  if (denied) return sys_error("exec:", quoted, EACCES);
  return make_error("exec:", quoted, "executable file not found in $PATH");
}

Status prepare_rootfs(const ContainerSpec& spec, bool identity) {
  UniqueFd root = BERTH_TRY(open_file(spec.rootfs, O_PATH | O_DIRECTORY));
  if (make_path_in_root(root.get(), spec.cwd.c_str(), false) != 0)
    return sys_error("create working directory", spec.cwd);
  if (identity) return ensure_identity(root.get(), spec).with_context("set up /etc/passwd");
  return {};
}

}  // namespace berth
