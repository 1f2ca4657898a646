// The rootfs's symlink form, rewritten for and after the engines that need host paths.
#include "runtime/link_form.h"

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "core/log.h"

namespace berth {

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
  auto next =
      rewrite_link_target(std::string_view(buf, static_cast<size_t>(n)), g_walk->from, g_walk->to);
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

namespace {

/// Present while a rewrite is under way: the links may be in both forms (a killed rewrite), so
/// the next use rewrites again whatever the record says (both directions are idempotent).
std::string rewrite_marker(const ContainerStore& cs, const ContainerRecord& c) {
  return path_join(cs.dir(c), "links.rewriting");
}

/// Rewrites container `now`'s links from `from` to `to` (one of them ""), under the marker, and
/// records `to`: recorded before links gain a prefix, after they lose it, so that the record
/// always names any prefix a link may carry.
Status rewrite_links(ContainerStore& cs, const ContainerRecord& now, const std::string& from,
                     const std::string& to) {
  std::string marker = rewrite_marker(cs, now);
  BERTH_CHECK(write_file_atomic(marker, "", 0644, Durability::kProcessSafe));
  if (!to.empty()) BERTH_CHECK(cs.set_link_prefix(now, to));
  size_t n = BERTH_TRY(rewrite_symlinks(cs.rootfs(now), from, to));
  log::debug("{}: {} absolute symlinks {}", now.short_id(), n,
             to.empty() ? "back in the image's form" : "made host paths");
  if (to.empty()) BERTH_CHECK(cs.set_link_prefix(now, ""));
  if (::unlink(marker.c_str()) != 0) return sys_error("unlink", marker);
  return {};
}

}  // namespace

Status canonical_links(ContainerStore& cs, const ContainerRecord& c) {
  ContainerRecord now = BERTH_TRY(cs.find(c.id));  // `c` may be older than the last run
  if (!now.link_prefix.empty()) return rewrite_links(cs, now, now.link_prefix, "");
  // No prefix recorded: no link carries one (it is recorded before links gain it, cleared after
  // they lose it), whatever a marker left by a killed rewrite says.
  std::string marker = rewrite_marker(cs, now);
  if (::unlink(marker.c_str()) != 0 && errno != ENOENT) return sys_error("unlink", marker);
  return {};
}

Result<RunOutcome> run_with_link_form(ContainerStore& cs, const ContainerRecord& c,
                                      const EngineRun& run) {
  // `c` was read just before the caller took the run lock; nothing else rewrites links.
  std::string want = run.engine->host_path_links ? cs.rootfs(c) : "";
  bool unfinished = path_exists(rewrite_marker(cs, c));
  if (c.link_prefix != want || unfinished) {
    // Back to the image's form first: from another engine's form, or another prefix (the
    // rootfs moved), or whatever a cut-short rewrite left.
    if (c.link_prefix != want || want.empty()) BERTH_CHECK(canonical_links(cs, c));
    if (!want.empty()) {
      ContainerRecord now = BERTH_TRY(cs.find(c.id));
      BERTH_CHECK(rewrite_links(cs, now, "", want));
    }
  }
  // The host form stays after the run: converting back costs a block per long link on most
  // file systems, seconds per run for an ordinary image. Every other reader goes through
  // canonical_links() first (another engine above, clone, export).
  return run.engine->run(run);
}

Result<FileLock> lock_canonical(ContainerStore& cs, const ContainerRecord& c, Op op) {
  ContainerRecord now = BERTH_TRY(cs.find(c.id));
  if (now.running) {
    if (now.link_prefix.empty()) return FileLock();  // the run leaves the links as they are
    return make_error(op, now.names.empty() ? now.id : now.names.front(),
                      "container " + now.short_id() +
                          " is running with host-path symlinks (the fakechroot engine)")
        .with_hint("wait for the run to end");
  }
  FileLock lock = BERTH_TRY(cs.lock_for_run(now).with_context(std::string(op.word())));
  BERTH_CHECK(canonical_links(cs, now));
  return lock;
}

}  // namespace berth
