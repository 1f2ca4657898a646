// Docker image references: [registry[:port]/]repository[:tag][@sha256:hex].
//
// Follows the grammar of distribution/reference: the first path component is
// a registry when it contains '.' or ':' or is "localhost"; the default
// registry is docker.io, where one-component names get the "library/"
// namespace; the tag defaults to "latest" when there is no digest.
// Also taken, as users of Apptainer, skopeo and enroot write them: a "docker://" prefix, and
// enroot's REGISTRY#IMAGE (the part before '#' is the registry, with or without a '.').
#pragma once

#include <string>
#include <string_view>

#include "core/error.h"

namespace berth {

struct Reference {
  std::string registry;    ///< "docker.io", "127.0.0.1:5000", "ghcr.io"
  std::string repository;  ///< "library/alpine", "org/team/app"
  std::string tag;         ///< "latest" when neither tag nor digest was given; may be empty
  std::string digest;      ///< "sha256:<hex>" or empty

  /// Fully qualified: "docker.io/library/alpine:3.19" (with "@digest" when set); a registry
  /// with no '.' or ':' (not "localhost") keeps enroot's '#': "registry#team/app:latest".
  /// Parses back to this reference.
  std::string str() const;
  /// As Docker shows it: "alpine:3.19", "ghcr.io/org/app:1" (no docker.io/library/).
  std::string familiar() const;
  /// The digest when set, else the tag: what goes in /v2/<repo>/manifests/<here>.
  std::string manifest_ref() const;
  /// The host to talk to: "registry-1.docker.io" for docker.io, else the registry itself.
  std::string api_host() const;
  bool operator==(const Reference&) const = default;
};

/// Parses a reference; a clear error names the offending part.
Result<Reference> parse_reference(std::string_view s);

}  // namespace berth
