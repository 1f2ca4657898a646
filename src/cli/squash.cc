// berth squash IMAGE|CONTAINER -o FILE.sqsh, and what `berth inspect FILE.sqsh` prints.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "cli/context.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/progress.h"
#include "image/squash.h"
#include "runtime/link_form.h"
#include "runtime/subids.h"
#include "site/policy.h"

namespace berth::cli {
namespace {

Result<nlohmann::json> read_config(const Store& store, const std::string& digest) {
  std::string text = BERTH_TRY(store.read_blob(digest));
  return parse_json(text, "image config " + digest);
}

/// The image config of a container: its image's, with the container's own "config" object
/// (which holds a command given at create); only that object when the image is gone.
nlohmann::json container_config(const Store& store, const ContainerRecord& c, std::string& digest) {
  nlohmann::json config = nlohmann::json::object();
  if (auto rec = store.find_image(c.image_id); rec.ok()) {
    digest = rec->manifest_digest;
    if (auto full = read_config(store, c.image_id); full.ok() && full->is_object()) config = *full;
  }
  config["config"] = c.image_config;
  return config;
}

void report(const GlobalOptions& g, bool json, const std::string& output, const SquashOptions& opts,
            const SquashStats& s, double seconds) {
  if (json) {
    print_json({{"output", output},
                {"compressor", opts.compressor},
                {"size", s.size},
                {"inodes", s.inodes},
                {"files", s.files},
                {"bytes", s.bytes},
                {"shadowed", s.shadowed},
                {"skipped_devices", s.skipped_devices},
                {"seconds", seconds}});
    return;
  }
  if (g.quiet) return;
  std::printf("%s: %llu inodes, %s (%s), %.1f s\n", output.c_str(),
              static_cast<unsigned long long>(s.inodes),
              human_size(static_cast<int64_t>(s.size)).c_str(), opts.compressor.c_str(), seconds);
}

}  // namespace

Action setup_squash(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    std::string name, output;
    std::string compressor;
    int level = 0;
    CLI::Option* compressor_given = nullptr;
    CLI::Option* level_given = nullptr;
    SquashOptions squash;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  app.add_option("NAME", o->name, "Image name, ID or digest, or container name or ID")->required();
  app.add_option("-o,--output", o->output, "The squashfs file to write (replaced when it exists)")
      ->required();
  o->compressor_given = app.add_option(
      "--compressor", o->compressor,
      "lz4 (default: fastest to build and to read), zstd or gzip; over the site's squash_options");
  o->level_given = app.add_option("--level", o->level, "Compression level: zstd 1-22, gzip 1-9");
  app.add_flag("--json", o->json, "Print what was written as JSON");
  return [o, &g]() -> Status {
    const SiteConfig& site = BERTH_TRY(g.site);
    SquashChoice cli;
    if (o->compressor_given->count() > 0) cli.compressor = o->compressor;
    if (o->level_given->count() > 0) cli.level = o->level;
    o->squash = BERTH_TRY(effective_squash_options(site, cli));
    auto start = std::chrono::steady_clock::now();
    auto seconds = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    Store store = BERTH_TRY(open_store(g));
    // Containers first, as inspect does.
    ContainerStore cs = BERTH_TRY(open_containers(g));
    if (auto c = cs.find(o->name); c.ok()) {
      std::string digest;
      nlohmann::json config = container_config(store, *c, digest);
      nlohmann::ordered_json meta = squash_metadata(c->image, digest, config);
      meta["container"] = {{"id", c->id}, {"names", c->names}};
      // The image's symlink form, whatever engine ran the container last (as export).
      FileLock held = BERTH_TRY(lock_canonical(cs, *c, "squash"));
      // Rootless, the files are ours on the host and root's inside: write what the container
      // sees (as export does; as root, host and container IDs are the same).
      // A container's files changed since the image was made: only SOURCE_DATE_EPOCH pins it.
      o->squash.made = reproducible_time(nlohmann::json());
      // Where the user has subordinate IDs, inside their namespace (as export): root there
      // reads every file and sees the IDs the container sees. The stats come back in a pipe.
      SquashStats s;
      int stats_pipe[2];
      if (::pipe2(stats_pipe, O_CLOEXEC) != 0) return sys_error("pipe", "squash");
      UniqueFd stats_r(stats_pipe[0]), stats_w(stats_pipe[1]);
      BERTH_CHECK(run_mapped([&]() -> Status {
        uid_t uid = ::geteuid() == 0 ? static_cast<uid_t>(-1) : ::geteuid();
        gid_t gid = ::geteuid() == 0 ? static_cast<gid_t>(-1) : ::getegid();
        SquashStats made =
            BERTH_TRY(squash_tree(cs.rootfs(*c), to_text(meta), o->squash, o->output, uid, gid)
                          .with_context("squash " + o->name));
        return write_all(stats_w.get(),
                         std::string_view(reinterpret_cast<const char*>(&made), sizeof made),
                         "squash");
      }));
      stats_w.reset();
      (void)!::read(stats_r.get(), &s, sizeof s);  // written whole above (a pipe's atomic size)
      report(g, o->json, o->output, o->squash, s, seconds());
      return {};
    }
    ImageRecord rec = BERTH_TRY(store.find_image(o->name));
    FileLock pinned = BERTH_TRY(store.pin());  // rmi waits: no blob goes while it is read
    if (rec.squashed()) {  // pulled --squash: the file is made already (its compressor)
      SquashStats s = BERTH_TRY(copy_squash_file(store.blob_path(rec.squash), o->output)
                                    .with_context("squash " + rec.name));
      SquashOptions made = o->squash;
      made.compressor = BERTH_TRY(read_squash_info(o->output)).compressor;
      report(g, o->json, o->output, made, s, seconds());
      return {};
    }
    nlohmann::json config = BERTH_TRY(read_config(store, rec.config_digest));
    std::vector<LayerInput> layers = BERTH_TRY(store.layer_inputs(rec, "squash"));
    std::string meta = to_text(squash_metadata(rec.name, rec.manifest_digest, config));
    o->squash.made = reproducible_time(config);  // the same image squashes to the same bytes
    SquashStats s = BERTH_TRY(
        squash_layers(layers, meta, o->squash, o->output).with_context("squash " + rec.name));
    report(g, o->json, o->output, o->squash, s, seconds());
    return {};
  };
}

bool looks_like_squash_path(const std::string& name) {
  return name.starts_with('/') || name.starts_with('.');
}

Status inspect_squash_file(const std::string& path, bool json) {
  SquashInfo info = BERTH_TRY(read_squash_info(path));
  nlohmann::json meta = info.metadata ? *info.metadata : nlohmann::json();
  if (json) {
    nlohmann::ordered_json j;
    j["path"] = path;
    j["compressor"] = info.compressor;
    j["block_size"] = info.block_size;
    j["inodes"] = info.inodes;
    j["bytes_used"] = info.bytes_used;
    j["file_size"] = info.file_size;
    j["mtime"] = info.mtime;
    j["berth"] = meta;  // null: not made by Berth
    // enroot's settings (/etc/environment, /etc/rc) as the image config Berth runs it with
    j["enroot"] = info.enroot_config ? *info.enroot_config : nlohmann::json();
    // Apptainer's (/.singularity.d) as the image config Berth runs it with, and where a SIF
    // file holds its squashfs partition
    j["singularity"] = info.singularity_config ? *info.singularity_config : nlohmann::json();
    j["sif"] = info.sif ? nlohmann::json{{"offset", info.sif->offset}, {"size", info.sif->size}}
                        : nlohmann::json();
    std::printf("%s\n", to_text(j, 2).c_str());
    return {};
  }
  if (info.metadata) {
    std::printf("Image:       %s\n", string_field(meta, "reference").c_str());
    std::printf("Digest:      %s\n", string_field(meta, "digest").c_str());
    auto cfg = meta.find("config");
    if (cfg != meta.end() && cfg->is_object()) {
      std::printf("Platform:    %s/%s\n", string_field(*cfg, "os").c_str(),
                  string_field(*cfg, "architecture").c_str());
      std::printf("Created:     %s\n", string_field(*cfg, "created").c_str());
    }
    if (auto c = meta.find("container"); c != meta.end() && c->is_object())
      std::printf("Container:   %s\n", string_field(*c, "id").c_str());
  } else if (info.enroot_config) {
    std::printf("Image:       made by enroot (/etc/rc, /etc/environment)\n");
  } else if (info.singularity_config) {
    std::printf("Image:       made by Apptainer/Singularity (/.singularity.d)\n");
  } else {
    std::printf("Image:       no Berth metadata (/.berth/image.json)\n");
  }
  if (info.sif)
    std::printf("SIF:         squashfs partition of %s at offset %llu\n",
                human_size(static_cast<int64_t>(info.sif->size)).c_str(),
                static_cast<unsigned long long>(info.sif->offset));
  std::printf("Compressor:  %s\n", info.compressor.c_str());
  std::printf("Block size:  %u\n", info.block_size);
  std::printf("Inodes:      %u\n", info.inodes);
  std::printf("Size:        %s\n", human_size(static_cast<int64_t>(info.file_size)).c_str());
  return {};
}

}  // namespace berth::cli
