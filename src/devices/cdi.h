// The Container Device Interface (CDI), both ways:
//  - out: a spec for the discovered NVIDIA driver, so Podman, containerd,
//    CRI-O or Kubernetes can inject the same GPUs that `berth run --gpus` would;
//  - in: `berth run --device vendor.com/class=name` applies any vendor's spec
//    found in the CDI directories (JSON or YAML), rootless.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "devices/nvidia_discover.h"
#include "devices/rdma.h"
#include "runtime/container_spec.h"

namespace berth {

inline constexpr const char* kCdiKind = "nvidia.com/gpu";

/// The spec: a device per GPU index and per UUID, plus "all"; common edits with
/// the control nodes, every version-matched 64-bit library (at its host path, and
/// again at its soname path so no symlink hook is needed), binaries, firmware,
/// ICD files, IPC endpoints and NVIDIA_VISIBLE_DEVICES=void. When the host has
/// nvidia-cdi-hook or nvidia-ctk, an update-ldcache hook is added for the
/// library folders (the hook's path as it is on this host, under the driver root). Device
/// nodes name their hostPath when the device root is not "/". cdiVersion is the lowest the
/// content needs (cdi_required_version), so older consumers (Podman 4.3) accept it.
nlohmann::json make_cdi_spec(const NvidiaDriver& driver);

inline constexpr const char* kRdmaCdiKind = "berth.dev/rdma";

/// The spec (kind kRdmaCdiKind) for the HCAs `devices` lists: a device per HCA named by its
/// index and by its name, with its uverbs node, and "all"; rdma_cm in the common edits. umad
/// and issm are never in it (devices/rdma.h); hostPath as for GPUs.
nlohmann::json make_rdma_cdi_spec(const RdmaDevices& devices);

/// A spec as the text of its file: pretty JSON, or YAML when `yaml`.
std::string cdi_spec_text(const nlohmann::json& doc, bool yaml);

/// The lowest cdiVersion ("0.3.0" at least) whose fields `doc` uses, by the reference
/// library's rules: mount type 0.4.0; deviceNode hostPath or a device name not starting with
/// a letter 0.5.0; annotations or a dotted class 0.6.0; additionalGids or intelRdt 0.7.0;
/// netDevices or intelRdt schemata/enableMonitoring 1.1.0.
std::string cdi_required_version(const nlohmann::json& doc);

/// Checks a parsed spec as the reference library does: cdiVersion known and sufficient for
/// the fields used, kind and device-name syntax, at least one device, no device twice or
/// without edits, well-formed env, device nodes, hooks and mounts. One-line reasons.
Status validate_cdi_spec(const nlohmann::json& doc, const std::string& path);

/// One spec file, parsed.
struct CdiSpec {
  std::string path;     ///< the file, for messages
  std::string kind;     ///< "vendor.com/class"
  nlohmann::json doc;   ///< the whole document
  std::string invalid;  ///< why the spec was refused (validate_cdi_spec); its devices unusable
  /// device name -> the other file of the same directory that defines it too
  std::vector<std::pair<std::string, std::string>> conflicts;
};

/// The directories searched, lowest priority first: $BERTH_CDI_SPEC_DIRS (colon-separated)
/// when set, else /etc/cdi, /var/run/cdi and the user's $XDG_CONFIG_HOME/cdi (~/.config/cdi).
std::vector<std::string> cdi_spec_dirs(const std::vector<std::string>& env,
                                       const std::string& home);

/// Every *.json, *.yaml and *.yml spec in `dirs` (missing directories are fine). A file that
/// does not parse or lacks cdiVersion/kind is skipped, its one-line reason in `warnings`; one
/// that fails validate_cdi_spec is kept with `invalid` set (and warned about); a device that two
/// files of one directory define is recorded in both as a conflict.
Result<std::vector<CdiSpec>> load_cdi_specs(const std::vector<std::string>& dirs,
                                            std::vector<std::string>* warnings);

/// Applies the device `name` ("vendor.com/class=device") to `spec`: the spec's and the
/// device's containerEdits (env; deviceNodes, read-only unless their permissions allow "w",
/// refused when their fileMode/uid/gid differ from the host node's, which a rootless bind
/// keeps; bind and tmpfs mounts at their containerPath, the mount point made where the image
/// lacks it, a tmpfs mode 1777 unless its options say otherwise; additionalGids the caller
/// holds). netDevices and intelRdt
/// are refused (a rootless run cannot honour them); so is a device of an invalid spec or one
/// defined in two files of one directory. Of hooks, NVIDIA's update-ldcache
/// (its folders join ld_library_dirs), create-symlinks (links), enable-cuda-compat (the
/// image's /usr/local/cuda/compat first when its libcuda is newer than the host driver, as
/// --gpus decides) and disable-device-node-modification (nothing to do rootless) are done
/// natively, and a chmod to 755 is what Berth's mount points have already; any other hook
/// cannot run rootless and is skipped: listed in `skipped_hooks` (each once, so the caller
/// warns once for the run) when given, else a warning each. The last spec found wins for a
/// device. Returns the warnings.
Result<std::vector<std::string>> apply_cdi_device(
    const std::vector<CdiSpec>& specs, const std::string& name, ContainerSpec& spec,
    std::vector<std::string>* skipped_hooks = nullptr);

}  // namespace berth
