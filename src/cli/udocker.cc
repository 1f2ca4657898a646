// udocker's command line, translated into Berth's commands (cli/udocker.h); the commands the
// drop-in runs itself are in cli/udocker_store.cc.
//
// A udocker line is GLOBAL-OPTIONS COMMAND OPTIONS OPERANDS: global options are the words before
// the first one starting with a letter; a command's options end at its first operand (for run,
// everything after the container is its command). A value is given as --opt=VALUE or
// --opt VALUE (VALUE not starting with '-'), as udocker's parser takes it. Each command either
// becomes a berth command line (the same code paths as `berth ...`) or, where udocker prints
// its own formats or has no Berth twin (ps, images, setup, showconf, mkrepo, install), runs here
// on Berth's stores.
#include "cli/udocker.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string_view>
#include <vector>

#include "cli/command.h"
#include "cli/context.h"
#include "cli/udocker_line.h"
#include "core/fs.h"
#include "image/reference.h"
#include "runtime/engines.h"

namespace berth::cli {
namespace udocker {

/// "A" + SEP + "B", built in place.
std::string cat3(std::string_view a, std::string_view sep, std::string_view b) {
  std::string s;
  s.reserve(a.size() + sep.size() + b.size());
  return s.append(a).append(sep).append(b);
}

/// The spec's last name: the one Parsed keys the option by.
std::string_view canonical(std::string_view names) {
  size_t comma = names.rfind(',');
  return comma == std::string_view::npos ? names : names.substr(comma + 1);
}

bool names_match(std::string_view names, std::string_view word) {
  size_t start = 0;
  while (start <= names.size()) {
    size_t comma = names.find(',', start);
    std::string_view n =
        names.substr(start, comma == std::string_view::npos ? comma : comma - start);
    if (n == word) return true;
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return false;
}

Result<Parsed> parse_command(const std::string& command, const std::vector<OptionSpec>& specs,
                             const std::vector<std::string>& words) {
  Parsed p;
  size_t i = 0;
  for (; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w.size() < 2 || w[0] != '-') break;  // the first operand ("-" is one: stdin)
    std::string_view name = w;
    std::string value;
    bool inline_value = false;
    if (size_t eq = w.find('='); eq != std::string::npos) {
      name = std::string_view(w).substr(0, eq);
      value = w.substr(eq + 1);
      inline_value = true;
    }
    const OptionSpec* spec = nullptr;
    for (const OptionSpec& s : specs)
      if (names_match(s.names, name)) spec = &s;
    if (spec == nullptr)
      return make_error("udocker", cat3(command, " ", w), "not an option of udocker " + command)
          .with_hint("see 'udocker help' and docs/udocker.md");
    if (spec->value && !inline_value) {
      if (i + 1 >= words.size() || words[i + 1].starts_with("-"))
        return make_error("udocker", cat3(command, " ", w), cat3("needs a value (", w, "=VALUE)"));
      value = words[++i];
    } else if (!spec->value && inline_value) {
      return make_error("udocker", cat3(command, " ", w), "takes no value");
    }
    p.options.emplace_back(std::string(canonical(spec->names)), value);
  }
  p.operands.assign(words.begin() + static_cast<std::ptrdiff_t>(i), words.end());
  return p;
}

/// One line on stderr for a udocker option Berth takes differently; never silent.
void note(const std::string& what) {
  std::fprintf(stderr, "udocker: %s\n", what.c_str());
}

/// The registry host of a --registry=URL value ("https://quay.io" -> "quay.io").
std::string registry_host(std::string url) {
  if (size_t scheme = url.find("://"); scheme != std::string::npos) url = url.substr(scheme + 3);
  while (url.ends_with("/")) url.pop_back();
  return url;
}

/// --httpproxy=URL: libcurl takes it from the environment, socks schemes included.
void use_proxy(const Parsed& p) {
  if (p.has("--httpproxy")) ::setenv("ALL_PROXY", p.get("--httpproxy").c_str(), 1);
}

/// IMAGE with --registry=URL's host in front, when it names none of its own.
std::string with_registry(const Parsed& p, const std::string& image) {
  if (!p.has("--registry")) return image;
  std::string first = image.substr(0, image.find('/'));
  bool has_host = image.find('/') != std::string::npos &&
                  (first.find('.') != std::string::npos || first.find(':') != std::string::npos ||
                   first == "localhost");
  return has_host ? image : registry_host(p.get("--registry")) + "/" + image;
}

Status need_operands(const std::string& command, const Parsed& p, size_t at_least,
                     const std::string& usage) {
  if (p.operands.size() >= at_least) return {};
  return make_error("udocker", command, "missing operand").with_hint("udocker " + usage);
}

/// Prints Status's error the way berth's main does, for checks made before any action runs.
int fail(const Status& st) {
  return Context{}.local([&st]() -> Status { return st; });
}

/// The mode `udocker ps -m` and `setup` show: the one set, else the engine's closest;
/// "NS" for Berth's own user-namespace engine, which udocker lacks.
std::string mode_of(const ContainerRecord& c) {
  if (!c.udocker_mode.empty()) return c.udocker_mode;
  for (const ModeRow& m : kModes)
    if (c.engine && c.engine->row == find_engine(m.engine) && m.difference[0] == '\0')
      return m.mode;
  return "NS";
}

/// Runs `fn` with stdout sent to /dev/null (a step whose output udocker does not print).
int quietly(const std::function<int()>& fn) {
  std::fflush(stdout);
  int saved = ::dup(STDOUT_FILENO);
  int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (saved >= 0 && null >= 0) ::dup2(null, STDOUT_FILENO);
  int rc = fn();
  std::fflush(stdout);
  if (saved >= 0) {
    ::dup2(saved, STDOUT_FILENO);
    ::close(saved);
  }
  if (null >= 0) ::close(null);
  return rc;
}

/// Runs `fn` with stdout captured into `*out` (a step whose output the drop-in reads).
int captured(const std::function<int()>& fn, std::string* out) {
  std::fflush(stdout);
  std::FILE* tmp = std::tmpfile();
  int saved = ::dup(STDOUT_FILENO);
  if (tmp == nullptr || saved < 0) {
    if (tmp != nullptr) std::fclose(tmp);
    if (saved >= 0) ::close(saved);
    return fn();  // nothing to capture into: the output goes where it would have
  }
  ::dup2(::fileno(tmp), STDOUT_FILENO);
  int rc = fn();
  std::fflush(stdout);
  ::dup2(saved, STDOUT_FILENO);
  ::close(saved);
  std::rewind(tmp);
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, tmp)) > 0;) out->append(buf, n);
  std::fclose(tmp);
  return rc;
}

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

