// berth gpu info [--json]: what the GPU driver discovery finds on this host.
//
// Without an NVIDIA driver (and no AMD GPU) the command fails with status 1,
// as nvidia-smi fails when it cannot reach a driver: scripts on a login node
// can test `berth gpu info >/dev/null` to learn whether GPUs can be injected.
// --json still prints the document (with "found": false) before failing.
#include <cstdio>
#include <memory>

#include "cli/context.h"
#include "devices/amd.h"
#include "devices/gpu_report.h"

namespace berth::cli {

Action setup_gpu(CLI::App& app, const GlobalOptions& g) {
  app.require_subcommand(1);
  CLI::App* info = app.add_subcommand("info", "Show the driver, GPUs and what a container would get");
  auto json = std::make_shared<bool>(false);
  info->add_flag("--json", *json, "Print JSON for scripts");
  return [&g, json]() -> Status {
    DiscoveryOptions opts = BERTH_TRY(discovery_options(g));
    NvidiaDriver nv = BERTH_TRY(discover_nvidia(opts));
    AmdDevices amd = discover_amd(opts);
    if (*json) print_json(gpu_info_json(nv, amd));
    else if (nv.found || amd.found) std::fputs(gpu_info_text(nv, amd).c_str(), stdout);
    if (nv.found || amd.found) return {};
    return make_error("gpu info", "", "no NVIDIA driver found under " + opts.driver_root)
        .with_hint("no /proc/driver/nvidia/version, libcuda.so.1 or libnvidia-ml.so.1 there; "
                   "set BERTH_DRIVER_ROOT if the driver lives in another tree");
  };
}

}  // namespace berth::cli
