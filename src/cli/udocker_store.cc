// The udocker commands the drop-in runs itself on Berth's stores (cli/udocker_line.h): the
// formats scripts parse (ps, images, setup, search), the commands Berth has no twin of
// (showconf, mkrepo, install), and udocker's clone format (import and export --clone).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "cli/context.h"
#include "cli/policy.h"
#include "cli/udocker_line.h"
#include "core/dir.h"
#include "core/env.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/log.h"
#include "image/auth.h"
#include "image/tar_writer.h"
#include "runtime/engines.h"
#include "runtime/link_form.h"
#include "runtime/subids.h"

namespace berth::cli::udocker {

void print_help() {
  std::printf(
      "udocker command line, run by Berth (docs/udocker.md has every command and option)\n\n"
      "  udocker [GLOBAL-OPTIONS] COMMAND [OPTIONS] [OPERANDS]\n\n"
      "Global options: -D|--debug, -q|--quiet, --insecure, --repo=DIR, --allow-root,\n"
      "  -h|--help, -V|--version. UDOCKER_DIR names the store, as --repo does.\n\n"
      "Images:     search, pull, images [-l] [-p], rmi [-f], tag, verify, inspect,\n"
      "            manifest inspect, load, save, import [--tocontainer] [--mv]\n"
      "Containers: create [--name=N], run [OPTIONS] CONTAINER|IMAGE [CMD...], ps [-m] [-s] [-p],\n"
      "            rm, name, rmname, rename, clone, export, protect, unprotect, inspect -p\n"
      "Settings:   setup [--execmode=P1|P2|F1|F2|F3|F4|R1|R2|R3|S1] [--nvidia] [--purge]\n"
      "            [--fixperm] CONTAINER, login, logout [-a], showconf, mkrepo DIR,\n"
      "            install (nothing to install), version, help\n\n"
      "Images and containers are Berth's: `berth images` and `berth ps -a` show the same ones.\n");
}

int do_version() {
  std::printf("version: %s\n", BERTH_VERSION);
  std::printf("tarball: none (Berth runs udocker's command line; no tools tarball)\n");
  return 0;
}

/// The store root the line uses, for showconf and mkrepo.
std::string home_of(const Context& ctx) {
  return ctx.g.home.empty() ? berth_home() : ctx.g.home;
}

int do_showconf(Context& ctx) {
  std::string home = home_of(ctx);
  std::string line(80, '-');
  std::printf("%s\n\t\tConfiguration options\n", line.c_str());
  std::printf("topdir = %s\n", home.c_str());
  std::printf("containersdir = %s\n", path_join(home, "containers").c_str());
  std::printf("layersdir = %s\n", path_join(home, "blobs/sha256").c_str());
  std::printf("default_execution_mode = NS (Berth's user-namespace engine)\n");
  std::printf("engines = %s\n", engine_names().c_str());
  std::printf("tarball = none\n");
  std::printf("%s\n", line.c_str());
  return 0;
}

int do_mkrepo(Context& ctx, const Parsed& p) {
  return ctx.local([&]() -> Status {
    BERTH_CHECK(need_operands("mkrepo", p, 1, "mkrepo DIR"));
    const std::string& dir = p.operands[0];
    if (path_exists(dir)) return make_error("udocker", "mkrepo " + dir, "already exists");
    BERTH_CHECK(make_dirs(dir, 0755));
    BERTH_CHECK(Store::open(dir));
    BERTH_CHECK(ContainerStore::open(dir));
    return {};
  });
}

int do_install(const Parsed& p) {
  std::printf(
      "udocker install: nothing to %s: Berth needs no tools tarball; it runs proot, "
      "fakechroot, runc/crun and apptainer from the host when a container asks for them\n",
      p.has("--purge") ? "remove" : "install");
  return 0;
}

/// "['a', 'b']": udocker prints a container's names as Python prints a list ("" for none).
std::string python_list(const std::vector<std::string>& names) {
  if (names.empty()) return "";
  std::string s = "[";
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", '" : "'") + names[i] + "'";
  return s + "]";
}

std::string format(const char* fmt, const std::string& a) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, a.c_str());
  return buf;
}

