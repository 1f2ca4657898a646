// berth gpu info [--json]: what the GPU driver discovery finds on this host.
// berth gpu stats [--json]: what NVML says the GPUs are doing (devices/nvml.h, docs/gpu.md).
//
// Without an NVIDIA driver (and no AMD GPU) the command fails with status 1,
// as nvidia-smi fails when it cannot reach a driver: scripts on a login node
// can test `berth gpu info >/dev/null` to learn whether GPUs can be injected.
// --json still prints the document (with "found": false) before failing.
#include <limits.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>

#include "cli/context.h"
#include "core/strings.h"
#include "devices/amd.h"
#include "devices/gpu_process.h"
#include "devices/gpu_report.h"
#include "devices/gpu_stats.h"
#include "devices/nvml.h"

namespace berth::cli {
namespace {

/// Where the readings were taken and who each process of the last sample is (/proc).
GpuStatsHost stats_host(const NvmlReadings& r) {
  GpuStatsHost host;
  if (const char* node = std::getenv("SLURMD_NODENAME"); node != nullptr && *node != '\0') {
    host.node = node;
  } else {
    char name[HOST_NAME_MAX + 1] = {};
    if (::gethostname(name, sizeof name - 1) == 0) host.node = name;
  }
  if (r.samples.empty()) return host;
  for (const auto& g : r.samples.back().gpus)
    for (const auto& p : g.processes.value_or(std::vector<NvmlProcess>{}))
      if (!host.owners.contains(p.pid)) host.owners[p.pid] = describe_gpu_process("/proc", p.pid);
  return host;
}

/// Each GPU's compute capability as NVML measures it, where the driver has NVML and it answers
/// within a few seconds; discovery alone cannot read it.
void measure_compute_capability(NvidiaDriver& nv) {
  const std::string library = nvml_library(nv);
  if (library.empty() || nv.gpus.empty()) return;
  NvmlOptions o;
  o.timeout_s = 10;
  auto r = read_nvml(library, o);
  // deliberate: without an answer from NVML the column stays unknown; the rest of `gpu info`
  // (what a container would get) does not depend on it
  if (!r.ok() || r->samples.empty()) return;
  for (NvidiaGpu& gpu : nv.gpus)
    for (const NvmlGpuReading& m : r->samples.back().gpus)
      if (!gpu.uuid.empty() && lower(m.uuid) == lower(gpu.uuid))
        gpu.compute_capability = m.compute_capability;
}

Action setup_gpu_info(CLI::App& app, const GlobalOptions& g) {
  auto json = std::make_shared<bool>(false);
  app.add_flag("--json", *json, "Print JSON for scripts");
  return [&g, json]() -> Status {
    DiscoveryOptions opts = BERTH_TRY(discovery_options(g));
    NvidiaDriver nv = BERTH_TRY(discover_nvidia(opts));
    measure_compute_capability(nv);
    AmdDevices amd = discover_amd(opts);
    if (*json)
      print_json(gpu_info_json(nv, amd));
    else if (nv.found || amd.found)
      std::fputs(gpu_info_text(nv, amd).c_str(), stdout);
    if (nv.found || amd.found) return {};
    return no_nvidia_driver_error("gpu info", opts.driver_root);
  };
}

Action setup_gpu_stats(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    bool json = false;
    std::string gpus;
    NvmlOptions nvml;
  };
  auto o = std::make_shared<Opts>();
  o->nvml.interval_ms = 1000;
  app.add_flag("--json", o->json, "Print JSON for scripts (keys in docs/gpu.md)");
  app.add_option("--gpus", o->gpus,
                 "Only these GPUs, as run --gpus takes them: all, N, device=0,2, device=GPU-uuid");
  app.add_option("--samples", o->nvml.samples,
                 "Read the GPUs this many times and show utilisation as mean (min-max) (default 1)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--interval-ms", o->nvml.interval_ms, "Between samples, in ms (default 1000)")
      ->check(CLI::Range(0, 3600000));
  app.add_option("--timeout", o->nvml.timeout_s,
                 "Give up when NVML does not answer within this many seconds (default 30)")
      ->check(CLI::Range(1, 3600));
  return [&g, o, &app]() -> Status {
    DiscoveryOptions opts = BERTH_TRY(discovery_options(g));
    opts.cuda_probe = CudaProbe::kNever;  // the CUDA version is not shown: no libcuda to load
    NvidiaDriver nv = BERTH_TRY(discover_nvidia(opts));
    if (!nv.found) return no_nvidia_driver_error("gpu stats", opts.driver_root);
    const std::string library = nvml_library(nv);
    if (library.empty())
      return make_error("gpu stats", opts.driver_root,
                        "the NVIDIA driver " + nv.version.str() + " there has no libnvidia-ml." +
                            nv.version.str() + " (NVML)",
                        ErrorCode::kNotFound)
          .with_hint("install the driver's utility libraries (nvidia-smi needs them too)");
    std::optional<std::string_view> flag;
    if (app.count("--gpus") > 0) flag = o->gpus;
    std::optional<std::string_view> visible;
    if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) visible = v;
    NvmlOptions nvml = o->nvml;
    nvml.uuids = BERTH_TRY(stats_selection(flag, visible, nv.gpus));
    NvmlReadings r = BERTH_TRY(read_nvml(library, nvml));
    const GpuStatsHost host = stats_host(r);
    if (o->json)
      print_json(gpu_stats_json(r, nvml, host));
    else
      std::fputs(gpu_stats_text(r, nvml, host).c_str(), stdout);
    return {};
  };
}

}  // namespace

Action setup_gpu(CLI::App& app, const GlobalOptions& g) {
  app.require_subcommand(1);
  Action info = setup_gpu_info(
      *app.add_subcommand("info", "Show the driver, GPUs and what a container would get"), g);
  Action stats = setup_gpu_stats(
      *app.add_subcommand("stats", "Show the GPUs' utilisation, memory and processes (NVML)"), g);
  return [&app, info, stats]() -> Status { return app.got_subcommand("stats") ? stats() : info(); };
}

}  // namespace berth::cli
