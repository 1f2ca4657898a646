// berthd's configuration file: TOML, parsed and reported as the site policy is
// (site/toml_reader.h).
#include "gateway/config.h"

#include "site/toml.h"
#include "site/toml_reader.h"

#include <algorithm>
#include <climits>

#include "core/fs.h"
#include "gateway/slurm_api.h"

namespace berth::gateway {
namespace {

constexpr const char* kHint = "see docs/gateway.md for berthd's keys and their types";

/// Reads one file's keys, each failure naming the file, the line and the key.
class Reader : public TomlReader {
 public:
  explicit Reader(const std::string& path) : TomlReader(path, kHint) {}

  Error missing(std::string_view table, std::string_view key) const {
    return make_error("read config", path(),
                      std::string(table) + " has no \"" + std::string(key) + "\"",
                      ErrorCode::kInvalidInput)
        .with_hint(kHint);
  }

  Result<std::string> nonempty(const toml::node& node, std::string_view key) const {
    std::string s = BERTH_TRY(string(node, key));
    if (s.empty()) return bad(node, key, "is empty");
    return s;
  }
  /// A service's base URL: http:// or https://, its trailing slashes dropped so that paths
  /// are appended to it.
  Result<std::string> base_url(const toml::node& node, std::string_view key) const {
    std::string url = BERTH_TRY(nonempty(node, key));
    if (!url.starts_with("https://") && !url.starts_with("http://"))
      return bad(node, key, "is not an http:// or https:// URL");
    while (url.ends_with("/")) url.pop_back();
    return url;
  }
  Result<int64_t> seconds(const toml::node& node, std::string_view key) const {
    auto v = node.value<int64_t>();
    if (!node.is_integer() || !v || *v < 0 || *v > 86400)
      return bad(node, key, "is not a whole number of seconds from 0 to 86400");
    return *v;
  }
  /// The tables of an array of tables `key` ([[key]]).
  Result<std::vector<const toml::table*>> tables(const toml::node& node,
                                                 std::string_view key) const {
    const toml::array* a = node.as_array();
    std::vector<const toml::table*> out;
    if (a != nullptr)
      for (const toml::node& item : *a) out.push_back(item.as_table());
    if (a == nullptr ||
        std::find(out.begin(), out.end(), static_cast<const toml::table*>(nullptr)) != out.end())
      return bad(node, key, "is not an array of tables ([[" + std::string(key) + "]])");
    return out;
  }

  Status listen(const toml::node& node, GatewayConfig& c) const {
    std::string s = BERTH_TRY(string(node, "listen"));
    size_t colon = s.rfind(':');
    if (colon == std::string::npos || colon == 0)
      return bad(node, "listen", "is not HOST:PORT: \"" + s + "\"");
    std::string host = s.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
      host = host.substr(1, host.size() - 2);
    long port = 0;
    std::string digits = s.substr(colon + 1);
    if (digits.empty() || digits.size() > 5 ||
        digits.find_first_not_of("0123456789") != std::string::npos ||
        (port = std::stol(digits)) > 65535)
      return bad(node, "listen", "is not HOST:PORT with a port of 0 to 65535: \"" + s + "\"");
    c.listen_host = host;
    c.listen_port = static_cast<int>(port);
    return {};
  }

  Result<IssuerConfig> issuer(const toml::table& t) const {
    IssuerConfig i;
    for (const auto& [k, v] : t) {
      std::string_view key = k.str();
      if (key == "issuer")
        i.issuer = BERTH_TRY(nonempty(v, key));
      else if (key == "audience")
        i.audience = BERTH_TRY(nonempty(v, key));
      else if (key == "required_scope")
        i.required_scope = BERTH_TRY(string(v, key));
      else if (key == "username_claim")
        i.username_claim = BERTH_TRY(string(v, key));
      else if (key == "exchange_client_id")
        i.exchange_client_id = BERTH_TRY(nonempty(v, key));
      else if (key == "exchange_client_secret_file")
        i.exchange_client_secret_file = BERTH_TRY(nonempty(v, key));
      else if (key == "exchange_client_secret")
        return bad(v, key,
                   "is not a key of [[issuers]]: put the secret in a file only berthd reads, "
                   "named by exchange_client_secret_file");
      else
        return bad(v, key, "is not a key of [[issuers]]");
    }
    if (i.issuer.empty()) return missing("[[issuers]]", "issuer");
    if (i.audience.empty()) return missing("[[issuers]] " + i.issuer, "audience");
    if (i.exchange_client_id.empty() != i.exchange_client_secret_file.empty())
      return missing("[[issuers]] " + i.issuer, i.exchange_client_id.empty()
                                                    ? "exchange_client_id"
                                                    : "exchange_client_secret_file");
    // Keys are fetched from the issuer: over HTTPS, or plain HTTP on this host only (tests).
    std::string_view rest = i.issuer;
    if (rest.starts_with("https://")) return i;
    if (rest.starts_with("http://")) {
      rest.remove_prefix(7);
      std::string_view host = rest.substr(0, rest.find_first_of(":/"));
      if (is_loopback_host(host)) return i;
    }
    return bad(*t.get("issuer"), "issuer",
               "is not an https:// URL (plain http:// only on loopback): \"" + i.issuer + "\"");
  }

