// berthd's broker mode ([broker], docs/broker.md): what each site of [[broker.sites]] has, as
// the broker last read it, and the answers built on it. A berthd site's GLUE document is
// fetched from its GET /v1/resources with the caller's own token (the site sees the real
// user) and kept for the site's info_ttl_s; any other site is described by a file (GLUE 2.1 or
// a cloud-info-provider CMDB document), read again when it changes. The decisions themselves
// are broker/placement.h's, pure; this class only gathers what they need.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "broker/placement.h"
#include "core/error.h"
#include "gateway/auth.h"
#include "gateway/config.h"
#include "gateway/token_exchange.h"

namespace berth::gateway {

/// What a site answered a broker's request (another kind's answer put in berthd's terms by
/// gateway/site_backends.h).
struct SiteAnswer {
  int status = 0;     ///< 0: no answer came
  bool sent = false;  ///< the request may have reached the site (false: no connection was made)
  std::string body;
  std::string content_type;
  std::string error;  ///< where no answer came, why, naming the URL
  /// The site was not asked: the broker had no token for it (BrokerService::token_for()).
  bool no_token = false;
};

/// `method` (GET, POST, DELETE) `path` of site `s`, with bearer `token` where given (in header
/// `token_header` as it is, where that is not "Authorization": OpenStack's X-Auth-Token), JSON
/// `body` and `idempotency_key` where given; certificates verified, no redirect followed, an
/// answer awaited at most `timeout_s`.
SiteAnswer call_site(const BrokerSiteConfig& s, std::string_view method, const std::string& path,
                     const std::string& token = "", const std::string& body = "",
                     const std::string& idempotency_key = "", time_t timeout_s = 5,
                     std::string_view token_header = "Authorization");

/// The message of berthd's error body ({"error": {"message"}}) in `body`, or "".
std::string site_error_message(const std::string& body);

class BrokerService {
 public:
  /// A caller's limits and quota at a site, as its GET /v1/me says; -1: none.
  struct CallerStanding {
    int max_gpus_per_job = -1;
    int64_t max_walltime_s = -1;
    double gpu_hours_left = -1;
  };
  /// `config` outlives the service, and so does `exchanger`, which sites of token =
  /// "exchange" need (without it, they get no token).
  explicit BrokerService(const BrokerConfig& config, TokenExchanger* exchanger = nullptr);

  /// The token site `s` is sent for the caller of access token `caller_token` (verified by
  /// the gateway already) at `now`. With token = "forward", the caller's own, which must name
  /// the site's audience in its `aud` where the site has one; with "exchange", one for the
  /// site's audience from the caller's issuer (TokenExchanger). An error says in one line why
  /// there is none: the site is then not asked at all.
  Result<std::string> token_for(const BrokerSiteConfig& s, const std::string& caller_token,
                                int64_t now);
  /// call_site() with token_for(`s`, `caller_token`) at the present time; where there is no
  /// token, an answer with no_token set and the reason in error, the site not asked.
  SiteAnswer call(const BrokerSiteConfig& s, std::string_view method, const std::string& path,
                  const std::string& caller_token, const std::string& body = "",
                  const std::string& idempotency_key = "", time_t timeout_s = 5);

  /// Reads every file-described site's resources; an error names the site and the file, so
  /// that berthd does not start on a description it cannot read.
  Status load();

  /// POST /v1/placements: the verdict on every site for job body `body` of caller `who`,
  /// whose bearer token `token` reads berthd sites. An error (kInvalidInput) is the body's.
  Result<nlohmann::json> placements(const nlohmann::json& body, const Account& who,
                                    const std::string& token, int64_t now);

  /// What place() decides for `body`: the job as read, and the verdict on every site.
  struct Decision {
    broker::BrokerJob job;
    broker::Placement placement;
    std::vector<broker::SiteView> sites;  ///< what the placement was decided on
  };
  Result<Decision> decide(const nlohmann::json& body, const Account& who, const std::string& token,
                          int64_t now);

  /// An answer with its HTTP status.
  struct Answer {
    int status = 200;
    nlohmann::json body;
  };
  /// POST /v1/manifests: for a job body whose placement.sites names one site, what would be
  /// sent there, on the class the broker would choose: {"site", "kind", "partition", "class",
  /// "manifest"}; 422 with the placements answer where no class of it fits. An error
  /// (kInvalidInput) for a body that is not a job or names not one site of [broker]; the
  /// manifest's own refusal (a GPU job on an upstream Chronos, no flavour) likewise.
  Result<Answer> manifest(const nlohmann::json& body, const Account& who, const std::string& token,
                          int64_t now);

