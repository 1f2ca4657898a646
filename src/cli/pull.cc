// berth pull [--platform os/arch[/variant]] [-q] REF
#include <cstdio>
#include <memory>

#include "cli/context.h"
#include "image/pull.h"

namespace berth::cli {

Action setup_pull(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    std::string ref, platform;
    bool quiet = false;
  };
  auto o = std::make_shared<Opts>();
  app.add_option("IMAGE", o->ref, "Image reference, e.g. alpine:3.19 or host:5000/repo@sha256:...")
      ->required();
  app.add_option("--platform", o->platform, "Platform to pull from an index: os/arch[/variant]");
  app.add_flag("-q,--quiet", o->quiet, "Print only the image reference");
  return [o, &g]() -> Status {
    Reference ref = BERTH_TRY(parse_reference(o->ref));
    PullOptions opts;
    if (!o->platform.empty()) opts.platform = BERTH_TRY(parse_platform(o->platform));
    opts.registry = BERTH_TRY(registry_options(g));
    Store store = BERTH_TRY(open_store(g));
    CredentialStore creds = BERTH_TRY(CredentialStore::load());
    ProgressMeter meter(!o->quiet && !g.quiet && ProgressMeter::stderr_is_terminal());
    opts.progress = &meter;
    PullResult r = BERTH_TRY(pull_image(store, ref, creds, opts).with_context("pull " + ref.str()));
    meter.finish();
    if (!o->quiet && !g.quiet) {
      std::printf("Digest: %s\n", r.record.manifest_digest.c_str());
      std::printf("Status: %s for %s\n",
                  r.up_to_date ? "Image is up to date" : "Downloaded newer image",
                  r.record.name.c_str());
    }
    std::printf("%s\n", r.record.name.c_str());
    return {};
  };
}

}  // namespace berth::cli