int do_ps(Context& ctx, const Parsed& p) {
  return ctx.local([&]() -> Status {
    ContainerStore cs = BERTH_TRY(open_containers(ctx.g));
    std::vector<ContainerRecord> all = BERTH_TRY(cs.list());
    std::optional<Store> store;
    if (p.has("-p")) store = BERTH_TRY(open_store(ctx.g));
    // udocker's columns: ID, protected (P or .), writable (W), then -m, -s, -p, names, image.
    // IDs are printed whole: Berth's are 64 digits, udocker's 36 (a column's width).
    std::string head = format("%-36s", "CONTAINER ID") + " P M ";
    if (p.has("-m")) head += "MOD ";
    if (p.has("-s")) head += "SIZE ";
    if (p.has("-p")) head += "PLATFORM           ";
    std::printf("%s%-18s %-20.20s\n", head.c_str(), "NAMES", "IMAGE");
    for (const ContainerRecord& c : all) {
      std::string line = format("%-36s", c.id) + (c.is_protected ? " P" : " .") + " W ";
      if (p.has("-m")) line += format("%2.2s ", mode_of(c));
      if (p.has("-s")) line += format("%5.5s ", std::to_string(tree_size(cs.dir(c)) / kMiB));
      if (p.has("-p")) {
        std::string platform;
        if (auto rec = store->find_image(c.image_id); rec.ok()) platform = rec->platform.str();
        line += format("%-18.18s ", platform);
      }
      auto [repo, tag] = image_repo_and_tag(c.image);  // as `images` shows it
      std::printf("%s%-18.100s %-20.100s\n", line.c_str(), python_list(c.names).c_str(),
                  cat3(repo, ":", tag).c_str());
    }
    return {};
  });
}

int do_images(Context& ctx, const Parsed& p) {
  return ctx.local([&]() -> Status {
    Store store = BERTH_TRY(open_store(ctx.g));
    std::vector<ImageRecord> images = BERTH_TRY(store.list_images());
    std::printf("REPOSITORY\n");
    for (const ImageRecord& rec : images) {
      auto [repo, tag] = image_repo_and_tag(rec.name);
      std::string name = cat3(repo, ":", tag);
      char prot = rec.is_protected ? 'P' : '.';
      if (p.has("-p"))
        std::printf("%-18.18s %c %s\n", rec.platform.str().c_str(), prot, name.c_str());
      else
        std::printf("%s    %c\n", name.c_str(), prot);
      if (!p.has("-l")) continue;
      std::string blobs = path_join(home_of(ctx), "blobs/sha256");
      std::printf(" %s/\n", blobs.c_str());
      for (const std::string& layer : rec.layers) {
        struct stat st {};
        int64_t size = ::stat(store.blob_path(layer).c_str(), &st) == 0 ? st.st_size : 0;
        int64_t mb = size / kMiB;
        if (mb == 0 && size > 0) mb = 1;
        std::printf("    %s (%lld MB)\n", layer.c_str(), static_cast<long long>(mb));
      }
    }
    return {};
  });
}

/// setup --fixperm: the owner may read and write every file and enter every directory (what
/// udocker's rchmod does; the files are the user's already, rootless, so there is no chown).
Status fix_permissions(const std::string& root) {
  std::error_code ec;
  auto add = [](const std::string& path, bool dir) -> Status {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return sys_error("stat", path);
    if (S_ISLNK(st.st_mode)) return {};
    mode_t want = st.st_mode | S_IRUSR | S_IWUSR | (dir ? S_IXUSR : 0);
    if (want != st.st_mode && ::chmod(path.c_str(), want & 07777) != 0)
      return sys_error("chmod", path);
    return {};
  };
  BERTH_CHECK(add(root, true));
  std::filesystem::recursive_directory_iterator it(root, ec), end;
  if (ec) return make_error("walk", root, ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return make_error("walk", root, ec.message());
    bool dir = it->is_directory(ec) && !it->is_symlink(ec);
    BERTH_CHECK(add(it->path().string(), dir));
  }
  return {};
}

int do_setup(Context& ctx, const Parsed& p) {
  return ctx.local([&]() -> Status {
    BERTH_CHECK(need_operands("setup", p, 1, "setup [--execmode=MODE] [--nvidia] CONTAINER"));
    ContainerStore cs = BERTH_TRY(open_containers(ctx.g));
    ContainerRecord c = BERTH_TRY(cs.find(p.operands[0]));
    std::string mode = p.get("--execmode");
    for (char& ch : mode) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    if (p.has("--execmode") && c.is_protected)
      return make_error("setup", c.short_id(), "the container is protected");
    if (p.has("--fixperm")) BERTH_CHECK(fix_permissions(cs.rootfs(c)));
    if (p.has("--nvidia")) BERTH_CHECK(cs.set_gpus(c, "all"));
    if (p.has("--execmode")) {
      const ModeRow* row = nullptr;
      for (const ModeRow& m : kModes)
        if (mode == m.mode) row = &m;
      if (row == nullptr)
        return make_error("setup", "--execmode=" + p.get("--execmode"), "not a udocker mode")
            .with_hint("P1, P2, F1, F2, F3, F4, R1, R2, R3 or S1");
      const SiteConfig& site = BERTH_TRY(ctx.g.site);
      EngineChoice engine = BERTH_TRY(parse_engine(row->engine));
      BERTH_CHECK(check_run_engine(site, engine));
      if (row->difference[0] != '\0') note(row->difference);
      std::string said;
      if (auto e = choose_engine(engine, &said); !e.ok()) log::warn("{}", e.error().message());
      return cs.set_udocker_mode(c, engine, row->mode);
    }
    // --purge: Berth leaves no mount points or bound files inside a container to clean. Only
    // a bare `setup CONTAINER` prints the settings, as in udocker.
    if (p.options.empty()) {
      c = BERTH_TRY(cs.find(c.id));
      std::printf("execmode: %s\n", mode_of(c).c_str());
      std::printf("nvidiamode: %s\n", c.gpus.empty() ? "False" : "True");
    }
    return {};
  });
}

