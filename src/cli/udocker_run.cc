// udocker's run and create, translated into berth run and berth create lines: udocker's
// options mapped onto Berth's (one note on stderr where Berth takes one differently), and what
// udocker gives a run besides (its working directory, its container_* variables).
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cli/context.h"
#include "cli/udocker_line.h"
#include "core/fs.h"
#include "core/root_path.h"
#include "image/reference.h"
#include "runtime/container_config.h"

namespace berth::cli::udocker {

int do_create(Context& ctx, const Parsed& p) {
  if (Status st = need_operands("create", p, 1, "create [--name=NAME] REPO/IMAGE:TAG"); !st.ok())
    return fail(st);
  std::vector<std::string> args = {"create"};
  std::string name = p.get("--name");
  if (!name.empty() && p.has("--force")) {
    // --force: create even when the name is taken (the new container goes without it).
    auto cs = open_containers(ctx.g);
    if (cs.ok() && cs->find(name, ContainerStore::Detail::kRecord).ok()) {
      note("create --force: the name " + name + " is taken; the new container has none");
      name.clear();
    }
  }
  if (!name.empty()) args.insert(args.end(), {"--name", name});
  args.push_back(p.operands[0]);
  ctx.allow_insecure(p.operands[0]);  // create pulls a missing image
  return ctx.berth(args);
}

/// --dri: the host's DRI device nodes and driver directories, as udocker binds them.
void add_dri(std::vector<std::string>& args) {
  if (path_exists("/dev/dri")) args.insert(args.end(), {"--device", "/dev/dri"});
  for (const char* dir :
       {"/usr/lib64/dri", "/lib64/dri", "/usr/lib/dri", "/lib/dri", "/usr/lib/x86_64-linux-gnu/dri",
        "/usr/lib/aarch64-linux-gnu/dri", "/usr/share/glvnd", "/usr/lib/xorg/modules/dri"})
    if (path_exists(dir)) args.insert(args.end(), {"-v", std::string(dir) + ":" + dir + ":ro"});
}

/// --cpuset-cpus=LIST ("0,2-3"): this process's CPU affinity, which the workload inherits.
Status set_cpuset(const std::string& list) {
  cpu_set_t set;
  CPU_ZERO(&set);
  size_t start = 0;
  while (start < list.size()) {
    size_t comma = list.find(',', start);
    std::string item = list.substr(start, comma == std::string::npos ? comma : comma - start);
    size_t dash = item.find('-');
    char* end = nullptr;
    long lo = std::strtol(item.c_str(), &end, 10);
    long hi = dash == std::string::npos ? lo : std::strtol(item.c_str() + dash + 1, &end, 10);
    if (item.empty() || *end != '\0' || lo < 0 || hi < lo || hi >= CPU_SETSIZE)
      return make_error("udocker", "--cpuset-cpus=" + list, "not a CPU list (like 0,2-3)");
    for (long cpu = lo; cpu <= hi; ++cpu) CPU_SET(static_cast<int>(cpu), &set);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (::sched_setaffinity(0, sizeof set, &set) != 0)
    return sys_error("run", "--cpuset-cpus=" + list);
  return {};
}

/// The home directory of `user` (udocker's -u value, "" for root) in the container's
/// /etc/passwd, "/" when the user has none there (udocker's default).
std::string container_home(const std::string& rootfs, const std::string& user) {
  Result<UniqueFd> root = open_file(rootfs, O_RDONLY | O_DIRECTORY);
  if (!root.ok()) return "/";
  Result<ResolvedUser> who = resolve_user_in_root(user.empty() ? "0" : user, root->get());
  return who.ok() && !who->home.empty() ? who->home : "/";
}

/// What udocker gives a run of an existing container besides its options: the working
/// directory, when neither the line nor the image names one, is the user's home (root's:
/// /root; Berth's own default is /), $HOME is that home also with --hostenv (the host's
/// would name a folder of the host), and the workload's environment says which container it
/// runs in (container_uuid, container_names, container_execmode, container_root,
/// container_ruser). --nometa drops the image's User and WorkingDir with the rest.
void udocker_run_defaults(const ContainerStore& cs, const ContainerRecord& c, const Parsed& p,
                          std::vector<std::string>& args) {
  std::string names;
  for (const std::string& n : c.names) names += (names.empty() ? "" : ",") + n;
  const char* user = ::getenv("USER");
  for (const std::string& kv :
       {"container_uuid=" + c.id, "container_names=" + names, "container_execmode=" + mode_of(c),
        "container_root=" + cs.rootfs(c), "container_ruser=" + std::string(user ? user : "")})
    args.insert(args.end(), {"-e", kv});
  auto image_text = [&c, &p](const char* key) {
    if (p.has("--nometa") || !c.image_config.is_object() || !c.image_config.contains(key) ||
        !c.image_config[key].is_string())
      return std::string();
    return c.image_config[key].get<std::string>();
  };
  std::string run_user = p.has("--user") ? p.get("--user") : image_text("User");
  if (p.has("--bindhome")) return;  // Berth's --bind-home makes the host's home the home
  std::string home = container_home(cs.rootfs(c), run_user);
  if (p.has("--hostenv")) args.insert(args.end(), {"-e", "HOME=" + home});
  if (p.has("--workdir") || !image_text("WorkingDir").empty() || home == "/") return;
  Result<UniqueFd> root = open_file(cs.rootfs(c), O_RDONLY | O_DIRECTORY);
  if (!root.ok()) return;
  UniqueFd dir(open_in_root(root->get(), home.c_str(), O_PATH | O_DIRECTORY));
  if (dir.valid()) args.insert(args.end(), {"-w", home});
}

int do_run(Context& ctx, const Parsed& p) {
  use_proxy(p);
  // udocker hands the workload its standard input as it is.
  std::vector<std::string> args = {"run", "-i"};
  for (const auto& [name, value] : p.options) {
    if (name == "--rm")
      args.push_back("--rm");
    else if (name == "--workdir")
      args.insert(args.end(), {"-w", value});
    else if (name == "--user")
      args.insert(args.end(), {"-u", value});
    else if (name == "--volume")  // udocker's HOST alone binds it at the same path
      args.insert(args.end(),
                  {"-v", value.find(':') == std::string::npos ? cat3(value, ":", value) : value});
    else if (name == "--env")
      args.insert(args.end(), {"-e", value});
    else if (name == "--env-file")
      args.insert(args.end(), {"--env-file", value});
    else if (name == "--hostenv")
      args.push_back("--hostenv");
    else if (name == "--bindhome")
      args.push_back("--bind-home");
    else if (name == "--device")
      args.insert(args.end(), {"--device", value});
    else if (name == "--entrypoint")
      args.insert(args.end(), {"--entrypoint", value});
    else if (name == "--nometa")
      args.push_back("--no-image-config");
    else if (name == "--dri")
      add_dri(args);
    else if (name == "--hostauth")
      args.insert(args.end(),
                  {"-v", "/etc/passwd:/etc/passwd:ro", "-v", "/etc/group:/etc/group:ro"});
  }
  if (p.has("--kernel"))
    note("run --kernel=" + p.get("--kernel") +
         ": Berth's engines do not fake the kernel version; "
         "the container sees the host's");
  if (p.has("--novol"))
    note("run --novol: Berth binds no host /dev, /proc or /sys to leave out (it mounts its own)");
  if (p.has("--nosysdirs"))
    note(
        "run --nosysdirs: Berth binds no host system directories; its own /proc, /sys and /dev "
        "stay");
  if (p.has("--publish") || p.has("--publish-all"))
    note(
        "run --publish: a rootless container shares the host's network; its ports are the "
        "host's");
  for (const char* ignored : {"--dns", "--dns-search", "--volumes-from"})
    if (p.has(ignored)) note(std::string("run ") + ignored + ": ignored, as udocker ignores it");
  if (p.has("--cpuset-cpus"))
    if (Status st = set_cpuset(p.get("--cpuset-cpus")); !st.ok()) return fail(st);

  std::vector<std::string> rest = p.operands;
  std::string name = p.get("--name");
  std::string pull = p.has("--pull") ? p.get("--pull") : "missing";
  if (p.has("--location")) {
    // A root filesystem outside the store, run in place; every operand is the command.
    std::string dir = p.get("--location");
    char real[PATH_MAX];
    if (::realpath(dir.c_str(), real) != nullptr) dir = real;
    if (!dir.starts_with("/")) dir = "./" + dir;
    args.push_back(dir);
    args.insert(args.end(), rest.begin(), rest.end());
    return ctx.berth(args);
  }
  if (rest.empty())
    return fail(make_error("udocker", "run", "a container or an image is required")
                    .with_hint("udocker run [OPTIONS] CONTAINER|REPO/IMAGE:TAG [COMMAND...]"));
  std::string target = rest.front();
  rest.erase(rest.begin());
  auto cs = open_containers(ctx.g);
  if (!cs.ok()) return fail(std::move(cs).error());
  // --pull=reuse --name=N: N's container when there is one (else pull and create as missing).
  if (pull == "reuse") {
    pull = "missing";
    if (!name.empty() && cs->find(name, ContainerStore::Detail::kRecord).ok()) {
      target = name;
      name.clear();
    }
  }
  // Every name: udocker tells the workload its container's names (container_names).
  auto existing = cs->find(target, ContainerStore::Detail::kFull);
  if (existing.ok()) udocker_run_defaults(*cs, *existing, p, args);
  if (existing.ok() && !name.empty()) {
    // udocker gives an existing container the name (Berth's run names new containers only).
    auto holder = cs->find(name, ContainerStore::Detail::kRecord);
    if (!holder.ok()) {
      if (Status st = cs->add_name(*existing, name); !st.ok()) return fail(st);
    } else if (holder->id != existing->id) {
      return fail(make_error("name", name, "already names container " + holder->short_id()));
    }
    name.clear();
  }
  if (!existing.ok()) {
    target = with_registry(p, target);
    ctx.allow_insecure(target);
    // --platform: pulled first for that platform (run has no --platform of its own).
    if (p.has("--platform") && pull != "never") {
      if (int rc = ctx.berth({"pull", "--platform", p.get("--platform"), target}); rc != 0)
        return rc;
      if (pull == "always") pull = "missing";
    }
  }
  if (!name.empty()) args.insert(args.end(), {"--name", name});
  if (!existing.ok()) args.insert(args.end(), {"--pull", pull});
  args.push_back(target);
  args.insert(args.end(), rest.begin(), rest.end());
  return ctx.berth(args);
}

}  // namespace berth::cli::udocker