  Result<std::map<std::string, std::string>> string_table(const toml::node& node,
                                                          std::string_view key) const {
    const toml::table* t = node.as_table();
    if (t == nullptr) return bad(node, key, "is not a table of strings");
    std::map<std::string, std::string> out;
    for (const auto& [k, v] : *t) {
      if (!v.is_string()) return bad(v, k.str(), "is not a string");
      out[std::string(k.str())] = *v.value<std::string>();
    }
    return out;
  }

  /// "auto" or a slurmrestd API version berthd speaks (gateway/slurm_api.h).
  Result<std::string> api_version(const toml::node& node, std::string_view key) const {
    std::string s = BERTH_TRY(string(node, key));
    if (s != "auto" && slurm_api(s) == nullptr)
      return bad(
          node, key,
          "is not \"auto\" or a version berthd speaks (" + slurm_api_names() + "): \"" + s + "\"");
    return s;
  }

  Status slurm(const toml::node& node, SlurmConfig& s) const {
    const toml::table* t = node.as_table();
    if (t == nullptr) return bad(node, "slurm", "is not a table ([slurm])");
    for (const auto& [k, v] : *t) {
      std::string_view key = k.str();
      if (key == "rest_url")
        s.rest_url = BERTH_TRY(nonempty(v, key));
      else if (key == "api_version")
        s.api_version = BERTH_TRY(api_version(v, key));
      else if (key == "jwt_key")
        s.jwt_key = BERTH_TRY(nonempty(v, key));
      else if (key == "token_lifespan_s")
        s.token_lifespan_s = BERTH_TRY(seconds(v, key));
      else if (key == "partition")
        s.partition = BERTH_TRY(string(v, key));
      else if (key == "partitions") {
        s.partitions = BERTH_TRY(strings(v, key));
        for (const std::string& p : s.partitions)
          if (p.empty() || p.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWX"
                                               "YZ0123456789_.-") != std::string::npos)
            return bad(
                v, key,
                "names \"" + p + "\", not a partition name (letters, digits, '_', '.', '-')");
      } else if (key == "workdir")
        s.workdir = BERTH_TRY(nonempty(v, key));
      else if (key == "environment")
        s.environment = BERTH_TRY(string_table(v, key));
      else if (key == "cluster")
        s.cluster = BERTH_TRY(nonempty(v, key));
      else if (key == "output_dir")
        s.output_dir = BERTH_TRY(nonempty(v, key));
      else if (key == "start_estimate") {
        const std::string how = BERTH_TRY(string(v, key));
        if (how != "none" && how != "sbatch") return bad(v, key, "is not \"none\" or \"sbatch\"");
        s.estimate.enabled = how == "sbatch";
      } else if (key == "sbatch")
        s.estimate.sbatch = BERTH_TRY(nonempty(v, key));
      else if (key == "slurm_conf") {
        s.estimate.slurm_conf = BERTH_TRY(nonempty(v, key));
        if (s.estimate.slurm_conf[0] != '/') return bad(v, key, "is not an absolute path");
      } else if (key == "estimate_timeout_s") {
        s.estimate.timeout_s = BERTH_TRY(seconds(v, key));
        if (s.estimate.timeout_s < 1) return bad(v, key, "is less than 1");
      } else
        return bad(v, key, "is not a key of [slurm]");
    }
    // The configured partition is always one a request may name: it is where jobs go anyway.
    if (!s.partition.empty() &&
        std::find(s.partitions.begin(), s.partitions.end(), s.partition) == s.partitions.end())
      s.partitions.insert(s.partitions.begin(), s.partition);
    if (s.rest_url.empty()) return missing("[slurm]", "rest_url");
    if (s.jwt_key.empty()) return missing("[slurm]", "jwt_key");
    if (!s.rest_url.starts_with("http://") && !s.rest_url.starts_with("https://"))
      return bad(*t->get("rest_url"), "rest_url", "is not an http:// or https:// URL");
    if (!s.output_dir.empty() && s.output_dir[0] != '/')
      return bad(*t->get("output_dir"), "output_dir", "is not an absolute path");
    return {};
  }

