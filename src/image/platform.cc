#include "image/platform.h"

#include <sys/utsname.h>

#include <algorithm>
#include <cctype>

#include <vector>

#include "core/strings.h"

namespace berth {

std::string Platform::str() const {
  std::string s = os + "/" + architecture;
  if (!variant.empty()) s += "/" + variant;
  return s;
}

namespace {
/// Folds uname/Debian architecture names into the GOARCH names OCI uses.
void normalise(Platform& p) {
  struct Alias {
    const char* from;
    const char* arch;
    const char* variant;
  };
  static const Alias aliases[] = {
      {"x86_64", "amd64", ""},
      {"x86-64", "amd64", ""},
      {"aarch64", "arm64", ""},
      {"armhf", "arm", "v7"},
      {"armel", "arm", "v6"},
      {"i386", "386", ""},
      {"i686", "386", ""},
      {"ppc64el", "ppc64le", ""},
      {"mips64el", "mips64le", ""},
      // uname -m on 32-bit ARM names the ISA level.
      {"armv7l", "arm", "v7"},
      {"armv6l", "arm", "v6"},
      {"armv5tel", "arm", "v5"},
  };
  // OCI platform values are lowercase; accept "Linux/AMD64" as typed.
  for (std::string* field : {&p.os, &p.architecture, &p.variant}) *field = lower(*field);
  for (const Alias& a : aliases) {
    if (p.architecture == a.from) {
      p.architecture = a.arch;
      if (p.variant.empty()) p.variant = a.variant;
      break;
    }
  }
  // arm64's "v8" is kept as declared (Docker Hub lists linux/arm64/v8); platform_matches
  // treats it as equal to no variant.
}
}  // namespace

Result<Platform> parse_platform(std::string_view s) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t slash = s.find('/', start);
    parts.emplace_back(s.substr(start, slash == std::string_view::npos ? slash : slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  for (const auto& p : parts) {
    if (p.empty()) break;
    for (char c : p) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'))
        return make_error("parse platform", std::string(s), "expected os/arch[/variant]");
    }
  }
  Platform p;
  if (parts.size() == 1 && !parts[0].empty()) {
    // One word is an OS ("linux": this host's architecture) or an architecture ("arm64": Linux).
    static constexpr std::string_view kOses[] = {"linux", "windows", "darwin", "freebsd"};
    std::string word = lower(parts[0]);
    if (std::find(std::begin(kOses), std::end(kOses), word) != std::end(kOses)) {
      p = host_platform();
      p.os = word;
      return p;
    }
    p.os = "linux";
    p.architecture = parts[0];
  } else if ((parts.size() == 2 || parts.size() == 3) && !parts[0].empty() && !parts[1].empty() &&
             (parts.size() == 2 || !parts[2].empty())) {
    p.os = parts[0];
    p.architecture = parts[1];
    if (parts.size() == 3) p.variant = parts[2];
  } else {
    return make_error("parse platform", std::string(s), "expected os/arch[/variant]");
  }
  normalise(p);
  return p;
}

Platform host_platform() {
  struct utsname u;
  Platform p{"linux", "amd64", ""};
  if (::uname(&u) == 0) p.architecture = u.machine;
  normalise(p);
  return p;
}

bool platform_matches(const Platform& want, const Platform& have) {
  if (want.os != have.os || want.architecture != have.architecture) return false;
  std::string wv = want.variant, hv = have.variant;
  if (want.architecture == "arm64") {
    if (wv == "v8") wv.clear();
    if (hv == "v8") hv.clear();
  }
  return wv.empty() || hv.empty() || wv == hv;
}

}  // namespace berth
