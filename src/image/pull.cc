#include "image/pull.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <ctime>
#include <mutex>
#include <thread>

#include "core/clock.h"
#include "core/json.h"
#include "core/log.h"
#include "image/diff_id_stream.h"
#include "image/gc.h"
#include "image/image_config.h"
#include "image/manifest.h"
#include "image/staging.h"

namespace berth {
namespace {

/// Everything one pull shares between its download workers.
struct PullContext {
  Store& store;
  RegistryClient& client;
  const Reference& ref;
  const std::string& repository;  ///< the repository at the registry pulled from
  const PullOptions& opts;
  std::vector<std::string> diff_ids;  ///< the image config's, one per layer
  std::optional<std::chrono::steady_clock::time_point> deadline;  ///< the pull's, if any
  std::atomic<bool> cancelled{false};
};

/// The refusal of a layer whose uncompressed tar hashes to `actual`, not the config's diff_id.
Status compare_diff_id(const Descriptor& desc, const std::string& actual,
                       const std::string& diff_id) {
  if (actual == diff_id) return {};
  return make_error("verify", desc.digest,
                    "the uncompressed layer hashes to " + actual + ", not the diff_id " + diff_id +
                        " the image config lists");
}

/// Whether the pull's overall deadline has (all but) passed: no retry then.
bool past_deadline(const PullContext& ctx) {
  // curl may stop a hair before the deadline it was given; a retry with so little left is moot.
  return ctx.deadline &&
         std::chrono::steady_clock::now() + std::chrono::milliseconds(250) >= *ctx.deadline;
}

/// Downloads one blob into the store (resuming a .partial, retrying
/// transfer failures) unless it is already there. `item` is its progress line. A layer's
/// `diff_id`, when given, is hashed while the bytes arrive (decompressed on the fly, in a
/// thread beside the download's; a resumed download's first bytes are replayed from the
/// .partial file), recorded on the blob as it is published (kDiffIdRecordAttr), and checked.
/// Each byte is read once: the blob is not read again, here or for its diff_id at unpack.
Status fetch_blob(PullContext& ctx, const Descriptor& desc, int item,
                  const std::string& diff_id = {}) {
  ProgressMeter* pm = ctx.opts.progress;
  for (int attempt = 1;; ++attempt) {
    auto writer = BERTH_TRY(ctx.store.begin_blob(desc.digest, desc.size));
    if (!writer) {
      if (pm) pm->set_status(item, "Already exists");
      return {};
    }
    uint64_t offset = writer->offset();
    if (offset > 0) log::info("resuming {} at byte {}", desc.digest, offset);
    if (pm && offset > 0) pm->advance(item, static_cast<int64_t>(offset));
    bool restarted = false, restart_applied = false;
    std::optional<DiffIdStream> stream;  // sees every byte from the first
    if (!diff_id.empty()) {
      stream.emplace(desc.digest);
      BERTH_CHECK(writer->replay([&](const char* data, size_t len) { stream->feed(data, len); }));
    }
    Status st = ctx.client.get_blob(
        ctx.repository, desc.digest, offset,
        [&](const char* data, size_t len) -> Status {
          if (ctx.cancelled.load(std::memory_order_relaxed))
            return make_error("download", desc.digest, "cancelled", ErrorCode::kCancelled);
          if (restarted && !restart_applied) {  // the registry ignored our Range
            restart_applied = true;
            if (pm) pm->advance(item, -static_cast<int64_t>(offset));
            BERTH_CHECK(writer->restart());
            if (!diff_id.empty()) stream.emplace(desc.digest);  // every byte comes again
          }
          if (pm) pm->advance(item, static_cast<int64_t>(len));
          if (stream) stream->feed(data, len);
          return writer->write(data, len);
        },
        &restarted);
    if (st.ok()) {
      std::optional<Result<std::string>> actual;
      if (stream) actual = stream->finish();
      if (actual && actual->ok()) writer->record_diff_id(**actual);
      // The blob digest first: a corrupt download is named as one, not by what it broke.
      BERTH_CHECK(writer->commit());
      if (actual) BERTH_CHECK(compare_diff_id(desc, BERTH_TRY(std::move(*actual)), diff_id));
      if (pm) pm->set_status(item, "Pull complete");
      return {};
    }
    // Only transfer failures are worth another attempt; a digest mismatch,
    // an HTTP error status or a full disk will not go away by retrying.
    const Error& e = st.error();
    bool transient = e.code == ErrorCode::kNetwork && !ctx.cancelled.load();
    if (!transient || attempt >= ctx.opts.retries || past_deadline(ctx)) return st;
    log::warn("{}; retrying ({}/{})", e.message(), attempt + 1, ctx.opts.retries);
  }
}

/// Downloads all layers with up to opts.jobs workers; the first failure
/// cancels the rest and is returned.
Status fetch_layers(PullContext& ctx, const std::vector<Descriptor>& layers,
                    const std::vector<int>& items) {
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::optional<Error> first_error;
  auto worker = [&] {
    for (;;) {
      size_t i = next.fetch_add(1);
      if (i >= layers.size() || ctx.cancelled.load()) return;
      Status st = fetch_blob(ctx, layers[i], items[i], ctx.diff_ids[i]);
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first_error) first_error = std::move(st).error();
        ctx.cancelled = true;
      }
    }
  };
  size_t n = std::min<size_t>(layers.size(), static_cast<size_t>(std::max(1, ctx.opts.jobs)));
  std::vector<std::thread> threads;
  for (size_t i = 1; i < n; ++i) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
  if (first_error) return std::move(*first_error);
  return {};
}