  Status reclaim(const toml::node& node, SlurmConfig& s) const {
    const toml::table* t = node.as_table();
    if (t == nullptr) return bad(node, "reclaim", "is not a table ([reclaim])");
    s.reclaim = true;
    for (const auto& [k, v] : *t) {
      std::string_view key = k.str();
      if (key == "enabled")
        s.reclaim = BERTH_TRY(boolean(v, key));
      else if (key == "sample_interval_s")
        s.reclaim_policy.sample_interval_s = BERTH_TRY(seconds(v, key));
      else if (key == "idle_for_s")
        s.reclaim_policy.idle_for_s = BERTH_TRY(seconds(v, key));
      else if (key == "berth")
        s.reclaim_berth = BERTH_TRY(nonempty(v, key));
      else if (key == "idle_below_pct") {
        auto pct = v.value<double>();
        if (!pct || *pct <= 0 || *pct > 100)
          return bad(v, key, "is not a percentage above 0, at most 100");
        s.reclaim_policy.idle_below_pct = *pct;
      } else if (key == "action") {
        std::string a = BERTH_TRY(string(v, key));
        if (a != "flag" && a != "cancel") return bad(v, key, "is not \"flag\" or \"cancel\"");
        s.reclaim_policy.cancel = a == "cancel";
      } else {
        return bad(v, key, "is not a key of [reclaim]");
      }
    }
    if (s.reclaim_policy.sample_interval_s < 1)
      return bad(*t->get("sample_interval_s"), "sample_interval_s", "is less than 1");
    return {};
  }

  Status share(const toml::node& node, ShareConfig& s) const {
    const toml::table* t = node.as_table();
    if (t == nullptr) return bad(node, "share", "is not a table ([share])");
    s.enabled = true;
    bool units = false;
    for (const auto& [k, v] : *t) {
      std::string_view key = k.str();
      if (key == "enabled")
        s.enabled = BERTH_TRY(boolean(v, key));
      else if (key == "gres") {
        s.gres = BERTH_TRY(string(v, key));
        if (s.gres != "shard" && s.gres != "mps") return bad(v, key, "is not \"shard\" or \"mps\"");
      } else if (key == "units_per_gpu") {
        auto n = v.value<int64_t>();
        if (!v.is_integer() || !n || *n < 1 || *n > 100000)
          return bad(v, key, "is not a whole number from 1 to 100000");
        s.units_per_gpu = *n;
        units = true;
      } else if (key == "pipe_dir" || key == "log_dir") {
        std::string dir = BERTH_TRY(nonempty(v, key));
        // The plugin hands it to `berth run` as a variable, and Berth binds it at its path.
        if (dir[0] != '/' || dir.find_first_of(":,\n") != std::string::npos)
          return bad(v, key, "is not an absolute path without ':', ',' or a newline");
        (key == "pipe_dir" ? s.pipe_dir : s.log_dir) = dir;
      } else {
        return bad(v, key, "is not a key of [share]");
      }
    }
    // MPS counts are percentages of a GPU by convention; shards are whatever gres.conf says.
    if (!units && s.gres == "mps") s.units_per_gpu = 100;
    if (s.units_per_gpu == 0 && s.enabled) return missing("[share]", "units_per_gpu");
    return {};
  }

  Status resources(const toml::node& node, PublishConfig& p) const {
    const toml::table* t = node.as_table();
    if (t == nullptr) return bad(node, "resources", "is not a table ([resources])");
    for (const auto& [k, v] : *t) {
      std::string_view key = k.str();
      if (key == "public")
        p.resources_public = BERTH_TRY(boolean(v, key));
      else if (key == "public_user")
        p.public_user = BERTH_TRY(nonempty(v, key));
      else if (key == "cache_s")
        p.resources_cache_s = BERTH_TRY(seconds(v, key));
      else if (key == "host")
        p.host = BERTH_TRY(nonempty(v, key));
      else if (key == "url") {
        p.url = BERTH_TRY(base_url(v, key));
      } else if (key == "infiniband")
        p.infiniband = BERTH_TRY(boolean(v, key));
      else
        return bad(v, key, "is not a key of [resources]");
    }
    if (p.resources_public && p.public_user.empty()) return missing("[resources]", "public_user");
    return {};
  }

