// berthd's configuration: one TOML file (`berthd --config FILE`), in the same format and read
// with the same rules as Berth's site policy (site/config.h). docs/gateway.md lists every key.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "broker/manifests.h"
#include "core/error.h"
#include "gateway/limits.h"
#include "gateway/quotas.h"
#include "gateway/reclaim.h"
#include "gateway/sacct.h"
#include "gateway/start_estimate.h"

namespace berth::gateway {

/// One trusted OIDC issuer ([[issuers]]).
struct IssuerConfig {
  std::string issuer;          ///< the exact `iss` its tokens carry; discovery is under it
  std::string audience;        ///< the `aud` its tokens must name (required)
  std::string required_scope;  ///< a scope tokens must carry; "" for none
  /// A claim naming the local account directly (e.g. "preferred_username"); "" when only the
  /// [[users]] table maps this issuer's identities.
  std::string username_claim;
  /// A broker's client at this issuer for RFC 8693 token exchange (gateway/token_exchange.h):
  /// its client_id, and the file holding its secret (readable by berthd, not by all); both
  /// or neither.
  std::string exchange_client_id;
  std::string exchange_client_secret_file;
};

/// One row of the mapping table ([[users]]): an identity and the local account it runs as.
struct UserMapping {
  std::string issuer;
  std::string subject;  ///< `sub`
  std::string user;     ///< the local account's name
};

/// GPU sharing ([share]): a job may ask for a fraction of one GPU ("gpu_share"), which becomes
/// Slurm's `shard` or `mps` GRES, with the site's CUDA MPS directories bound into its container.
struct ShareConfig {
  bool enabled = false;
  std::string gres = "shard";  ///< "shard" or "mps": the GRES of gres.conf that splits each GPU
  /// The GRES count of one GPU in gres.conf: its shards, or its MPS count (100 by convention).
  int64_t units_per_gpu = 0;
  /// The site's MPS daemons' CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY on each node
  /// (the CUDA defaults unless set), given to the job's container.
  std::string pipe_dir = "/tmp/nvidia-mps";
  std::string log_dir = "/var/log/nvidia-mps";
};

/// The Slurm cluster jobs go to ([slurm]), through its slurmrestd.
struct SlurmConfig {
  std::string rest_url;  ///< slurmrestd, "http://HOST:PORT" (rest_auth/jwt)
  /// The slurmrestd API version berthd speaks: "auto" (the newest both sides know, from what
  /// slurmrestd offers) or one of gateway/slurm_api.h's ("v0.0.41", "v0.0.38").
  std::string api_version = "auto";
  std::string jwt_key;            ///< the file of Slurm's auth/jwt key (jwt_key=)
  int64_t token_lifespan_s = 60;  ///< the life of each token berthd mints
  std::string partition;          ///< "" for Slurm's default
  /// The partitions a job request may name (resources.partition, check_partition()):
  /// [slurm] partitions, with [slurm] partition ahead of them when it names one not listed.
  std::vector<std::string> partitions;
  std::string workdir = "/tmp";  ///< the batch script's working directory
  /// Variables every job's environment starts with (PATH, SLURM_CONF, ...).
  std::map<std::string, std::string> environment;
  /// The cluster's name in GET /v1/systems.
  std::string cluster = "slurm";
  /// Where jobs write their stdout and stderr for GET /v1/jobs/{id}/output: a folder shared
  /// with the compute nodes, sticky and writable by all, whose default ACL lets berthd read
  /// (docs/gateway.md); "" keeps no output.
  std::string output_dir;
  /// Idle-GPU reclaim ([reclaim]): GPU jobs sample their GPUs beside their output (output_dir
  /// is needed), berthd flags, and with `cancel`, cancels, those idle for the policy's time.
  bool reclaim = false;
  ReclaimPolicy reclaim_policy;
  std::string reclaim_berth = "berth";  ///< the berth program on the compute nodes
  ShareConfig share;                    ///< [share]
  /// The types of [gpu_models] (PublishConfig::gpu_models), which a job's
  /// resources.gpu_model may name.
  std::vector<std::string> gpu_models;
  /// A dry run's start_estimate (start_estimate, sbatch, slurm_conf, estimate_timeout_s).
  StartEstimateConfig estimate;
};

/// What GET /v1/resources knows of one GPU model beyond Slurm's count ([gpu_models.TYPE], TYPE
/// being the GRES type of gpu:TYPE:N). Empty fields are left out of the document.
struct GpuModelConfig {
  std::string vendor, model, driver_version, cuda_version;
  int64_t memory_mb = 0;
};

/// GET /v1/resources and /metrics ([resources] and top-level keys).
struct PublishConfig {
  /// GET /v1/resources without a token (an information system's fetch); slurmrestd is then
  /// asked as `public_user`, a local account of no privilege.
  bool resources_public = false;
  std::string public_user;
  int64_t resources_cache_s = 15;  ///< how long one answer from Slurm is served again
  std::string host = "localhost";  ///< this gateway's public name, in the GLUE IDs
  /// This gateway's public base URL, published as GLUE's ComputingEndpoint; "" for none.
  std::string url;
  /// Whether the nodes are on InfiniBand (GLUE's NetworkInfo, what a broker's
  /// resources.infiniband asks for); every node alike.
  bool infiniband = false;
  std::map<std::string, GpuModelConfig> gpu_models;
  /// The GPUs one job may ask for as GLUE's MaxSlotsPerJob: [limits] max_gpus_per_job (the
  /// default every account has); -1 when it is not set.
  int max_gpus_per_job = -1;
  /// The partitions published as GLUE's ComputingShares: [slurm] partitions (those a job may
  /// name, so that a broker never chooses one the gateway refuses); empty: every partition.
  std::vector<std::string> partitions;
  bool metrics_public = false;  ///< GET /metrics without a token (else administrators only)
};

// --- h-authz: [accounts] and [connections] ---
/// Which local accounts a token may map to ([accounts]).
struct AccountsConfig {
  /// The uids jobs may run as (login.defs' UID_MIN and UID_MAX): system accounts below,
  /// nobody (65534) above.
  int64_t uid_min = 1000;
  int64_t uid_max = 60000;
  /// Lets tokens map to berthd's own account. Only for a test rig where berthd and the jobs
  /// share one account; never on a site (a job could read Slurm's JWT key).
  bool allow_own_account = false;
};

/// What one client may hold of berthd's connections ([connections]).
struct ConnectionsConfig {
  /// The time a request's headers and body have to arrive, from its first byte.
  int64_t request_timeout_s = 30;
  /// How long an idle keep-alive connection (or a new one) waits for a request's first byte.
  int64_t idle_timeout_s = 5;
  /// Connections open at once from one client address; more are closed at once.
  int64_t max_per_address = 32;
  /// Connections accepted but waiting for a worker thread; more are answered 503.
  int64_t max_queued = 256;
};
// --- end h-authz ---

/// One site a broker places jobs on ([[broker.sites]], docs/broker.md).
struct BrokerSiteConfig {
  std::string name;
  /// berthd, kubernetes, marathon, chronos, openstack or static (a site only described)
  std::string kind = "berthd";
  std::string url;  ///< berthd's base URL, or the API server's (required but for static)
  /// The `aud` the site's tokens need: a forwarded token must name it, an exchanged one is
  /// asked for it; "" (forward only) for the caller's token as it is.
  std::string audience;
  std::string token = "forward";          ///< "forward" (the caller's own) or "exchange" (RFC 8693)
  double weight = 1;                      ///< the site's preference; per group in `weights`
  std::map<std::string, double> weights;  ///< group -> weight, over `weight`
  std::vector<std::string> groups;        ///< the token groups that may use it; empty: all
  /// For a site other than berthd: what it has, a GLUE 2.1 JSON file or a cloud-info-provider
  /// CMDB JSON file (broker/site_info.h).
  std::string resources;
  int64_t info_ttl_s = 300;  ///< what the site published is stale after this long
  bool shares = false;       ///< takes fractions of a GPU
  bool gpu_jobs = true;      ///< its backend runs GPU jobs (Marathon, Chronos: say so)
  /// A berthd site is asked for a dry run of the job on its best class before it is chosen
  /// (its own limits and start estimate); false: chosen on what it published only.
  bool dry_run = true;
  /// What its manifests need beyond the node class (namespace, runtime_class, gpu_resource,
  /// mesos_gpu_attribute, disk_mb, chronos_gpus, image_ref, network_id, key_name); an
  /// OpenStack site's flavours are its node classes.
  broker::SiteOptions manifest;
};

/// The broker mode ([broker]): berthd chooses among sites for each job.
struct BrokerConfig {
  bool enabled = false;
  std::vector<BrokerSiteConfig> sites;
  /// [broker.score]: how much each factor counts (broker/placement.h's ScoreWeights).
  double score_start_now = 3, score_wait = 2, score_free = 1, score_fit = 1, score_preference = 2,
         score_reliability = 1;
  /// The site named `name`, or nullptr.
  const BrokerSiteConfig* find_site(std::string_view name) const;
};

struct GatewayConfig {
  std::string path;  ///< the file read, named in errors
  std::string listen_host = "127.0.0.1";
  int listen_port = 8080;
  /// Plain HTTP on an address other than loopback; without it berthd refuses to start so.
  bool plain_http_anywhere = false;
  std::string tls_cert;  ///< PEM certificate (chain); with tls_key, berthd speaks HTTPS
  std::string tls_key;
  int64_t leeway_s = 60;  ///< clock skew allowed on exp and nbf
  /// The shortest time between two JWKS fetches of one issuer for an unknown kid.
  int64_t jwks_min_refresh_s = 30;
  std::vector<std::string> admin_groups;  ///< a member of any is an administrator
  std::vector<IssuerConfig> issuers;
  std::vector<UserMapping> users;
  /// The job database's file; with [slurm], the job endpoints; with [broker] and no [slurm],
  /// the broker's jobs.
  std::string database;
  SlurmConfig slurm;
  /// Seconds between two reconciliations of the database with Slurm; 0: only at start.
  int64_t reconcile_interval_s = 30;
  /// Limits on jobs per account ([limits], gateway/limits.h).
  LimitsConfig limits;
  /// GPU-hour budgets per group and period ([quotas], gateway/quotas.h).
  QuotaConfig quotas;
  /// Where usage is read from, and the account jobs are charged to ([accounting],
  /// gateway/sacct.h).
  AccountingConfig accounting;
  /// The audit log's file (gateway/audit.h); "" for none.
  std::string audit_log;
  PublishConfig publish;
  AccountsConfig accounts;        ///< [accounts] (h-authz)
  ConnectionsConfig connections;  ///< [connections] (h-authz)
  BrokerConfig broker;            ///< [broker] and [[broker.sites]]

  /// Whether the job endpoints are on (database and [slurm] both configured).
  bool jobs() const { return !database.empty() && !slurm.rest_url.empty(); }

  /// The issuer whose `issuer` is exactly `iss`, or nullptr.
  const IssuerConfig* find_issuer(std::string_view iss) const;
  /// Whether berthd serves HTTPS.
  bool tls() const { return !tls_cert.empty(); }
};

/// Parses the TOML text of berthd's configuration `path` (which names it in errors) and checks
/// it: at least one issuer, each with an audience; listen is "HOST:PORT"; tls_cert and tls_key
/// together; plain HTTP off loopback only with plain_http_anywhere.
Result<GatewayConfig> parse_gateway_config(std::string_view text, const std::string& path);

/// Reads and parses the configuration file at `path`.
Result<GatewayConfig> read_gateway_config(const std::string& path);

/// Whether `host` (a listen address) is a loopback address: 127.0.0.0/8, ::1 or "localhost".
bool is_loopback_host(std::string_view host);

}  // namespace berth::gateway
