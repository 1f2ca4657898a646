#include "site/central_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "core/dir.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/sha256.h"

namespace berth {
namespace {

/// "sha256:<hex>" of what `fd` holds, read from its start.
Result<std::string> hash_fd(int fd, const std::string& what) {
  Sha256 h;
  std::string buf(1 << 20, '\0');
  off_t at = 0;
  for (;;) {
    ssize_t n = ::pread(fd, buf.data(), buf.size(), at);
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_error("read", what);
    }
    if (n == 0) break;
    h.update(buf.data(), static_cast<size_t>(n));
    at += n;
  }
  return h.digest();
}

}  // namespace

Result<std::optional<Store>> open_central_store(const SiteConfig& site) {
  if (site.central_store.empty()) return std::optional<Store>();
  Store s =
      BERTH_TRY(Store::open_shared(site.central_store)
                    .with_context("central_store of " + (site.sources.count("central_store")
                                                             ? site.sources.at("central_store")
                                                             : std::string("the policy"))));
  return std::optional<Store>(std::move(s));
}

std::string central_verdict_dir(const Store& user_store) {
  return path_join(user_store.root(), "central-verified");
}

Result<std::vector<Leftover>> sweep_central_verdicts(const SiteConfig& site,
                                                     const Store& user_store, bool dry_run) {
  std::vector<Leftover> stale;
  std::string dir = central_verdict_dir(user_store);
  std::vector<std::string> names = list_dir(dir);
  if (names.empty()) return stale;
  // A central store that cannot be opened now (its checks fail, it is gone) vouches for
  // nothing: every verdict goes, and the next run says why it cannot use the store.
  std::optional<Store> central;
  if (auto opened = open_central_store(site); opened.ok()) central = std::move(*opened);
  for (const std::string& name : names) {
    std::string path = path_join(dir, name);
    bool keep = false;
    if (central) {
      auto digest = read_file(path);
      struct stat st;
      if (digest.ok() && digest->ends_with("\n")) {
        std::string blob = central->blob_path(digest->substr(0, digest->size() - 1));
        keep = ::stat(blob.c_str(), &st) == 0 && squashfs_key(st) == name;
      }
    }
    if (keep) continue;
    Leftover l;
    l.kind = LeftoverKind::kVerdict;
    l.path = path;
    l.bytes = tree_size(path);
    if (!dry_run && ::unlink(path.c_str()) != 0 && errno != ENOENT)
      return sys_error("remove", path);
    stale.push_back(std::move(l));
  }
  return stale;
}

Result<SquashfsFile> open_central_squash(const Store& central, const ImageRecord& image,
                                         const Store& user_store) {
  if (!image.squashed())
    return make_error("central store", image.name,
                      "the image is kept as layers there: the central store serves squashed "
                      "images only",
                      ErrorCode::kUnsupported)
        .with_hint(
            "ask the administrators to pull it with --squash, or pull it yourself: "
            "berth pull " +
            image.name);
  // The manifest and config are digest-checked as the user's own store checks them.
  BERTH_TRY(central.read_blob(image.manifest_digest));
  BERTH_TRY(central.read_blob(image.config_digest));
  std::string path = central.blob_path(image.squash);
  SquashfsFile f = BERTH_TRY(open_squashfs(path));
  BERTH_CHECK(central.check_shared(path, f.st));

  std::string key = squashfs_key(f.st);
  std::string dir = central_verdict_dir(user_store);
  std::string verdict = path_join(dir, key);
  if (auto seen = read_file(verdict); seen.ok() && *seen == image.squash + "\n") {
    log::debug("central store: {} verified before ({})", path, key);
    return f;
  }
  log::info("central store: verifying {} ({} bytes) once", path, f.st.st_size);
  std::string actual = BERTH_TRY(hash_fd(f.fd.get(), path));
  if (actual != image.squash)
    return make_error("verify", path,
                      "digest mismatch: got " + actual + ", the record of " + image.name +
                          " says " + image.squash,
                      ErrorCode::kIntegrity)
        .with_hint("tell the administrators of the central store");
  struct stat now;
  if (::fstat(f.fd.get(), &now) != 0) return sys_error("stat", path);
  if (squashfs_key(now) != key) return f;  // changed while hashed: verified, not remembered
  BERTH_CHECK(make_own_dir(dir, "central store", "the central store's verdicts folder"));
  // Best effort: without the verdict the next start hashes the file again.
  if (auto st = write_file_atomic(verdict, image.squash + "\n", 0600, Durability::kProcessSafe);
      !st.ok())
    log::warn("{}", st.error().message());
  return f;
}

}  // namespace berth