  Result<double> weight(const toml::node& node, std::string_view key) const {
    auto v = node.value<double>();
    if (!(node.is_floating_point() || node.is_integer()) || !v || *v < 0 || *v > 1000)
      return bad(node, key, "is not a number from 0 to 1000");
    return *v;
  }

  Result<BrokerSiteConfig> broker_site(const toml::table& t) const {
    BrokerSiteConfig s;
    for (const auto& [k, v] : t) {
      std::string_view key = k.str();
      if (key == "name") {
        s.name = BERTH_TRY(nonempty(v, key));
        if (s.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-_.") !=
            std::string::npos)
          return bad(v, key, "is not lower-case letters, digits, '-', '_' and '.'");
      } else if (key == "kind") {
        s.kind = BERTH_TRY(string(v, key));
        static const char* kinds[] = {"berthd",  "kubernetes", "marathon",
                                      "chronos", "openstack",  "static"};
        if (std::find_if(std::begin(kinds), std::end(kinds),
                         [&s](const char* k) { return s.kind == k; }) == std::end(kinds))
          return bad(v, key, "is not berthd, kubernetes, marathon, chronos, openstack or static");
      } else if (key == "url") {
        s.url = BERTH_TRY(base_url(v, key));
      } else if (key == "audience") {
        s.audience = BERTH_TRY(nonempty(v, key));
      } else if (key == "token") {
        s.token = BERTH_TRY(string(v, key));
        if (s.token != "forward" && s.token != "exchange")
          return bad(v, key, "is not \"forward\" or \"exchange\"");
      } else if (key == "weight") {
        s.weight = BERTH_TRY(weight(v, key));
      } else if (key == "weights") {
        const toml::table* w = v.as_table();
        if (w == nullptr) return bad(v, key, "is not a table of group = weight");
        for (const auto& [g, n] : *w)
          s.weights[std::string(g.str())] = BERTH_TRY(weight(n, g.str()));
      } else if (key == "groups") {
        s.groups = BERTH_TRY(strings(v, key));
      } else if (key == "resources") {
        s.resources = BERTH_TRY(nonempty(v, key));
      } else if (key == "info_ttl_s") {
        s.info_ttl_s = BERTH_TRY(seconds(v, key));
      } else if (key == "shares") {
        s.shares = BERTH_TRY(boolean(v, key));
      } else if (key == "gpu_jobs") {
        s.gpu_jobs = BERTH_TRY(boolean(v, key));
      } else if (key == "dry_run") {
        s.dry_run = BERTH_TRY(boolean(v, key));
      } else if (key == "namespace") {
        s.manifest.k8s_namespace = BERTH_TRY(nonempty(v, key));
      } else if (key == "runtime_class") {
        s.manifest.runtime_class = BERTH_TRY(nonempty(v, key));
      } else if (key == "gpu_resource") {
        s.manifest.gpu_resource = BERTH_TRY(nonempty(v, key));
      } else if (key == "mesos_gpu_attribute") {
        s.manifest.mesos_gpu_attribute = BERTH_TRY(nonempty(v, key));
      } else if (key == "disk_mb") {
        s.manifest.disk_mb = BERTH_TRY(whole(v, key, 0, int64_t{1} << 30));
      } else if (key == "chronos_gpus") {
        s.manifest.chronos_gpus = BERTH_TRY(boolean(v, key));
      } else if (key == "image_ref") {
        s.manifest.image_ref = BERTH_TRY(nonempty(v, key));
      } else if (key == "network_id") {
        s.manifest.network_id = BERTH_TRY(nonempty(v, key));
      } else if (key == "key_name") {
        s.manifest.key_name = BERTH_TRY(nonempty(v, key));
      } else {
        return bad(v, key, "is not a key of [[broker.sites]]");
      }
    }
    if (s.name.empty()) return missing("[[broker.sites]]", "name");
    if (s.url.empty() && s.kind != "static") return missing("[[broker.sites]] " + s.name, "url");
    if (s.resources.empty() && s.kind != "berthd")
      return missing("[[broker.sites]] " + s.name + " (kind " + s.kind + ")", "resources");
    return s;
  }

