#include "site/config.h"

#include <nlohmann/json.hpp>

#include "core/env.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/strings.h"
#include "core/log.h"
#include "site/policy.h"

#include <algorithm>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace berth {
namespace {

/// j[key] when it is a string; "" when it is absent or null; an error when it is anything else.
Result<std::string> string_value(const nlohmann::json& j, const char* key,
                                 const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::string();
  if (!it->is_string())
    return make_error("read config", path, std::string("\"") + key + "\" is not a string");
  return it->get<std::string>();
}

/// j[key] when it is a whole number >= 0; 0 when absent or null; an error when anything else.
Result<long> count_value(const nlohmann::json& j, const char* key, const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return 0L;
  if (!it->is_number_integer() || it->get<long long>() < 0 ||
      it->get<long long>() > 1'000'000'000)
    return make_error("read config", path,
                      std::string("\"") + key + "\" is not a whole number of 0 to 1000000000");
  return static_cast<long>(it->get<long long>());
}

}  // namespace

std::string user_config_path() { return path_join(berth_config_dir(), "config.json"); }

std::string user_policy_path() { return path_join(berth_config_dir(), "berth.conf"); }

std::string site_policy_path() { return env_or("BERTH_SITE_CONF", kSitePolicyPath); }

bool SiteConfig::is_locked(std::string_view key) const {
  return std::find(locked.begin(), locked.end(), key) != locked.end();
}

Result<SiteConfig> parse_site_config(std::string_view text, const std::string& path) {
  auto parsed = parse_json(text, path);
  if (!parsed) return make_error("read config", path, parsed.error().detail);
  const nlohmann::json& j = *parsed;
  if (!j.is_object()) return make_error("read config", path, "not a JSON object");
  SiteConfig c;
  c.path = path;
  if (auto it = j.find("insecure-registries"); it != j.end() && !it->is_null()) {
    if (!it->is_array())
      return make_error("read config", path, "\"insecure-registries\" is not a list of strings");
    for (const auto& r : *it) {
      if (!r.is_string())
        return make_error("read config", path, "\"insecure-registries\" is not a list of strings");
      c.insecure_registries.push_back(r.get<std::string>());
    }
  }
  c.driver_root = BERTH_TRY(string_value(j, "driver_root", path));
  c.dev_root = BERTH_TRY(string_value(j, "dev_root", path));
  c.pull_low_speed_limit = BERTH_TRY(count_value(j, "pull-low-speed-limit", path));
  c.pull_low_speed_time = BERTH_TRY(count_value(j, "pull-low-speed-time", path));
  c.pull_deadline = BERTH_TRY(count_value(j, "pull-deadline", path));
  return c;
}

Result<SiteConfig> read_site_config(const std::string& path) {
  if (!path_exists(path)) return SiteConfig{};
  std::string text = BERTH_TRY(read_file(path));
  return parse_site_config(text, path);
}

namespace {

/// Merges one file's layer after another's, recording where each value came from.
class Merger {
 public:
  explicit Merger(SiteConfig& c) : c_(c) {}

  void note(const char* key, const std::string& path) {
    std::string& s = c_.sources[key];
    if (s.find(path) == std::string::npos) s += (s.empty() ? "" : " + ") + path;
  }
  void set_note(const char* key, const std::string& path) { c_.sources[key] = path; }
  void ignore(const std::string& path, const char* key, const std::string& why) {
    c_.ignored.push_back(path + ": " + key + ": " + why);
  }

