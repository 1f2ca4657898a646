// Docker reference parsing. The grammar is distribution/reference's:
//
//   reference := name [":" tag] ["@" digest]
//   name      := [registry "/"] component ("/" component)*
//   registry  := (domain-name | "[" ipv6 "]") [":" port]
//   component := [a-z0-9]+ (separator [a-z0-9]+)*, separator := "." | "_" | "__" | "-"+
//   tag       := [\w][\w.-]{0,127}
//
// followed by Docker's normalisation (docker.io, library/, latest).
#include "image/reference.h"

#include "core/sha256.h"
#include "core/strings.h"

namespace berth {

namespace {

constexpr std::string_view kDockerHub = "docker.io";
constexpr std::string_view kDockerTransport = "docker://";
constexpr std::string_view kDockerHubLegacy = "index.docker.io";
constexpr std::string_view kDockerHubApi = "registry-1.docker.io";
constexpr std::string_view kOfficialPrefix = "library/";
constexpr size_t kMaxNameLength = 255;
constexpr size_t kMaxTagLength = 128;

Error bad(std::string_view input, std::string why) {
  return make_error("parse reference", std::string(input), std::move(why));
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_lower_alnum(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z');
}
bool is_alnum(char c) {
  return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}
bool is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
bool is_word(char c) {
  return is_alnum(c) || c == '_';
}

bool all_of(std::string_view s, bool (*pred)(char)) {
  for (char c : s)
    if (!pred(c)) return false;
  return true;
}

/// [\w][\w.-]{0,127}
bool valid_tag(std::string_view t) {
  if (t.empty() || t.size() > kMaxTagLength || !is_word(t[0])) return false;
  for (char c : t)
    if (!is_word(c) && c != '.' && c != '-') return false;
  return true;
}

/// A DNS-style host: labels of [A-Za-z0-9-], not starting or ending with '-',
/// joined by '.'. IPv4 addresses are a special case of this.
bool valid_host_name(std::string_view h) {
  size_t start = 0;
  for (;;) {
    size_t dot = h.find('.', start);
    std::string_view label = h.substr(start, dot == std::string_view::npos ? dot : dot - start);
    if (label.empty() || label.front() == '-' || label.back() == '-') return false;
    for (char c : label)
      if (!is_alnum(c) && c != '-') return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

/// host[:port] where host is a host name or a bracketed IPv6 address.
bool valid_registry(std::string_view r) {
  std::string_view port;
  if (!r.empty() && r.front() == '[') {
    size_t close = r.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    std::string_view addr = r.substr(1, close - 1);
    for (char c : addr)
      if (!is_hex(c) && c != ':') return false;
    std::string_view rest = r.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return false;
      port = rest.substr(1);
      if (port.empty()) return false;
    }
  } else {
    size_t colon = r.find(':');
    if (colon != std::string_view::npos) {
      port = r.substr(colon + 1);
      if (port.empty()) return false;
    }
    if (!valid_host_name(r.substr(0, colon))) return false;
  }
  return all_of(port, is_digit);
}

/// [a-z0-9]+ joined by '.', '_', '__' or a run of '-'.
bool valid_component(std::string_view c) {
  if (c.empty() || !is_lower_alnum(c.front()) || !is_lower_alnum(c.back())) return false;
  size_t i = 0;
  while (i < c.size()) {
    if (is_lower_alnum(c[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < c.size() && !is_lower_alnum(c[j])) ++j;
    std::string_view sep = c.substr(i, j - i);
    bool dashes = sep.find_first_not_of('-') == std::string_view::npos;
    if (!(sep == "." || sep == "_" || sep == "__" || dashes)) return false;
    i = j;
  }
  return true;
}

/// Docker's rule for whether the first path component names a registry.
bool names_registry(std::string_view first) {
  return first.find_first_of(".:") != std::string_view::npos || first == "localhost";
}

/// Checks every "/"-separated component of a repository path.
Status check_repository(std::string_view input, std::string_view repo) {
  if (repo.empty()) return bad(input, "repository name is empty");
  for (char c : repo)
    if (c >= 'A' && c <= 'Z') return bad(input, "repository name must be lowercase");
  size_t start = 0;
  for (;;) {
    size_t slash = repo.find('/', start);
    std::string_view comp =
        repo.substr(start, slash == std::string_view::npos ? slash : slash - start);
    if (comp.empty()) return bad(input, "repository name has an empty path component");
    if (!valid_component(comp))
      return bad(input, "invalid repository name component \"" + std::string(comp) +
                            "\": use a-z, 0-9 and the separators '.', '_', '__', '-'");
    if (slash == std::string_view::npos) return {};
    start = slash + 1;
  }
}

}  // namespace

Result<Reference> parse_reference(std::string_view input) {
  // Transports users bring from Apptainer, skopeo and enroot: "docker://" names a registry
  // image as here; enroot writes the registry before a '#' (docker://[REGISTRY#]IMAGE), where
  // the registry needs no '.' or ':' to be one.
  std::string_view text = input;
  if (text.starts_with(kDockerTransport)) text.remove_prefix(kDockerTransport.size());
  if (text.empty()) return bad(input, "reference is empty");
  if (text.size() == 64 && is_lower_hex(text))
    return bad(input, "a 64-character hex string cannot be a repository name");
  std::string_view hash_registry;
  if (size_t hash = text.find('#'); hash != std::string_view::npos) {
    hash_registry = text.substr(0, hash);
    text = text.substr(hash + 1);
    if (hash_registry.find('@') != std::string_view::npos)
      return bad(input,
                 "a user before the registry (enroot's USER@REGISTRY#IMAGE) is taken by the "
                 "Slurm plugin only: log in with `berth login -u USER REGISTRY` instead");
    if (!valid_registry(hash_registry))
      return bad(input, "invalid registry \"" + std::string(hash_registry) + "\" before '#'");
    if (text.find('#') != std::string_view::npos)
      return bad(input, "more than one '#': enroot's form is REGISTRY#IMAGE[:TAG]");
  }

  Reference ref;
  std::string_view name = text;
  if (size_t at = name.find('@'); at != std::string_view::npos) {
    std::string_view digest = name.substr(at + 1);
    Status ok = validate_digest(digest);
    if (!ok.ok())
      return bad(input, "invalid digest \"" + std::string(digest) + "\": " + ok.error().detail);
    ref.digest = digest;
    name = name.substr(0, at);
  }

  // The tag's ':' is the first one after the last '/'; earlier ones belong to a port.
  size_t last_slash = name.rfind('/');
  size_t tag_from = last_slash == std::string_view::npos ? 0 : last_slash + 1;
  if (size_t colon = name.find(':', tag_from); colon != std::string_view::npos) {
    std::string_view tag = name.substr(colon + 1);
    if (!valid_tag(tag))
      return bad(input, "invalid tag \"" + std::string(tag) +
                            "\": use up to 128 letters, digits, '_', '.', '-', not starting "
                            "with '.' or '-'");
    ref.tag = tag;
    name = name.substr(0, colon);
  } else if (ref.digest.empty()) {
    ref.tag = "latest";
  }

  if (name.empty()) return bad(input, "repository name is empty");
  std::string_view repo = name;
  ref.registry = kDockerHub;
  if (!hash_registry.empty()) {
    ref.registry = hash_registry == kDockerHubLegacy ? kDockerHub : hash_registry;
  } else if (size_t slash = name.find('/');
             slash != std::string_view::npos && names_registry(name.substr(0, slash))) {
    std::string_view registry = name.substr(0, slash);
    if (!valid_registry(registry))
      return bad(input, "invalid registry \"" + std::string(registry) + "\"");
    ref.registry = registry == kDockerHubLegacy ? kDockerHub : registry;
    repo = name.substr(slash + 1);
  }
  BERTH_CHECK(check_repository(input, repo));

  ref.repository = repo;
  if (ref.registry == kDockerHub && repo.find('/') == std::string_view::npos)
    ref.repository.insert(0, kOfficialPrefix);
  if (ref.registry.size() + 1 + ref.repository.size() > kMaxNameLength)
    return bad(input, "repository name is longer than 255 characters");
  return ref;
}

namespace {

/// registry "/" repository, or enroot's registry "#" repository where a '/' would not mark the
/// registry as one ("registry#team/app" written "registry/team/app" reads back as Docker Hub's).
std::string qualified(const Reference& r) {
  return r.registry + (names_registry(r.registry) ? "/" : "#") + r.repository;
}

}  // namespace

std::string Reference::str() const {
  std::string s = qualified(*this);
  if (!tag.empty()) s += ":" + tag;
  if (!digest.empty()) s += "@" + digest;
  return s;
}

std::string Reference::familiar() const {
  std::string name = qualified(*this);
  if (registry == kDockerHub) {
    name = repository;
    // "library/alpine" -> "alpine", but "library/a/b" stays as it is (as in Docker).
    if (name.starts_with(kOfficialPrefix) &&
        name.find('/', kOfficialPrefix.size()) == std::string::npos)
      name.erase(0, kOfficialPrefix.size());
  }
  if (!tag.empty()) name += ":" + tag;
  if (!digest.empty()) name += "@" + digest;
  return name;
}

std::string Reference::manifest_ref() const {
  return digest.empty() ? tag : digest;
}

std::string Reference::api_host() const {
  return registry == kDockerHub ? std::string(kDockerHubApi) : registry;
}

}  // namespace berth