  Status broker(const toml::node& node, BrokerConfig& b) const {
    const toml::table* t = node.as_table();
    if (t == nullptr) return bad(node, "broker", "is not a table ([broker])");
    b.enabled = true;
    for (const auto& [k, v] : *t) {
      std::string_view key = k.str();
      if (key == "enabled") {
        b.enabled = BERTH_TRY(boolean(v, key));
      } else if (key == "sites") {
        for (const toml::table* s : BERTH_TRY(tables(v, "broker.sites"))) {
          BrokerSiteConfig site = BERTH_TRY(broker_site(*s));
          if (b.find_site(site.name) != nullptr)
            return bad(v, key, "names site \"" + site.name + "\" twice");
          b.sites.push_back(std::move(site));
        }
      } else if (key == "score") {
        const toml::table* w = v.as_table();
        if (w == nullptr) return bad(v, key, "is not a table ([broker.score])");
        for (const auto& [f, n] : *w) {
          std::string_view factor = f.str();
          double* slot = factor == "start_now"     ? &b.score_start_now
                         : factor == "wait"        ? &b.score_wait
                         : factor == "free"        ? &b.score_free
                         : factor == "fit"         ? &b.score_fit
                         : factor == "preference"  ? &b.score_preference
                         : factor == "reliability" ? &b.score_reliability
                                                   : nullptr;
          if (slot == nullptr) return bad(n, factor, "is not a factor of [broker.score]");
          *slot = BERTH_TRY(weight(n, factor));
        }
      } else {
        return bad(v, key, "is not a key of [broker]");
      }
    }
    if (b.enabled && b.sites.empty()) return missing("[broker]", "sites");
    return {};
  }

  // --- h-authz: [accounts] and [connections] ---
  Result<int64_t> whole(const toml::node& node, std::string_view key, int64_t lo,
                        int64_t hi) const {
    auto v = node.value<int64_t>();
    if (!node.is_integer() || !v || *v < lo || *v > hi)
      return bad(node, key,
                 "is not a whole number from " + std::to_string(lo) + " to " + std::to_string(hi));
    return *v;
  }

  Status accounts(const toml::node& node, AccountsConfig& a) const {
    const toml::table* t = node.as_table();
    if (t == nullptr) return bad(node, "accounts", "is not a table ([accounts])");
    for (const auto& [k, v] : *t) {
      std::string_view key = k.str();
      if (key == "uid_min")
        a.uid_min = BERTH_TRY(whole(v, key, 1, UINT32_MAX - 1));
      else if (key == "uid_max")
        a.uid_max = BERTH_TRY(whole(v, key, 1, UINT32_MAX - 1));
      else if (key == "allow_own_account")
        a.allow_own_account = BERTH_TRY(boolean(v, key));
      else
        return bad(v, key, "is not a key of [accounts]");
    }
    if (a.uid_min > a.uid_max)
      return bad(node, "accounts", "has uid_min above uid_max: no account could run jobs");
    return {};
  }

  Status connections(const toml::node& node, ConnectionsConfig& c) const {
    const toml::table* t = node.as_table();
    if (t == nullptr) return bad(node, "connections", "is not a table ([connections])");
    for (const auto& [k, v] : *t) {
      std::string_view key = k.str();
      if (key == "request_timeout_s")
        c.request_timeout_s = BERTH_TRY(whole(v, key, 1, 3600));
      else if (key == "idle_timeout_s")
        c.idle_timeout_s = BERTH_TRY(whole(v, key, 1, 3600));
      else if (key == "max_per_address")
        c.max_per_address = BERTH_TRY(whole(v, key, 1, 100000));
      else if (key == "max_queued")
        c.max_queued = BERTH_TRY(whole(v, key, 1, 100000));
      else
        return bad(v, key, "is not a key of [connections]");
    }
    return {};
  }
  // --- end h-authz ---

  Status gpu_models(const toml::node& node, PublishConfig& p) const {
    const toml::table* t = node.as_table();
    if (t == nullptr) return bad(node, "gpu_models", "is not a table ([gpu_models.TYPE])");
    for (const auto& [type, entry] : *t) {
      const toml::table* m = entry.as_table();
      if (m == nullptr) return bad(entry, type.str(), "is not a table ([gpu_models.TYPE])");
      GpuModelConfig g;
      for (const auto& [k, v] : *m) {
        std::string_view key = k.str();
        if (key == "vendor")
          g.vendor = BERTH_TRY(nonempty(v, key));
        else if (key == "model")
          g.model = BERTH_TRY(nonempty(v, key));
        else if (key == "driver_version")
          g.driver_version = BERTH_TRY(nonempty(v, key));
        else if (key == "cuda_version")
          g.cuda_version = BERTH_TRY(nonempty(v, key));
        else if (key == "compute_capability")
          // Issue 30: published as measured, never as typed (gateway/gpu_facts.h).
          return bad(v, key,
                     "is measured by NVML on the nodes (the GPU jobs' samples, [reclaim]), not "
                     "configured: remove it");
        else if (key == "memory_mb") {
          auto mb = v.value<int64_t>();
          if (!v.is_integer() || !mb || *mb <= 0)
            return bad(v, key, "is not a positive whole number");
          g.memory_mb = *mb;
        } else {
          return bad(v, key, "is not a key of [gpu_models.TYPE]");
        }
      }
      p.gpu_models[std::string(type.str())] = std::move(g);
    }
    return {};
  }

