// berth cdi generate [--output FILE] [--format json|yaml]: a CDI spec for this host's NVIDIA GPUs.
#include <cstdio>
#include <memory>

#include "cli/context.h"
#include "core/fs.h"
#include "devices/cdi.h"

namespace berth::cli {

Action setup_cdi(CLI::App& app, const GlobalOptions& g) {
  app.require_subcommand(1);
  CLI::App* gen = app.add_subcommand("generate", "Write a CDI spec (nvidia.com/gpu) for this host");
  auto output = std::make_shared<std::string>();
  gen->add_option("-o,--output", *output, "Write the spec to FILE (default: standard output)");
  auto format = std::make_shared<std::string>();
  gen->add_option("--format", *format, "json or yaml (default: by the output file's extension, else json)")
      ->check(CLI::IsMember({"json", "yaml"}));
  return [&g, output, format]() -> Status {
    DiscoveryOptions opts = BERTH_TRY(discovery_options(g));
    NvidiaDriver nv = BERTH_TRY(discover_nvidia(opts));
    if (!nv.found)
      return make_error("cdi generate", "", "no NVIDIA driver found under " + opts.driver_root)
          .with_hint("set BERTH_DRIVER_ROOT if the driver lives in another tree");
    bool yaml = *format == "yaml" ||
                (format->empty() && (output->ends_with(".yaml") || output->ends_with(".yml")));
    std::string text = cdi_spec_text(make_cdi_spec(nv), yaml);
    if (output->empty()) {
      std::fputs(text.c_str(), stdout);
      return {};
    }
    return write_file_atomic(*output, text);
  };
}

}  // namespace berth::cli
