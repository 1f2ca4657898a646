#include "site/policy.h"

#include <climits>
#include <cstdlib>

#include "core/strings.h"
#include "image/reference.h"

namespace berth {
namespace {

/// The file a rule came from, for a refusal: the site's, the user's or both.
std::string rule_source(const SiteConfig& c, const char* key) {
  auto it = c.sources.find(key);
  return it == c.sources.end() ? "the configuration" : it->second;
}

std::string host_part(std::string_view registry) {
  if (registry.starts_with("[")) return std::string(registry.substr(0, registry.find(']') + 1));
  return std::string(registry.substr(0, registry.find(':')));
}

}  // namespace

bool path_at_or_under(std::string_view path, std::string_view dir) {
  return dir == "/" || is_at_or_under(path, dir);  // is_under() wants "/x/" for "/x"
}

std::string policy_registry_name(std::string_view registry) {
  std::string r = lower(registry);
  if (r == "index.docker.io" || r == "registry-1.docker.io" || r == "registry.hub.docker.com")
    return "docker.io";
  return r;
}

bool registry_matches(std::string_view registry, std::string_view entry) {
  std::string r = policy_registry_name(registry);
  std::string e = policy_registry_name(entry);
  if (r == e) return true;
  std::string host = host_part(r);
  if (e.starts_with("*.")) return host.size() > e.size() - 1 && host.ends_with(e.substr(1));
  return e.find(':') == std::string::npos && host == e;
}

Status check_registry_allowed(const SiteConfig& c, const std::string& registry) {
  if (!c.allowed_registries) return {};
  for (const std::string& e : *c.allowed_registries)
    if (registry_matches(registry, e)) return {};
  std::string list;
  for (const std::string& e : *c.allowed_registries) list += (list.empty() ? "" : ", ") + e;
  return make_error("registry", registry,
                    "registry not allowed by " + rule_source(c, "allowed_registries") +
                        " (allowed_registries: " + (list.empty() ? "none" : list) + ")",
                    ErrorCode::kPermission);
}

std::string stored_image_registry(const ImageRecord& image) {
  if (image.registry) return *image.registry;
  auto ref = parse_reference(image.name);
  return ref.ok() ? ref->registry : "";
}

Status check_stored_image_allowed(const SiteConfig& c, const ImageRecord& image) {
  std::string registry = stored_image_registry(image);
  if (registry.empty()) return {};
  Status st = check_registry_allowed(c, registry);
  if (!st.ok())
    return std::move(st).error().with_hint("the image was pulled from " + registry +
                                           " before the policy said otherwise; remove it "
                                           "(berth rmi " +
                                           image.name +
                                           ") or pull it from a "
                                           "registry the policy allows");
  return {};
}

std::vector<Mirror> mirrors_for(const SiteConfig& c, const std::string& registry) {
  std::vector<Mirror> out;
  std::string name = policy_registry_name(registry);
  for (const auto& [reg, mirrors] : c.registry_mirrors) {
    if (policy_registry_name(reg) != name) continue;
    for (std::string_view m : mirrors) {
      Mirror mirror;
      if (m.starts_with("http://")) {
        mirror.plain_http = true;
        m.remove_prefix(7);
      } else if (m.starts_with("https://")) {
        m.remove_prefix(8);
      }
      while (m.ends_with("/")) m.remove_suffix(1);
      size_t slash = m.find('/');
      mirror.host = std::string(m.substr(0, slash));
      if (slash != std::string_view::npos) mirror.prefix = std::string(m.substr(slash + 1)) + "/";
      if (!mirror.host.empty()) out.push_back(std::move(mirror));
    }
  }
  return out;
}

std::string normalize_path(std::string_view path) {
  std::vector<std::string_view> parts;
  for (std::string_view p : split(path, '/')) {
    if (p.empty() || p == ".") continue;
    if (p == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.push_back(p);
  }
  std::string out;
  for (std::string_view p : parts) out += "/" + std::string(p);
  return out.empty() ? "/" : out;
}

Status check_mount_destination(const SiteConfig& c, const std::string& destination) {
  std::string dst = normalize_path(destination);
  for (const std::string& deny : c.deny_mount_destinations) {
    std::string d = normalize_path(deny);
    if (path_at_or_under(dst, d) || (d != dst && path_at_or_under(d, dst)))
      return make_error("volume", destination,
                        "mounting on " + d + " is denied by " +
                            rule_source(c, "deny_mount_destinations") +
                            " (deny_mount_destinations)",
                        ErrorCode::kPermission);
  }
  return {};
}

Status check_mount_source(const SiteConfig& c, const std::string& source) {
  if (!c.allow_mount_sources) return {};
  char real[PATH_MAX];
  if (::realpath(source.c_str(), real) == nullptr) return sys_error("volume", source);
  for (const std::string& allow : *c.allow_mount_sources)
    if (path_at_or_under(real, normalize_path(allow))) return {};
  std::string list;
  for (const std::string& e : *c.allow_mount_sources) list += (list.empty() ? "" : ", ") + e;
  std::string shown = source == real ? source : source + " (" + real + ")";
  return make_error("volume", shown,
                    "not under a folder allowed by " + rule_source(c, "allow_mount_sources") +
                        " (allow_mount_sources: " + (list.empty() ? "none" : list) + ")",
                    ErrorCode::kPermission);
}

Status check_engine_allowed(const SiteConfig& c, EngineChoice engine) {
  if (!c.allowed_engines) return {};
  for (const EngineChoice& e : *c.allowed_engines)
    if (e == engine) return {};
  std::string list;
  for (const EngineChoice& e : *c.allowed_engines)
    list.append(list.empty() ? "" : ", ").append(e.spelled);
  return make_error("engine", std::string(engine.spelled),
                    "not allowed by " + rule_source(c, "allowed_engines") +
                        " (allowed_engines: " + (list.empty() ? "none" : list) + ")",
                    ErrorCode::kPermission);
}

Status check_not_locked(const SiteConfig& c, std::string_view key, std::string_view what, Op op) {
  if (!c.is_locked(key)) return {};
  return make_error(op, std::string(what),
                    "the site policy " + c.site_path + " locks " + std::string(key),
                    ErrorCode::kPermission);
}

Result<SquashOptions> effective_squash_options(const SiteConfig& c, const SquashChoice& cli) {
  SquashOptions site;
  if (!c.squash_options.empty())
    site = BERTH_TRY(parse_squash_options(c.squash_options)
                         .with_context("squash_options of " + rule_source(c, "squash_options")));
  SquashOptions opts = site;
  if (cli.compressor && *cli.compressor != site.compressor) {
    opts.compressor = *cli.compressor;
    opts.level = 0;  // the policy's level was meant for its own compressor
  }
  if (cli.level) opts.level = *cli.level;
  BERTH_CHECK(check_squash_options(opts));
  if (opts.compressor != site.compressor || opts.level != site.level) {
    std::string what;
    if (cli.compressor) what += "--compressor " + *cli.compressor;
    if (cli.level) what += (what.empty() ? "" : " ") + ("--level " + std::to_string(*cli.level));
    BERTH_CHECK(check_not_locked(c, "squash_options", what, "squash"));
  }
  return opts;
}

}  // namespace berth
