// The table of the site policy's keys (site/policy_keys.h): each row drives parsing, merging,
// the lock and `berth info` together, so a key is listed, merged and lockable by its row alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "runtime/engines.h"
#include "site/config.h"
#include "site/policy_keys.h"

namespace berth {
namespace {

constexpr const char* kSite = "/etc/berth/berth.conf";
constexpr const char* kUser = "/home/u/.config/berth/berth.conf";

/// What a user's file does to a key the site sets.
enum class User { kAdds, kWins, kIsIgnored, kIsRefused };

struct Sample {
  std::string site;  ///< the site's value, TOML; shown otherwise than an unset key
  std::string user;  ///< a user's value, TOML, other than the site's
  User merged;
};

/// A value of every key. A key added to the table without one here fails KeysAndSamples.
const std::map<std::string, Sample>& samples() {
  static const std::map<std::string, Sample> s = {
      {"insecure_registries", {R"(["a.lan"])", R"(["b.lan"])", User::kAdds}},
      {"deny_mount_destinations", {R"(["/etc"])", R"(["/srv"])", User::kAdds}},
      {"site_mounts", {R"(["/a:/a"])", R"(["/b:/b:ro"])", User::kAdds}},
      {"env", {R"({ set = { A = "1" } })", R"({ unset = ["A"] })", User::kAdds}},
      {"allowed_registries", {R"(["docker.io", "ghcr.io"])", R"(["ghcr.io"])", User::kAdds}},
      {"allowed_engines", {R"(["userns", "proot"])", R"(["proot"])", User::kAdds}},
      {"allow_mount_sources", {R"(["/home"])", R"(["/home/u"])", User::kAdds}},
      {"registry_mirrors",
       {R"({ "docker.io" = ["m.lan"] })", R"({ "ghcr.io" = ["n.lan"] })", User::kAdds}},
      {"readonly", {"true", "false", User::kWins}},
      {"default_engine", {R"("proot")", R"("userns")", User::kWins}},
      {"driver_root", {R"("/d1")", R"("/d2")", User::kWins}},
      {"dev_root", {R"("/e1")", R"("/e2")", User::kWins}},
      {"gpus", {R"("all")", R"("device=0")", User::kWins}},
      {"ib", {R"("all")", R"("mlx5_0")", User::kWins}},
      {"mount_home", {"true", "false", User::kWins}},
      {"squash_options", {R"("-comp zstd")", R"("-comp gzip")", User::kWins}},
      {"store_format", {R"("squashfs")", R"("layers")", User::kWins}},
      {"root_emulation", {R"("seccomp")", R"("none")", User::kWins}},
      {"central_store", {R"("/c1")", R"("/c2")", User::kWins}},
      {"runtime_dir", {R"("/r1")", R"("/r2")", User::kWins}},
      {"pull_low_speed_limit", {"10", "20", User::kWins}},
      {"pull_low_speed_time", {"10", "20", User::kWins}},
      {"pull_deadline", {"10", "20", User::kWins}},
      {"extract_limit_mb", {"100", "200", User::kWins}},
      {"mpi",
       {R"({ ompi = { libraries = ["/usr/lib/libmpi.so"] } })",
        R"({ mpich = { libraries = ["/usr/lib/libmpich.so"] } })", User::kIsRefused}},
      {"mpi_default", {R"("ompi")", R"("mpich")", User::kIsIgnored}},
      {"lock", {R"(["readonly"])", R"(["gpus"])", User::kIsRefused}},
  };
  return s;
}

PolicyLayer layer(const std::string& text, const char* path, bool site) {
  auto l = parse_policy(text, path, site);
  EXPECT_TRUE(l.ok()) << text << ": " << l.error().message();
  return l.ok() ? *l : PolicyLayer{};
}

TEST(SitePolicyKeys, KeysAndSamples) {
  std::set<std::string> keys, sampled;
  for (std::string_view k : policy_key_names())
    EXPECT_TRUE(keys.insert(std::string(k)).second) << k;
  for (const auto& [k, s] : samples()) sampled.insert(k);
  EXPECT_EQ(keys, sampled);
}

TEST(SitePolicyKeys, BerthInfoListsEveryRowAndNothingElse) {
  nlohmann::json settings = policy_settings(merge_policy(std::nullopt, {}));
  std::vector<std::string> listed;
  for (const auto& [k, v] : settings.items()) {
    listed.push_back(k);
    EXPECT_EQ(v["source"], "default") << k;
  }
  std::set<std::string> keys;
  for (std::string_view k : policy_key_names()) keys.insert(std::string(k));
  EXPECT_EQ(std::set<std::string>(listed.begin(), listed.end()), keys);
  // What an unset key means, as berth info shows it.
  EXPECT_EQ(settings["default_engine"]["value"], std::string(default_engine().spelled));
  EXPECT_EQ(settings["root_emulation"]["value"], "auto");
  EXPECT_EQ(settings["store_format"]["value"], "layers");
  EXPECT_EQ(settings["driver_root"]["value"], "/");
  EXPECT_EQ(settings["dev_root"]["value"], "/dev");
  EXPECT_EQ(settings["pull_low_speed_limit"]["value"], 1024);
  EXPECT_EQ(settings["pull_low_speed_time"]["value"], 60);
  EXPECT_EQ(settings["pull_deadline"]["value"], 0);
  EXPECT_EQ(settings["extract_limit_mb"]["value"], 0);
  EXPECT_TRUE(settings["allowed_registries"]["value"].is_null());  // any
}

TEST(SitePolicyKeys, EachRowIsParsedMergedShownAndLockedByItself) {
  nlohmann::json unset = policy_settings(merge_policy(std::nullopt, {}));
  std::vector<std::string_view> lockable = lockable_policy_keys();
  for (std::string_view name : policy_key_names()) {
    std::string key(name);
    SCOPED_TRACE(key);
    ASSERT_TRUE(samples().contains(key));
    const Sample& s = samples().at(key);
    std::string site_text = key + " = " + s.site + "\n";
    std::string user_text = key + " = " + s.user + "\n";

    // The site's value is read, taken and shown, and said to be the site's.
    PolicyLayer site = layer(site_text, kSite, true);
    nlohmann::json shown = policy_settings(merge_policy(site, {}))[key];
    EXPECT_EQ(shown["source"], kSite);
    EXPECT_NE(shown["value"], unset[key]["value"]);

    // A user's file over it: added to, preferred, ignored or refused, by the row's rule.
    auto user = parse_policy(user_text, kUser, false);
    if (s.merged == User::kIsRefused) {
      ASSERT_FALSE(user.ok());
      EXPECT_NE(user.error().message().find(": line 1: \"" + key + "\" is a site policy key: "),
                std::string::npos)
          << user.error().message();
    } else {
      ASSERT_TRUE(user.ok()) << user.error().message();
      SiteConfig c = merge_policy(site, {*user});
      std::string source = s.merged == User::kAdds   ? std::string(kSite) + " + " + kUser
                           : s.merged == User::kWins ? std::string(kUser)
                                                     : std::string(kSite);
      EXPECT_EQ(policy_settings(c)[key]["source"], source);
      EXPECT_TRUE(c.ignored.empty());
      // A user's file alone: theirs, where a user's file may set the key at all.
      SiteConfig alone = merge_policy(std::nullopt, {*user});
      EXPECT_EQ(policy_settings(alone)[key]["source"],
                s.merged == User::kIsIgnored ? "default" : kUser);
    }

    // Locked by the site: the user's value is ignored, and said to be; or `lock` refuses it.
    bool is_lockable = std::find(lockable.begin(), lockable.end(), name) != lockable.end();
    std::string lock_text = (key == "lock" ? "" : site_text) + "lock = [\"" + key + "\"]\n";
    auto locked = parse_policy(lock_text, kSite, true);
    if (!is_lockable) {
      ASSERT_FALSE(locked.ok());
      EXPECT_NE(
          locked.error().message().find("\"lock\" names \"" + key + "\", which cannot be locked ("),
          std::string::npos)
          << locked.error().message();
      continue;
    }
    ASSERT_TRUE(locked.ok()) << locked.error().message();
    EXPECT_EQ(s.merged, User::kWins);  // only single values are locked
    SiteConfig c = merge_policy(*locked, {*user});
    EXPECT_TRUE(c.is_locked(key));
    EXPECT_EQ(policy_settings(c)[key], shown);
    EXPECT_EQ(c.ignored,
              std::vector<std::string>{std::string(kUser) + ": " + key + ": locked by " + kSite});
  }
}

}  // namespace
}  // namespace berth
