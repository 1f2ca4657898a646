// The host-MPI ABI rule (Sarus's MPI hook, kept to the letter): before a host MPI library is
// bound in, each MPI library of the image is matched with the host's by linker name
// ("libmpi.so") and their versions ("libmpi.so.12.1.11" -> 12, 1, 11; each number optional)
// compared under the site's rule:
//   major   the majors are equal;
//   full    the majors are equal and the host's minor >= the image's; when only the majors
//           agree (the host's minor is lower) the host library is injected *beside* the
//           image's, not over it, with a warning;
//   strict  the majors and the minors are equal.
// Patch numbers never matter. A missing major on either side cannot be compared: an error. A
// missing minor counts as 0 (libmpi.so.12 is 12.0).
// Pure: names and versions in, a verdict out; the injection is mpi.h's.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/vocabulary.h"

namespace berth {

enum class MpiAbiRule { kMajor, kFull, kStrict };

/// The words the site policy's [mpi.TYPE] abi spells the rules with (major when it gives none).
inline constexpr Word<MpiAbiRule> kMpiAbiRuleWords[] = {
    {MpiAbiRule::kMajor, "major"},
    {MpiAbiRule::kFull, "full"},
    {MpiAbiRule::kStrict, "strict"},
};

/// "major" | "full" | "strict"; nullopt for anything else.
constexpr std::optional<MpiAbiRule> parse_mpi_abi_rule(std::string_view text) {
  return parse_word(kMpiAbiRuleWords, text);
}
/// The rule's word.
constexpr std::string_view mpi_abi_rule_name(MpiAbiRule rule) {
  return word_of(kMpiAbiRuleWords, rule);
}

/// A shared library's file name split: "libmpi.so.12.1.11" -> linker name "libmpi.so" and
/// {12, 1, 11}; "libmpi.so" -> {"libmpi.so", {}}. nullopt when the name has no ".so" or a
/// version part that is not dot-separated numbers.
struct LibraryName {
  std::string linker_name;
  std::vector<int> version;
  std::optional<int> major() const;
  std::optional<int> minor() const;
};
std::optional<LibraryName> parse_library_name(std::string_view file_name);

enum class AbiVerdict {
  kOver,          ///< compatible: bind the host's library over the image's
  kBeside,        ///< full rule, only the majors agree: inject beside it, warn
  kIncompatible,  ///< refuse
};

/// The verdict for host library `host` against the image's `image` (same linker name).
AbiVerdict check_mpi_abi(const LibraryName& host, const LibraryName& image, MpiAbiRule rule);

/// Of several files of the image with one linker name, the one the loader loads: `preferred`
/// (the real file the ld.so.cache entry resolves to) when among them, else the highest
/// version. `files` are file names; returns an index into them, -1 when empty.
int choose_image_library(const std::vector<std::string>& files, const std::string& preferred);

/// Checks every pair: `host` and `image` are file names (real files, links resolved). Each
/// host library whose linker name the image has gets its verdict; a host library the image
/// lacks is injected beside. An incompatible pair is an error of one line naming both files
/// and versions; `warnings` gets one line per kBeside pair.
struct MpiPair {
  std::string host;
  std::string image;  ///< "" when the image has no library of that linker name
  AbiVerdict verdict = AbiVerdict::kBeside;
};
Result<std::vector<MpiPair>> match_mpi_libraries(const std::vector<std::string>& host,
                                                 const std::vector<std::string>& image,
                                                 MpiAbiRule rule,
                                                 std::vector<std::string>* warnings);

/// The highest "GLIBC_X.Y[.Z]" version name in an ELF file's bytes, {} when none: for a
/// library, the newest glibc symbol version it needs; for a libc.so.6, the version it is
/// (the newest it defines). Sarus's glibc rule: a host MPI that needs a newer glibc than the
/// image's is refused.
std::vector<int> highest_glibc_version(std::string_view bytes);

/// "2.34" for {2, 34}.
std::string version_string(const std::vector<int>& v);

}  // namespace berth
