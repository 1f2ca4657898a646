// berth pull [--platform os/arch[/variant]] [-q] [--squash|--no-squash] REF
#include <cstdio>
#include <memory>

#include "cli/context.h"
#include "core/env.h"
#include "image/pull.h"
#include "site/policy.h"

namespace berth::cli {

Result<PullResult> pull_reference(const GlobalOptions& g, const std::string& name,
                                  const std::string& platform, bool progress, bool squash,
                                  const std::string& creds_user) {
  Reference ref = BERTH_TRY(parse_reference(name));
  PullOptions opts;
  if (!platform.empty()) opts.platform = BERTH_TRY(parse_platform(platform));
  const SiteConfig& site = BERTH_TRY(g.site);
  BERTH_CHECK(check_registry_allowed(site, ref.registry).with_context("pull " + ref.str()));
  opts.registry = BERTH_TRY(registry_options(g));
  opts.deadline_s = site.pull_deadline;
  // The site's squash_options (compressor, level) build the file, as for `berth squash`.
  if (squash) opts.squash = BERTH_TRY(effective_squash_options(site, SquashChoice{}));
  for (const Mirror& m : mirrors_for(site, ref.registry)) {
    opts.mirrors.push_back(PullMirror{m.host, m.prefix});
    if (m.plain_http) opts.registry.insecure.push_back(m.host);
  }
  Store store = BERTH_TRY(open_store(g));
  CredentialStore creds = BERTH_TRY(CredentialStore::load());
  // Several users may have logged in to one registry: the one asked for, and no other.
  creds.user = creds_user.empty() ? env_or("BERTH_CREDS_USER", "") : creds_user;
  if (!creds.user.empty() && !creds.find(ref.registry))
    return make_error("pull", ref.str(),
                      "no stored login of user '" + creds.user + "' for " + ref.registry)
        .with_hint("berth login -u " + creds.user + " " + ref.registry);
  ProgressMeter meter(progress && ProgressMeter::stderr_is_terminal());
  opts.progress = &meter;
  PullResult r = BERTH_TRY(pull_image(store, ref, creds, opts).with_context("pull " + ref.str()));
  meter.finish();
  return r;
}

Action setup_pull(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    std::string ref, platform, creds_user;
    bool quiet = false, squash = false;
  };
  auto o = std::make_shared<Opts>();
  app.add_option("IMAGE", o->ref, "Image reference, e.g. alpine:3.19 or host:5000/repo@sha256:...")
      ->required();
  app.add_option("--platform", o->platform, "Platform to pull from an index: os/arch[/variant]");
  app.add_flag("-q,--quiet", o->quiet, "Print only the image reference");
  app.add_option("--creds-user", o->creds_user,
                 "Use the stored login of this user (berth login -u USER); default: "
                 "$BERTH_CREDS_USER, else the registry's last login");
  app.add_flag("--squash,!--no-squash", o->squash,
               "Keep the image as one squashfs file, not as layers (default: the "
               "configuration's store_format)");
  return [o, &g, &app]() -> Status {
    std::optional<bool> flag;
    if (app.count("--squash") + app.count("--no-squash") > 0) flag = o->squash;
    bool squash = BERTH_TRY(squash_wanted(g, flag, "pull"));
    PullResult r = BERTH_TRY(
        pull_reference(g, o->ref, o->platform, !o->quiet && !g.quiet, squash, o->creds_user));
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
