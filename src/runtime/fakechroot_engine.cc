// The fakechroot engine: Debian's libfakechroot, preloaded into the image's own ELF loader,
// rewrites the paths of libc calls to lie under FAKECHROOT_BASE. No namespaces, no ptrace, so
// close to bare speed; but only dynamically linked glibc programs are covered (a static or musl
// program would see the host), the user stays the caller, and the kernel follows symlinks on
// the host: absolute links in the rootfs must name host paths (Engine::host_path_links; runtime's
// link_form.h rewrites them around the run). Volumes are links to the host path, excluded from
// translation, removed after the run.
#include "runtime/fakechroot_engine.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/elf.h"
#include "core/env.h"
#include "core/env_list.h"
#include "core/fs.h"
#include "core/root_path.h"
#include "core/strings.h"
#include "runtime/fallback.h"
#include "runtime/mount_plan.h"
#include "runtime/spawn.h"
#include "runtime/tool.h"

namespace berth {
namespace {

#if defined(__x86_64__)
constexpr const char* kMultiarch = "x86_64-linux-gnu";
#elif defined(__aarch64__)
constexpr const char* kMultiarch = "aarch64-linux-gnu";
#else
#error "add this architecture's multiarch tuple"
#endif

}  // namespace

Result<std::string> find_libfakechroot(const EngineTool& tool, const char* package) {
  std::string env = tool.env_var != nullptr ? env_or(tool.env_var, "") : "";
  if (!env.empty()) {
    if (path_exists(env)) return env;
    return make_error("engine", std::string(tool.env_var) + "=" + env, "no such file");
  }
  for (const std::string& dir :
       {std::string("/usr/lib/") + kMultiarch + "/fakechroot", std::string("/usr/lib/fakechroot"),
        std::string("/usr/lib64/fakechroot")}) {
    std::string lib = path_join(dir, "libfakechroot.so");
    if (path_exists(lib)) return lib;
  }
  return make_error("engine", tool.name, "not installed (libfakechroot.so not found)")
      .with_hint(std::string("install the Debian package '") + package + "'");
}

namespace {

/// The image's library folders, as its loader would search them (existing ones only).
std::vector<std::string> library_dirs(const std::string& rootfs) {
  std::vector<std::string> dirs = {std::string("/lib/") + kMultiarch,
                                   std::string("/usr/lib/") + kMultiarch,
                                   "/lib64",
                                   "/usr/lib64",
                                   "/lib",
                                   "/usr/lib",
                                   "/usr/local/lib"};
  glob_t g;
  if (::glob((rootfs + "/etc/ld.so.conf.d/*.conf").c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) {
      auto text = read_file(g.gl_pathv[i]);
      if (!text) continue;  // unreadable configuration: the standard folders remain
      for (std::string_view line : split_lines(*text))
        if (line.starts_with("/")) dirs.emplace_back(line.substr(0, line.find_first_of(" \t#")));
    }
    ::globfree(&g);
  }
  std::vector<std::string> out;
  for (const std::string& d : dirs) {
    struct stat st;
    if (::stat((rootfs + d).c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
        std::find(out.begin(), out.end(), d) == out.end())
      out.push_back(d);
  }
  return out;
}

/// A volume made a link for one run: the link, and whether an empty folder was there before.
struct VolumeLink {
  std::string link;
  bool was_dir = false;
};

/// Makes each volume whose host and container paths differ a link in the rootfs to the host
/// path. Only a missing or empty folder can become a link.
Result<std::vector<VolumeLink>> link_volumes(const ContainerSpec& spec) {
  std::vector<VolumeLink> made;
  for (const Volume& v : spec.volumes) {
    std::string target = BERTH_TRY(normalize_container_path(v.container));
    if (target == v.host) continue;  // excluded from translation instead
    std::string link = spec.rootfs + target;
    struct stat st;
    VolumeLink l{link, false};
    if (::lstat(link.c_str(), &st) == 0) {
      char buf[4096];
      ssize_t n = S_ISLNK(st.st_mode) ? ::readlink(link.c_str(), buf, sizeof buf) : -1;
      if (n >= 0 && std::string_view(buf, static_cast<size_t>(n)) == v.host) {
        made.push_back(l);  // left by a run that was killed: reuse it
        continue;
      }
      if (!S_ISDIR(st.st_mode) || ::rmdir(link.c_str()) != 0)
        return make_error("mount", "volume " + v.host + ":" + v.container,
                          "the fakechroot engine can bind a volume only where the image has "
                          "nothing or an empty folder")
            .with_hint("choose another container path, or use another engine");
      l.was_dir = true;
    } else {
      BERTH_CHECK(make_dirs(link.substr(0, link.rfind('/'))));
    }
    if (::symlink(v.host.c_str(), link.c_str()) != 0) return sys_error("symlink", link);
    made.push_back(l);
  }
  return made;
}

void unlink_volumes(const std::vector<VolumeLink>& links) {
  for (const VolumeLink& l : links) {
    // Best effort: a link left behind is reused by the next fakechroot run and, like the rest of
    // the rootfs, only this container's.
    if (::unlink(l.link.c_str()) == 0 && l.was_dir) (void)::mkdir(l.link.c_str(), 0755);
  }
}

}  // namespace

FakechrootLaunch fakechroot_launch(const ContainerSpec& spec, const std::string& loader,
                                   const std::string& command,
                                   const std::vector<std::string>& lib_dirs,
                                   const std::string& library) {
  const std::string& root = spec.rootfs;
  std::string libpath;
  // The image's own LD_LIBRARY_PATH first, as host paths (the loader does not go through
  // libfakechroot), then its standard folders.
  auto add_dir = [&](const std::string& d) {
    if (!libpath.empty()) libpath += ':';
    libpath += root;
    libpath += d;
  };
  for (const std::string& d : split_path(env_lookup(spec.env, "LD_LIBRARY_PATH").value_or("")))
    if (d.starts_with("/")) add_dir(d);
  for (const std::string& d : lib_dirs) add_dir(d);

  FakechrootLaunch l;
  l.argv = {root + loader, "--library-path", libpath, root + command};
  l.argv.insert(l.argv.end(), spec.argv.begin() + 1, spec.argv.end());
  l.env = spec.env;
  // Host paths seen as they are: the pseudo file systems, the host files other engines bind,
  // and volumes (same path inside, or the host end of a volume link).
  std::string exclude = "/dev:/proc:/sys:/etc/resolv.conf:/etc/hosts";
  for (const Volume& v : spec.volumes) exclude += ":" + v.host;
  std::string preload = env_lookup(spec.env, "LD_PRELOAD").value_or("");
  set_env(l.env, "LD_PRELOAD=" + library + (preload.empty() ? "" : ":" + preload));
  set_env(l.env, "LD_LIBRARY_PATH=" + libpath);
  set_env(l.env, "FAKECHROOT_BASE=" + root);
  set_env(l.env, "FAKECHROOT_ELFLOADER=" + root + loader);
  set_env(l.env, "FAKECHROOT_EXCLUDE_PATH=" + exclude);
  return l;
}

RunOutcome run_fakechroot(const EngineRun& run) {
  const ContainerSpec& spec = *run.spec;
  auto failed = [](Error e) { return RunOutcome{125, std::move(e)}; };
  auto library = engine_tool(*run.engine);
  if (!library) return failed(std::move(library).error());
  if (auto st = refuse_unsupported(spec, *run.engine); !st) return failed(std::move(st).error());
  if (spec.uid != 0 && spec.uid != ::getuid())
    return failed(make_error("run", "user " + std::to_string(spec.uid),
                             "the fakechroot engine cannot change the user: the workload runs as "
                             "the calling user")
                      .with_hint("use the proot or userns engine for -u"));
  if (auto plan = plan_mounts(spec, probe_host(spec)); !plan)
    return failed(std::move(plan).error());
  std::string cwd = spec.rootfs + (spec.cwd == "/" ? "" : spec.cwd);
  if (auto st = make_dirs(cwd); !st) return failed(std::move(st).error());

  int code;
  auto command = resolve_command(spec, &code, PathView::kHost);
  if (!command) return RunOutcome{code, std::move(command).error()};
  // A script runs through its interpreter, which must be a dynamic program too.
  std::vector<std::string> script_args;
  std::string program = *command;
  for (int depth = 0; depth < 4; ++depth) {
    UniqueFd fd(::open((spec.rootfs + program).c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return RunOutcome{126, sys_error("open", program)};
    char head[256] = {};
    ssize_t n = ::pread(fd.get(), head, sizeof head - 1, 0);
    if (n < 2 || head[0] != '#' || head[1] != '!') break;
    std::string line(head + 2, static_cast<size_t>(n) - 2);
    line = line.substr(0, line.find('\n'));
    size_t b = line.find_first_not_of(" \t");
    if (b == std::string::npos)
      return RunOutcome{126, make_error("exec", program, "empty #! line")};
    line = line.substr(b);
    size_t e = line.find_first_of(" \t");
    std::string interp = line.substr(0, e);
    std::vector<std::string> args = {interp};
    if (e != std::string::npos) {
      std::string arg = line.substr(line.find_first_not_of(" \t", e));
      if (!arg.empty()) args.push_back(arg);
    }
    args.push_back(program);
    script_args.insert(script_args.begin(), args.begin() + 1, args.end());
    program = interp;
  }
  std::string loader;
  {
    UniqueFd fd(::open((spec.rootfs + program).c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return RunOutcome{127, sys_error("exec", program)};
    auto interp = elf_interpreter(fd.get(), program);
    if (!interp) return RunOutcome{126, std::move(interp).error()};
    if (interp->empty())
      return failed(make_error("run", program,
                               "the fakechroot engine cannot run a statically linked program "
                               "(it would see the host's files)")
                        .with_hint("use the proot or userns engine"));
    if (interp->find("musl") != std::string::npos || !path_exists(spec.rootfs + *interp))
      return failed(make_error("run", program,
                               "the fakechroot engine needs a glibc image; the program's loader "
                               "is " +
                                   *interp)
                        .with_hint("use the proot or userns engine"));
    loader = *interp;
  }
  ContainerSpec launched = spec;
  launched.argv = {program};
  launched.argv.insert(launched.argv.end(), script_args.begin(), script_args.end());
  launched.argv.insert(launched.argv.end(), spec.argv.begin() + 1, spec.argv.end());
  auto links = link_volumes(spec);
  if (!links) return failed(std::move(links).error());
  FakechrootLaunch l =
      fakechroot_launch(launched, loader, program, library_dirs(spec.rootfs), *library);
  RunOutcome out = spawn_and_wait(spec, l.argv, l.env, cwd);
  unlink_volumes(*links);
  return out;
}

}  // namespace berth
