// berth-fuse-owner.so: preloaded into Debian's squashfuse_ll by Berth's squashfs keeper
// (site/squashfs_mount.h), it reports every file of the image as owned by the user who mounted
// it, as a rootless unpack of the same image would be.
//
// Why: squashfuse_ll 0.1.105 has no uid=/gid= options (the high-level squashfuse has, and is
// 8-30x slower on metadata). Without them an image made from root-owned files shows uid 0,
// which a user namespace cannot map: root inside the container then lacks CAP_DAC_OVERRIDE
// over every file (overlayfs refuses --writable's copy-up, and a 0700 /root is closed). The
// kernel learns owners only from the attributes in lookup and getattr replies, so rewriting
// the two reply calls is enough; readdir replies carry no owners.
//
// The owner comes from $BERTH_FUSE_OWNER ("UID:GID"); without it the replies pass unchanged.
// The shim links nothing: the real functions are found with dlsym(RTLD_NEXT).
#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <cstdlib>

namespace {

// libfuse3's own declarations (fuse_lowlevel.h, unchanged since 3.0), so that the shim builds
// without libfuse3-dev. fuse_req_t is opaque.
using fuse_req_t = struct fuse_req*;
using fuse_ino_t = uint64_t;
struct fuse_entry_param {
  fuse_ino_t ino;
  uint64_t generation;
  struct stat attr;
  double attr_timeout;
  double entry_timeout;
};
using ReplyAttr = int (*)(fuse_req_t, const struct stat*, double);
using ReplyEntry = int (*)(fuse_req_t, const struct fuse_entry_param*);

// Set once, when the shim is loaded, before squashfuse_ll's main runs (no guarded statics:
// the shim needs nothing from the C++ runtime).
bool g_set = false;
uid_t g_uid = 0;
gid_t g_gid = 0;
ReplyAttr g_reply_attr = nullptr;
ReplyEntry g_reply_entry = nullptr;

__attribute__((constructor)) void load() {
  g_reply_attr = reinterpret_cast<ReplyAttr>(::dlsym(RTLD_NEXT, "fuse_reply_attr"));
  g_reply_entry = reinterpret_cast<ReplyEntry>(::dlsym(RTLD_NEXT, "fuse_reply_entry"));
  const char* v = std::getenv("BERTH_FUSE_OWNER");
  if (v == nullptr) return;
  char* end = nullptr;
  unsigned long uid = std::strtoul(v, &end, 10);
  if (end == v || *end != ':') return;
  const char* g = end + 1;
  unsigned long gid = std::strtoul(g, &end, 10);
  if (end == g || *end != '\0') return;
  g_uid = static_cast<uid_t>(uid);
  g_gid = static_cast<gid_t>(gid);
  g_set = true;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int fuse_reply_attr(fuse_req_t req,
                                                                      const struct stat* attr,
                                                                      double attr_timeout) {
  if (!g_set || attr == nullptr) return g_reply_attr(req, attr, attr_timeout);
  struct stat st = *attr;
  st.st_uid = g_uid;
  st.st_gid = g_gid;
  return g_reply_attr(req, &st, attr_timeout);
}

extern "C" __attribute__((visibility("default"))) int fuse_reply_entry(
    fuse_req_t req, const struct fuse_entry_param* e) {
  if (!g_set || e == nullptr) return g_reply_entry(req, e);
  fuse_entry_param copy = *e;
  copy.attr.st_uid = g_uid;
  copy.attr.st_gid = g_gid;
  return g_reply_entry(req, &copy);
}
