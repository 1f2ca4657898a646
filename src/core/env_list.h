// Environment lists: a container's (or the host's) variables as "K=V" strings, in
// order, and the colon-separated lists (PATH, LD_LIBRARY_PATH) some values hold.
// For the invoking process's own environment see core/env.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace berth {

/// The PATH a container gets when neither its image nor the user sets one (Docker's).
inline constexpr const char* kDefaultPath =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// This process's environment ("K=V", in order).
std::vector<std::string> current_environment();
/// The name part of "K=V" (all of `kv` when it has no '=').
std::string_view env_name(std::string_view kv);
/// The value of `key` in a "K=V" list (the last one wins; a bare "K" unsets); nullopt when absent.
std::optional<std::string> env_lookup(const std::vector<std::string>& env, std::string_view key);
/// Sets or replaces K=V in `env`, keeping first-seen order.
void set_env(std::vector<std::string>& env, std::string kv);
/// One change to an environment list, as a site policy's [env] table gives it (Sarus's
/// set/prepend/append/unset): prepend and append join with ':' (the value alone when the
/// variable is unset or empty).
struct EnvEdit {
  enum class Kind : uint8_t { kSet, kPrepend, kAppend, kUnset };
  Kind kind = Kind::kSet;
  std::string name;
  std::string value;  ///< unused for kUnset
  bool operator==(const EnvEdit&) const = default;
};
/// Applies `edit` to `env`.
void apply_env_edit(std::vector<std::string>& env, const EnvEdit& edit);
/// Removes every entry of `key` from `env`.
void unset_env(std::vector<std::string>& env, std::string_view key);

/// A colon-separated list (PATH, LD_LIBRARY_PATH) as its entries, empty ones kept.
std::vector<std::string> split_path(std::string_view list);

}  // namespace berth