/// search: Berth's results (`berth search --json`) in udocker's columns, NAME OFFICIAL
/// DESCRIPTION STARS, truncated as udocker truncates them unless --no-trunc.
int do_search(Context& ctx, const std::string& term, bool no_trunc) {
  std::string out;
  int rc = captured([&] { return ctx.berth({"search", "--json", term}); }, &out);
  if (rc != 0) return rc;
  nlohmann::json hits = parse_json_or_discarded(out);
  if (!hits.is_array()) return fail(make_error("search", term, "unreadable results"));
  const char* fmt = no_trunc ? "%-55s %8s %-70s %5s\n" : "%-55.80s %8.8s %-70.70s %5.5s\n";
  std::printf(fmt, "NAME", "OFFICIAL", "DESCRIPTION", "STARS");
  for (const nlohmann::json& h : hits) {
    auto text = [&h](const char* key) {
      const nlohmann::json& v = h.contains(key) ? h[key] : nlohmann::json();
      return v.is_string() ? v.get<std::string>() : v.is_number() ? v.dump() : std::string();
    };
    std::string description = text("description");
    description = description.substr(0, description.find('\n'));
    bool official =
        h.contains("official") && h["official"].is_boolean() && h["official"].get<bool>();
    std::printf(fmt, text("name").c_str(), official ? "[OK]" : "----", description.c_str(),
                text("stars").c_str());
  }
  return 0;
}

