// berth cp: files between a container's root filesystem and the host, both ways, as
// `docker cp` copies them: CONTAINER:SRC DEST or SRC CONTAINER:DEST. Everything runs as the
// caller, whose files both sides are; paths in the container resolve inside its root
// (openat2 RESOLVE_IN_ROOT: a symlink of the image cannot lead out), and the last component
// of a source is never followed (a symlink is copied as one).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "cli/command.h"
#include "cli/context.h"
#include "core/dir.h"
#include "core/fs.h"
#include "core/root_path.h"

namespace berth::cli {
namespace {

/// One side of a copy: the folder that holds it, open, and its name there ("." for the folder
/// itself); `contents`: SRC/. (the folder's entries rather than the folder).
struct CopyEnd {
  UniqueFd parent;
  std::string base;
  std::string shown;  ///< as the user wrote it
  bool contents = false;
  bool folder = false;  ///< written with a final '/': it must be a folder that exists
};

/// `path` split into its folder and last name, lexically; "." ends (DIR/.) ask for contents.
void split_path(std::string path, std::string& dir, std::string& base, bool& contents) {
  contents = path == "." || path.ends_with("/.") || path == "/";
  if (contents && path != "/") path.resize(path.size() - 1);
  while (path.size() > 1 && path.ends_with("/")) path.pop_back();
  std::filesystem::path p(path);
  if (path == "/" || path.empty()) {
    dir = "/";
    base = ".";
    return;
  }
  dir = p.has_parent_path() ? p.parent_path().string() : ".";
  base = p.filename().string();
}

Result<CopyEnd> container_end(int root_fd, const std::string& name, const std::string& path) {
  CopyEnd end;
  end.shown = name + ":" + path;
  // A relative path is the root's, as docker cp takes it.
  std::string abs = path.starts_with("/") ? path : "/" + path;
  std::string dir;
  split_path(abs, dir, end.base, end.contents);
  end.folder = abs.size() > 1 && abs.ends_with("/");
  int fd = open_in_root(root_fd, dir.c_str(), O_PATH | O_DIRECTORY);
  if (fd < 0) return sys_error("copy", end.shown);
  end.parent.reset(fd);
  return end;
}

Result<CopyEnd> host_end(const std::string& path) {
  CopyEnd end;
  end.shown = path;
  std::string dir;
  split_path(path, dir, end.base, end.contents);
  end.folder = path.size() > 1 && path.ends_with("/");
  int fd = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return sys_error("copy", path);
  end.parent.reset(fd);
  return end;
}

/// The entry `name` of `dirfd`, not followed; nullopt when it is not there.
std::optional<struct stat> entry_stat(int dirfd, const std::string& name) {
  struct stat st;
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return std::nullopt;
  return st;
}

UniqueFd open_dir_at(int dirfd, const std::string& name) {
  return UniqueFd(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

/// Copies `sname` of `sfd` over `dname` of `dfd`, as docker cp does: a folder into a folder
/// of that name merges into it; a file replaces a file; a folder never replaces a file, nor
/// a file a folder.
Status copy_over(int sfd, const std::string& sname, int dfd, const std::string& dname,
                 const std::string& from, const std::string& to) {
  auto src = entry_stat(sfd, sname);
  if (!src) return sys_error("copy", from);
  auto dst = entry_stat(dfd, dname);
  if (!dst) return copy_entry_at(sfd, sname.c_str(), dfd, dname.c_str(), from, to);
  if (S_ISDIR(src->st_mode) && S_ISDIR(dst->st_mode)) {
    UniqueFd s = open_dir_at(sfd, sname), d = open_dir_at(dfd, dname);
    if (!s.valid()) return sys_error("open", from);
    if (!d.valid()) return sys_error("open", to);
    std::vector<DirEntry> entries;
    if (int err = list_dir_at(s.get(), entries)) return sys_error("opendir", from, err);
    for (const DirEntry& e : entries)
      BERTH_CHECK(copy_over(s.get(), e.name, d.get(), e.name, path_join(from, e.name),
                            path_join(to, e.name)));
    return {};
  }
  if (S_ISDIR(src->st_mode))
    return make_error("copy", from, "a folder cannot replace the file " + to);
  if (S_ISDIR(dst->st_mode))
    return make_error("copy", from, "a file cannot replace the folder " + to);
  if (::unlinkat(dfd, dname.c_str(), 0) != 0) return sys_error("copy", to);
  return copy_entry_at(sfd, sname.c_str(), dfd, dname.c_str(), from, to);
}

Status copy_between(const CopyEnd& src, const CopyEnd& dst) {
  auto st = entry_stat(src.parent.get(), src.base);
  if (!st) return sys_error("copy", src.shown);
  if (src.contents && !S_ISDIR(st->st_mode))
    return make_error("copy", src.shown, "not a folder: SRC/. copies a folder's contents");
  auto there = entry_stat(dst.parent.get(), dst.base);
  if ((dst.contents || dst.folder) && !(there && S_ISDIR(there->st_mode)))
    return make_error("copy", dst.shown, "no such folder (a path ending in / names one)",
                      ErrorCode::kNotFound);
  if (there && S_ISDIR(there->st_mode) && !src.contents) {
    // Into an existing folder, under the source's own name.
    UniqueFd into = open_dir_at(dst.parent.get(), dst.base);
    if (!into.valid()) return sys_error("open", dst.shown);
    std::string name = src.base == "." ? "root" : src.base;
    return copy_over(src.parent.get(), src.base, into.get(), name, src.shown,
                     path_join(dst.shown, name));
  }
  if (src.contents && there && !S_ISDIR(there->st_mode))
    return make_error("copy", src.shown, "a folder cannot replace the file " + dst.shown);
  return copy_over(src.parent.get(), src.base, dst.parent.get(), dst.base, src.shown, dst.shown);
}

/// "NAME:PATH" for a container's side: a colon before any '/', not at the start; nullopt
/// for a host path (which may hold a colon after a '/': ./a:b).
std::optional<std::pair<std::string, std::string>> container_side(const std::string& arg) {
  size_t colon = arg.find(':');
  if (colon == std::string::npos || colon == 0 || arg.find('/') < colon) return std::nullopt;
  return std::make_pair(arg.substr(0, colon), arg.substr(colon + 1));
}

}  // namespace

Action setup_cp(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    std::string from, to;
  };
  auto o = std::make_shared<Opts>();
  app.add_option("SRC", o->from, "CONTAINER:PATH or a host path")->required();
  app.add_option("DEST", o->to, "a host path or CONTAINER:PATH")->required();
  return [o, &g]() -> Status {
    auto from_c = container_side(o->from), to_c = container_side(o->to);
    if (from_c.has_value() == to_c.has_value())
      return make_error("copy", o->from + " " + o->to,
                        "one side must be CONTAINER:PATH and the other a host path")
          .with_hint("berth cp CONTAINER:/etc/hosts . or berth cp ./file CONTAINER:/tmp/");
    if (o->from == "-" || o->to == "-")
      return make_error("copy", "-", "tar streams on stdin or stdout are not taken",
                        ErrorCode::kUnsupported)
          .with_hint("copy to a folder, then tar it");
    const auto& [name, path] = from_c ? *from_c : *to_c;
    ContainerStore cs = BERTH_TRY(open_containers(g));
    ContainerRecord c = BERTH_TRY(cs.find(name));
    UniqueFd root = BERTH_TRY(open_file(cs.rootfs(c), O_PATH | O_DIRECTORY));
    CopyEnd inside = BERTH_TRY(container_end(root.get(), name, path));
    CopyEnd outside = BERTH_TRY(host_end(from_c ? o->to : o->from));
    return from_c ? copy_between(inside, outside) : copy_between(outside, inside);
  };
}

}  // namespace berth::cli
