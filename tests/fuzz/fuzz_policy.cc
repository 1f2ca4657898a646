// Site policy files (TOML, docs/site.md): the input is the site's file, then after a NUL byte
// the user's (none without one); both are parsed, merged, and the pure checks run over the
// result.
#include <cstring>

#include "fuzz_util.h"
#include "site/config.h"
#include "site/policy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text = berth::fuzz::as_text(data, size);
  size_t nul = text.find('\0');
  std::string_view site_text = text.substr(0, nul);
  std::string_view user_text = nul == std::string_view::npos ? "" : text.substr(nul + 1);
  auto site = berth::parse_policy(site_text, "/etc/berth/berth.conf", true);
  auto user = berth::parse_policy(user_text, "/home/u/.config/berth/berth.conf", false);
  std::optional<berth::PolicyLayer> site_layer;
  if (site.ok()) site_layer = *site;
  std::vector<berth::PolicyLayer> user_layers;
  if (user.ok()) user_layers.push_back(*user);
  berth::SiteConfig c = berth::merge_policy(site_layer, user_layers);
  // squash_options are checked when a file is read: what was read must give options.
  if (!berth::effective_squash_options(c, {}).ok()) __builtin_trap();
  for (const char* registry :
       {"docker.io", "registry-1.docker.io", "127.0.0.1:5000", "nvcr.io", "a.b.example.org"}) {
    (void)berth::check_registry_allowed(c, registry);
    (void)berth::mirrors_for(c, registry);
  }
  for (const char* dest : {"/", "/etc", "/usr/lib", "/scratch/x", "/a/../etc"})
    (void)berth::check_mount_destination(c, dest);
  for (const berth::Engine& engine : berth::engine_table())
    (void)berth::check_engine_allowed(c, {&engine, engine.name});
  (void)berth::check_not_locked(c, "readonly", "--read-only");
  return 0;
}