  Result<UserMapping> user(const toml::table& t) const {
    UserMapping u;
    for (const auto& [k, v] : t) {
      std::string_view key = k.str();
      if (key == "issuer")
        u.issuer = BERTH_TRY(nonempty(v, key));
      else if (key == "sub")
        u.subject = BERTH_TRY(nonempty(v, key));
      else if (key == "user")
        u.user = BERTH_TRY(nonempty(v, key));
      else
        return bad(v, key, "is not a key of [[users]]");
    }
    if (u.issuer.empty()) return missing("[[users]]", "issuer");
    if (u.subject.empty()) return missing("[[users]]", "sub");
    if (u.user.empty()) return missing("[[users]]", "user");
    return u;
  }

  /// One table of limit keys: `where` names it in errors ("[limits]").
  Result<LimitValues> limit_values(const toml::table& t, const std::string& where,
                                   bool nested) const {
    LimitValues out;
    for (const auto& [k, v] : t) {
      std::string_view key = k.str();
      if (nested && (key == "users" || key == "groups")) continue;
      auto which = limit_key(key);
      if (!which) return bad(v, key, "is not a key of " + where);
      auto n = v.value<int64_t>();
      if (walltime_key(*which)) {
        // Slurm's time limits are whole minutes: a cap in minutes is exactly the limit the job
        // gets in Slurm.
        if (!v.is_integer() || !n || *n < 60 || *n > int64_t{366} * 86400 || *n % 60 != 0)
          return bad(v, key, "is not a whole number of minutes, in seconds (60, 120, ...)");
      } else if (!v.is_integer() || !n || *n < 0 || *n > 1000000) {
        return bad(v, key, "is not a whole number from 0 to 1000000");
      }
      out[static_cast<size_t>(*which)] = *n;
    }
    return out;
  }

  /// The entries of [limits.users] or [limits.groups].
  Result<std::map<std::string, LimitValues>> limit_entries(const toml::node& node,
                                                           std::string_view key) const {
    const toml::table* t = node.as_table();
    if (t == nullptr)
      return bad(node, key, "is not a table of tables ([limits." + std::string(key) + ".NAME])");
    std::map<std::string, LimitValues> out;
    for (const auto& [name, entry] : *t) {
      const toml::table* e = entry.as_table();
      std::string where = "[limits." + std::string(key) + ".\"" + std::string(name.str()) + "\"]";
      if (e == nullptr || name.str().empty())
        return bad(entry, name.str(), "is not a table of limits (" + where + ")");
      out[std::string(name.str())] = BERTH_TRY(limit_values(*e, where, false));
    }
    return out;
  }

