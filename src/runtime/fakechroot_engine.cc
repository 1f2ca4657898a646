// The fakechroot engine: Debian's libfakechroot, preloaded into the image's own ELF loader,
// rewrites the paths of libc calls to lie under FAKECHROOT_BASE. No namespaces, no ptrace, so
// close to bare speed; but only dynamically linked glibc programs are covered (a static or musl
// program would see the host), the user stays the caller, and the kernel follows symlinks on
// the host: absolute links in the rootfs must name host paths (rewrite_symlinks(), done by the
// caller and recorded with the container). Volumes are links to the host path, excluded from
// translation, removed after the run.
#include "runtime/fakechroot_engine.h"

#include <elf.h>
#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/env.h"
#include "core/fs.h"
#include "runtime/fallback.h"
#include "runtime/mount_plan.h"
#include "runtime/root_path.h"
#include "runtime/spawn.h"
#include "runtime/tool.h"

namespace berth {
namespace {

#if defined(__x86_64__)
constexpr const char* kMultiarch = "x86_64-linux-gnu";
constexpr int kElfMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr const char* kMultiarch = "aarch64-linux-gnu";
constexpr int kElfMachine = EM_AARCH64;
#else
#error "add this architecture's multiarch tuple and ELF machine"
#endif

}  // namespace

Result<std::string> find_libfakechroot(const EngineTool& tool, const char* package) {
  std::string env = tool.env_var != nullptr ? env_or(tool.env_var, "") : "";
  if (!env.empty()) {
    if (path_exists(env)) return env;
    return make_error("engine", std::string(tool.env_var) + "=" + env, "no such file");
  }
  for (std::string dir : {std::string("/usr/lib/") + kMultiarch + "/fakechroot", std::string("/usr/lib/fakechroot"),
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
                                   "/lib64", "/usr/lib64", "/lib", "/usr/lib", "/usr/local/lib"};
  glob_t g;
  if (::glob((rootfs + "/etc/ld.so.conf.d/*.conf").c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) {
      auto text = read_file(g.gl_pathv[i]);
      if (!text) continue;  // unreadable configuration: the standard folders remain
      size_t pos = 0;
      while (pos < text->size()) {
        size_t end = text->find('\n', pos);
        if (end == std::string::npos) end = text->size();
        std::string line = text->substr(pos, end - pos);
        pos = end + 1;
        if (line.starts_with("/")) dirs.push_back(line.substr(0, line.find_first_of(" \t#")));
      }
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

/// `env` with `name` set to `value` (replacing an earlier entry).
void set_var(std::vector<std::string>& env, const std::string& name, const std::string& value) {
  for (std::string& e : env) {
    if (e.starts_with(name + "=")) {
      e = name + "=" + value;
      return;
    }
  }
  env.push_back(name + "=" + value);
}

std::string var(const std::vector<std::string>& env, const std::string& name) {
  for (const std::string& e : env)
    if (e.starts_with(name + "=")) return e.substr(name.size() + 1);
  return "";
}

}  // namespace

Result<std::string> elf_interpreter(int fd, const std::string& what) {
  Elf64_Ehdr eh;
  if (::pread(fd, &eh, sizeof eh, 0) != static_cast<ssize_t>(sizeof eh) ||
      std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    return make_error("exec", what, "not an ELF executable");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != kElfMachine)
    return make_error("exec", what, "not a 64-bit executable for this machine");
  if (eh.e_phentsize != sizeof(Elf64_Phdr)) return make_error("exec", what, "bad ELF header");
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    off_t at = static_cast<off_t>(eh.e_phoff + i * sizeof ph);
    if (::pread(fd, &ph, sizeof ph, at) != static_cast<ssize_t>(sizeof ph))
      return make_error("exec", what, "truncated ELF program headers");
    if (ph.p_type != PT_INTERP) continue;
    if (ph.p_filesz == 0 || ph.p_filesz > 4096) return make_error("exec", what, "bad PT_INTERP");
    std::string interp(ph.p_filesz, '\0');
    if (::pread(fd, interp.data(), interp.size(), static_cast<off_t>(ph.p_offset)) !=
        static_cast<ssize_t>(interp.size()))
      return make_error("exec", what, "truncated PT_INTERP");
    interp.resize(std::strlen(interp.c_str()));
    return interp;
  }
  return std::string();
}

FakechrootLaunch fakechroot_launch(const ContainerSpec& spec, const std::string& loader,
                                   const std::string& command,
                                   const std::vector<std::string>& lib_dirs,
                                   const std::string& library) {
  const std::string& root = spec.rootfs;
  std::string libpath;
  // The image's own LD_LIBRARY_PATH first, as host paths (the loader does not go through
  // libfakechroot), then its standard folders.
  for (const std::string& d : split_path(var(spec.env, "LD_LIBRARY_PATH")))
    if (d.starts_with("/")) libpath += (libpath.empty() ? "" : ":") + root + d;
  for (const std::string& d : lib_dirs) libpath += (libpath.empty() ? "" : ":") + root + d;

  FakechrootLaunch l;
  l.argv = {root + loader, "--library-path", libpath, root + command};
  l.argv.insert(l.argv.end(), spec.argv.begin() + 1, spec.argv.end());
  l.env = spec.env;
  // Host paths seen as they are: the pseudo file systems, the host files other engines bind,
  // and volumes (same path inside, or the host end of a volume link).
  std::string exclude = "/dev:/proc:/sys:/etc/resolv.conf:/etc/hosts";
  for (const Volume& v : spec.volumes) exclude += ":" + v.host;
  std::string preload = var(spec.env, "LD_PRELOAD");
  set_var(l.env, "LD_PRELOAD", library + (preload.empty() ? "" : ":" + preload));
  set_var(l.env, "LD_LIBRARY_PATH", libpath);
  set_var(l.env, "FAKECHROOT_BASE", root);
  set_var(l.env, "FAKECHROOT_ELFLOADER", root + loader);
  set_var(l.env, "FAKECHROOT_EXCLUDE_PATH", exclude);
  return l;
}

std::optional<std::string> rewrite_link_target(std::string_view target, std::string_view from,
                                               std::string_view to) {
  if (target.empty() || target.front() != '/') return std::nullopt;  // relative: fine everywhere
  if (from.empty()) {
    // The image's form: every absolute target gains the prefix, unless it already has it.
    if (!to.empty() && target.starts_with(to) &&
        (target.size() == to.size() || target[to.size()] == '/'))
      return std::nullopt;
    return std::string(to) + std::string(target);
  }
  if (!target.starts_with(from) || (target.size() > from.size() && target[from.size()] != '/'))
    return std::nullopt;
  std::string rest(target.substr(from.size()));
  if (to.empty() && rest.empty()) rest = "/";
  return std::string(to) + rest;
}

namespace {

// nftw() takes no context argument: the walk's state, for one walk at a time.
struct RewriteWalk {
  std::string_view from, to;
  size_t changed = 0;
  Error error;
  bool failed = false;
};
RewriteWalk* g_walk = nullptr;

int rewrite_one(const char* path, const struct stat*, int type, struct FTW*) {
  if (type != FTW_SL && type != FTW_SLN) return 0;
  char buf[4096];
  ssize_t n = ::readlink(path, buf, sizeof buf);
  if (n < 0 || n == sizeof buf) return 0;  // vanished or absurdly long: left as it is
  auto next = rewrite_link_target(std::string_view(buf, static_cast<size_t>(n)), g_walk->from,
                                  g_walk->to);
  if (!next) return 0;
  std::string tmp = std::string(path) + ".berth-relink";
  (void)::unlink(tmp.c_str());  // a leftover of a killed rewrite
  if (::symlink(next->c_str(), tmp.c_str()) != 0 || ::rename(tmp.c_str(), path) != 0) {
    g_walk->error = sys_error("rewrite symlink", path);
    g_walk->failed = true;
    (void)::unlink(tmp.c_str());
    return 1;
  }
  ++g_walk->changed;
  return 0;
}

}  // namespace

Result<size_t> rewrite_symlinks(const std::string& rootfs, std::string_view from,
                                std::string_view to) {
  RewriteWalk walk{from, to};
  g_walk = &walk;
  int rc = ::nftw(rootfs.c_str(), rewrite_one, 64, FTW_PHYS);
  g_walk = nullptr;
  if (walk.failed) return walk.error;
  if (rc != 0) return sys_error("walk", rootfs);
  return walk.changed;
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
  if (auto plan = plan_mounts(spec, probe_host(spec)); !plan) return failed(std::move(plan).error());
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
    if (b == std::string::npos) return RunOutcome{126, make_error("exec", program, "empty #! line")};
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
                               "is " + *interp)
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
