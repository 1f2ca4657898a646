// NVIDIA driver discovery on the host, through a driver-root prefix and a
// device-root prefix (like nvidia-container-cli --root and nvidia-ctk cdi
// generate --dev-root), so tests and sites with the driver in a side tree
// can point it anywhere. Discovery only reads; planning is gpu_plan.h, the capability table
// nvidia_capabilities.h, the roots' configuration nvidia_driver_config.h and the libcuda probe
// nvidia_probe.h.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "devices/device_node.h"
#include "devices/nvidia_capabilities.h"
#include "devices/nvidia_driver_config.h"
#include "devices/version.h"

namespace berth {

struct NvidiaGpu {
  int index = 0;               ///< position in PCI bus order, as nvidia-smi numbers GPUs
  std::string model;           ///< "NVIDIA A100-SXM4-40GB"
  std::string uuid;            ///< "GPU-..."
  std::string bus_id;          ///< "0000:07:00.0"
  int minor = -1;              ///< Device Minor: /dev/nvidia<minor>
  std::string proc_dir;        ///< "/proc/driver/nvidia/gpus/<bus id>" (host namespace)
  std::string proc_host_path;  ///< the same under the driver root
  bool has_node = false;       ///< /dev/nvidia<minor> exists under the device root
  DeviceNode node;
  /// The CUDA compute capability ("9.0") as NVML measures it (`gpu info`); "" unknown.
  std::string compute_capability;
};

/// A driver file: a library, binary, firmware blob, ICD file or IPC endpoint.
struct DriverFile {
  std::string path;       ///< absolute, in the host's namespace ("/usr/lib64/libcuda.so.550.54.15")
  std::string host_path;  ///< the same under the driver root (what to bind from)
  CapabilitySet caps = 0;  ///< needed by any of these; 0 = whenever the driver is injected
  std::string soname;      ///< libraries: DT_SONAME ("libcuda.so.1")
  bool lib32 = false;      ///< libraries: a 32-bit x86 object (compat32)
  bool is_dir = false;     ///< IPC: a directory (the MPS pipe and log directories)
};

struct NvidiaDriver {
  DiscoveryOptions options;
  bool found = false;                 ///< a kernel module version or driver libraries were found
  Version version;                    ///< the driver version libraries are matched against
  Version kernel_version;             ///< from /proc/driver/nvidia/version
  Version library_version;            ///< from the libcuda.so / libnvidia-ml.so suffix
  Version cuda_version;               ///< from cuDriverGetVersion, else from the driver branch
  std::string cuda_version_note;      ///< why cuda_version is unknown or derived, empty when probed
  bool cuda_version_derived = false;  ///< cuda_version is from the driver branch, not probed
  std::vector<NvidiaGpu> gpus;        ///< in index order
  std::vector<DeviceNode>
      control_nodes;                   ///< nvidiactl, nvidia-uvm, nvidia-uvm-tools, nvidia-modeset
  std::vector<DeviceNode> cap_nodes;   ///< /dev/nvidia-caps/* (MIG)
  std::vector<DeviceNode> imex_nodes;  ///< /dev/nvidia-caps-imex-channels/*
  std::vector<DriverFile> libraries;   ///< version-matched, 64-bit first then 32-bit, by path
  std::vector<DriverFile> binaries;
  std::vector<DriverFile> firmware;      ///< GSP firmware for this version
  std::vector<DriverFile> config_files;  ///< Vulkan/EGL/OpenCL ICDs and similar
  std::vector<DriverFile> ipc;           ///< persistenced socket, MPS pipe and log directories
  std::string proc_params;               ///< /proc/driver/nvidia/params, empty when absent
  std::vector<std::string> warnings;     ///< one line each, for -v and `gpu info`
};

/// Discovers the driver under the options' roots. A host without a driver is
/// not an error (found == false); errors are unreadable files that should be readable.
Result<NvidiaDriver> discover_nvidia(const DiscoveryOptions& opts);

/// Parses the NVRM line of /proc/driver/nvidia/version ("... Kernel Module  550.54.15  ...").
std::optional<Version> parse_nvrm_version(std::string_view text);
/// The "<base>.so.<version>" split of a library file name; false when it has no ".so." part.
bool split_library_name(std::string_view name, std::string* base, std::string* version);

}  // namespace berth
