// berth ib info [--json]: the InfiniBand/RDMA HCAs discovery finds (devices/rdma.h), and what
// a container given each would get. Fails with status 1 when there are none, as `gpu info`
// does without a driver, so scripts can test for a fabric.
#include <cstdio>
#include <memory>

#include "cli/context.h"
#include "core/fs.h"
#include "devices/rdma.h"

namespace berth::cli {
namespace {

nlohmann::json ib_info_json(const RdmaDevices& d) {
  nlohmann::json j;
  j["found"] = d.found();
  j["sysfs_root"] = d.roots.sysfs_root;
  j["dev_root"] = d.roots.dev_root;
  j["rdma_cm"] = d.has_rdma_cm ? nlohmann::json(d.rdma_cm.path) : nlohmann::json();
  j["hcas"] = nlohmann::json::array();
  for (const Hca& h : d.hcas) {
    nlohmann::json ports = nlohmann::json::array();
    for (const RdmaPort& p : h.ports)
      ports.push_back(
          {{"port", p.number}, {"state", p.state}, {"link_layer", p.link_layer}, {"rate", p.rate}});
    j["hcas"].push_back({{"index", h.index},
                         {"name", h.name},
                         {"driver", h.driver},
                         {"node_guid", h.node_guid},
                         {"ports", ports},
                         {"uverbs", h.has_node ? nlohmann::json(h.node.path) : nlohmann::json()},
                         {"not_injected", h.mad}});
  }
  return j;
}

std::string ib_info_text(const RdmaDevices& d) {
  std::string out;
  for (const Hca& h : d.hcas) {
    out += std::to_string(h.index) + "  " + h.name + "  " + (h.driver.empty() ? "-" : h.driver) +
           "  guid " + (h.node_guid.empty() ? "-" : h.node_guid) + "  " +
           (h.has_node ? h.node.path : "(no verbs device node)") + "\n";
    for (const RdmaPort& p : h.ports)
      out += "   port " + std::to_string(p.number) + ": " + p.state + ", " + p.link_layer +
             (p.rate.empty() ? "" : ", " + p.rate) + "\n";
  }
  out += std::string("rdma_cm: ") + (d.has_rdma_cm ? d.rdma_cm.path : "absent") + "\n";
  out += "never injected: umad*, issm* (fabric management)\n";
  return out;
}

}  // namespace

Action setup_ib(CLI::App& app, const GlobalOptions& g) {
  app.require_subcommand(1);
  CLI::App* info = app.add_subcommand("info", "Show the HCAs, their ports and verbs devices");
  auto json = std::make_shared<bool>(false);
  info->add_flag("--json", *json, "Print JSON for scripts");
  return [&g, json]() -> Status {
    auto discovery = discovery_options(g);
    std::string dev_root = discovery.ok() ? discovery->effective_dev_root() : "/";
    RdmaRoots roots = BERTH_TRY(rdma_roots_from_env(dev_root));
    RdmaDevices d = BERTH_TRY(discover_rdma(roots));
    if (*json)
      print_json(ib_info_json(d));
    else if (d.found())
      std::fputs(ib_info_text(d).c_str(), stdout);
    if (d.found()) return {};
    return make_error("ib info", "",
                      "no InfiniBand/RDMA device under " +
                          path_join(roots.sysfs_root, "sys/class/infiniband"))
        .with_hint("set BERTH_SYSFS_ROOT if the host's sysfs is elsewhere");
  };
}

}  // namespace berth::cli