/// A container's root made of the udocker clone it holds: ROOT/'s entries move up, udocker's
/// metadata files (container.json, imagerepo.name, ...) go. A tarball without ROOT/ and
/// container.json is a plain root filesystem, which udocker's import --clone also takes: it
/// stays as it is.
Status unwrap_clone(const std::string& rootfs, const std::string& file) {
  std::string inner = path_join(rootfs, "ROOT");
  struct stat st {};
  if (::lstat(inner.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    if (::lstat(path_join(rootfs, "container.json").c_str(), &st) == 0)
      return make_error("import", file, "a udocker clone without its ROOT/ folder");
    return {};
  }
  for (const std::string& e : list_dir(rootfs))
    if (e != "ROOT") BERTH_CHECK(remove_tree(path_join(rootfs, e)));
  for (const std::string& e : list_dir(inner))
    if (::rename(path_join(inner, e).c_str(), path_join(rootfs, e).c_str()) != 0)
      return sys_error("rename", path_join(inner, e));
  if (::rmdir(inner.c_str()) != 0) return sys_error("remove", inner);
  return {};
}

/// export --clone: the container in udocker's clone format (the container's folder as udocker
/// keeps it: ROOT/, container.json with the image config, imagerepo.name), which udocker's
/// `import --clone` reads; to FILE or stdout ("-").
Status export_clone(const GlobalOptions& g, const std::string& file, const std::string& name) {
  ContainerStore cs = BERTH_TRY(open_containers(g));
  ContainerRecord c = BERTH_TRY(cs.find(name));
  FileLock held = BERTH_TRY(lock_canonical(cs, c, "export"));  // the image's symlink form
  bool to_stdout = file.empty() || file == "-";
  UniqueFd out;
  if (!to_stdout) out = BERTH_TRY(open_file(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  auto write = [&]() -> Status {
    TarWriter w = BERTH_TRY(TarWriter::open(to_stdout ? STDOUT_FILENO : out.get(), file));
    if (::geteuid() != 0) w.set_owner_view(::geteuid(), ::getegid());
    BERTH_CHECK(w.add_dir("ROOT"));
    BERTH_CHECK(w.add_tree(cs.rootfs(c), "ROOT/").with_context("export " + name));
    nlohmann::json config = {{"config", c.image_config}, {"os", "linux"}};
    BERTH_CHECK(w.add_bytes("container.json", to_text(config, 2) + "\n"));
    BERTH_CHECK(w.add_bytes("imagerepo.name", c.image));
    return w.finish();
  };
  Status st = run_mapped(write);  // inside the subordinate-ID namespace, as berth export
  if (!st.ok() && !to_stdout) (void)::unlink(file.c_str());  // a half-written archive
  return st;
}

/// import --clone: a container exported by udocker with `export --clone` (its directory: ROOT/
/// and udocker's metadata) becomes a Berth container; prints its ID.
int import_clone(Context& ctx, const Parsed& p) {
  const std::string& file = p.operands[0];
  const std::string image = "udocker-clone:import";  // a staging name, removed at the end
  if (int rc = quietly([&] { return ctx.berth({"import", file, image}); }); rc != 0) return rc;
  std::vector<std::string> create = {"create", "--pull", "never"};
  if (p.has("--name")) create.insert(create.end(), {"--name", p.get("--name")});
  create.push_back(image);
  std::string out;
  int rc = captured([&] { return ctx.berth(create); }, &out);
  std::string id = out.substr(0, out.find('\n'));
  if (rc == 0) {
    rc = ctx.local([&]() -> Status {
      ContainerStore cs = BERTH_TRY(open_containers(ctx.g));
      ContainerRecord c = BERTH_TRY(cs.find(id));
      if (Status st = unwrap_clone(cs.rootfs(c), file); !st.ok()) {
        (void)cs.remove(c, true);  // half made: the error below is what matters
        return st;
      }
      return {};
    });
  }
  quietly([&] { return ctx.berth({"-q", "rmi", image}); });
  if (rc == 0) std::printf("%s\n", id.c_str());
  return rc;
}

int import_file(Context& ctx, const Parsed& p);

/// import: udocker's forms; with --mv the tarball is gone once it is imported (udocker moves
/// it into its repository; Berth's store keeps what it made of it, so the file is removed).
int do_import(Context& ctx, const Parsed& p) {
  int rc = import_file(ctx, p);
  if (rc == 0 && p.has("--mv") && !p.operands.empty() && p.operands[0] != "-" &&
      ::unlink(p.operands[0].c_str()) != 0)
    return fail(sys_error("remove", p.operands[0]).with_context("import --mv"));
  return rc;
}

int import_file(Context& ctx, const Parsed& p) {
  if (p.has("--clone")) {
    if (Status st = need_operands("import", p, 1, "import --clone [--name=NAME] FILE"); !st.ok())
      return fail(st);
    return import_clone(ctx, p);
  }
  // "import - IMAGE" reads stdin.
  if (Status st = need_operands("import", p, 1, "import [--tocontainer] FILE|- [REPO/IMAGE:TAG]");
      !st.ok())
    return fail(st);
  std::string file = p.operands[0];
  std::vector<std::string> args = {"import"};
  if (p.has("--platform")) args.insert(args.end(), {"--platform", p.get("--platform")});
  if (!p.has("--tocontainer")) {
    if (Status st = need_operands("import", p, 2, "import FILE|- REPO/IMAGE:TAG"); !st.ok())
      return fail(st);
    args.insert(args.end(), {file, p.operands[1]});
    return ctx.berth(args);
  }
  // --tocontainer: an image first (Berth's containers come from images), then the container;
  // only the container's ID is printed, as udocker does.
  std::string image = p.operands.size() > 1 ? p.operands[1] : "imported:unknown";
  args.insert(args.end(), {file, image});
  if (int rc = quietly([&] { return ctx.berth(args); }); rc != 0) return rc;
  std::vector<std::string> create = {"create", "--pull", "never"};
  if (p.has("--name")) create.insert(create.end(), {"--name", p.get("--name")});
  create.push_back(image);
  return ctx.berth(create);
}

int do_logout(Context& ctx, const Parsed& p) {
  if (!p.has("-a")) {
    std::vector<std::string> args = {"logout"};
    if (p.has("--registry")) args.push_back(registry_host(p.get("--registry")));
    return ctx.berth(args);
  }
  return ctx.local([]() -> Status {
    CredentialStore creds = BERTH_TRY(CredentialStore::load());
    for (const std::string& r : creds.berth_registries()) BERTH_TRY(creds.erase(r));
    return {};
  });
}

int do_inspect(Context& ctx, const Parsed& p) {
  if (!p.has("-p")) {
    std::vector<std::string> args = {"inspect"};
    args.insert(args.end(), p.operands.begin(), p.operands.end());
    return ctx.berth(args);
  }
  return ctx.local([&]() -> Status {
    BERTH_CHECK(need_operands("inspect", p, 1, "inspect -p CONTAINER"));
    ContainerStore cs = BERTH_TRY(open_containers(ctx.g));
    ContainerRecord c = BERTH_TRY(cs.find(p.operands[0], ContainerStore::Detail::kRecord));
    std::printf("%s\n", cs.rootfs(c).c_str());
    return {};
  });
}

}  // namespace berth::cli::udocker