/// What udocker gives a run of an existing container besides its options: the working
/// directory, when neither the line nor the image names one, is the user's home (root's:
/// /root, when the container has it; Berth's own default is /), and the workload's environment
/// says which container it runs in (container_uuid, container_names, container_execmode,
/// container_root, container_ruser).
void udocker_run_defaults(const ContainerStore& cs, const ContainerRecord& c, const Parsed& p,
                          std::vector<std::string>& args) {
  std::string names;
  for (const std::string& n : c.names) names += (names.empty() ? "" : ",") + n;
  const char* user = ::getenv("USER");
  for (const std::string& kv :
       {"container_uuid=" + c.id, "container_names=" + names, "container_execmode=" + mode_of(c),
        "container_root=" + cs.rootfs(c), "container_ruser=" + std::string(user ? user : "")})
    args.insert(args.end(), {"-e", kv});
  bool image_workdir = c.image_config.is_object() && c.image_config.contains("WorkingDir") &&
                       c.image_config["WorkingDir"].is_string() &&
                       !c.image_config["WorkingDir"].get<std::string>().empty();
  if (!p.has("--workdir") && !p.has("--user") && !p.has("--nometa") && !image_workdir) {
    struct stat st {};
    if (::lstat(path_join(cs.rootfs(c), "root").c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      args.insert(args.end(), {"-w", "/root"});
  }
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
      args.insert(args.end(), {"--entrypoint", ""});
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

// ---------------------------------------------------------------------------------------------
// The command table

struct UdockerCommand {
  const char* name;
  std::vector<OptionSpec> options;
  std::function<int(Context&, const Parsed&)> run;
};

/// `berth WORDS... OPERANDS...`: commands whose operands Berth takes as they are.
std::function<int(Context&, const Parsed&)> as_berth(const std::vector<std::string>& words) {
  return [words](Context& ctx, const Parsed& p) {
    std::vector<std::string> args = words;
    args.insert(args.end(), p.operands.begin(), p.operands.end());
    return ctx.berth(args);
  };
}

/// udocker's commands, made on the first udocker line only: a berth start builds nothing here.
const std::vector<UdockerCommand>& commands() {
  const std::vector<OptionSpec> registry_flags = {
      {"--index", true}, {"--registry", true}, {"--httpproxy", true}, {"--platform", true}};
  static const std::vector<UdockerCommand> table = {
      {"help",
       {},
       [](Context&, const Parsed&) {
         print_help();
         return 0;
       }},
      {"version", {}, [](Context&, const Parsed&) { return do_version(); }},
      {"showconf", {}, [](Context& c, const Parsed&) { return do_showconf(c); }},
      {"mkrepo", {}, do_mkrepo},
      {"install",
       {{"--force"}, {"--purge"}},
       [](Context&, const Parsed& p) { return do_install(p); }},
      {"search",
       {{"-a"},
        {"--no-trunc"},
        {"--list-tags"},
        {"--index", true},
        {"--registry", true},
        {"--httpproxy", true}},
       [](Context& ctx, const Parsed& p) {
         if (p.has("--list-tags"))
           return fail(make_error("udocker", "search --list-tags", "Berth lists no tags")
                           .with_hint("skopeo list-tags docker://IMAGE lists them"));
         use_proxy(p);
         if (Status st = need_operands("search", p, 1, "search [-a] EXPRESSION"); !st.ok())
           return fail(st);
         std::string term = p.operands[0];
         if (p.has("--registry")) term = cat3(registry_host(p.get("--registry")), "/", term);
         ctx.allow_insecure(term + ":x");
         return do_search(ctx, term, p.has("--no-trunc"));  // -a: Berth never pauses
       }},
      {"pull", registry_flags,
       [](Context& ctx, const Parsed& p) {
         use_proxy(p);
         if (Status st = need_operands("pull", p, 1, "pull REPO/IMAGE:TAG"); !st.ok())
           return fail(st);
         std::string image = with_registry(p, p.operands[0]);
         ctx.allow_insecure(image);
         std::vector<std::string> args = {"pull"};
         if (p.has("--platform")) args.insert(args.end(), {"--platform", p.get("--platform")});
         args.push_back(image);
         int rc = ctx.berth(args);
         // udocker names an image pulled with --registry=URL as typed, without the registry:
         // `create REPO/IMAGE:TAG` must find it so, and `images` show it so (the name moves;
         // the blobs stay, used by the new name).
         if (rc == 0 && image != p.operands[0])
           rc = quietly([&] {
             int tagged = ctx.berth({"tag", image, p.operands[0]});
             return tagged != 0 ? tagged : ctx.berth({"rmi", image});
           });
         return rc;
       }},
      {"images", {{"-l"}, {"-p"}, {"--no-trunc"}, {"--all"}}, do_images},
      {"create", {{"--name", true}, {"--force"}}, do_create},
      {"run",
       {{"--rm"},
        {"-w,--workdir", true},
        {"-u,--user", true},
        {"-v,--volume", true},
        {"--novol", true},
        {"-e,--env", true},
        {"--env-file", true},
        {"--hostauth"},
        {"--containerauth"},
        {"--nosysdirs"},
        {"--nometa"},
        {"--dri"},
        {"--hostenv"},
        {"--cpuset-cpus", true},
        {"--name", true},
        {"--bindhome"},
        {"--kernel", true},
        {"--device", true},
        {"--location", true},
        {"--nobanner"},
        {"--entrypoint", true},
        {"--platform", true},
        {"--pull", true},
        {"--httpproxy", true},
        {"--index", true},
        {"--registry", true},
        {"-p,--publish", true},
        {"-P,--netcoop,--publish-all"},
        {"--volumes-from", true},
        {"--dns", true},
        {"--dns-search", true},
        {"-i"},
        {"-t"},
        {"-a"}},
       do_run},
      {"ps", {{"-m"}, {"-s"}, {"-p"}}, do_ps},
      {"rm",
       {{"-f"}},
       [](Context& ctx, const Parsed& p) {
         std::vector<std::string> args = {"rm"};
         if (p.has("-f")) args.push_back("-f");
         args.insert(args.end(), p.operands.begin(), p.operands.end());
         return ctx.berth(args);
       }},
      {"rmi", {{"-f"}}, as_berth({"rmi"})},  // -f: Berth's rmi removes what only it uses
      {"tag", {}, as_berth({"tag"})},
      {"name", {}, as_berth({"name"})},
      {"rmname", {}, as_berth({"rmname"})},
      {"rename",
       {},
       [](Context& ctx, const Parsed& p) {
         // udocker renames one name; Berth's rename replaces them all: name, then rmname.
         if (Status st = need_operands("rename", p, 2, "rename NAME NEW_NAME"); !st.ok())
           return fail(st);
         if (int rc = ctx.berth({"name", p.operands[0], p.operands[1]}); rc != 0) return rc;
         return ctx.berth({"rmname", p.operands[0]});
       }},
      {"clone",
       {{"--name", true}},
       [](Context& ctx, const Parsed& p) {
         std::vector<std::string> args = {"clone"};
         if (p.has("--name")) args.insert(args.end(), {"--name", p.get("--name")});
         args.insert(args.end(), p.operands.begin(), p.operands.end());
         return ctx.berth(args);
       }},
      {"import",
       {{"--mv"}, {"--tocontainer"}, {"--clone"}, {"--name", true}, {"--platform", true}},
       do_import},
      {"export",
       {{"-o"}, {"--clone"}},
       [](Context& ctx, const Parsed& p) {
         if (p.has("--clone")) {
           std::string file = p.has("-o") && p.operands.size() >= 2 ? p.operands[0] : "-";
           std::string name = p.operands.empty() ? "" : p.operands.back();
           return ctx.local([&ctx, file, name] { return export_clone(ctx.g, file, name); });
         }
         // -o FILE CONTAINER, or - CONTAINER (stdout).
         std::vector<std::string> args = {"export"};
         if (p.has("-o") && p.operands.size() >= 2)
           args.insert(args.end(), {"-o", p.operands[0], p.operands[1]});
         else if (!p.operands.empty())
           args.push_back(p.operands.back());
         return ctx.berth(args);
       }},
      {"save",
       {{"-o,--output", true}},
       [](Context& ctx, const Parsed& p) {
         std::vector<std::string> args = {"save"};
         if (p.has("--output")) args.insert(args.end(), {"-o", p.get("--output")});
         for (const std::string& o : p.operands)
           if (o != "-") args.push_back(o);
         return ctx.berth(args);
       }},
      {"load",
       {{"-i,--input", true}},
       [](Context& ctx, const Parsed& p) {
         std::vector<std::string> names;
         for (const std::string& o : p.operands)
           if (o != "-") names.push_back(o);
         if (!names.empty())
           return fail(make_error("udocker", "load " + names[0],
                                  "Berth loads images under the names the archive gives them")
                           .with_hint("udocker load -i FILE, then udocker tag"));
         std::string input = p.has("--input") ? p.get("--input") : "-";
         return ctx.berth({"load", "-i", input});
       }},
      {"inspect", {{"-p"}}, do_inspect},
      {"verify", {}, as_berth({"verify"})},
      {"protect", {}, as_berth({"protect"})},
      {"unprotect", {}, as_berth({"unprotect"})},
      {"manifest", registry_flags,
       [](Context& ctx, const Parsed& p) {
         use_proxy(p);
         if (Status st = need_operands("manifest", p, 2, "manifest inspect REPO/IMAGE:TAG");
             !st.ok())
           return fail(st);
         if (p.has("--platform")) note("manifest --platform: Berth prints the whole index");
         std::string image = with_registry(p, p.operands[1]);
         ctx.allow_insecure(image);
         return ctx.berth({"manifest", p.operands[0], "--json", image});
       }},
      {"login",
       {{"--username", true}, {"--password", true}, {"--password-stdin"}, {"--registry", true}},
       [](Context& ctx, const Parsed& p) {
         std::vector<std::string> args = {"login"};
         if (p.has("--username")) args.insert(args.end(), {"-u", p.get("--username")});
         if (p.has("--password")) args.insert(args.end(), {"-p", p.get("--password")});
         if (p.has("--password-stdin")) args.push_back("--password-stdin");
         if (p.has("--registry")) args.push_back(registry_host(p.get("--registry")));
         return ctx.berth(args);
       }},
      {"logout", {{"-a"}, {"--registry", true}}, do_logout},
      {"setup",
       {{"--execmode", true}, {"--force"}, {"--purge"}, {"--fixperm"}, {"--nvidia"}},
       do_setup},
  };
  return table;
}

/// Maps udocker's store choice onto Berth's: --repo=DIR (which must exist, as udocker wants),
/// else $UDOCKER_DIR, else Berth's own store. A real udocker repository is refused: its layout
/// is not Berth's.
Status choose_store(const std::string& repo, Context& ctx) {
  const char* env = ::getenv("UDOCKER_DIR");
  std::string dir = repo;
  std::string said_by = "--repo";
  if (dir.empty() && env != nullptr && *env != '\0') {
    dir = env;
    said_by = "UDOCKER_DIR";
  }
  if (dir.empty()) return {};
  if (!repo.empty() && !path_exists(dir))
    return make_error("udocker", "--repo=" + dir, "no such repository")
        .with_hint("make it with: udocker mkrepo " + dir);
  if (path_exists(path_join(dir, "repos")) || path_exists(path_join(dir, "layers")))
    return make_error("udocker", dir,
                      "holds a udocker repository (repos/, layers/), which Berth cannot use "
                      "(named by " +
                          said_by + ")")
        .with_hint("point " + said_by + " at a new directory, or unset it for Berth's store");
  ctx.g.home = dir;
  ctx.global.insert(ctx.global.end(), {"--home", dir});
  return {};
}

}  // namespace udocker

bool invoked_as_udocker(const char* argv0) {
  if (argv0 == nullptr) return false;
  std::string_view a = argv0;
  size_t slash = a.rfind('/');
  return (slash == std::string_view::npos ? a : a.substr(slash + 1)) == "udocker";
}

Status make_udocker_link(const std::string& dir) {
  char self[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n < 0) return sys_error("readlink", "/proc/self/exe");
  self[n] = '\0';
  std::string link = path_join(dir, "udocker");
  char current[PATH_MAX];
  ssize_t m = ::readlink(link.c_str(), current, sizeof current - 1);
  if (m >= 0) {
    current[m] = '\0';
    if (std::string_view(current) == self) return {};  // there already
    return make_error("setup", link, std::string("exists, a link to ") + current)
        .with_hint("remove it first to point it at this berth");
  }
  if (path_exists(link)) return make_error("setup", link, "exists and is not a link");
  if (::symlink(self, link.c_str()) != 0) return sys_error("symlink", link);
  std::printf("%s -> %s\n", link.c_str(), self);
  return {};
}

int udocker_main(int argc, char** argv) {
  using namespace udocker;
  std::vector<std::string> words(argv + 1, argv + argc);
  Context ctx;
  bool allow_root = false, help = false, version = false;
  std::string repo;
  size_t i = 0;
  // Global options: every word before the first that starts with a letter.
  for (; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w.empty()) continue;
    if (std::isalpha(static_cast<unsigned char>(w[0]))) break;
    if (w == "-D" || w == "--debug") {
      ctx.g.verbose = true;
      ctx.global.push_back("-v");
    } else if (w == "-q" || w == "--quiet") {
      ctx.g.quiet = true;
      ctx.global.push_back("-q");
    } else if (w == "--insecure") {
      ctx.insecure = true;
    } else if (w == "--allow-root") {
      allow_root = true;
    } else if (w == "-h" || w == "--help") {
      help = true;
    } else if (w == "-V" || w == "--version") {
      version = true;
    } else if (w.starts_with("--repo=")) {
      repo = w.substr(7);
    } else if (w == "--repo" && i + 1 < words.size()) {
      repo = words[++i];
    } else if (w.starts_with("--config")) {
      return fail(make_error("udocker", w, "udocker configuration files are not read by Berth")
                      .with_hint("Berth's settings: ~/.config/berth/berth.conf (docs/site.md)"));
    } else {
      return fail(
          make_error("udocker", w, "not a udocker global option").with_hint("see 'udocker help'"));
    }
  }
  if (::geteuid() == 0 && !allow_root)
    return fail(make_error("udocker", "euid 0", "udocker runs as root only with --allow-root")
                    .with_hint("run it as yourself, or give --allow-root as udocker wants"));
  if (help || (i == words.size() && !version)) {
    print_help();
    return 0;
  }
  if (version) return do_version();
  if (Status st = choose_store(repo, ctx); !st.ok()) return fail(st);
  std::string command = words[i];
  std::vector<std::string> rest(words.begin() + static_cast<std::ptrdiff_t>(i) + 1, words.end());
  for (const UdockerCommand& c : commands()) {
    if (command != c.name) continue;
    if (!rest.empty() && (rest.front() == "--help" || rest.front() == "-h")) {
      print_help();
      return 0;
    }
    auto parsed = parse_command(command, c.options, rest);
    if (!parsed.ok()) return fail(std::move(parsed).error());
    return c.run(ctx, *parsed);
  }
  return fail(
      make_error("udocker", command, "not a udocker command").with_hint("see 'udocker help'"));
}

}  // namespace berth::cli
