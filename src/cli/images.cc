// berth images [--json] [-q], berth inspect IMAGE|CONTAINER|FILE.sqsh, berth rmi IMAGE..., berth
// tag SOURCE TARGET
#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>
#include <optional>
#include <set>

#include "cli/context.h"
#include "core/json.h"
#include "core/progress.h"
#include "image/manifest.h"
#include "image/reference.h"
#include "site/central_store.h"

namespace berth::cli {
namespace {

/// How an image is kept: "layers" or "squashfs".
const char* format_of(const ImageRecord& rec) {
  return rec.squashed() ? "squashfs" : "layers";
}

nlohmann::json record_json(const ImageRecord& rec, bool central) {
  auto [repo, tag] = image_repo_and_tag(rec.name);
  return {{"name", rec.name},
          {"format", format_of(rec)},
          {"squash", rec.squash},
          {"store", central ? "central" : "user"},
          {"repository", repo},
          {"tag", tag},
          {"digest", rec.manifest_digest},
          {"index_digest", rec.index_digest},
          {"id", rec.config_digest},
          {"platform", rec.platform.str()},
          {"size", rec.size},
          {"layers", rec.layers},
          {"pulled", rec.pulled},
          {"protected", rec.is_protected}};
}

Result<nlohmann::json> parse_blob_json(const Store& store, const std::string& digest) {
  std::string text = BERTH_TRY(store.read_blob(digest));
  return parse_json(text, store.blob_path(digest));
}

}  // namespace

Action setup_images(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    bool json = false, quiet = false;
  };
  auto o = std::make_shared<Opts>();
  app.add_flag("--json", o->json, "Print a JSON array");
  app.add_flag("-q,--quiet", o->quiet, "Print image IDs only");
  return [o, &g]() -> Status {
    Store store = BERTH_TRY(open_store(g));
    std::vector<ImageRecord> images = BERTH_TRY(store.list_images());
    // Then the central store's images the user's store does not shadow by name.
    size_t own = images.size();
    const SiteConfig& site = BERTH_TRY(g.site);
    std::optional<Store> central = BERTH_TRY(open_central_store(site));
    if (central) {
      std::set<std::string> names;
      for (const auto& rec : images) names.insert(rec.name);
      for (auto& rec : BERTH_TRY(central->list_images()))
        if (!names.count(rec.name)) images.push_back(std::move(rec));
    }
    if (o->json) {
      nlohmann::json arr = nlohmann::json::array();
      for (size_t i = 0; i < images.size(); ++i) arr.push_back(record_json(images[i], i >= own));
      print_json(arr);
      return {};
    }
    if (o->quiet) {
      for (const auto& rec : images) std::printf("%s\n", rec.short_id().c_str());
      return {};
    }
    std::vector<std::vector<std::string>> rows = {
        {"REPOSITORY", "TAG", "IMAGE ID", "PLATFORM", "SIZE", "FORMAT"}};
    for (size_t i = 0; i < images.size(); ++i) {
      const ImageRecord& rec = images[i];
      auto [repo, tag] = image_repo_and_tag(rec.name);
      rows.push_back({repo, tag, rec.short_id(), rec.platform.str(), human_size(rec.size),
                      std::string(format_of(rec)) + (i >= own ? " (central)" : "")});
    }
    print_table(rows);
    return {};
  };
}