/// The platform an image config declares, and its diff_ids.
Result<Platform> config_platform(const std::string& config_json, const std::string& digest,
                                 std::vector<std::string>* diff_ids) {
  ImageConfig config = BERTH_TRY(parse_image_config(config_json, digest));
  *diff_ids = std::move(config.diff_ids);
  const Platform& p = config.platform;
  if (p.os.empty() || p.architecture.empty()) return p;
  return parse_platform(p.str());
}

/// Merges the layers of `rec` (all in the store, the caller pinning them) into one squashfs
/// file, published as a blob; sets rec.squash and rec.size. Nothing is left under a name but
/// the published blob: the file is written in a staging folder, which goes when this returns.
Status squash_into_store(Store& store, ImageRecord& rec, const SquashOptions& opts) {
  std::vector<LayerInput> layers = BERTH_TRY(store.layer_inputs(rec, "squash"));
  std::string config_text = BERTH_TRY(store.read_blob(rec.config_digest));
  nlohmann::json config = BERTH_TRY(parse_json(config_text, "image config " + rec.config_digest));
  std::string meta = to_text(squash_metadata(rec.name, rec.manifest_digest, config));
  SquashOptions pinned = opts;
  pinned.made = reproducible_time(config);  // one image, one blob: the same bytes every time
  Staging staging = BERTH_TRY(Staging::create(store));
  std::string out = staging.new_path();
  log::info("squashing {} layers of {}", layers.size(), rec.name);
  SquashStats stats = BERTH_TRY(squash_layers(layers, meta, pinned, out));
  std::string digest = BERTH_TRY(sha256_file(out));
  BERTH_CHECK(store.adopt_blob(digest, out));
  rec.squash = digest;
  rec.size = static_cast<int64_t>(stats.size);
  return {};
}

