// udocker's command line, translated into Berth's commands (cli/udocker.h): the global options,
// the command table and the store's choice. The line's grammar and the helpers the commands
// share are in cli/udocker_line.cc, run and create in cli/udocker_run.cc, the commands the
// drop-in runs itself in cli/udocker_store.cc.
//
// A udocker line is GLOBAL-OPTIONS COMMAND OPTIONS OPERANDS: global options are the words before
// the first one starting with a letter; a command's options end at its first operand (for run,
// everything after the container is its command). A value is given as --opt=VALUE or
// --opt VALUE (VALUE not starting with '-'), as udocker's parser takes it. Each command either
// becomes a berth command line (the same code paths as `berth ...`) or, where udocker prints
// its own formats or has no Berth twin (ps, images, setup, showconf, mkrepo, install), runs here
// on Berth's stores.
#include "cli/udocker.h"

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
#include "core/strings.h"

namespace berth::cli {
namespace udocker {

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
  return basename_of(argv0) == "udocker";
}

Status make_udocker_link(const std::string& dir) {
  char self[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n < 0) return sys_error("readlink", "/proc/self/exe");
  self[n] = '\0';
  // udocker's own setup makes the folder it is told to put the link in; so does this.
  BERTH_CHECK(make_dirs(dir).with_context("setup --udocker-link"));
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
