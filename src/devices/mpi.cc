#include "devices/mpi.h"

#include <fcntl.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

#include "core/elf.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/root_path.h"
#include "core/strings.h"
#include "devices/inject.h"
#include "devices/ld_cache.h"
#include "runtime/container_config.h"

namespace berth {
namespace {

/// Binds `lib` into kMpiLibDir with its soname link.
void beside(const HostLibrary& lib, MpiPlan& plan) {
  std::string name = basename_of(lib.real);
  plan.edits.push_back({DeviceEdit::Kind::kBind, lib.real, path_join(kMpiLibDir, name), true});
  if (!lib.soname.empty() && lib.soname != name)
    plan.edits.push_back({DeviceEdit::Kind::kSymlink, name, path_join(kMpiLibDir, lib.soname)});
}

/// Sarus's glibc rule: the host libraries' newest needed GLIBC_ version against the image's
/// libc.so.6 (through its ld.so.cache). Read only under --mpi.
Status check_glibc(const std::vector<HostLibrary>& host, const std::vector<HostLibrary>& deps,
                   const std::vector<ImageLibrary>& image, const std::string& rootfs) {
  std::vector<int> need;
  std::string needer;
  for (const auto* group : {&host, &deps})
    for (const HostLibrary& h : *group) {
      std::string bytes = BERTH_TRY(read_file(h.real));
      std::vector<int> v = highest_glibc_version(bytes);
      if (v > need) {
        need = v;
        needer = h.real;
      }
    }
  if (need.empty()) return {};
  std::string libc;
  for (const ImageLibrary& i : image)
    if (i.soname == "libc.so.6") libc = i.real;
  if (libc.empty())
    return make_error("inject MPI", needer,
                      "needs glibc " + version_string(need) +
                          " and the image has none (no libc.so.6 in its ld.so.cache)",
                      ErrorCode::kUnsupported);
  auto root = BERTH_TRY(open_file(rootfs, O_PATH | O_DIRECTORY));
  std::string bytes = BERTH_TRY(read_file_in_root(root.get(), libc.c_str()));
  std::vector<int> have = highest_glibc_version(bytes);
  if (have < need)
    return make_error("inject MPI", needer,
                      "needs glibc " + version_string(need) + ", newer than the image's " +
                          (have.empty() ? std::string("(unknown)") : version_string(have)) + " (" +
                          libc + ")",
                      ErrorCode::kUnsupported)
        .with_hint(
            "use an image built on a newer distribution, or a host MPI built for older ones");
  return {};
}

}  // namespace

Result<MpiPlan> plan_mpi(const MpiDeclaration& decl, const std::vector<HostLibrary>& host,
                         const std::vector<HostLibrary>& dependencies,
                         const std::vector<ImageLibrary>& image) {
  std::vector<std::string> host_names, image_names;
  for (const HostLibrary& h : host) host_names.push_back(basename_of(h.real));
  for (const ImageLibrary& i : image) image_names.push_back(basename_of(i.real));
  MpiPlan plan;
  std::vector<MpiPair> pairs =
      BERTH_TRY(match_mpi_libraries(host_names, image_names, decl.abi, &plan.warnings));
  bool image_has_mpi = false;
  for (const MpiPair& p : pairs) image_has_mpi |= !p.image.empty();
  if (!image_has_mpi) {
    std::string names;
    for (const std::string& h : host_names)
      names += (names.empty() ? "" : ", ") + parse_library_name(h)->linker_name;
    return make_error(
               "inject MPI", "--mpi=" + decl.type,
               "the image has no MPI library to replace (none of " + names + " in its ld.so.cache)",
               ErrorCode::kNotFound)
        .with_hint("run the image without --mpi, or rebuild it with an MPI of the same ABI");
  }
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (pairs[i].verdict == AbiVerdict::kOver) {
      for (const ImageLibrary& il : image)
        if (basename_of(il.real) == pairs[i].image)
          plan.edits.push_back({DeviceEdit::Kind::kBind, host[i].real, il.real, true});
    } else {
      beside(host[i], plan);
    }
  }
  for (const HostLibrary& d : dependencies) beside(d, plan);
  for (const DeviceEdit& e : plan.edits)
    if (e.target.starts_with(kMpiLibDir)) {
      plan.library_dirs = {kMpiLibDir};
      break;
    }
  return plan;
}

