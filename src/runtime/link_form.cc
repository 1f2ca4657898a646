// The rootfs's symlink form, rewritten for and after the engines that need host paths.
#include "runtime/link_form.h"

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

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

Status canonical_links(ContainerStore& cs, const ContainerRecord& c) {
  ContainerRecord now = BERTH_TRY(cs.find(c.id));  // `c` may be older than the last run
  if (now.link_prefix.empty()) return {};
  size_t n = BERTH_TRY(rewrite_symlinks(cs.rootfs(now), now.link_prefix, ""));
  log::debug("{}: {} absolute symlinks back in the image's form", now.short_id(), n);
  return cs.set_link_prefix(now, "");
}

Result<RunOutcome> run_with_link_form(ContainerStore& cs, const ContainerRecord& c,
                                      const EngineRun& run) {
  // Links a killed run left in another form go back first; an engine that needs host paths
  // gets them recorded before they change, so that a run killed meanwhile is undone next time
  // (the rewrite leaves links that have the prefix already as they are).
  BERTH_CHECK(canonical_links(cs, c));
  if (!run.engine->host_path_links) return run.engine->run(run);
  std::string rootfs = cs.rootfs(c);
  BERTH_CHECK(cs.set_link_prefix(c, rootfs));
  size_t n = BERTH_TRY(rewrite_symlinks(rootfs, "", rootfs));
  log::debug("{}: {} absolute symlinks made host paths for the {} engine", c.short_id(), n,
             run.engine->name);
  RunOutcome out = run.engine->run(run);
  if (Status st = canonical_links(cs, c); !st.ok()) {
    // The run's own outcome matters more; the next use of the container tries again.
    log::warn("{}", st.error().message());
  }
  return out;
}

Result<FileLock> lock_canonical(ContainerStore& cs, const ContainerRecord& c, const char* op) {
  ContainerRecord now = BERTH_TRY(cs.find(c.id));
  if (now.running) {
    if (now.link_prefix.empty()) return FileLock();  // the run leaves the links as they are
    return make_error(op, now.names.empty() ? now.id : now.names.front(),
                      "container " + now.short_id() +
                          " is running with host-path symlinks (the fakechroot engine)")
        .with_hint("wait for the run to end");
  }
  FileLock lock = BERTH_TRY(cs.lock_for_run(now).with_context(op));
  BERTH_CHECK(canonical_links(cs, now));
  return lock;
}

}  // namespace berth
