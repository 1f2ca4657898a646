#include "devices/gpu_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/strings.h"

namespace berth {
namespace {

using nlohmann::json;

/// Files needing a capability (files with caps 0 go under every capability's "always" list).
json files_for(const std::vector<DriverFile>& files, CapabilitySet cap, bool lib32) {
  json out = json::array();
  for (const auto& f : files)
    if ((f.caps & cap) && f.lib32 == lib32) out.push_back(f.path);
  return out;
}

json nodes_json(const std::vector<DeviceNode>& nodes) {
  json out = json::array();
  for (const auto& n : nodes) out.push_back(n.path);
  return out;
}

json paths(const std::vector<DriverFile>& files) {
  json out = json::array();
  for (const auto& f : files) out.push_back(f.path);
  return out;
}

}  // namespace

json gpu_info_json(const NvidiaDriver& nv, const AmdDevices& amd) {
  json gpus = json::array();
  for (const auto& g : nv.gpus)
    gpus.push_back(
        {{"index", g.index},
         {"model", g.model},
         {"uuid", g.uuid},
         {"bus_id", g.bus_id},
         {"compute_capability", g.compute_capability.empty() ? json() : json(g.compute_capability)},
         {"minor", g.minor},
         {"device_node", g.has_node ? json(g.node.path) : json()}});
  json caps = json::object();
  for (const auto& c : capability_names()) {
    if (c.cap == kCapCompat32) {
      caps[c.name] = {{"libraries", json::array()}, {"binaries", json::array()}};
      for (const auto& f : nv.libraries)
        if (f.lib32) caps[c.name]["libraries"].push_back(f.path);
      continue;
    }
    caps[c.name] = {{"libraries", files_for(nv.libraries, c.cap, false)},
                    {"binaries", files_for(nv.binaries, c.cap, false)},
                    {"config_files", files_for(nv.config_files, c.cap, false)}};
  }
  auto ver = [](const Version& v) { return v.known() ? json(v.str()) : json(); };
  json j = {
      {"driver_root", nv.options.driver_root},
      {"dev_root", nv.options.effective_dev_root()},
      {"nvidia",
       {{"found", nv.found},
        {"driver_version", ver(nv.version)},
        {"kernel_version", ver(nv.kernel_version)},
        {"library_version", ver(nv.library_version)},
        {"cuda_version", ver(nv.cuda_version)},
        {"cuda_version_note", nv.cuda_version_note},
        {"cuda_version_derived", nv.cuda_version_derived},
        {"gpus", gpus},
        {"capabilities", caps},
        {"control_nodes", nodes_json(nv.control_nodes)},
        {"mig_nodes", nodes_json(nv.cap_nodes)},
        {"imex_nodes", nodes_json(nv.imex_nodes)},
        {"firmware", paths(nv.firmware)},
        {"ipc", paths(nv.ipc)},
        {"warnings", nv.warnings}}},
      {"amd",
       {{"found", amd.found},
        {"kfd", amd.found ? json(amd.kfd.path) : json()},
        {"render_nodes", nodes_json(amd.render_nodes)},
        {"rocm_version", amd.rocm_version.empty() ? json() : json(amd.rocm_version)}}},
  };
  return j;
}

Error no_nvidia_driver_error(Op op, const std::string& driver_root) {
  return make_error(op, "", "no NVIDIA driver found under " + driver_root, ErrorCode::kNotFound)
      .with_hint(
          "no /proc/driver/nvidia/version, libcuda.so.1 or libnvidia-ml.so.1 there; "
          "set BERTH_DRIVER_ROOT if the driver lives in another tree");
}

std::string gpu_info_text(const NvidiaDriver& nv, const AmdDevices& amd) {
  std::string out;
  if (nv.found) {
    out += fmt::format("NVIDIA driver {}, CUDA {}{}\n", nv.version.str(), nv.cuda_version.str(),
                       nv.cuda_version_note.empty() ? "" : " (" + nv.cuda_version_note + ")");
    if (nv.options.driver_root != "/" || nv.options.effective_dev_root() != "/")
      out += fmt::format("driver root {}, device root {}\n", nv.options.driver_root,
                         nv.options.effective_dev_root());
    if (nv.gpus.empty()) {
      out += "no GPUs listed in /proc/driver/nvidia/gpus\n";
    } else {
      size_t mw = 5, uw = 4;
      bool cc = false;  // a column only where NVML measured one
      for (const auto& g : nv.gpus) {
        mw = std::max(mw, g.model.size()), uw = std::max(uw, g.uuid.size());
        cc = cc || !g.compute_capability.empty();
      }
      out += fmt::format("\n{:<5}  {:<{}}  {:<{}}  {:<12}  {}{}\n", "INDEX", "MODEL", mw, "UUID",
                         uw, "BUS ID", cc ? fmt::format("{:<4}  ", "CC") : "", "MINOR");
      for (const auto& g : nv.gpus)
        out += fmt::format(
            "{:<5}  {:<{}}  {:<{}}  {:<12}  {}{}{}\n", g.index, g.model, mw, g.uuid, uw, g.bus_id,
            cc ? fmt::format("{:<4}  ", g.compute_capability.empty() ? "-" : g.compute_capability)
               : "",
            g.minor, g.has_node ? "" : " (no device node)");
    }
    out += "\ninjected per capability:\n";
    for (const auto& c : capability_names()) {
      std::vector<std::string> names;
      for (const auto& l : nv.libraries)
        if (c.cap == kCapCompat32 ? l.lib32 : ((l.caps & c.cap) && !l.lib32))
          names.push_back(basename_of(l.path));
      if (c.cap != kCapCompat32)
        for (const auto* group : {&nv.binaries, &nv.config_files})
          for (const auto& f : *group)
            if (f.caps & c.cap) names.push_back(basename_of(f.path));
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : " ") + n;
      out += fmt::format("  {:<9} {}\n", c.name, list.empty() ? "-" : list);
    }
    std::string nodes;
    for (const auto* group : {&nv.control_nodes, &nv.cap_nodes, &nv.imex_nodes})
      for (const auto& n : *group) nodes += " " + n.path;
    out += fmt::format("  {:<9}{}\n", "devices", nodes.empty() ? " -" : nodes);
    if (!nv.firmware.empty())
      out += fmt::format("  {:<9} {} files\n", "firmware", nv.firmware.size());
    for (const auto& w : nv.warnings) out += "warning: " + w + "\n";
  } else {
    out += "no NVIDIA driver found under " + nv.options.driver_root + "\n";
  }
  if (amd.found)
    out += fmt::format("AMD GPUs: {} with {} render node{}{}\n", amd.kfd.path,
                       amd.render_nodes.size(), amd.render_nodes.size() == 1 ? "" : "s",
                       amd.rocm_version.empty() ? "" : ", ROCm " + amd.rocm_version);
  return out;
}

}  // namespace berth
