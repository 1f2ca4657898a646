// The table of the site policy's keys (site/policy_keys.h), and the loops over it: parsing a
// file into a PolicyLayer, merging the site's and the user's layers into the SiteConfig in
// force, and the values `berth info` shows.
//
// A row is built by key<LAYER MEMBER, CONFIG MEMBER, READ, RULE[, SHOW]>("name", {facts}):
// READ is the PolicyReader method (or a function of this file) that reads the file's value;
// RULE says how a user's file merges into the site's value (the site's own is always taken as it
// is): Prefer, Add, AppendTo, Narrow, PreferAllowedEngine, Mirrors or SiteOnly; SHOW, when the
// member is not shown as it is. A rule is chosen at compile time, so a row whose rule does not
// fit its member's type does not build.
#include "site/policy_keys.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <type_traits>

#include "devices/mpi_abi.h"
#include "image/squash.h"
#include "runtime/engines.h"
#include "runtime/root_emulation.h"
#include "site/policy.h"
#include "site/policy_reader.h"

namespace berth {
namespace {

/// A merge under way: the configuration it makes, and where each value came from.
struct Merging {
  SiteConfig& c;
  bool site_sets_mirrors = false;  ///< the site's file has registry_mirrors

  /// Adds `path` to the files `key`'s value came from ("a + b").
  void note(std::string_view key, const std::string& path) const {
    std::string& s = c.sources[std::string(key)];
    if (s.find(path) == std::string::npos) s += (s.empty() ? "" : " + ") + path;
  }
  /// `key`'s value came from `path` alone.
  void set_note(std::string_view key, const std::string& path) const {
    c.sources[std::string(key)] = path;
  }
  /// A user's setting left out because it would loosen the site's rules.
  void ignore(const std::string& path, std::string_view key, const std::string& why) const {
    c.ignored.push_back(path + ": " + std::string(key) + ": " + why);
  }
};

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

// --- How a user's file merges into the site's value -------------------------------------

/// One value: the user's wins, unless the site locks the key.
struct Prefer {
  template <auto L, auto C>
  static void merge(const PolicyLayer& u, std::string_view key, const Merging& m) {
    const auto& from = u.*L;
    if (!from) return;
    auto& to = m.c.*C;
    if (m.c.is_locked(key)) {
      if (*from != to) m.ignore(u.path, key, "locked by " + m.c.site_path);
      return;
    }
    to = *from;
    m.set_note(key, u.path);
  }
};

/// default_engine: as Prefer, but an engine outside allowed_engines (merged before) is ignored.
struct PreferAllowedEngine {
  template <auto L, auto C>
  static void merge(const PolicyLayer& u, std::string_view key, const Merging& m) {
    const auto& from = u.*L;
    const auto& allowed = m.c.allowed_engines;
    if (from && allowed && std::find(allowed->begin(), allowed->end(), *from) == allowed->end()) {
      m.ignore(u.path, key, std::string(from->spelled) + ": not in allowed_engines");
      return;
    }
    Prefer::merge<L, C>(u, key, m);
  }
};

/// A list the user adds to: their entries join the site's, each once.
struct Add {
  template <auto L, auto C>
  static void merge(const PolicyLayer& u, std::string_view key, const Merging& m) {
    const auto& from = u.*L;
    if (!from || from->empty()) return;
    auto& to = m.c.*C;
    for (const auto& e : *from)
      if (std::find(to.begin(), to.end(), e) == to.end()) to.push_back(e);
    m.note(key, u.path);
  }
};

/// A list the user adds to in order, into the config's member `Target` (which is not the
/// site's where the user's entries are treated otherwise: site_mounts).
template <auto Target>
struct AppendTo {
  template <auto L, auto C>
  static void merge(const PolicyLayer& u, std::string_view key, const Merging& m) {
    const auto& from = u.*L;
    if (!from || from->empty()) return;
    auto& to = m.c.*Target;
    to.insert(to.end(), from->begin(), from->end());
    m.note(key, u.path);
  }
};

/// What an allow list holds, which says when one entry covers another.
enum class Allows { kRegistries, kEngines, kFolders };

/// Whether `entry` of a user's allow list lies within `allowed`, an entry of the site's: a
/// registry by registry_matches(), a folder when it is at or under it.
bool covers(Allows kind, const std::string& allowed, const std::string& entry) {
  if (kind == Allows::kRegistries) return registry_matches(entry, allowed);
  return path_at_or_under(normalize_path(entry), normalize_path(allowed));
}
/// An engine when it is the same row.
bool covers(Allows, const EngineChoice& allowed, const EngineChoice& entry) {
  return entry == allowed;
}

/// An allow list: the user may keep only what the site's allows (no site list: theirs).
template <Allows kKind>
struct Narrow {
  template <auto L, auto C>
  static void merge(const PolicyLayer& u, std::string_view key, const Merging& m) {
    const auto& from = u.*L;
    if (!from) return;
    auto& to = m.c.*C;
    if (!to) {
      to = *from;
      m.set_note(key, u.path);
      return;
    }
    std::remove_cvref_t<decltype(*from)> kept, dropped;
    for (const auto& e : *from) {
      bool ok =
          std::any_of(to->begin(), to->end(), [&](const auto& s) { return covers(kKind, s, e); });
      (ok ? kept : dropped).push_back(e);
    }
    to = kept;
    m.note(key, u.path);
    if (dropped.empty()) return;
    m.ignore(u.path, key,
             joined(dropped) + (kKind == Allows::kFolders
                                    ? ": not under a folder " + m.c.site_path + " allows"
                                    : ": not allowed by " + m.c.site_path));
  }
};

/// registry_mirrors: the user's own, for registries the site does not mirror, through
/// registries the policy allows (a mirror is where the bytes come from; allowed_registries is
/// merged before).
void merge_mirrors(const std::map<std::string, std::vector<std::string>>& from,
                   const std::string& path, std::string_view key, const Merging& m) {
  SiteConfig& c = m.c;
  for (const auto& entry : from) {
    const std::string& reg = entry.first;  // not a structured binding: clang 14 cannot capture one
    const std::vector<std::string>& mirrors = entry.second;
    bool site_mirrors =
        std::any_of(c.registry_mirrors.begin(), c.registry_mirrors.end(), [&](const auto& kv) {
          return policy_registry_name(kv.first) == policy_registry_name(reg);
        });
    if (site_mirrors && m.site_sets_mirrors) {
      m.ignore(path, key, reg + ": " + c.site_path + " sets its mirrors");
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
        m.ignore(path, key, mirrors[i] + ": not in the allowed_registries of " + c.site_path);
    }
    if (!kept.empty()) {
      c.registry_mirrors[reg] = kept;
      m.note(key, path);
    }
  }
}

struct Mirrors {
  template <auto L, auto C>
  static void merge(const PolicyLayer& u, std::string_view key, const Merging& m) {
    static_assert(C == &SiteConfig::registry_mirrors, "merge_mirrors() fills registry_mirrors");
    if (const auto& from = u.*L) merge_mirrors(*from, u.path, key, m);
  }
};

/// The site's alone: a user's value is not merged (where a user's file may name the key at
/// all: PolicyKey::site_only).
struct SiteOnly {};

// --- A row ------------------------------------------------------------------------------

struct PolicyKey;
using ParseFn = Status (*)(const PolicyReader&, const toml::node&, std::string_view key,
                           PolicyLayer&);
using MergeFn = void (*)(const PolicyLayer&, std::string_view key, const Merging&);
using ShowFn = nlohmann::json (*)(const SiteConfig&, const PolicyKey&);

/// The facts of a row beyond its members and rules.
struct KeyFacts {
  bool lockable = false;       ///< the site may name it in `lock`
  std::string_view site_only;  ///< why a user's file may not name it; "": it may
  std::string_view unset;      ///< what an unset string means, as `berth info` shows it
  long unset_count = 0;        ///< what an unset (0) count means, as `berth info` shows it
};

struct PolicyKey {
  std::string_view name;
  ParseFn parse;  ///< reads the file's value into the layer
  MergeFn take;   ///< the site's value into the configuration
  MergeFn merge;  ///< a user's value into the configuration; nullptr: the site's alone
  ShowFn show;    ///< the value in force, for `berth info`
  KeyFacts facts;
};

template <auto L, auto Read>
Status parse_into(const PolicyReader& r, const toml::node& node, std::string_view key,
                  PolicyLayer& l) {
  l.*L = BERTH_TRY(std::invoke(Read, r, node, key));
  return {};
}

template <auto L, auto C>
void take(const PolicyLayer& site, std::string_view key, const Merging& m) {
  if (const auto& from = site.*L) {
    m.c.*C = *from;
    m.set_note(key, site.path);
  }
}

template <typename T>
constexpr bool kIsOptional = false;
template <typename T>
constexpr bool kIsOptional<std::optional<T>> = true;

/// The member as it is: an unset allow list as null (any), an empty string or a count of 0
/// as what it means where the row says so.
template <auto C>
nlohmann::json shown(const SiteConfig& c, const PolicyKey& k) {
  const auto& v = c.*C;
  using T = std::remove_cvref_t<decltype(v)>;
  if constexpr (kIsOptional<T>) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  } else if constexpr (std::is_same_v<T, std::string>) {
    return nlohmann::json(v.empty() && !k.facts.unset.empty() ? std::string(k.facts.unset) : v);
  } else if constexpr (std::is_same_v<T, long>) {
    return nlohmann::json(v <= 0 && k.facts.unset_count > 0 ? k.facts.unset_count : v);
  } else {
    return nlohmann::json(v);
  }
}

template <auto L, auto C, auto Read, typename Rule, auto Show = &shown<C>>
constexpr PolicyKey key(std::string_view name, KeyFacts facts = {}) {
  MergeFn merge = nullptr;
  if constexpr (!std::is_same_v<Rule, SiteOnly>) merge = &Rule::template merge<L, C>;
  return {name, &parse_into<L, Read>, &take<L, C>, merge, Show, facts};
}

// --- Reads and shows of single keys -----------------------------------------------------

Result<std::string> read_store_format(const PolicyReader& r, const toml::node& node,
                                      std::string_view key) {
  return r.one_of(node, key, {"layers", "squashfs"});
}

/// Checked now, so that a typo fails every command naming the file, not a squash later.
Result<std::string> read_squash_options(const PolicyReader& r, const toml::node& node,
                                        std::string_view key) {
  std::string s = BERTH_TRY(r.string(node, key));
  if (auto opts = parse_squash_options(s); !opts)
    return r.bad(node, key, "holds \"" + s + "\": " + opts.error().detail);
  return s;
}

Result<RootEmulation> read_root_emulation(const PolicyReader& r, const toml::node& node,
                                          std::string_view key) {
  return r.word(node, key, kRootEmulationWords);
}

Result<EngineChoice> read_engine(const PolicyReader& r, const toml::node& node,
                                 std::string_view key) {
  return r.engine(node, key);
}

/// Keys of the table that are lockable.
Result<std::vector<std::string>> read_lock(const PolicyReader& r, const toml::node& node,
                                           std::string_view key) {
  std::vector<std::string> names = BERTH_TRY(r.strings(node, key));
  std::vector<std::string_view> lockable = lockable_policy_keys();
  for (const std::string& name : names) {
    if (std::find(lockable.begin(), lockable.end(), name) != lockable.end()) continue;
    std::string what = "names \"" + name + "\", which cannot be locked (";
    for (std::string_view k : lockable) what += (what.back() == '(' ? "" : ", ") + std::string(k);
    return r.bad(node, key, what + ")");
  }
  return names;
}

nlohmann::json show_root_emulation(const SiteConfig& c, const PolicyKey&) {
  return std::string(root_emulation_name(c.root_emulation));
}

/// Berth's own default (runtime/engines.h) where the policy names none.
nlohmann::json show_default_engine(const SiteConfig& c, const PolicyKey&) {
  return std::string(c.default_engine.value_or(default_engine()).spelled);
}

nlohmann::json show_allowed_engines(const SiteConfig& c, const PolicyKey&) {
  if (!c.allowed_engines) return nullptr;  // any
  nlohmann::json out = nlohmann::json::array();
  for (const EngineChoice& e : *c.allowed_engines) out.push_back(std::string(e.spelled));
  return out;
}

nlohmann::json show_env(const SiteConfig& c, const PolicyKey&) {
  nlohmann::json env = nlohmann::json::array();
  for (const EnvEdit& e : c.env) {
    static const char* const kinds[] = {"set", "prepend", "append", "unset"};
    nlohmann::json one = {{"op", kinds[static_cast<int>(e.kind)]}, {"name", e.name}};
    if (e.kind != EnvEdit::Kind::kUnset) one["value"] = e.value;
    env.push_back(one);
  }
  return env;
}

/// The site's mounts, then the user file's.
nlohmann::json show_mounts(const SiteConfig& c, const PolicyKey&) {
  std::vector<std::string> mounts = c.site_mounts;
  mounts.insert(mounts.end(), c.user_mounts.begin(), c.user_mounts.end());
  return mounts;
}

nlohmann::json show_mpi(const SiteConfig& c, const PolicyKey&) {
  nlohmann::json out = nlohmann::json::object();
  for (const MpiDeclaration& p : c.mpi)
    out[p.type] = {{"libraries", p.libraries},
                   {"dependencies", p.dependencies},
                   {"mounts", p.mounts},
                   {"abi", std::string(mpi_abi_rule_name(p.abi))}};
  return out;
}

// --- The table --------------------------------------------------------------------------

using L = PolicyLayer;
using C = SiteConfig;
using R = PolicyReader;

/// Rows merge in this order: one whose rule reads another key's value (registry_mirrors reads
/// allowed_registries, default_engine allowed_engines) comes after it. The lockable ones are
/// listed in this order where `lock` names one that is not.
constexpr PolicyKey kPolicyKeys[] = {
    key<&L::insecure_registries, &C::insecure_registries, &R::strings, Add>("insecure_registries"),
    key<&L::deny_mount_destinations, &C::deny_mount_destinations, &R::absolute_paths, Add>(
        "deny_mount_destinations"),
    key<&L::site_mounts, &C::site_mounts, &R::mounts, AppendTo<&C::user_mounts>, show_mounts>(
        "site_mounts"),
    key<&L::env, &C::env, &R::env, AppendTo<&C::env>, show_env>("env"),
    key<&L::allowed_registries, &C::allowed_registries, &R::strings, Narrow<Allows::kRegistries>>(
        "allowed_registries"),
    key<&L::allowed_engines, &C::allowed_engines, &R::engines, Narrow<Allows::kEngines>,
        show_allowed_engines>("allowed_engines"),
    key<&L::allow_mount_sources, &C::allow_mount_sources, &R::absolute_paths,
        Narrow<Allows::kFolders>>("allow_mount_sources"),
    key<&L::registry_mirrors, &C::registry_mirrors, &R::mirrors, Mirrors>("registry_mirrors"),
    key<&L::readonly, &C::readonly, &R::boolean, Prefer>("readonly", {.lockable = true}),
    key<&L::default_engine, &C::default_engine, read_engine, PreferAllowedEngine,
        show_default_engine>("default_engine", {.lockable = true}),
    key<&L::driver_root, &C::driver_root, &R::absolute_path, Prefer>(
        "driver_root", {.lockable = true, .unset = "/"}),
    key<&L::dev_root, &C::dev_root, &R::absolute_path, Prefer>("dev_root",
                                                               {.lockable = true, .unset = "/dev"}),
    key<&L::gpus, &C::gpus, &R::string, Prefer>("gpus", {.lockable = true}),
    key<&L::ib, &C::ib, &R::string, Prefer>("ib", {.lockable = true}),
    key<&L::mount_home, &C::mount_home, &R::boolean, Prefer>("mount_home", {.lockable = true}),
    key<&L::squash_options, &C::squash_options, read_squash_options, Prefer>("squash_options",
                                                                             {.lockable = true}),
    key<&L::store_format, &C::store_format, read_store_format, Prefer>(
        "store_format", {.lockable = true, .unset = "layers"}),
    key<&L::root_emulation, &C::root_emulation, read_root_emulation, Prefer, show_root_emulation>(
        "root_emulation", {.lockable = true}),
    key<&L::central_store, &C::central_store, &R::absolute_path, Prefer>("central_store"),
    key<&L::runtime_dir, &C::runtime_dir, &R::absolute_path, Prefer>("runtime_dir"),
    key<&L::pull_low_speed_limit, &C::pull_low_speed_limit, &R::count, Prefer>(
        "pull_low_speed_limit", {.unset_count = 1024}),
    key<&L::pull_low_speed_time, &C::pull_low_speed_time, &R::count, Prefer>("pull_low_speed_time",
                                                                             {.unset_count = 60}),
    key<&L::pull_deadline, &C::pull_deadline, &R::count, Prefer>("pull_deadline"),
    key<&L::extract_limit_mb, &C::extract_limit_mb, &R::count, Prefer>("extract_limit_mb"),
    key<&L::mpi, &C::mpi, &R::mpi, SiteOnly, show_mpi>(
        "mpi", {.site_only = "host MPIs are the site's to declare"}),
    key<&L::mpi_default, &C::mpi_default, &R::string, SiteOnly>("mpi_default"),
    key<&L::lock, &C::locked, read_lock, SiteOnly>(
        "lock", {.site_only = "a user's file cannot lock settings"}),
};

}  // namespace

