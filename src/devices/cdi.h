// The Container Device Interface (CDI), both ways:
//  - out: a spec for the discovered NVIDIA driver, so Podman, containerd,
//    CRI-O or Kubernetes can inject the same GPUs that `berth run --gpus` would;
//  - in: `berth run --device vendor.com/class=name` applies any vendor's spec
//    found in the CDI directories (JSON or YAML), rootless.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "devices/nvidia_discover.h"
#include "runtime/container_spec.h"

namespace berth {

inline constexpr const char* kCdiVersion = "0.6.0";
inline constexpr const char* kCdiKind = "nvidia.com/gpu";

/// The spec: a device per GPU index and per UUID, plus "all"; common edits with
/// the control nodes, every version-matched 64-bit library (at its host path, and
/// again at its soname path so no symlink hook is needed), binaries, firmware,
/// ICD files, IPC endpoints and NVIDIA_VISIBLE_DEVICES=void. When the host has
/// nvidia-cdi-hook or nvidia-ctk, an update-ldcache hook is added for the
/// library folders. Device nodes name their hostPath when the device root is not "/".
nlohmann::json make_cdi_spec(const NvidiaDriver& driver);

/// One spec file, parsed.
struct CdiSpec {
  std::string path;    ///< the file, for messages
  std::string kind;    ///< "vendor.com/class"
  nlohmann::json doc;  ///< the whole document
};

/// The directories searched, lowest priority first: $BERTH_CDI_SPEC_DIRS (colon-separated)
/// when set, else /etc/cdi, /var/run/cdi and the user's $XDG_CONFIG_HOME/cdi (~/.config/cdi).
std::vector<std::string> cdi_spec_dirs(const std::vector<std::string>& env, const std::string& home);

/// Every *.json, *.yaml and *.yml spec in `dirs` (missing directories are fine). A file that
/// does not parse or lacks cdiVersion/kind is skipped, its one-line reason in `warnings`.
Result<std::vector<CdiSpec>> load_cdi_specs(const std::vector<std::string>& dirs,
                                            std::vector<std::string>* warnings);

/// Applies the device `name` ("vendor.com/class=device") to `spec`: the spec's and the
/// device's containerEdits (env, deviceNodes, mounts). Of hooks, NVIDIA's update-ldcache
/// (its folders join ld_library_dirs) and create-symlinks (links) are done natively; any other
/// hook cannot run rootless and is skipped with a warning. The last spec found wins for a
/// device. Returns the warnings.
Result<std::vector<std::string>> apply_cdi_device(const std::vector<CdiSpec>& specs,
                                                  const std::string& name, ContainerSpec& spec);

}  // namespace berth
