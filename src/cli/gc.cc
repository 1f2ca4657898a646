// berth gc [--dry-run] [--json] [--timeout S]: removes what killed or refused commands left
// behind (image/gc.h), safely while other berth processes run.
#include <array>
#include <cstdio>
#include <memory>

#include "cli/context.h"
#include "core/progress.h"
#include "core/safe_text.h"
#include "image/gc.h"
#include "site/central_store.h"

namespace berth::cli {
namespace {

/// What gc says of `n` leftovers of a kind: "unused blob" / "unused blobs".
std::string kind_phrase(LeftoverKind k, size_t n) {
  static constexpr std::array<std::pair<const char*, const char*>, 7> kPhrases = {{
      {"unused blob", "unused blobs"},
      {"interrupted download", "interrupted downloads"},
      {"abandoned staging folder", "abandoned staging folders"},
      {"half-created or half-removed container", "half-created or half-removed containers"},
      {"leftover temporary file", "leftover temporary files"},
      {"dangling container name", "dangling container names"},
      {"stale central store verdict", "stale central store verdicts"},
  }};
  const auto& [one, many] = kPhrases[static_cast<size_t>(k)];
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

nlohmann::json leftover_json(const Leftover& l) {
  nlohmann::json j = {{"kind", leftover_kind_word(l.kind)}, {"path", l.path}, {"bytes", l.bytes}};
  if (!l.digest.empty()) j["digest"] = l.digest;
  return j;
}

}  // namespace

Action setup_gc(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    bool dry_run = false, json = false;
    int timeout = 0;
  };
  auto o = std::make_shared<Opts>();
  app.add_flag("-n,--dry-run", o->dry_run, "Say what would be removed; remove nothing");
  app.add_flag("--json", o->json, "Print what was removed as JSON");
  app.add_option("--timeout", o->timeout,
                 "Give up after this many seconds when pulls or imports hold the store "
                 "(default: wait)");
  return [o, &g]() -> Status {
    Store store = BERTH_TRY(open_store(g));
    ContainerStore containers = BERTH_TRY(open_containers(g));
    // Things with an owner's lock first (never waiting), then the blobs under the sweep lock.
    std::vector<Leftover> found = BERTH_TRY(sweep_tmp(store, o->dry_run));
    std::vector<Leftover> more = BERTH_TRY(containers.sweep(o->dry_run));
    found.insert(found.end(), more.begin(), more.end());
    const SiteConfig& site = BERTH_TRY(g.site);
    more = BERTH_TRY(sweep_central_verdicts(site, store, o->dry_run));
    found.insert(found.end(), more.begin(), more.end());
    {
      FileLock sweep = BERTH_TRY(wait_for_sweep_lock(g, store, "gc", o->timeout));
      std::vector<Leftover> blobs = BERTH_TRY(unreferenced_blob_files(store));
      if (!o->dry_run) BERTH_CHECK(remove_blobs(blobs, sweep));
      found.insert(found.begin(), blobs.begin(), blobs.end());
    }

    std::vector<Leftover> gone, busy;
    for (Leftover& l : found) (l.in_use ? busy : gone).push_back(std::move(l));
    int64_t total = 0;
    for (const Leftover& l : gone) total += l.bytes;
    if (o->json) {
      nlohmann::json removed = nlohmann::json::array(), in_use = nlohmann::json::array();
      for (const Leftover& l : gone) removed.push_back(leftover_json(l));
      for (const Leftover& l : busy) in_use.push_back(leftover_json(l));
      print_json({{"dry_run", o->dry_run},
                  {"removed", removed},
                  {"in_use", in_use},
                  {"count", gone.size()},
                  {"bytes", total}});
      return {};
    }
    if (g.quiet) return {};
    for (size_t k = 0; k <= static_cast<size_t>(LeftoverKind::kVerdict); ++k) {
      size_t n = 0;
      int64_t bytes = 0;
      for (const Leftover& l : gone)
        if (static_cast<size_t>(l.kind) == k) ++n, bytes += l.bytes;
      if (n == 0) continue;
      std::printf("%s %s: %s\n", o->dry_run ? "Would delete" : "Deleted",
                  kind_phrase(static_cast<LeftoverKind>(k), n).c_str(), human_size(bytes).c_str());
      if (g.verbose)
        for (const Leftover& l : gone)
          if (static_cast<size_t>(l.kind) == k) std::printf("  %s\n", safe_text(l.path).c_str());
    }
    if (!busy.empty()) {
      std::printf("Left alone, in use by a running berth: %zu\n", busy.size());
      if (g.verbose)
        for (const Leftover& l : busy) std::printf("  %s\n", safe_text(l.path).c_str());
    }
    std::printf("Total %s space: %s\n", o->dry_run ? "reclaimable" : "reclaimed",
                human_size(total).c_str());
    return {};
  };
}

}  // namespace berth::cli
