// The configuration file (site/config.h): its keys, a missing file, and malformed ones named.
#include "site/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

#include "core/fs.h"

namespace berth {
namespace {

TEST(SiteConfig, ReadsEveryKey) {
  auto c = parse_site_config(
      R"({"insecure-registries": ["example.org", "127.0.0.1:5000"],
          "driver_root": "/opt/driver", "dev_root": "/opt/dev", "other": 1})",
      "/cfg/config.json");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->path, "/cfg/config.json");
  EXPECT_EQ(c->insecure_registries, (std::vector<std::string>{"example.org", "127.0.0.1:5000"}));
  EXPECT_EQ(c->driver_root, "/opt/driver");
  EXPECT_EQ(c->dev_root, "/opt/dev");
}

TEST(SiteConfig, AbsentAndNullKeysAreUnset) {
  auto c = parse_site_config(R"({"insecure-registries": null, "driver_root": null})", "f");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_TRUE(c->insecure_registries.empty());
  EXPECT_EQ(c->driver_root, "");
  EXPECT_EQ(c->dev_root, "");
}

TEST(SiteConfig, MalformedFilesAreNamed) {
  struct Case {
    const char* text;
    const char* detail;
  };
  for (const Case& t : {
           Case{"[1]", "not a JSON object"},
           Case{R"({"insecure-registries": "example.org"})",
                "\"insecure-registries\" is not a list of strings"},
           Case{R"({"insecure-registries": [1]})",
                "\"insecure-registries\" is not a list of strings"},
           Case{R"({"driver_root": 7})", "\"driver_root\" is not a string"},
           Case{R"({"dev_root": ["/x"]})", "\"dev_root\" is not a string"},
       }) {
    SCOPED_TRACE(t.text);
    auto c = parse_site_config(t.text, "/cfg/config.json");
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.error().message(), std::string("read config /cfg/config.json: ") + t.detail);
  }
  auto c = parse_site_config("{insecure", "/cfg/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message().rfind("read config /cfg/config.json: ", 0), 0u)
      << c.error().message();
}

TEST(SiteConfig, MissingFileGivesTheDefaultsAndTheUserFileIsFound) {
  std::string dir = ::testing::TempDir() + "/berth-site-config-" + std::to_string(getpid());
  ASSERT_TRUE(remove_tree(dir).ok());
  auto missing = read_site_config(dir + "/config.json");
  ASSERT_TRUE(missing.ok()) << missing.error().message();
  EXPECT_EQ(missing->path, "");
  EXPECT_TRUE(missing->insecure_registries.empty());

  ASSERT_TRUE(make_dirs(dir).ok());
  ASSERT_TRUE(write_file_atomic(dir + "/config.json", R"({"dev_root": "/d"})").ok());
  ::setenv("BERTH_CONFIG_DIR", dir.c_str(), 1);
  std::string path = user_config_path();
  ::unsetenv("BERTH_CONFIG_DIR");
  EXPECT_EQ(path, dir + "/config.json");
  auto read = read_site_config(path);
  ASSERT_TRUE(read.ok()) << read.error().message();
  EXPECT_EQ(read->path, path);
  EXPECT_EQ(read->dev_root, "/d");
  (void)remove_tree(dir);  // best effort
}

}  // namespace
}  // namespace berth