Result<std::vector<HostLibrary>> resolve_host_libraries(const std::vector<std::string>& paths) {
  std::vector<HostLibrary> out;
  for (const std::string& p : paths) {
    char real[PATH_MAX];
    if (::realpath(p.c_str(), real) == nullptr) return sys_error("inject MPI", p);
    ElfInfo info = BERTH_TRY(read_elf_info(real));
    out.push_back({p, real, info.soname});
  }
  return out;
}

Result<std::vector<ImageLibrary>> image_libraries(const std::string& rootfs) {
  auto root = BERTH_TRY(open_file(rootfs, O_PATH | O_DIRECTORY));
  std::string cache = BERTH_TRY(read_file_in_root(root.get(), "/etc/ld.so.cache"));
  std::vector<ImageLibrary> out;
  if (cache.empty()) return out;
  auto entries = BERTH_TRY(parse_ld_cache(cache, path_join(rootfs, "etc/ld.so.cache")));
  for (const LdCacheEntry& e : entries) {
    if (!(e.flags & kLdCacheX8664Lib64) && host_elf_machine() == 62) continue;  // 64-bit only
    int fd = open_in_root(root.get(), e.path.c_str(), O_PATH);
    if (fd < 0) continue;  // a stale cache entry
    char link[PATH_MAX];
    std::string proc = "/proc/self/fd/" + std::to_string(fd);
    ssize_t n = ::readlink(proc.c_str(), link, sizeof link - 1);
    ::close(fd);
    if (n <= 0) continue;
    std::string host(link, static_cast<size_t>(n));
    if (!host.starts_with(rootfs)) continue;
    std::string inside = host.substr(rootfs.size());
    if (inside.empty() || inside[0] != '/') inside.insert(0, "/");
    out.push_back({e.name, inside});
  }
  return out;
}

Status add_mpi(const std::vector<MpiDeclaration>& declared, const std::string& default_type,
               const std::string& type, ContainerSpec& spec) {
  std::string want = type.empty() ? default_type : type;
  const MpiDeclaration* decl = nullptr;
  std::string names;
  for (const MpiDeclaration& d : declared) {
    names += (names.empty() ? "" : ", ") + d.type;
    if (d.type == want) decl = &d;
  }
  if (decl == nullptr)
    return make_error("inject MPI", "--mpi" + (type.empty() ? std::string() : "=" + type),
                      want.empty() ? "the site policy declares no default MPI (mpi_default)"
                                   : "the site policy declares no MPI " + want +
                                         " (declared: " + (names.empty() ? "none" : names) + ")",
                      ErrorCode::kNotFound);
  auto host = BERTH_TRY(resolve_host_libraries(decl->libraries));
  auto deps = BERTH_TRY(resolve_host_libraries(decl->dependencies));
  auto image = BERTH_TRY(image_libraries(spec.rootfs));
  MpiPlan plan = BERTH_TRY(plan_mpi(*decl, host, deps, image));
  BERTH_CHECK(check_glibc(host, deps, image, spec.rootfs));
  for (const std::string& w : plan.warnings) log::warn("{}", w);
  ensure_run_dir(spec);
  for (DeviceEdit& e : plan.edits) spec.device_edits.push_back(std::move(e));
  for (const std::string& m : decl->mounts) spec.volumes.push_back(BERTH_TRY(parse_volume(m)));
  add_library_dirs(plan.library_dirs, spec);
  return {};
}

}  // namespace berth
