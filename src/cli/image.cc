// berth image prune [-a] [-f] [--json]: removes images nothing needs, as `docker image prune`.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <set>

#include "cli/context.h"
#include "core/progress.h"
#include "image/gc.h"

namespace berth::cli {
namespace {

/// Asks on the terminal, as Docker does; a script says -f.
Status confirm(bool all) {
  if (!::isatty(STDIN_FILENO))
    return make_error("image prune", "", "not confirmed: standard input is not a terminal")
        .with_hint("use -f to prune without asking");
  std::fprintf(stderr, "WARNING! This will remove %s.\nAre you sure you want to continue? [y/N] ",
               all ? "all images not used by a container (protected ones excepted)"
                   : "all dangling images (recorded by digest only, no tag)");
  std::fflush(stderr);
  std::string answer;
  std::getline(std::cin, answer);
  if (answer == "y" || answer == "Y" || answer == "yes") return {};
  return make_error("image prune", "", "not confirmed: nothing removed");
}

}  // namespace

Action setup_image(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    bool all = false, force = false, json = false;
    int timeout = 0;
  };
  auto o = std::make_shared<Opts>();
  app.require_subcommand(1);
  CLI::App* prune = app.add_subcommand(
      "prune",
      "Remove dangling images (recorded by digest only), or with -a every image no container "
      "uses; protected images never; then the blobs no image uses");
  prune->add_flag("-a,--all", o->all, "Remove every image no container uses, not only dangling");
  prune->add_flag("-f,--force", o->force, "Do not ask for confirmation");
  prune->add_flag("--json", o->json, "Print what was removed as JSON");
  prune->add_option("--timeout", o->timeout,
                    "Give up after this many seconds when pulls or imports hold the store "
                    "(default: wait)");
  return [o, &g]() -> Status {
    Store store = BERTH_TRY(open_store(g));
    ContainerStore containers = BERTH_TRY(open_containers(g));
    if (!o->force) BERTH_CHECK(confirm(o->all));
    // Under the sweep lock no create is unpacking: the containers listed are all there are.
    FileLock sweep = BERTH_TRY(wait_for_sweep_lock(g, store, "image prune", o->timeout));
    std::set<std::string> used;
    for (const ContainerRecord& c : BERTH_TRY(containers.list())) used.insert(c.image_id);
    std::vector<ImageRecord> images = BERTH_TRY(store.list_images());
    std::vector<ImageRecord> doomed = prune_candidates(images, used, o->all);

    // What the records' removal frees: their blobs no remaining record uses, sized now.
    std::set<std::string> doomed_names;
    for (const ImageRecord& r : doomed) doomed_names.insert(r.name);
    std::vector<ImageRecord> kept;
    std::vector<std::string> their_blobs;
    for (const ImageRecord& r : images) {
      if (doomed_names.count(r.name)) {
        for (std::string& d : image_blobs(r)) their_blobs.push_back(std::move(d));
      } else {
        kept.push_back(r);
      }
    }
    int64_t bytes = 0;
    for (const std::string& d : unreferenced_blobs(their_blobs, kept))
      bytes += tree_size(store.blob_path(d));
    size_t blobs = 0;
    for (const ImageRecord& r : doomed)
      blobs += BERTH_TRY(store.remove_image(r.name, &sweep)).blobs_deleted;
    // Then the blobs no image used before (a killed pull's, a refused one's).
    std::vector<Leftover> unused = BERTH_TRY(unreferenced_blob_files(store));
    BERTH_CHECK(remove_blobs(unused, sweep));
    blobs += unused.size();
    for (const Leftover& l : unused) bytes += l.bytes;

    if (o->json) {
      nlohmann::json names = nlohmann::json::array();
      for (const ImageRecord& r : doomed) names.push_back(r.name);
      print_json({{"untagged", names}, {"blobs_deleted", blobs}, {"bytes", bytes}});
      return {};
    }
    if (g.quiet) return {};
    for (const ImageRecord& r : doomed) std::printf("Untagged: %s\n", r.name.c_str());
    std::printf("Deleted: %zu blobs\n", blobs);
    std::printf("Total reclaimed space: %s\n", human_size(bytes).c_str());
    return {};
  };
}

}  // namespace berth::cli
