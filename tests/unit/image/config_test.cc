// The image config parser (image/image_config.h): what pull, load, create and run read.
#include "image/image_config.h"

#include <gtest/gtest.h>

namespace berth {
namespace {

using nlohmann::json;

TEST(ImageConfig, ReadsPlatformDiffIdsAndTheConfigObject) {
  auto c = parse_image_config(
      R"({"architecture":"arm64","os":"linux","variant":"v8",
          "config":{"Env":["A=1"],"Cmd":["/bin/sh"],"Labels":{"k":"v"}},
          "rootfs":{"type":"layers","diff_ids":["sha256:aa","sha256:bb"]}})",
      "sha256:cfg");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->platform.os, "linux");
  EXPECT_EQ(c->platform.architecture, "arm64");
  EXPECT_EQ(c->platform.variant, "v8");
  EXPECT_EQ(c->diff_ids, (std::vector<std::string>{"sha256:aa", "sha256:bb"}));
  EXPECT_EQ(c->config["Labels"]["k"], "v");
  EXPECT_EQ(c->config["Cmd"][0], "/bin/sh");
}

TEST(ImageConfig, AbsentOrNullPartsAreEmpty) {
  for (const char* text : {R"({})", R"({"config":null,"rootfs":null,"os":null})"}) {
    SCOPED_TRACE(text);
    auto c = parse_image_config(text, "d");
    ASSERT_TRUE(c.ok()) << c.error().message();
    EXPECT_TRUE(c->config.is_object());
    EXPECT_TRUE(c->config.empty());
    EXPECT_TRUE(c->diff_ids.empty());
    EXPECT_EQ(c->platform.os, "");
  }
}

TEST(ImageConfig, MalformedConfigsAreErrorsNotExceptions) {
  struct Case {
    const char* text;
    const char* detail;
  };
  for (const Case& t : {Case{"[]", "not a JSON object"}, Case{R"({"os":1})", "os is not a string"},
                        Case{R"({"architecture":["amd64"]})", "architecture is not a string"},
                        Case{R"({"config":"x"})", "config is not a JSON object"}}) {
    SCOPED_TRACE(t.text);
    auto c = parse_image_config(t.text, "sha256:cfg");
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.error().message(),
              std::string("parse config sha256:cfg: malformed image config: ") + t.detail);
  }
  auto c = parse_image_config("{\"os\":", "sha256:cfg");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message().rfind("parse config sha256:cfg: malformed image config: ", 0), 0u);
  // Bytes that are not UTF-8 inside a string are a parse error, not a throw.
  EXPECT_FALSE(parse_image_config("{\"os\":\"\xff\"}", "sha256:cfg").ok());
}

TEST(RunSettings, DockersFields) {
  auto s = parse_run_settings(json::parse(
      R"({"Entrypoint":["/init"],"Cmd":["run","-v"],"Env":["PATH=/bin","A=b"],
          "User":"1000:100","WorkingDir":"/srv"})"));
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->entrypoint, (std::vector<std::string>{"/init"}));
  EXPECT_EQ(s->cmd, (std::vector<std::string>{"run", "-v"}));
  EXPECT_EQ(s->env, (std::vector<std::string>{"PATH=/bin", "A=b"}));
  EXPECT_EQ(s->user, "1000:100");
  EXPECT_EQ(s->working_dir, "/srv");

  auto empty = parse_run_settings(json::parse(R"({"Cmd":null,"User":5})"));
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->cmd.empty());
  EXPECT_EQ(empty->user, "");  // a User that is not a string is ignored

  auto bad = parse_run_settings(json::parse(R"({"Env":"A=1"})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "image config Env: not a list of strings");
}

}  // namespace
}  // namespace berth