 private:
  SiteConfig& c_;
};

/// Whether the site's entry `s` allows the user's `u`: a registry by registry_matches(), an
/// engine when it is the same row.
bool allows(const std::string& s, const std::string& u) {
  return registry_matches(u, s);
}
bool allows(const EngineChoice& s, const EngineChoice& u) {
  return u == s;
}

/// Entries of `user` the site's list allows, the rest ignored.
template <class T>
std::vector<T> narrowed(const std::vector<T>& site, const std::vector<T>& user,
                        std::vector<T>* dropped) {
  std::vector<T> out;
  for (const T& u : user) {
    bool ok = std::any_of(site.begin(), site.end(), [&](const T& s) { return allows(s, u); });
    (ok ? out : *dropped).push_back(u);
  }
  return out;
}

std::string_view text_of(const std::string& s) {
  return s;
}
std::string_view text_of(const EngineChoice& e) {
  return e.spelled;
}

template <class T>
std::string joined(const std::vector<T>& v) {
  std::string out;
  for (const T& s : v) out.append(out.empty() ? "" : ", ").append(text_of(s));
  return out;
}

/// Merges one user file's layer into `c` (the site's, and the user files before it).
void merge_user_layer(SiteConfig& c, const PolicyLayer& u, bool site_sets_mirrors) {
  Merger m(c);
  const std::string& up = u.path;

  // Lists the user adds to: their entries join the site's.
  auto add = [&](const char* key, const auto& from, std::vector<std::string>& to) {
    if (!from || from->empty()) return;
    for (const std::string& e : *from)
      if (std::find(to.begin(), to.end(), e) == to.end()) to.push_back(e);
    m.note(key, up);
  };
  add("insecure_registries", u.insecure_registries, c.insecure_registries);
  add("deny_mount_destinations", u.deny_mount_destinations, c.deny_mount_destinations);
  if (u.site_mounts && !u.site_mounts->empty()) {
    c.user_mounts.insert(c.user_mounts.end(), u.site_mounts->begin(), u.site_mounts->end());
    m.note("site_mounts", up);
  }
  if (u.env && !u.env->empty()) {
    c.env.insert(c.env.end(), u.env->begin(), u.env->end());
    m.note("env", up);
  }

  // Lists that allow: the user may only narrow the site's.
  auto narrow = [&](const char* key, const auto& from, auto& to) {
    if (!from) return;
    if (!to) {
      to = *from;
      m.set_note(key, up);
      return;
    }
    std::remove_cvref_t<decltype(*from)> dropped;
    to = narrowed(*to, *from, &dropped);
    m.note(key, up);
    if (!dropped.empty())
      m.ignore(up, key, joined(dropped) + ": not allowed by " + c.site_path);
  };
  narrow("allowed_registries", u.allowed_registries, c.allowed_registries);
  narrow("allowed_engines", u.allowed_engines, c.allowed_engines);
  if (u.allow_mount_sources) {
    if (!c.allow_mount_sources) {
      c.allow_mount_sources = *u.allow_mount_sources;
      m.set_note("allow_mount_sources", up);
    } else {
      std::vector<std::string> kept, dropped;
      for (const std::string& p : *u.allow_mount_sources) {
        bool ok = std::any_of(c.allow_mount_sources->begin(), c.allow_mount_sources->end(),
                              [&](const std::string& s) {
                                return path_at_or_under(normalize_path(p), normalize_path(s));
                              });
        (ok ? kept : dropped).push_back(p);
      }
      c.allow_mount_sources = kept;
      m.note("allow_mount_sources", up);
      if (!dropped.empty())
        m.ignore(up, "allow_mount_sources", joined(dropped) + ": not under a folder " +
                                                c.site_path + " allows");
    }
  }

  // Mirrors: the user's own, for registries the site does not mirror, through registries
  // the policy allows (a mirror is where the bytes come from).
  if (u.registry_mirrors) {
    for (const auto& entry : *u.registry_mirrors) {
      const std::string& reg = entry.first;  // not a structured binding: clang 14 cannot capture one
      const std::vector<std::string>& mirrors = entry.second;
      bool site_mirrors = std::any_of(c.registry_mirrors.begin(), c.registry_mirrors.end(),
                                      [&](const auto& kv) {
                                        return policy_registry_name(kv.first) ==
                                               policy_registry_name(reg);
                                      });
      if (site_mirrors && site_sets_mirrors) {
        m.ignore(up, "registry_mirrors", reg + ": " + c.site_path + " sets its mirrors");
        continue;
      }
      std::vector<std::string> kept;
      SiteConfig probe;
      probe.registry_mirrors[reg] = mirrors;
      std::vector<Mirror> split = mirrors_for(probe, reg);
      for (size_t i = 0; i < split.size() && i < mirrors.size(); ++i) {
        if (check_registry_allowed(c, split[i].host).ok())
          kept.push_back(mirrors[i]);
        else
          m.ignore(up, "registry_mirrors",
                   mirrors[i] + ": not in the allowed_registries of " + c.site_path);
      }
      if (!kept.empty()) {
        c.registry_mirrors[reg] = kept;
        m.note("registry_mirrors", up);
      }
    }
  }

  // Single values: the user's preference, unless the site locks the key.
  auto prefer = [&](const char* key, const auto& from, auto& to) {
    if (!from) return;
    if (c.is_locked(key)) {
      if (*from != to) m.ignore(up, key, std::string("locked by ") + c.site_path);
      return;
    }
    to = *from;
    m.set_note(key, up);
  };
  prefer("mount_home", u.mount_home, c.mount_home);
  prefer("readonly", u.readonly, c.readonly);
  prefer("root_emulation", u.root_emulation, c.root_emulation);
  if (u.default_engine && c.allowed_engines &&
      std::find(c.allowed_engines->begin(), c.allowed_engines->end(), *u.default_engine) ==
          c.allowed_engines->end()) {
    m.ignore(up, "default_engine",
             std::string(u.default_engine->spelled) + ": not in allowed_engines");
  } else {
    prefer("default_engine", u.default_engine, c.default_engine);
  }
  prefer("driver_root", u.driver_root, c.driver_root);
  prefer("dev_root", u.dev_root, c.dev_root);
  prefer("gpus", u.gpus, c.gpus);
  prefer("ib", u.ib, c.ib);
  prefer("central_store", u.central_store, c.central_store);
  prefer("squash_options", u.squash_options, c.squash_options);
  prefer("store_format", u.store_format, c.store_format);
  prefer("runtime_dir", u.runtime_dir, c.runtime_dir);
  prefer("pull_low_speed_limit", u.pull_low_speed_limit, c.pull_low_speed_limit);
  prefer("pull_low_speed_time", u.pull_low_speed_time, c.pull_low_speed_time);
  prefer("pull_deadline", u.pull_deadline, c.pull_deadline);
}

}  // namespace

SiteConfig merge_policy(const std::optional<PolicyLayer>& site,
                        const std::vector<PolicyLayer>& user) {
  SiteConfig c;
  Merger m(c);
  bool site_mirrors = site && site->registry_mirrors;
  if (site) {
    const PolicyLayer& s = *site;
    c.site_path = s.path;
    auto take = [&](const char* key, const auto& from, auto& to) {
      if (from) {
        to = *from;
        m.set_note(key, s.path);
      }
    };
    take("insecure_registries", s.insecure_registries, c.insecure_registries);
    take("allowed_registries", s.allowed_registries, c.allowed_registries);
    take("registry_mirrors", s.registry_mirrors, c.registry_mirrors);
    take("site_mounts", s.site_mounts, c.site_mounts);
    take("deny_mount_destinations", s.deny_mount_destinations, c.deny_mount_destinations);
    take("allow_mount_sources", s.allow_mount_sources, c.allow_mount_sources);
    take("mount_home", s.mount_home, c.mount_home);
    take("env", s.env, c.env);
    take("readonly", s.readonly, c.readonly);
    take("root_emulation", s.root_emulation, c.root_emulation);
    take("default_engine", s.default_engine, c.default_engine);
    take("allowed_engines", s.allowed_engines, c.allowed_engines);
    take("driver_root", s.driver_root, c.driver_root);
    take("dev_root", s.dev_root, c.dev_root);
    take("gpus", s.gpus, c.gpus);
    take("ib", s.ib, c.ib);
    take("mpi", s.mpi, c.mpi);
    take("mpi_default", s.mpi_default, c.mpi_default);
    take("lock", s.lock, c.locked);
    take("central_store", s.central_store, c.central_store);
    take("squash_options", s.squash_options, c.squash_options);
    take("store_format", s.store_format, c.store_format);
    take("runtime_dir", s.runtime_dir, c.runtime_dir);
    take("pull_low_speed_limit", s.pull_low_speed_limit, c.pull_low_speed_limit);
    take("pull_low_speed_time", s.pull_low_speed_time, c.pull_low_speed_time);
    take("pull_deadline", s.pull_deadline, c.pull_deadline);
  }
  for (const PolicyLayer& u : user) merge_user_layer(c, u, site_mirrors);
  return c;
}

namespace {

/// The older config.json as a layer of the user's (its keys are a subset).
PolicyLayer json_layer(const SiteConfig& j) {
  PolicyLayer l;
  l.path = j.path;
  if (!j.insecure_registries.empty()) l.insecure_registries = j.insecure_registries;
  if (!j.driver_root.empty()) l.driver_root = j.driver_root;
  if (!j.dev_root.empty()) l.dev_root = j.dev_root;
  if (j.pull_low_speed_limit > 0) l.pull_low_speed_limit = j.pull_low_speed_limit;
  if (j.pull_low_speed_time > 0) l.pull_low_speed_time = j.pull_low_speed_time;
  if (j.pull_deadline > 0) l.pull_deadline = j.pull_deadline;
  return l;
}

/// Reads a policy file; nullopt when it is missing.
Result<std::optional<PolicyLayer>> read_policy(const std::string& path, bool site) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::optional<PolicyLayer>();
    return sys_error("read config", path);  // there, maybe, but hidden: not skipped
  }
  if (site) BERTH_CHECK(check_trusted_file(path));
  std::string text = BERTH_TRY(read_file(path));
  return std::optional<PolicyLayer>(BERTH_TRY(parse_policy(text, path, site)));
}

}  // namespace

Result<SiteConfig> load_config() {
  std::string site_path = site_policy_path();
  // A policy named on purpose must be there: a typo would leave it silently unenforced.
  if (::getenv("BERTH_SITE_CONF") != nullptr && !path_exists(site_path))
    return make_error("read config", site_path, "no such file (named by BERTH_SITE_CONF)",
                      ErrorCode::kNotFound);
  std::optional<PolicyLayer> site = BERTH_TRY(read_policy(site_path, true));

  // The user's layers: config.json, then berth.conf over it.
  SiteConfig json = BERTH_TRY(read_site_config(user_config_path()));
  std::optional<PolicyLayer> user = BERTH_TRY(read_policy(user_policy_path(), false));
  std::vector<PolicyLayer> user_layers;
  if (!json.path.empty()) user_layers.push_back(json_layer(json));
  if (user) user_layers.push_back(*user);
  SiteConfig c = merge_policy(site, user_layers);
  c.path = json.path;
  c.user_path = user ? user->path : "";
  return c;
}

}  // namespace berth
