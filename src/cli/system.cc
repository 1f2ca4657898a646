// berth system df [-v] [--json]: what the store holds and what could be reclaimed, as
// `docker system df`; every blob counted once, however many images share it.
#include <cstdio>
#include <map>
#include <memory>
#include <set>

#include "cli/context.h"
#include "core/progress.h"
#include "image/gc.h"

namespace berth::cli {
namespace {

/// One row of the table.
struct Usage {
  size_t total = 0, active = 0;
  int64_t size = 0, reclaimable = 0;
  nlohmann::json items = nlohmann::json::array();

  nlohmann::json json() const {
    return {{"total", total},
            {"active", active},
            {"size", size},
            {"reclaimable", reclaimable},
            {"items", items}};
  }
  std::vector<std::string> row(const char* type) const {
    return {type, std::to_string(total), std::to_string(active), human_size(size),
            size_with_share(reclaimable, size)};
  }
};

}  // namespace

Action setup_system(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    bool verbose = false, json = false;
  };
  auto o = std::make_shared<Opts>();
  app.require_subcommand(1);
  CLI::App* df = app.add_subcommand(
      "df",
      "Show the space images, containers, unused blobs and staging take, and what "
      "'berth image prune -a', 'berth rm' and 'berth gc' could reclaim");
  df->add_flag("-v,--verbose", o->verbose, "Show each image, container and leftover");
  df->add_flag("--json", o->json, "Print JSON (sizes in bytes, every item listed)");
  return [o, &g]() -> Status {
    Store store = BERTH_TRY(open_store(g));
    ContainerStore cs = BERTH_TRY(open_containers(g));
    std::vector<ContainerRecord> containers = BERTH_TRY(cs.list());
    std::vector<ImageRecord> images = BERTH_TRY(store.list_images());

    // Images: each blob once. Reclaimable: what `image prune -a` frees (the blobs of images
    // neither used by a container nor protected that no such image shares).
    std::set<std::string> used_ids;
    for (const ContainerRecord& c : containers) used_ids.insert(c.image_id);
    std::map<std::string, int64_t> blob_size;
    std::map<std::string, size_t> users;  // records using each blob
    for (const ImageRecord& r : images) {
      std::vector<std::string> blobs = image_blobs(r);
      for (const std::string& d : std::set<std::string>(blobs.begin(), blobs.end())) {
        if (!blob_size.count(d)) blob_size[d] = tree_size(store.blob_path(d));
        ++users[d];
      }
    }
    Usage img;
    std::set<std::string> ids, active_ids;
    std::vector<ImageRecord> keep;
    std::vector<std::string> all_blobs;
    for (const auto& [d, size] : blob_size) {
      img.size += size;
      all_blobs.push_back(d);
    }
    std::vector<std::vector<std::string>> image_rows = {
        {"REPOSITORY", "TAG", "IMAGE ID", "SIZE", "SHARED SIZE", "UNIQUE SIZE", "CONTAINERS"}};
    for (const ImageRecord& r : images) {
      ids.insert(r.config_digest);
      size_t n = 0;
      for (const ContainerRecord& c : containers) n += c.image_id == r.config_digest;
      if (n > 0) active_ids.insert(r.config_digest);
      if (n > 0 || r.is_protected) keep.push_back(r);
      std::vector<std::string> blobs = image_blobs(r);
      std::set<std::string> mine(blobs.begin(), blobs.end());
      int64_t size = 0, unique = 0;
      for (const std::string& d : mine) {
        size += blob_size[d];
        if (users[d] == 1) unique += blob_size[d];
      }
      img.items.push_back({{"name", r.name},
                           {"id", r.config_digest},
                           {"size", size},
                           {"shared_size", size - unique},
                           {"unique_size", unique},
                           {"containers", n},
                           {"protected", r.is_protected}});
      auto [repo, tag] = image_repo_and_tag(r.name);
      image_rows.push_back({repo, tag, r.short_id(), human_size(size), human_size(size - unique),
                            human_size(unique), std::to_string(n)});
    }
    img.total = ids.size();
    img.active = active_ids.size();
    for (const std::string& d : unreferenced_blobs(all_blobs, keep))
      img.reclaimable += blob_size[d];

    // Containers: the folder of each; reclaimable: those neither running nor protected.
    Usage con;
    std::vector<std::vector<std::string>> container_rows = {
        {"CONTAINER ID", "IMAGE", "SIZE", "STATUS", "NAMES"}};
    for (const ContainerRecord& c : containers) {
      int64_t size = tree_size(cs.dir(c));
      ++con.total;
      con.active += c.running;
      con.size += size;
      if (!c.running && !c.is_protected) con.reclaimable += size;
      std::string status = c.running ? "running" : c.last_exit ? "exited" : "created";
      con.items.push_back({{"id", c.id},
                           {"names", c.names},
                           {"image", c.image},
                           {"size", size},
                           {"status", status},
                           {"protected", c.is_protected}});
      std::string names;
      for (const std::string& n : c.names) names += (names.empty() ? "" : ",") + n;
      container_rows.push_back({c.short_id(), c.image, human_size(size), status, names});
    }

    // Blobs no record names: a pull, import or load in progress may be about to name them.
    Usage unused;
    bool busy = !BERTH_TRY(store.sweep_lock(false)).held();
    for (const Leftover& l : BERTH_TRY(unreferenced_blob_files(store))) {
      ++unused.total;
      unused.size += l.bytes;
      if (busy)
        ++unused.active;
      else
        unused.reclaimable += l.bytes;
      unused.items.push_back(
          {{"digest", l.digest}, {"path", l.path}, {"size", l.bytes}, {"in_use", busy}});
    }
    // Staging and other leftovers, looked at (dry run) as gc would.
    Usage staging;
    std::vector<Leftover> left = BERTH_TRY(sweep_tmp(store, true));
    std::vector<Leftover> more = BERTH_TRY(cs.sweep(true));
    left.insert(left.end(), more.begin(), more.end());
    std::vector<std::vector<std::string>> staging_rows = {{"PATH", "KIND", "SIZE", "IN USE"}};
    for (const Leftover& l : left) {
      ++staging.total;
      staging.size += l.bytes;
      if (l.in_use)
        ++staging.active;
      else
        staging.reclaimable += l.bytes;
      staging.items.push_back({{"kind", leftover_kind_word(l.kind)},
                               {"path", l.path},
                               {"size", l.bytes},
                               {"in_use", l.in_use}});
      staging_rows.push_back({l.path, std::string(leftover_kind_word(l.kind)), human_size(l.bytes),
                              l.in_use ? "yes" : "no"});
    }

    if (o->json) {
      print_json({{"images", img.json()},
                  {"containers", con.json()},
                  {"unused_blobs", unused.json()},
                  {"staging", staging.json()}});
      return {};
    }
    print_table({{"TYPE", "TOTAL", "ACTIVE", "SIZE", "RECLAIMABLE"},
                 img.row("Images"),
                 con.row("Containers"),
                 unused.row("Unused blobs"),
                 staging.row("Staging")});
    if (o->verbose) {
      std::printf("\nImages space usage:\n\n");
      print_table(image_rows);
      std::printf("\nContainers space usage:\n\n");
      print_table(container_rows);
      std::printf("\nLeftovers ('berth gc' removes those not in use):\n\n");
      print_table(staging_rows);
    }
    return {};
  };
}

}  // namespace berth::cli
