// Device edits as the host binds a fallback engine expresses itself.
#include "runtime/device_binds.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "core/fs.h"
#include "core/log.h"
#include "runtime/mount_plan.h"

namespace berth {
namespace {

bool is_under(const std::string& path, const std::string& dir) {
  return path.size() > dir.size() && path.starts_with(dir) && path[dir.size()] == '/';
}

}  // namespace

Result<std::vector<HostBind>> device_binds(const ContainerSpec& spec, const std::string& scratch,
                                           const Engine& engine, bool write) {
  std::vector<HostBind> out;
  // kTmpfs targets and the scratch folders standing in for them.
  std::vector<std::pair<std::string, std::string>> tmpfs;
  std::vector<std::string> sealed;  // read-only kTmpfs folders, closed once filled
  auto add_tmpfs = [&](const std::string& target, bool read_only) -> Status {
    std::string host = path_join(scratch, "tmpfs" + std::to_string(tmpfs.size()));
    if (write) BERTH_CHECK(make_dirs(host));
    if (read_only) sealed.push_back(host);
    tmpfs.emplace_back(target, host);
    out.push_back({host, target, false});
    return {};
  };
  auto under_tmpfs = [&tmpfs](const std::string& target) -> std::string {
    for (const auto& [ctr, host] : tmpfs)
      if (is_under(target, ctr)) return host + target.substr(ctr.size());
    return "";
  };
  // As plan_mounts() does: Berth's run directory is a scratch folder whenever an edit lands in
  // it and no edit makes it one.
  bool run_dir_needed = false, run_dir_given = false;
  for (const DeviceEdit& d : spec.device_edits) {
    run_dir_needed |= is_under(d.target, kBerthRunDir);
    run_dir_given |= d.kind == DeviceEdit::Kind::kTmpfs && d.target == kBerthRunDir;
  }
  if (run_dir_needed && !run_dir_given) BERTH_CHECK(add_tmpfs(kBerthRunDir, false));
  int files = 0;
  for (const DeviceEdit& d : spec.device_edits) {
    std::string target = BERTH_TRY(normalize_container_path(d.target));
    // Where the engine cannot mount inside /proc (runc refuses to), the optional
    // /proc/driver/nvidia narrowing is left out, as on a host without the driver's /proc entries.
    bool in_proc = target == "/proc" || target.starts_with("/proc/");
    if (in_proc && !engine.mounts_in_proc && !d.required) {
      log::debug("{} engine: {} left out (it mounts nothing inside /proc)", engine.name, target);
      continue;
    }
    switch (d.kind) {
      case DeviceEdit::Kind::kBind:
        if (!path_exists(d.source)) {
          if (!d.required) continue;
          return make_error("device", d.source, "host path does not exist");
        }
        out.push_back({d.source, target, d.read_only});
        break;
      case DeviceEdit::Kind::kTmpfs:
        BERTH_CHECK(add_tmpfs(target, d.read_only));
        break;
      case DeviceEdit::Kind::kFile:
      case DeviceEdit::Kind::kSymlink: {
        std::string host = under_tmpfs(target);
        if (host.empty() && d.kind == DeviceEdit::Kind::kFile) {
          // Written beside the scratch folders and bound read-only over the target.
          host = path_join(scratch, "file" + std::to_string(files++));
          out.push_back({host, target, true});
        }
        if (host.empty() && d.kind == DeviceEdit::Kind::kSymlink) {
          // A link to a path an earlier edit bound (a host binary staged in the run directory):
          // the same host file bound at the link's place does what the link would.
          auto bound = std::find_if(out.begin(), out.end(),
                                    [&d](const HostBind& b) { return b.container == d.source; });
          if (bound != out.end()) {
            out.push_back({bound->host, target, bound->read_only});
            break;
          }
          if (!d.required) {
            // An optional convenience (a binary's link in /usr/bin): this engine cannot write
            // it without changing the image, so it goes without.
            log::debug("{} engine: {} left out", engine.name, target);
            continue;
          }
        }
        if (host.empty())
          return make_error("device", target,
                            std::string("the ") + engine.name +
                                " engine cannot create links in the image")
              .with_hint("--gpus and --device need the userns or oci engine");
        if (!write) break;
        BERTH_CHECK(make_dirs(host.substr(0, host.rfind('/'))));
        if (d.kind == DeviceEdit::Kind::kFile) {
          BERTH_CHECK(write_file_atomic(host, d.source, 0644, Durability::kProcessSafe));
        } else if (::symlink(d.source.c_str(), host.c_str()) != 0) {
          return sys_error("symlink", host);
        }
        break;
      }
    }
  }
  // A read-only kTmpfs (mode 0555) is closed once its files are written.
  for (const std::string& dir : sealed)
    if (write && ::chmod(dir.c_str(), 0555) != 0) return sys_error("chmod", dir);
  return out;
}

}  // namespace berth