  Status limits(const toml::node& node, LimitsConfig& l) const {
    const toml::table* t = node.as_table();
    if (t == nullptr) return bad(node, "limits", "is not a table ([limits])");
    l.defaults = BERTH_TRY(limit_values(*t, "[limits]", true));
    if (const toml::node* users = t->get("users"))
      l.users = BERTH_TRY(limit_entries(*users, "users"));
    if (const toml::node* groups = t->get("groups"))
      l.groups = BERTH_TRY(limit_entries(*groups, "groups"));
    return {};
  }
  Status accounting(const toml::node& node, AccountingConfig& a) const {
    const toml::table* t = node.as_table();
    if (t == nullptr) return bad(node, "accounting", "is not a table ([accounting])");
    for (const auto& [k, v] : *t) {
      std::string_view key = k.str();
      if (key == "source") {
        a.source = BERTH_TRY(string(v, key));
        if (a.source != "database" && a.source != "sacct" && a.source != "auto")
          return bad(v, key, "is not \"database\", \"sacct\" or \"auto\"");
      } else if (key == "sacct") {
        a.sacct = BERTH_TRY(nonempty(v, key));
      } else if (key == "slurm_conf") {
        a.slurm_conf = BERTH_TRY(nonempty(v, key));
        if (a.slurm_conf[0] != '/') return bad(v, key, "is not an absolute path");
      } else if (key == "timeout_s") {
        a.timeout_s = BERTH_TRY(seconds(v, key));
        if (a.timeout_s < 1) return bad(v, key, "is less than 1");
      } else if (key == "slurm_account") {
        a.slurm_account = BERTH_TRY(string(v, key));
        if (a.slurm_account != "primary_group" && a.slurm_account != "default")
          return bad(v, key, "is not \"primary_group\" or \"default\"");
      } else if (key == "group_by") {
        // What usage and quotas group jobs by (h-vo): a token group or the Unix group.
        a.group_by = BERTH_TRY(string(v, key));
        if (a.group_by != "token" && a.group_by != "unix")
          return bad(v, key, "is not \"token\" or \"unix\"");
      } else {
        return bad(v, key, "is not a key of [accounting]");
      }
    }
    return {};
  }
  Status quotas(const toml::node& node, QuotaConfig& q) const {
    const toml::table* t = node.as_table();
    if (t == nullptr) return bad(node, "quotas", "is not a table ([quotas])");
    for (const auto& [k, v] : *t) {
      std::string_view key = k.str();
      if (key == "period") {
        if (auto n = v.value<int64_t>(); v.is_integer()) {
          if (!n || *n < 60 || *n > int64_t{366} * 86400)
            return bad(
                v, key,
                "is not \"month\", \"week\", \"day\" or a number of seconds from 60 to 31622400");
          q.period = "";
          q.period_s = *n;
          continue;
        }
        std::string p = BERTH_TRY(string(v, key));
        if (p != "month" && p != "week" && p != "day")
          return bad(
              v, key,
              "is not \"month\", \"week\", \"day\" or a number of seconds from 60 to 31622400");
        q.period = p;
        q.period_s = 0;
      } else if (key == "groups") {
        const toml::table* groups = v.as_table();
        if (groups == nullptr)
          return bad(v, key, "is not a table of tables ([quotas.groups.NAME])");
        for (const auto& [name, entry] : *groups) {
          std::string where = "[quotas.groups.\"" + std::string(name.str()) + "\"]";
          const toml::table* e = entry.as_table();
          if (e == nullptr || name.str().empty())
            return bad(entry, name.str(), "is not a table with gpu_hours (" + where + ")");
          for (const auto& [ek, ev] : *e) {
            if (ek.str() != "gpu_hours") return bad(ev, ek.str(), "is not a key of " + where);
            auto h = ev.value<double>();
            if (!(ev.is_integer() || ev.is_floating_point()) || !h || !(*h >= 0) || *h > 1e9)
              return bad(ev, ek.str(), "is not a number of GPU-hours from 0 to 1e9");
            q.gpu_hours[std::string(name.str())] = *h;
          }
          if (!q.gpu_hours.contains(std::string(name.str())))
            return bad(entry, name.str(), where + " has no gpu_hours");
        }
      } else {
        return bad(v, key, "is not a key of [quotas]");
      }
    }
    return {};
  }
};

}  // namespace

const IssuerConfig* GatewayConfig::find_issuer(std::string_view iss) const {
  for (const IssuerConfig& i : issuers)
    if (i.issuer == iss) return &i;
  return nullptr;
}

const BrokerSiteConfig* BrokerConfig::find_site(std::string_view name) const {
  for (const BrokerSiteConfig& s : sites)
    if (s.name == name) return &s;
  return nullptr;
}

