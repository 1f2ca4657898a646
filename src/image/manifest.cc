// Manifest and index parsing. Every JSON access is checked by type first, so
// nlohmann never throws past parse(); parse errors become "malformed manifest".
#include "image/manifest.h"

#include <algorithm>
#include <limits>

#include "core/json.h"
#include "core/sha256.h"

namespace berth {

using nlohmann::json;

namespace {

constexpr std::string_view kSchema1 = "application/vnd.docker.distribution.manifest.v1+json";
constexpr std::string_view kSchema1Signed =
    "application/vnd.docker.distribution.manifest.v1+prettyjws";
constexpr std::string_view kDockerForeignLayer =
    "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip";

/// Where an error happened: "parse manifest <media type>", prefixing details.
struct Where {
  Op op;
  std::string subject;
  /// A manifest that is not what its media type promises.
  Error fail(std::string detail) const {
    return make_error(op, subject, "malformed manifest: " + std::move(detail));
  }
  /// A well-formed document Berth cannot use here (unsupported, or the wrong kind).
  Error plain(std::string detail) const { return make_error(op, subject, std::move(detail)); }
};

/// "application/json; charset=utf-8" -> "application/json".
std::string_view strip_parameters(std::string_view content_type) {
  content_type = content_type.substr(0, content_type.find(';'));
  while (!content_type.empty() && content_type.back() == ' ') content_type.remove_suffix(1);
  while (!content_type.empty() && content_type.front() == ' ') content_type.remove_prefix(1);
  return content_type;
}

Result<json> parse_object(std::string_view body, const Where& where) {
  auto parsed = parse_json(body, where.subject);
  if (!parsed) return where.fail(parsed.error().detail);
  json j = std::move(*parsed);
  if (!j.is_object()) return where.fail("not a JSON object");
  return j;
}

bool is_schema1(std::string_view media_type) {
  return media_type == kSchema1 || media_type == kSchema1Signed;
}

Error schema1_error(const Where& where) {
  return where.plain("Docker schema 1 manifests are not supported")
      .with_hint(
          "push the image again with a current Docker, or convert it with "
          "`skopeo copy --format v2s2`");
}

Status check_schema_version(const json& j, const Where& where) {
  auto it = j.find("schemaVersion");
  if (it == j.end()) return where.fail("schemaVersion is missing (expected 2)");
  if (!it->is_number_integer() || it->get<int64_t>() != 2)
    return where.plain("unsupported schemaVersion " + it->dump() + " (expected 2)");
  return {};
}

std::string media_type_from_json(const json& j, std::string_view content_type) {
  if (std::string mt = string_field(j, "mediaType"); !mt.empty()) return mt;
  // Generic types (application/json, text/plain) say nothing; vendor types do.
  std::string_view ct = strip_parameters(content_type);
  if (ct.starts_with("application/vnd.")) return std::string(ct);
  if (j.contains("manifests")) return std::string(media::kOciIndex);
  if (j.contains("layers")) return std::string(media::kOciManifest);
  if (j.contains("fsLayers")) return std::string(kSchema1);
  return std::string(ct);
}

/// Index platforms are normalised as parse_platform does, so that they compare
/// equal to what users type. A value parse_platform rejects is kept as it is:
/// it then matches nothing, rather than making the whole index unusable.
Result<Platform> parse_index_platform(const json& p, const std::string& at, const Where& where) {
  if (!p.is_object()) return where.fail(at + ": platform is not a JSON object");
  std::string os = string_field(p, "os"), arch = string_field(p, "architecture");
  if (os.empty() || arch.empty())
    return where.fail(at + ": platform needs \"os\" and \"architecture\"");
  std::string variant = string_field(p, "variant");
  Platform raw{os, arch, variant};
  if ((os + arch + variant).find('/') != std::string::npos) return raw;
  auto parsed = parse_platform(raw.str());
  return parsed.ok() ? *parsed : raw;
}

/// Parses one descriptor; `at` names it in errors ("config", "layers[2]").
Result<Descriptor> parse_descriptor(const json& j, const std::string& at, const Where& where) {
  if (!j.is_object()) return where.fail(at + ": not a JSON object");
  Descriptor d;
  if (auto it = j.find("mediaType"); it != j.end()) {
    if (!it->is_string()) return where.fail(at + ": mediaType is not a string");
    d.media_type = it->get<std::string>();
  }
  auto digest = j.find("digest");
  if (digest == j.end() || !digest->is_string()) return where.fail(at + ": digest is missing");
  d.digest = digest->get<std::string>();
  if (Status ok = validate_digest(d.digest); !ok.ok())
    return where.fail(at + ": invalid digest \"" + d.digest + "\": " + ok.error().detail);
  auto size = j.find("size");
  bool size_ok = size != j.end() && size->is_number_integer() &&
                 (size->is_number_unsigned()
                      ? size->get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max())
                      : size->get<int64_t>() >= 0);
  if (!size_ok) return where.fail(at + ": size must be a non-negative integer");
  d.size = size->get<int64_t>();
  if (auto it = j.find("platform"); it != j.end())
    d.platform = BERTH_TRY(parse_index_platform(*it, at, where));
  if (auto it = j.find("annotations"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return where.fail(at + ": annotations is not a JSON object");
    d.annotations = *it;
  }
  return d;
}

/// buildx lists its attestation manifests under the platform unknown/unknown.
bool is_attestation(const Descriptor& d) {
  return d.platform && d.platform->os == "unknown" && d.platform->architecture == "unknown";
}

/// Platforms of an index, as "os/arch[/variant]", each once, in index order.
std::string available_platforms(const IndexManifest& index) {
  std::vector<std::string> seen;
  for (const Descriptor& d : index.manifests) {
    if (!d.platform || is_attestation(d)) continue;
    std::string s = d.platform->str();
    if (std::find(seen.begin(), seen.end(), s) == seen.end()) seen.push_back(s);
  }
  if (seen.empty()) return "none";
  std::string out;
  for (const std::string& s : seen) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

std::string media::accept_header() {
  std::string out;
  for (std::string_view mt : {kOciIndex, kOciManifest, kDockerManifestList, kDockerManifest}) {
    if (!out.empty()) out += ", ";
    out += mt;
  }
  return out;
}

bool is_index_media_type(std::string_view media_type) {
  return media_type == media::kDockerManifestList || media_type == media::kOciIndex;
}

std::string detect_manifest_media_type(std::string_view body, std::string_view content_type) {
  json j = parse_json_or_discarded(body);
  if (!j.is_object()) return std::string(strip_parameters(content_type));
  return media_type_from_json(j, content_type);
}

Result<ImageManifest> parse_image_manifest(std::string_view body, std::string_view media_type) {
  const Where where{"parse manifest", std::string(media_type)};
  if (is_schema1(media_type)) return schema1_error(where);
  json j = BERTH_TRY(parse_object(body, where));
  if (auto v = j.find("schemaVersion"); v != j.end() && *v == 1) return schema1_error(where);
  ImageManifest m;
  m.media_type = media_type.empty() ? media_type_from_json(j, "") : std::string(media_type);
  if (is_index_media_type(m.media_type))
    return where.plain("expected an image manifest, got an index");
  if (m.media_type != media::kDockerManifest && m.media_type != media::kOciManifest)
    return where.plain("unsupported manifest media type \"" + m.media_type + "\"");
  BERTH_CHECK(check_schema_version(j, where));

  auto config = j.find("config");
  if (config == j.end()) return where.fail("config is missing");
  m.config = BERTH_TRY(parse_descriptor(*config, "config", where));
  auto layers = j.find("layers");
  if (layers == j.end() || !layers->is_array()) return where.fail("layers is missing");
  for (size_t i = 0; i < layers->size(); ++i) {
    std::string at = "layers[" + std::to_string(i) + "]";
    m.layers.push_back(BERTH_TRY(parse_descriptor((*layers)[i], at, where)));
  }
  return m;
}

Result<IndexManifest> parse_index(std::string_view body, std::string_view media_type) {
  const Where where{"parse index", std::string(media_type)};
  json j = BERTH_TRY(parse_object(body, where));
  IndexManifest index;
  index.media_type = media_type.empty() ? media_type_from_json(j, "") : std::string(media_type);
  if (!is_index_media_type(index.media_type))
    return where.plain("expected an index, got \"" + index.media_type + "\"");
  BERTH_CHECK(check_schema_version(j, where));

  auto manifests = j.find("manifests");
  if (manifests == j.end() || !manifests->is_array()) return where.fail("manifests is missing");
  for (size_t i = 0; i < manifests->size(); ++i) {
    std::string at = "manifests[" + std::to_string(i) + "]";
    index.manifests.push_back(BERTH_TRY(parse_descriptor((*manifests)[i], at, where)));
  }
  return index;
}

Result<Descriptor> select_platform(const IndexManifest& index, const Platform& want) {
  // An exact match wins over one that only matches because a variant is unset.
  const Descriptor* compatible = nullptr;
  for (const Descriptor& d : index.manifests) {
    if (!d.platform || is_attestation(d)) continue;
    if (*d.platform == want) return d;
    if (!compatible && platform_matches(want, *d.platform)) compatible = &d;
  }
  if (compatible) return *compatible;
  std::string in = index.media_type.empty() ? "the index" : index.media_type;
  return make_error("select platform", want.str(),
                    "no image for platform " + want.str() + " in " + in +
                        "; available: " + available_platforms(index));
}

Result<Compression> layer_compression(std::string_view media_type) {
  struct Known {
    std::string_view media_type;
    Compression compression;
  };
  static constexpr Known kKnown[] = {
      {media::kDockerLayerGzip, Compression::kGzip},
      {"application/vnd.docker.image.rootfs.diff.tar", Compression::kNone},
      {"application/vnd.docker.image.rootfs.diff.tar.zstd", Compression::kZstd},
      {media::kOciLayerTar, Compression::kNone},
      {media::kOciLayerGzip, Compression::kGzip},
      {media::kOciLayerZstd, Compression::kZstd},
      {"application/vnd.oci.image.layer.nondistributable.v1.tar", Compression::kNone},
      {"application/vnd.oci.image.layer.nondistributable.v1.tar+gzip", Compression::kGzip},
      {"application/vnd.oci.image.layer.nondistributable.v1.tar+zstd", Compression::kZstd},
  };
  for (const Known& k : kKnown)
    if (k.media_type == media_type) return k.compression;
  if (media_type == kDockerForeignLayer)
    return make_error("unpack layer", std::string(media_type),
                      "foreign (Windows) layers are not supported");
  return make_error("unpack layer", std::string(media_type), "unsupported layer media type");
}

}  // namespace berth
