// Image manifests and indexes: Docker v2 schema 2, Docker manifest list,
// OCI image manifest, OCI image index. Parsing only; fetching is in
// registry.h and storing in store.h.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "image/platform.h"

namespace berth {

namespace media {
inline constexpr std::string_view kDockerManifest =
    "application/vnd.docker.distribution.manifest.v2+json";
inline constexpr std::string_view kDockerManifestList =
    "application/vnd.docker.distribution.manifest.list.v2+json";
inline constexpr std::string_view kOciManifest = "application/vnd.oci.image.manifest.v1+json";
inline constexpr std::string_view kOciIndex = "application/vnd.oci.image.index.v1+json";
inline constexpr std::string_view kDockerConfig = "application/vnd.docker.container.image.v1+json";
inline constexpr std::string_view kOciConfig = "application/vnd.oci.image.config.v1+json";
inline constexpr std::string_view kDockerLayerGzip =
    "application/vnd.docker.image.rootfs.diff.tar.gzip";
inline constexpr std::string_view kOciLayerTar = "application/vnd.oci.image.layer.v1.tar";
inline constexpr std::string_view kOciLayerGzip = "application/vnd.oci.image.layer.v1.tar+gzip";
inline constexpr std::string_view kOciLayerZstd = "application/vnd.oci.image.layer.v1.tar+zstd";
/// The Accept header value listing all four manifest types.
std::string accept_header();
}  // namespace media

struct Descriptor {
  std::string media_type;
  std::string digest;  ///< validated "sha256:<hex>"
  int64_t size = 0;
  std::optional<Platform> platform;  ///< only in indexes
  nlohmann::json annotations;        ///< null when absent
};

struct ImageManifest {
  std::string media_type;
  Descriptor config;
  std::vector<Descriptor> layers;
};

struct IndexManifest {
  std::string media_type;
  std::vector<Descriptor> manifests;
};

/// True for Docker manifest lists and OCI indexes.
bool is_index_media_type(std::string_view media_type);
/// The media type of a manifest body: its "mediaType" field, else the HTTP
/// Content-Type, else inferred from the fields present ("manifests" vs "layers").
std::string detect_manifest_media_type(std::string_view body, std::string_view content_type);
/// Parses an image manifest, checking schemaVersion 2, digests and sizes.
Result<ImageManifest> parse_image_manifest(std::string_view body, std::string_view media_type);
/// Parses a manifest list / image index.
Result<IndexManifest> parse_index(std::string_view body, std::string_view media_type);
/// Picks the entry for `want`; when none matches the error lists every platform available.
Result<Descriptor> select_platform(const IndexManifest& index, const Platform& want);

enum class Compression { kNone, kGzip, kZstd };
/// The compression of a layer media type; unknown or foreign types are an error.
Result<Compression> layer_compression(std::string_view media_type);

}  // namespace berth