Action setup_inspect(CLI::App& app, const GlobalOptions& g) {
  auto name = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  app.add_option(
         "NAME", *name,
         "Container name or ID, image name, ID or digest, or a squashfs file (/... or ./...)")
      ->required();
  app.add_flag("--json", *json,
               "For a squashfs file: print JSON (containers and images always are)");
  auto format = std::make_shared<std::string>();
  app.add_option("-f,--format", *format,
                 "A Go template over the JSON, with Docker's field names too: "
                 "'{{.State.Status}}', '{{json .Config.Env}}' (see docs/docker.md)");
  auto type = std::make_shared<std::string>();
  app.add_option("--type", *type,
                 "Only this kind of object, as docker inspect --type: container or image (a "
                 "missing container is then \"no such container\")")
      ->check(CLI::IsMember({"container", "image"}));
  return [name, json, format, type, &g]() -> Status {
    if (type->empty() && looks_like_squash_path(*name)) return inspect_squash_file(*name, *json);
    // Containers first, as `docker inspect` does.
    ContainerStore cs = BERTH_TRY(open_containers(g));
    if (*type != "image") {
      auto c = cs.find(*name);
      if (c.ok()) {
        if (!format->empty()) return print_template(*format, container_template_view(cs, *c));
        print_json(container_json(cs, *c));
        return {};
      }
      if (*type == "container") return std::move(c).error();
    }
    Store own = BERTH_TRY(open_store(g));
    std::optional<FoundImage> found = BERTH_TRY(find_image_anywhere(g, own, *name));
    if (!found) return own.find_image(*name).error();  // the user's store's "no such image"
    const Store& store = found->store;
    const ImageRecord& rec = found->record;
    nlohmann::json manifest = BERTH_TRY(parse_blob_json(store, rec.manifest_digest));
    nlohmann::json config = BERTH_TRY(parse_blob_json(store, rec.config_digest));
    nlohmann::json layers = nlohmann::json::array();
    // The stored manifest was checked when it was pulled or loaded; still, read it without
    // trusting its types.
    if (auto ls = manifest.find("layers"); ls != manifest.end() && ls->is_array())
      for (const auto& l : *ls) {
        auto size = l.find("size");  // end() when `l` is not an object
        layers.push_back(
            {{"digest", string_field(l, "digest")},
             {"size", size != l.end() && size->is_number_integer() ? size->get<int64_t>() : 0},
             {"media_type", string_field(l, "mediaType")}});
      }
    nlohmann::json squash = nullptr;
    if (rec.squashed())
      squash = {{"digest", rec.squash},
                {"path", store.blob_path(rec.squash)},
                {"size", tree_size(store.blob_path(rec.squash))}};
    nlohmann::json j = {{"name", rec.name},
                        {"format", format_of(rec)},
                        {"store", found->central ? "central" : "user"},
                        {"squash", squash},
                        {"manifest_digest", rec.manifest_digest},
                        {"index_digest", rec.index_digest},
                        {"media_type", rec.manifest_media_type},
                        {"id", rec.config_digest},
                        {"platform",
                         {{"os", rec.platform.os},
                          {"architecture", rec.platform.architecture},
                          {"variant", rec.platform.variant}}},
                        {"size", rec.size},
                        {"pulled", rec.pulled},
                        {"protected", rec.is_protected},
                        {"layers", layers},
                        {"config", config},
                        {"manifest", manifest}};
    if (format->empty()) {
      print_json(j);
      return {};
    }
    // Docker's names for the same facts (docker image inspect's), for the template.
    j["Id"] = rec.config_digest;
    j["RepoTags"] = nlohmann::json::array({rec.name});
    j["RepoDigests"] = nlohmann::json::array();
    if (!rec.manifest_digest.empty()) {
      std::string repo = image_repo_and_tag(rec.name).first;
      j["RepoDigests"].push_back(repo + "@" + rec.manifest_digest);
    }
    j["Created"] = config.is_object() ? config.value("created", "") : "";
    j["Architecture"] = rec.platform.architecture;
    j["Os"] = rec.platform.os;
    j["Variant"] = rec.platform.variant;
    j["Size"] = rec.size;
    j["Config"] = docker_config_view(config.is_object() && config.contains("config")
                                         ? config["config"]
                                         : nlohmann::json::object());
    return print_template(*format, j);
  };
}

Action setup_rmi(CLI::App& app, const GlobalOptions& g) {
  auto names = std::make_shared<std::vector<std::string>>();
  app.add_option("IMAGE", *names, "Image names, IDs or digests")->required();
  return [names, &g]() -> Status {
    Store store = BERTH_TRY(open_store(g));
    for (const std::string& n : *names) {
      RemovedImages removed = BERTH_TRY(store.remove_image(n));
      for (const auto& r : removed.names) std::printf("Untagged: %s\n", r.c_str());
      std::printf("Deleted: %zu blobs\n", removed.blobs_deleted);
    }
    return {};
  };
}

Action setup_tag(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    std::string source, target;
  };
  auto o = std::make_shared<Opts>();
  app.add_option("SOURCE", o->source, "Image name, ID or digest")->required();
  app.add_option("TARGET", o->target, "New name: REPO[:TAG]")->required();
  return [o, &g]() -> Status {
    Store store = BERTH_TRY(open_store(g));
    BERTH_TRY(store.tag_image(o->source, o->target));
    return {};
  };
}

}  // namespace berth::cli
