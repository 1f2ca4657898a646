// `berth search`: finding repositories on a registry without pulling.
//
// A registry that offers the catalog (GET /v2/_catalog, distribution's registry does) is
// searched by filtering its repository names; one with Docker Hub's search API (GET
// /v1/search?q=) is asked directly. A registry offering neither gets one clear error.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "image/registry.h"

namespace berth {

struct SearchHit {
  std::string name;         ///< "127.0.0.1:5000/e2e/busybox", or Docker Hub's "library/alpine"
  std::string description;  ///< from /v1/search only
  int stars = -1;           ///< -1 when the registry does not say
  bool official = false;
};

/// The registry a term names and the words to look for: "host:5000/busy" gives
/// {"host:5000", "busy"}; a term without a registry part searches docker.io.
std::pair<std::string, std::string> split_search_term(std::string_view term);

/// The repository names that contain `term` (case-insensitive), at most `limit`, sorted.
std::vector<std::string> filter_catalog(const std::vector<std::string>& repositories,
                                        std::string_view term, size_t limit);

/// Searches `registry` (through `client`, made for it) for `term`.
Result<std::vector<SearchHit>> search_registry(RegistryClient& client, const std::string& registry,
                                               const std::string& term, size_t limit);

}  // namespace berth