/// Pulls `ref` from `registry` (its own or a mirror), where it is `repository`.
Result<PullResult> pull_from(Store& store, const Reference& ref, const std::string& registry,
                             const std::string& repository, const CredentialStore& creds,
                             const PullOptions& opts, const RegistryOptions& reg) {
  RegistryClient client(registry, reg, creds.find(registry));
  Platform want = opts.platform.value_or(host_platform());

  FetchedManifest top = BERTH_TRY(client.get_manifest(repository, ref.manifest_ref()));
  FetchedManifest chosen = top;
  std::string index_digest;
  if (is_index_media_type(top.media_type)) {
    IndexManifest index = BERTH_TRY(parse_index(top.body, top.media_type));
    Descriptor d = BERTH_TRY(select_platform(index, want));
    log::debug("platform {} -> {}", want.str(), d.digest);
    chosen = BERTH_TRY(client.get_manifest(repository, d.digest));
    if (is_index_media_type(chosen.media_type))
      return make_error("select platform", d.digest, "nested image indexes are not supported");
    index_digest = top.digest;
  }
  ImageManifest manifest = BERTH_TRY(parse_image_manifest(chosen.body, chosen.media_type));
  for (const Descriptor& l : manifest.layers) BERTH_TRY(layer_compression(l.media_type));

  std::string name = ref.str();
  FileLock pin = BERTH_TRY(store.pin());  // no rmi may delete what we find present
  // Up to date: the same manifest under this name with every blob present.
  // (A single-platform manifest stored for another platform than --platform asks is not up to
  // date: it goes on to the platform check below, which says so.)
  // The form asked for (layers, or one squashfs file) counts: the other form is converted.
  if (auto old = store.find_image(name);
      old.ok() && old->manifest_digest == chosen.digest &&
      old->squashed() == opts.squash.has_value() &&
      (!opts.platform || platform_matches(*opts.platform, old->platform))) {
    bool complete = true;
    for (const auto& d : image_blobs(*old)) complete = complete && store.has_blob(d);
    if (complete) return PullResult{*old, true};
  }

  PullContext ctx{store, client, ref, repository, opts};
  ctx.deadline = reg.deadline;
  ProgressMeter* pm = opts.progress;
  int config_item =
      pm ? pm->add(std::string(digest_hex(manifest.config.digest).substr(0, 12)) + " (config)",
                   manifest.config.size)
         : -1;
  std::vector<int> items;
  for (const Descriptor& l : manifest.layers)
    items.push_back(pm ? pm->add(std::string(digest_hex(l.digest).substr(0, 12)), l.size) : -1);

  BERTH_CHECK(fetch_blob(ctx, manifest.config, config_item));
  std::string config = BERTH_TRY(store.read_blob(manifest.config.digest));
  Platform have = BERTH_TRY(config_platform(config, manifest.config.digest, &ctx.diff_ids));
  if (ctx.diff_ids.size() != manifest.layers.size())
    return make_error("verify", manifest.config.digest,
                      "the image config lists " + std::to_string(ctx.diff_ids.size()) +
                          " diff_ids for " + std::to_string(manifest.layers.size()) + " layers");
  if (!have.os.empty() && !platform_matches(want, have)) {
    if (opts.platform)
      return make_error("select platform", want.str(),
                        "image " + name + " is for " + have.str() + ", not the requested platform");
    log::warn("image {} is for {}, this host is {}", name, have.str(), want.str());
  }
  BERTH_CHECK(fetch_layers(ctx, manifest.layers, items));

  // Manifests go in last: an image whose layers are missing is never recorded.
  if (!index_digest.empty() && !store.has_blob(index_digest))
    BERTH_CHECK(store.put_blob(index_digest, top.body));
  if (!store.has_blob(chosen.digest)) BERTH_CHECK(store.put_blob(chosen.digest, chosen.body));

  ImageRecord rec;
  rec.name = name;
  rec.manifest_digest = chosen.digest;
  rec.index_digest = index_digest;
  rec.config_digest = manifest.config.digest;
  rec.manifest_media_type = chosen.media_type;
  rec.platform = have.os.empty() ? want : have;
  for (const Descriptor& l : manifest.layers) {
    rec.layers.push_back(l.digest);
    rec.size += l.size;
  }
  rec.pulled = now_rfc3339();
  rec.registry = ref.registry;
  std::vector<ImageRecord> release;
  if (opts.squash) {
    release.push_back(rec);  // its layers, once the squashed record no longer needs them
    BERTH_CHECK(squash_into_store(store, rec, *opts.squash).with_context("squash " + name));
  }
  std::optional<ImageRecord> replaced;
  BERTH_CHECK(store.add_image(rec, &replaced));
  pin = FileLock();  // recorded: every blob this pull relies on is named now
  if (replaced) release.push_back(*replaced);
  release_replaced(store, release);
  return PullResult{rec, false};
}

}  // namespace

Result<PullResult> pull_image(Store& store, const Reference& ref, const CredentialStore& creds,
                              const PullOptions& opts) {
  RegistryOptions reg = opts.registry;
  if (opts.deadline_s > 0)
    reg.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(opts.deadline_s);
  for (const PullMirror& m : opts.mirrors) {
    auto r =
        pull_from(store, ref, m.registry, m.repository_prefix + ref.repository, creds, opts, reg);
    if (r.ok()) {
      log::debug("pulled {} from the mirror {}", ref.str(), m.registry);
      return r;
    }
    // As Docker's registry-mirrors: whatever went wrong at the mirror, the registry itself
    // is asked next (layers the mirror delivered stay in the store, verified).
    log::info("mirror {}: {}; trying the next source", m.registry, r.error().message());
  }
  return pull_from(store, ref, ref.registry, ref.repository, creds, opts, reg);
}

}  // namespace berth
