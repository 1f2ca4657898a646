// InfiniBand / RDMA HCAs: discovery under a sysfs root and a device root (BERTH_SYSFS_ROOT,
// BERTH_DEV_ROOT, so tests fabricate a host), selection (--ib, MELLANOX_VISIBLE_DEVICES, the
// site policy's default) and the plan of device edits a run gets.
//
// What a container gets, and why:
//  - /dev/infiniband/uverbsN of the selected HCAs and /dev/infiniband/rdma_cm, bound at their
//    paths: the verbs and connection-manager paths every provider (mlx4/mlx5, efa, irdma,
//    bnxt_re, hfi1, rxe...) uses from user space.
//  - Never umadN or issmN: management datagrams and the subnet-manager port are for the
//    fabric's administrators (enroot and the k8s RDMA plugins leave them out too).
//  - /sys/class/infiniband, infiniband_verbs and infiniband_mad narrowed to the selected HCAs:
//    a read-only tmpfs over each with the host's links (to /sys/devices/...) re-made for the
//    selected entries and abi_version bound, so libibverbs enumerates only what it may open.
//    Where the container's /sys has no such class (a fabricated host, another network
//    namespace's sysfs), a tmpfs over /sys/class with the other classes bound back holds them,
//    the selected HCAs' directories bound read-only from the sysfs root.
//  - RLIMIT_MEMLOCK is the caller's: the run inherits it and Berth does not change it (verbs
//    pin memory; a site raises the limit in limits.conf or Slurm's PropagateResourceLimits).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "devices/device_node.h"
#include "runtime/container_spec.h"

namespace berth {

/// Where discovery looks: sysfs_root/sys/class/..., dev_root/dev/infiniband/...
struct RdmaRoots {
  std::string sysfs_root = "/";  ///< BERTH_SYSFS_ROOT
  std::string dev_root = "/";    ///< BERTH_DEV_ROOT (the GPU's device root)
};

/// One port of an HCA (sys/class/infiniband/NAME/ports/N).
struct RdmaPort {
  int number = 0;
  std::string state;       ///< "4: ACTIVE"
  std::string link_layer;  ///< "InfiniBand" | "Ethernet"
  std::string rate;        ///< "200 Gb/sec (4X HDR)"
};

struct Hca {
  int index = 0;          ///< position in name order: what --ib 0,1 counts
  std::string name;       ///< "mlx5_0"
  std::string driver;     ///< the kernel driver of its device ("mlx5_core"), "" if none
  std::string node_guid;  ///< "0c42:a103:0016:054c"
  std::string sys_link;   ///< the class entry's link text ("../../devices/pci.../mlx5_0")
  std::vector<RdmaPort> ports;
  std::string uverbs;       ///< "uverbs0" ("" when the HCA has no verbs device)
  std::string uverbs_link;  ///< its infiniband_verbs entry's link text
  bool has_node = false;    ///< /dev/infiniband/<uverbs> exists under the device root
  DeviceNode node;
  std::vector<std::string> mad;  ///< its umadN/issmN names (never injected; for ib info)
};

struct RdmaDevices {
  RdmaRoots roots;
  std::vector<Hca> hcas;  ///< in name order
  bool has_rdma_cm = false;
  DeviceNode rdma_cm;
  bool found() const { return !hcas.empty(); }
};

/// The roots from BERTH_SYSFS_ROOT and `dev_root` (the GPU discovery's device root); both
/// absolute, else an error.
Result<RdmaRoots> rdma_roots_from_env(const std::string& dev_root);

/// Reads the HCAs under the roots. A host without any is not an error (found() false).
Result<RdmaDevices> discover_rdma(const RdmaRoots& roots);

/// A parsed selection: --ib all|none|0,1|mlx5_0 and MELLANOX_VISIBLE_DEVICES (void, none,
/// all, list). kNothing for void, none and "".
struct IbRequest {
  enum class Kind { kNothing, kAll, kList } kind = Kind::kNothing;
  std::vector<std::string> ids;  ///< kList: indexes or names, as given
};
IbRequest parse_ib_request(std::string_view text);

/// The HCAs `req` selects, in the order given (duplicates dropped). An id that names no HCA
/// is an error of one line naming it and listing those present; `what` is the flag or
/// variable it came from ("--ib 3").
Result<std::vector<const Hca*>> select_hcas(const RdmaDevices& devices, const IbRequest& req,
                                            const std::string& what);

/// The device edits that give a container `selected` (see the header comment): nodes first,
/// then the narrowed sysfs classes. `container_sys` is the host folder the container's /sys
/// shows ("/sys"): where it has no class/infiniband, a read-only tmpfs goes over /sys/class
/// instead, its other classes bound back from there and the InfiniBand classes holding the
/// selected HCAs' directories, bound read-only from the sysfs root.
std::vector<DeviceEdit> plan_rdma(const RdmaDevices& devices,
                                  const std::vector<const Hca*>& selected,
                                  const std::string& container_sys);

}  // namespace berth
