// The site policy's keys, as one table (site/policy_keys.cc): each row names a key, how a
// file's value is read, the PolicyLayer and SiteConfig members it fills, how a user's file
// merges into the site's (tighten, never loosen), whether the site may lock it and how
// `berth info` shows it. parse_policy() and merge_policy() (site/config.h), the check of `lock`
// and `berth info` loop over it: a new key is a row, its members and its lines in docs/site.md.
#pragma once

#include <nlohmann/json.hpp>

#include <string_view>
#include <vector>

#include "site/config.h"

namespace berth {

/// Every key a policy file may name, in the table's order.
std::vector<std::string_view> policy_key_names();

/// The keys a site may name in `lock`, in the table's order.
std::vector<std::string_view> lockable_policy_keys();

/// The policy in force, for `berth info`: every key of the table as {"value": what is in force
/// (what an unset key means, where that is not the empty value), "source": the file(s) it came
/// from, or "default"}.
nlohmann::json policy_settings(const SiteConfig& c);

}  // namespace berth