bool is_loopback_host(std::string_view host) {
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

Result<GatewayConfig> parse_gateway_config(std::string_view text, const std::string& path) {
  const toml::table root = BERTH_TRY(parse_toml(text, path));
  Reader r(path);
  GatewayConfig c;
  c.path = path;
  for (const auto& [k, v] : root) {
    std::string_view key = k.str();
    if (key == "listen")
      BERTH_CHECK(r.listen(v, c));
    else if (key == "plain_http_anywhere")
      c.plain_http_anywhere = BERTH_TRY(r.boolean(v, key));
    else if (key == "tls_cert")
      c.tls_cert = BERTH_TRY(r.nonempty(v, key));
    else if (key == "tls_key")
      c.tls_key = BERTH_TRY(r.nonempty(v, key));
    else if (key == "leeway_s")
      c.leeway_s = BERTH_TRY(r.seconds(v, key));
    else if (key == "jwks_min_refresh_s")
      c.jwks_min_refresh_s = BERTH_TRY(r.seconds(v, key));
    else if (key == "admin_groups")
      c.admin_groups = BERTH_TRY(r.strings(v, key));
    else if (key == "database")
      c.database = BERTH_TRY(r.nonempty(v, key));
    else if (key == "slurm")
      BERTH_CHECK(r.slurm(v, c.slurm));
    else if (key == "reconcile_interval_s")
      c.reconcile_interval_s = BERTH_TRY(r.seconds(v, key));
    else if (key == "limits")
      BERTH_CHECK(r.limits(v, c.limits));
    else if (key == "quotas")
      BERTH_CHECK(r.quotas(v, c.quotas));
    else if (key == "accounting")
      BERTH_CHECK(r.accounting(v, c.accounting));
    else if (key == "audit_log")
      c.audit_log = BERTH_TRY(r.nonempty(v, key));
    else if (key == "metrics_public")
      c.publish.metrics_public = BERTH_TRY(r.boolean(v, key));
    else if (key == "resources")
      BERTH_CHECK(r.resources(v, c.publish));
    else if (key == "reclaim")
      BERTH_CHECK(r.reclaim(v, c.slurm));
    else if (key == "share")
      BERTH_CHECK(r.share(v, c.slurm.share));
    else if (key == "gpu_models")
      BERTH_CHECK(r.gpu_models(v, c.publish));
    else if (key == "accounts")  // h-authz
      BERTH_CHECK(r.accounts(v, c.accounts));
    else if (key == "connections")  // h-authz
      BERTH_CHECK(r.connections(v, c.connections));
    else if (key == "broker")
      BERTH_CHECK(r.broker(v, c.broker));
    else if (key == "issuers") {
      for (const toml::table* t : BERTH_TRY(r.tables(v, key)))
        c.issuers.push_back(BERTH_TRY(r.issuer(*t)));
    } else if (key == "users") {
      for (const toml::table* t : BERTH_TRY(r.tables(v, key)))
        c.users.push_back(BERTH_TRY(r.user(*t)));
    } else {
      return r.bad(v, key, "is not a key of berthd's configuration");
    }
  }
  // [gpu_models] is also the list of the GPU models a job may ask for (resources.gpu_model).
  for (const auto& [type, model] : c.publish.gpu_models) c.slurm.gpu_models.push_back(type);
  if (auto max = c.limits.defaults[static_cast<size_t>(LimitKey::kMaxGpusPerJob)])
    c.publish.max_gpus_per_job = static_cast<int>(*max);
  c.publish.partitions = c.slurm.partitions;
  auto fail = [&](const std::string& what) {
    return make_error("read config", path, what, ErrorCode::kInvalidInput).with_hint(kHint);
  };
  if (c.issuers.empty()) return fail("no [[issuers]]: berthd trusts no tokens");
  for (size_t i = 0; i < c.issuers.size(); ++i)
    for (size_t j = i + 1; j < c.issuers.size(); ++j)
      if (c.issuers[i].issuer == c.issuers[j].issuer)
        return fail("issuer \"" + c.issuers[i].issuer + "\" is listed twice");
  for (const UserMapping& u : c.users)
    if (c.find_issuer(u.issuer) == nullptr)
      return fail("[[users]] names issuer \"" + u.issuer + "\", which is not in [[issuers]]");
  for (const BrokerSiteConfig& s : c.broker.sites) {
    if (s.token != "exchange") continue;
    if (s.audience.empty())
      return fail("[[broker.sites]] " + s.name +
                  " has token = \"exchange\" and no audience: the audience to ask for");
    if (std::none_of(c.issuers.begin(), c.issuers.end(),
                     [](const IssuerConfig& i) { return !i.exchange_client_id.empty(); }))
      return fail("[[broker.sites]] " + s.name +
                  " has token = \"exchange\", and no [[issuers]] has an exchange_client_id: "
                  "the broker could exchange no caller's token");
  }
  // A broker's database holds the broker's jobs (gateway/broker_jobs.h), with no Slurm.
  if (c.database.empty() != c.slurm.rest_url.empty() && !(c.broker.enabled && !c.database.empty()))
    return fail(c.broker.enabled ? "[slurm] needs a database: the job endpoints need both"
                                 : "database and [slurm] go together: the job endpoints need both");
  if (c.tls_cert.empty() != c.tls_key.empty())
    return fail("tls_cert and tls_key go together: give both or neither");
  if (c.slurm.reclaim && c.slurm.output_dir.empty())
    return fail("[reclaim] needs [slurm] output_dir: GPU jobs write their samples there");
  if (!c.tls() && !c.plain_http_anywhere && !is_loopback_host(c.listen_host))
    return fail("plain HTTP on " + c.listen_host +
                ", which is not loopback: configure tls_cert and tls_key, or set "
                "plain_http_anywhere = true");
  return c;
}

Result<GatewayConfig> read_gateway_config(const std::string& path) {
  std::string text = BERTH_TRY(read_file(path));
  return parse_gateway_config(text, path);
}

}  // namespace berth::gateway
