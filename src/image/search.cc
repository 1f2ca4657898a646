#include "image/search.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <functional>

#include "core/json.h"
#include "core/strings.h"
#include "image/http.h"

namespace berth {

namespace {

using nlohmann::json;

constexpr int kMaxCatalogPages = 100;
constexpr const char* kDockerHubIndex = "https://index.docker.io";

/// The next page's path from a Link header: `</v2/_catalog?last=x&n=100>; rel="next"`; "" when
/// there is none. A link to another origin than `base` (the registry's scheme://host[:port]) is
/// refused rather than followed, as the distribution client resolves it against the registry
/// and never leaves it: the registry's credentials and trust stay with the registry.
Result<std::string> next_page(const std::string& link, const std::string& base) {
  size_t open = link.find('<'), close = link.find('>');
  if (open == std::string::npos || close == std::string::npos || close < open) return std::string();
  if (link.find("rel=\"next\"") == std::string::npos) return std::string();
  std::string target = link.substr(open + 1, close - open - 1);
  if (size_t scheme = target.find("://"); scheme != std::string::npos) {
    size_t path = target.find('/', scheme + 3);
    std::string origin = target.substr(0, path);
    if (origin != base)
      return make_error("GET", base + "/v2/_catalog",
                        "the next page's link leads to " + origin +
                            ", not this registry; not "
                            "following it");
    target = path == std::string::npos ? std::string("/") : target.substr(path);
  }
  return target.starts_with("/v2/_catalog") ? target : std::string();
}

/// GET /v2/_catalog, every page; nullopt when the registry does not offer it.
Result<std::optional<std::vector<std::string>>> catalog(RegistryClient& client) {
  std::vector<std::string> repos;
  std::string path = "/v2/_catalog?n=1000";
  for (int page = 0; page < kMaxCatalogPages && !path.empty(); ++page) {
    ApiResponse r = BERTH_TRY(client.get_api(path, "registry:catalog:*"));
    if (r.status == 404 || r.status == 405 || r.status == 401 || r.status == 403)
      return std::optional<std::vector<std::string>>();
    if (r.status != 200)
      return http_error("GET", client.base_url() + path, static_cast<int>(r.status),
                        "unexpected response");
    json j = parse_json_or_discarded(r.body);
    if (!j.is_object() || !j.contains("repositories") || !j["repositories"].is_array())
      return std::optional<std::vector<std::string>>();  // not a catalog: some other service
    for (const auto& name : j["repositories"])
      if (name.is_string()) repos.push_back(name.get<std::string>());
    path = BERTH_TRY(next_page(r.link, client.base_url()));
  }
  return std::optional<std::vector<std::string>>(std::move(repos));
}

/// Fetches a path of the search API.
using Fetch = std::function<Result<ApiResponse>(const std::string& path)>;

/// GET /v1/search?q=; nullopt when the registry does not offer it.
Result<std::optional<std::vector<SearchHit>>> v1_search(const Fetch& fetch, const std::string& term,
                                                        size_t limit) {
  std::string path = "/v1/search?q=" + url_escape(term) + "&n=" + std::to_string(limit);
  ApiResponse r = BERTH_TRY(fetch(path));
  json j = r.status == 200 ? parse_json_or_discarded(r.body) : json();
  if (!j.is_object() || !j.contains("results") || !j["results"].is_array())
    return std::optional<std::vector<SearchHit>>();
  std::vector<SearchHit> hits;
  for (const auto& item : j["results"]) {
    if (!item.is_object() || !item.contains("name") || !item["name"].is_string()) continue;
    SearchHit h;
    h.name = item["name"].get<std::string>();
    if (item.contains("description") && item["description"].is_string())
      h.description = item["description"].get<std::string>();
    if (item.contains("star_count") && item["star_count"].is_number_integer())
      h.stars = item["star_count"].get<int>();
    h.official = item.contains("is_official") && item["is_official"].is_boolean() &&
                 item["is_official"].get<bool>();
    hits.push_back(std::move(h));
    if (hits.size() >= limit) break;
  }
  return std::optional<std::vector<SearchHit>>(std::move(hits));
}

}  // namespace

std::pair<std::string, std::string> split_search_term(std::string_view term) {
  size_t slash = term.find('/');
  if (slash != std::string_view::npos) {
    std::string_view first = term.substr(0, slash);
    if (first.find_first_of(".:") != std::string_view::npos || first == "localhost")
      return {std::string(first), std::string(term.substr(slash + 1))};
  }
  return {"docker.io", std::string(term)};
}

std::vector<std::string> filter_catalog(const std::vector<std::string>& repositories,
                                        std::string_view term, size_t limit) {
  std::string want = lower(term);
  std::vector<std::string> out;
  for (const std::string& r : repositories)
    if (lower(r).find(want) != std::string::npos) out.push_back(r);
  std::sort(out.begin(), out.end());
  if (out.size() > limit) out.resize(limit);
  return out;
}

Result<std::vector<SearchHit>> search_registry(RegistryClient& client, const std::string& registry,
                                               const std::string& term, size_t limit) {
  if (registry == "docker.io") {
    // Docker Hub offers no catalog; its search lives on the index host, not the registry's.
    Fetch hub = [](const std::string& path) -> Result<ApiResponse> {
      HttpRequest req;
      req.url = std::string(kDockerHubIndex) + path;
      HttpResponse r = BERTH_TRY(http_perform(req));
      return ApiResponse{r.status, std::move(r.body), ""};
    };
    auto hits = BERTH_TRY(v1_search(hub, term, limit));
    if (hits) return std::move(*hits);
    return make_error("search", kDockerHubIndex, "unexpected answer from Docker Hub's search");
  }
  auto repos = BERTH_TRY(catalog(client));
  if (repos) {
    std::vector<SearchHit> hits;
    for (const std::string& name : filter_catalog(*repos, term, limit))
      hits.push_back({fmt::format("{}/{}", registry, name), "", -1, false});
    return hits;
  }
  Fetch fetch = [&](const std::string& path) { return client.get_api(path, ""); };
  auto hits = BERTH_TRY(v1_search(fetch, term, limit));
  if (hits) return std::move(*hits);
  return make_error("search", registry,
                    "the registry offers no search: neither /v2/_catalog nor /v1/search");
}

}  // namespace berth
