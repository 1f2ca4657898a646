// berth search TERM, berth manifest inspect REF: asking a registry without pulling.
#include <cstdio>
#include <memory>

#include "cli/context.h"
#include "core/json.h"
#include "image/search.h"

namespace berth::cli {
namespace {

/// A client for `registry` with the stored credentials, if any.
Result<std::unique_ptr<RegistryClient>> client_for(const GlobalOptions& g,
                                                   const std::string& registry) {
  RegistryOptions opts = BERTH_TRY(registry_options_for(g, registry));
  CredentialStore creds = BERTH_TRY(CredentialStore::load());
  return std::make_unique<RegistryClient>(registry, opts, creds.find(registry));
}

}  // namespace

Action setup_search(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    std::string term;
    size_t limit = 25;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  app.add_option("TERM", o->term, "What to look for; [REGISTRY/]WORDS, e.g. 127.0.0.1:5000/busy")
      ->required();
  app.add_option("--limit", o->limit, "Show at most this many results (default 25)")
      ->check(CLI::Range(1, 10000));
  app.add_flag("--json", o->json, "Print a JSON array");
  return [o, &g]() -> Status {
    auto [registry, words] = split_search_term(o->term);
    auto client = BERTH_TRY(client_for(g, registry));
    std::vector<SearchHit> hits = BERTH_TRY(search_registry(*client, registry, words, o->limit));
    if (o->json) {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& h : hits)
        arr.push_back({{"name", h.name},
                       {"description", h.description},
                       {"stars", h.stars < 0 ? nlohmann::json(nullptr) : nlohmann::json(h.stars)},
                       {"official", h.official}});
      print_json(arr);
      return {};
    }
    std::vector<std::vector<std::string>> rows = {{"NAME", "DESCRIPTION", "STARS", "OFFICIAL"}};
    for (const auto& h : hits)
      rows.push_back({h.name, h.description, h.stars < 0 ? "" : std::to_string(h.stars),
                      h.official ? "[OK]" : ""});
    print_table(rows);
    return {};
  };
}

Action setup_manifest(CLI::App& app, const GlobalOptions& g) {
  app.require_subcommand(1);
  CLI::App* inspect =
      app.add_subcommand("inspect", "Show an image's manifest or index from its registry");
  struct Opts {
    std::string ref;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  inspect->add_option("IMAGE", o->ref, "Image reference")->required();
  inspect->add_flag("--json", o->json, "Pretty-print the JSON (as docker manifest inspect does)");
  return [o, &g]() -> Status {
    Reference ref = BERTH_TRY(parse_reference(o->ref));
    auto client = BERTH_TRY(client_for(g, ref.registry));
    FetchedManifest m = BERTH_TRY(client->get_manifest(ref.repository, ref.manifest_ref())
                                      .with_context("manifest inspect " + ref.str()));
    if (!o->json) {
      std::fwrite(m.body.data(), 1, m.body.size(), stdout);
      if (m.body.empty() || m.body.back() != '\n') std::fputc('\n', stdout);
      return {};
    }
    // Within parse_json's limits first; then again as ordered_json, to print the registry's
    // key order.
    auto j = parse_json_or_discarded(m.body).is_discarded()
                 ? nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded)
                 : nlohmann::ordered_json::parse(m.body, nullptr, false);
    if (j.is_discarded())
      return make_error("manifest inspect", ref.str(),
                        "the registry sent a manifest that is not JSON");
    std::printf("%s\n", to_text(j, 3).c_str());
    return {};
  };
}

}  // namespace berth::cli
