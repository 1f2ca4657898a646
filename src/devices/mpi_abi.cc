#include "devices/mpi_abi.h"

#include <charconv>

#include "core/strings.h"

namespace berth {

std::optional<int> LibraryName::major() const {
  if (version.empty()) return std::nullopt;
  return version[0];
}

std::optional<int> LibraryName::minor() const {
  if (version.size() < 2) return std::nullopt;
  return version[1];
}

std::optional<LibraryName> parse_library_name(std::string_view file_name) {
  size_t so = file_name.find(".so");
  if (so == std::string_view::npos || so == 0) return std::nullopt;
  std::string_view rest = file_name.substr(so + 3);
  if (!rest.empty() && rest[0] != '.') return std::nullopt;  // "libx.sox"
  LibraryName out;
  out.linker_name = std::string(file_name.substr(0, so + 3));
  if (rest.empty()) return out;
  rest.remove_prefix(1);
  for (std::string_view part : split(rest, '.')) {
    int v = 0;
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size()) return std::nullopt;
    out.version.push_back(v);
  }
  return out;
}

AbiVerdict check_mpi_abi(const LibraryName& host, const LibraryName& image, MpiAbiRule rule) {
  if (!host.major() || !image.major() || *host.major() != *image.major())
    return AbiVerdict::kIncompatible;
  int hm = host.minor().value_or(0), im = image.minor().value_or(0);
  switch (rule) {
    case MpiAbiRule::kMajor:
      return AbiVerdict::kOver;
    case MpiAbiRule::kStrict:
      return hm == im ? AbiVerdict::kOver : AbiVerdict::kIncompatible;
    case MpiAbiRule::kFull:
      return hm >= im ? AbiVerdict::kOver : AbiVerdict::kBeside;
  }
  return AbiVerdict::kIncompatible;
}

int choose_image_library(const std::vector<std::string>& files, const std::string& preferred) {
  int best = -1;
  std::vector<int> best_version;
  for (size_t i = 0; i < files.size(); ++i) {
    if (files[i] == preferred) return static_cast<int>(i);
    auto n = parse_library_name(files[i]);
    std::vector<int> v = n ? n->version : std::vector<int>{};
    if (best < 0 || v > best_version) {
      best = static_cast<int>(i);
      best_version = v;
    }
  }
  return best;
}

std::vector<int> highest_glibc_version(std::string_view bytes) {
  std::vector<int> best;
  constexpr std::string_view kTag = "GLIBC_";
  for (size_t at = bytes.find(kTag); at != std::string_view::npos; at = bytes.find(kTag, at + 1)) {
    size_t i = at + kTag.size();
    std::vector<int> v;
    while (i < bytes.size() && bytes[i] >= '0' && bytes[i] <= '9') {
      int n = 0;
      while (i < bytes.size() && bytes[i] >= '0' && bytes[i] <= '9' && n < 100000)
        n = n * 10 + (bytes[i++] - '0');
      v.push_back(n);
      if (i < bytes.size() && bytes[i] == '.' && i + 1 < bytes.size() && bytes[i + 1] >= '0' &&
          bytes[i + 1] <= '9')
        ++i;
      else
        break;
    }
    // Names end there ("GLIBC_2.34\0"); "GLIBC_PRIVATE" and text like "GLIBC_2.3x" do not count.
    bool ends = i >= bytes.size() || bytes[i] == '\0';
    if (v.size() >= 2 && ends && v > best) best = v;
  }
  return best;
}

std::string version_string(const std::vector<int>& v) {
  std::string s;
  for (int n : v) s += (s.empty() ? "" : ".") + std::to_string(n);
  return s;
}

namespace {

std::string version_text(const LibraryName& n) {
  if (n.version.empty()) return "no version";
  std::string s;
  for (int v : n.version) s += (s.empty() ? "" : ".") + std::to_string(v);
  return s;
}

}  // namespace

Result<std::vector<MpiPair>> match_mpi_libraries(const std::vector<std::string>& host,
                                                 const std::vector<std::string>& image,
                                                 MpiAbiRule rule,
                                                 std::vector<std::string>* warnings) {
  std::vector<MpiPair> out;
  for (const std::string& h : host) {
    auto hn = parse_library_name(h);
    if (!hn)
      return make_error("inject MPI", h, "not a shared library's file name (lib*.so[.N...])",
                        ErrorCode::kInvalidInput);
    std::vector<std::string> same;
    for (const std::string& i : image) {
      auto in = parse_library_name(i);
      if (in && in->linker_name == hn->linker_name) same.push_back(i);
    }
    MpiPair pair{h, "", AbiVerdict::kBeside};
    if (!same.empty()) {
      pair.image = same[static_cast<size_t>(choose_image_library(same, ""))];
      auto in = *parse_library_name(pair.image);
      pair.verdict = check_mpi_abi(*hn, in, rule);
      std::string both = "host " + h + " (" + version_text(*hn) + ") and image " + pair.image +
                         " (" + version_text(in) + ")";
      if (pair.verdict == AbiVerdict::kIncompatible)
        return make_error("inject MPI", hn->linker_name,
                          both + " are not ABI-compatible under the " +
                              std::string(mpi_abi_rule_name(rule)) + " rule",
                          ErrorCode::kInvalidInput);
      if (pair.verdict == AbiVerdict::kBeside && warnings != nullptr)
        warnings->push_back(both +
                            ": only the majors agree; the host's is injected beside the "
                            "image's, not over it");
    }
    out.push_back(std::move(pair));
  }
  return out;
}

}  // namespace berth
