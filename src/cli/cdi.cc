// berth cdi generate [--kind gpu|rdma] [--output FILE] [--format json|yaml]: a CDI spec for
// this host's NVIDIA GPUs (nvidia.com/gpu) or InfiniBand/RDMA HCAs (berth.dev/rdma).
#include <cstdio>
#include <memory>

#include "cli/context.h"
#include "core/fs.h"
#include "core/json.h"
#include "devices/cdi.h"

namespace berth::cli {

Action setup_cdi(CLI::App& app, const GlobalOptions& g) {
  app.require_subcommand(1);
  CLI::App* gen = app.add_subcommand("generate", "Write a CDI spec (nvidia.com/gpu) for this host");
  auto output = std::make_shared<std::string>();
  gen->add_option("-o,--output", *output, "Write the spec to FILE (default: standard output)");
  auto kind = std::make_shared<std::string>("gpu");
  gen->add_option("--kind", *kind, "gpu (nvidia.com/gpu, the default) or rdma (berth.dev/rdma)")
      ->check(CLI::IsMember({"gpu", "rdma"}));
  auto format = std::make_shared<std::string>();
  gen->add_option("--format", *format,
                  "json or yaml (default: by the output file's extension, else json)")
      ->check(CLI::IsMember({"json", "yaml"}));
  return [&g, output, format, kind]() -> Status {
    DiscoveryOptions opts = BERTH_TRY(discovery_options(g));
    nlohmann::json doc;
    if (*kind == "rdma") {
      RdmaRoots roots = BERTH_TRY(rdma_roots_from_env(opts.effective_dev_root()));
      RdmaDevices d = BERTH_TRY(discover_rdma(roots));
      if (!d.found())
        return make_error("cdi generate", "",
                          "no InfiniBand/RDMA device under " +
                              path_join(roots.sysfs_root, "sys/class/infiniband"))
            .with_hint("set BERTH_SYSFS_ROOT if the host's sysfs is elsewhere");
      doc = make_rdma_cdi_spec(d);
    } else {
      NvidiaDriver nv = BERTH_TRY(discover_nvidia(opts));
      if (!nv.found)
        return make_error("cdi generate", "", "no NVIDIA driver found under " + opts.driver_root)
            .with_hint("set BERTH_DRIVER_ROOT if the driver lives in another tree");
      doc = make_cdi_spec(nv);
    }
    bool yaml = *format == "yaml" ||
                (format->empty() && (output->ends_with(".yaml") || output->ends_with(".yml")));
    std::string text = cdi_spec_text(doc, yaml);
    if (output->empty()) {
      std::fputs(text.c_str(), stdout);
      return {};
    }
    return write_file_atomic(*output, text);
  };
}

}  // namespace berth::cli