  /// Counts one attempt at site `site`: `good` when the site took the job (and, read later, did
  /// not fail it on its nodes or keep it waiting past its time). A site's reliability factor
  /// is the share of good ones among its last kReliabilityWindow attempts (1 before any).
  void record_attempt(const std::string& site, bool good);
  static constexpr size_t kReliabilityWindow = 20;

  /// The node class `c` of `d` names, or nullptr.
  static const broker::NodeClass* class_of(const Decision& d, const broker::Candidate& c);
  /// What site `site` (candidate `c` of `d`) is sent for `d`'s job: broker/manifests.h's
  /// manifest_for its kind, on the candidate's class, with the site's options (an OpenStack
  /// site's flavours being the classes it published); the manifest's own refusal as an error.
  static Result<nlohmann::json> manifest_of(const Decision& d, const broker::Candidate& c,
                                            const BrokerSiteConfig& site);

  /// The sites as the caller sees them: for `berth sites` and GET /v1/sites.
  nlohmann::json sites(const Account& who, const std::string& token, int64_t now);

 private:
  /// What is known of one site.
  struct Known {
    broker::SiteInfo info;
    bool read = false;     ///< info holds a document
    int64_t read_at = 0;   ///< when it was fetched, or the file's modification time
    int64_t tried_at = 0;  ///< the last fetch tried
    bool up = true;        ///< the last fetch succeeded
    std::string error;     ///< why the last fetch failed
    /// What the site said of one caller, learnt from its answers.
    struct CallerWord {
      int64_t at = 0;       ///< when
      bool heard = false;   ///< it answered for the caller: took a token of theirs or refused it
      std::string refused;  ///< its reason for refusing the caller's token (401, 403)
      CallerStanding standing;  ///< what a berthd site says the caller stands under (GET /v1/me)
      /// Why the broker had no token for the caller at the site (token_for()): asked again
      /// at each of their requests, a failure never being kept.
      std::string no_token;
    };
    /// By caller (issuer and subject). A word older than the site's info_ttl_s is asked again
    /// at the caller's next request and then forgotten: a caller's standing (their quota left)
    /// is as fresh as the site's document, and only the callers of late are held.
    std::map<std::string, CallerWord> callers;
    /// The last attempts at the site, oldest first: whether each was good (record_attempt()).
    std::deque<bool> attempts;
    /// The issuers a berthd site says it trusts (GET /v1/health); nullopt where it does not.
    std::optional<std::vector<std::string>> trusted;
    bool dry_run = false;  ///< a berthd site says it answers dry runs (GET /v1/health)
  };
  /// Whether the site of `k` trusts `who`'s issuer, as far as it says.
  static bool trusts(const Known& k, const Account& who);
  /// What the site of `k` said of `who`, or nullptr.
  static const Known::CallerWord* word_of(const Known& k, const Account& who);
  /// Whether word `w` of site `s` is younger than the site's info_ttl_s (at least 1 s).
  static bool recent(const BrokerSiteConfig& s, const Known::CallerWord& w, int64_t now);
  /// Whether site `s`, known as `k`, must be read again for caller `who`: a berthd's
  /// document older than its ttl or a caller it has not been asked about, a file that changed.
  static bool stale(const BrokerSiteConfig& s, const Known& k, const Account& who, int64_t now);
  /// Reads again every site that is stale for `who`, in parallel.
  void bring_up_to_date(const Account& who, const std::string& token, int64_t now);
  /// Site `s` as caller `who` sees it, from what is known of it (`k`).
  static broker::SiteView view(const BrokerSiteConfig& s, const Known& k, const Account& who,
                               int64_t now);
  /// Fetches (with `who`'s token) or reads site `s`'s document into `k`.
  void refresh(const BrokerSiteConfig& s, Known& k, const Account& who, const std::string& token,
               int64_t now);
  /// Puts what a refresh of site `s` for the caller keyed `key` read (`read`, made from a copy
  /// of `live`) into `live`: the site's facts and that caller's word from the read, the other
  /// callers' words and the attempts as `live` has them now; words older than the ttl dropped.
  static void merge(const BrokerSiteConfig& s, Known& live, Known&& read, const std::string& key,
                    int64_t now);

  const BrokerConfig& config_;
  TokenExchanger* exchanger_;
  std::mutex mu_;
  std::map<std::string, Known> known_;  // by site name
};

}  // namespace berth::gateway