std::vector<std::string_view> policy_key_names() {
  std::vector<std::string_view> out;
  for (const PolicyKey& k : kPolicyKeys) out.push_back(k.name);
  return out;
}

std::vector<std::string_view> lockable_policy_keys() {
  std::vector<std::string_view> out;
  for (const PolicyKey& k : kPolicyKeys)
    if (k.facts.lockable) out.push_back(k.name);
  return out;
}

Result<PolicyLayer> parse_policy(std::string_view text, const std::string& path, bool site) {
  const toml::table t = BERTH_TRY(parse_toml(text, path));
  PolicyReader r(path);
  PolicyLayer l;
  l.path = path;
  for (const auto& [name, node] : t) {
    std::string_view k = name.str();
    const PolicyKey* row = std::find_if(std::begin(kPolicyKeys), std::end(kPolicyKeys),
                                        [&](const PolicyKey& p) { return p.name == k; });
    // A misspelt key in a policy would silently not be enforced: refuse it.
    if (row == std::end(kPolicyKeys)) return r.bad(node, k, "is not a key Berth knows");
    if (!site && !row->facts.site_only.empty())
      return r.bad(node, k, "is a site policy key: " + std::string(row->facts.site_only));
    BERTH_CHECK(row->parse(r, node, k, l));
  }
  return l;
}

SiteConfig merge_policy(const std::optional<PolicyLayer>& site,
                        const std::vector<PolicyLayer>& user) {
  SiteConfig c;
  Merging m{c};
  if (site) {
    c.site_path = site->path;
    m.site_sets_mirrors = site->registry_mirrors.has_value();
    for (const PolicyKey& k : kPolicyKeys) k.take(*site, k.name, m);
  }
  for (const PolicyLayer& u : user)
    for (const PolicyKey& k : kPolicyKeys)
      if (k.merge != nullptr) k.merge(u, k.name, m);
  return c;
}

nlohmann::json policy_settings(const SiteConfig& c) {
  nlohmann::json out = nlohmann::json::object();
  for (const PolicyKey& k : kPolicyKeys) {
    auto it = c.sources.find(std::string(k.name));
    out[std::string(k.name)] = {{"value", k.show(c, k)},
                                {"source", it == c.sources.end() ? "default" : it->second}};
  }
  return out;
}

}  // namespace berth
