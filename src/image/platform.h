// Platforms as in the OCI image index: os/architecture[/variant].
#pragma once

#include <string>
#include <string_view>

#include "core/error.h"

namespace berth {

struct Platform {
  std::string os;            ///< "linux"
  std::string architecture;  ///< GOARCH names: "amd64", "arm64", "arm", "ppc64le", "s390x"
  std::string variant;       ///< "v7", "v8", or empty

  /// "linux/arm64/v8" or "linux/amd64".
  std::string str() const;
  bool operator==(const Platform&) const = default;
};

/// Parses "os/arch[/variant]"; architecture aliases are normalised
/// (x86_64 -> amd64, aarch64 -> arm64, armhf -> arm/v7).
Result<Platform> parse_platform(std::string_view s);
/// The platform this binary runs on (from uname), e.g. linux/amd64.
Platform host_platform();
/// True when an image for `have` runs on a request for `want`: os and
/// architecture equal, variants equal or either unset (arm64 treats "" as "v8").
bool platform_matches(const Platform& want, const Platform& have);

}  // namespace berth
