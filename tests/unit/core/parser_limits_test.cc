// Parsers of outside input have limits: JSON and YAML size and depth, YAML aliases, and fields of
// the wrong type or absurd numbers give one line of error (or a warning), never an exception.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "core/json.h"
#include "devices/cdi.h"
#include "devices/nvidia_discover.h"
#include "devices/yaml.h"
#include "gpu_fixture.h"
#include "image/image_config.h"
#include "site/config.h"
#include "test_util.h"

namespace berth {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

TEST(ParseJson, ReadsOrdinaryDocuments) {
  auto j = parse_json(R"({"a": [1, {"b": "[[[{{{"}], "c": "x\"]"})", "manifest m");
  ASSERT_TRUE(j.ok()) << j.error().message();
  EXPECT_EQ((*j)["a"][1]["b"], "[[[{{{");
}

TEST(ParseJson, SyntaxErrorsAreOneLineWithoutExceptionText) {
  auto j = parse_json("{\"a\": ", "manifest sha256:ab");
  ASSERT_FALSE(j.ok());
  std::string m = j.error().message();
  EXPECT_TRUE(m.starts_with("parse manifest sha256:ab: ")) << m;
  EXPECT_EQ(m.find("json.exception"), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
}

TEST(ParseJson, DepthLimitCountsOnlyBracketsOutsideStrings) {
  std::string ok = std::string(kJsonMaxDepth, '[') + std::string(kJsonMaxDepth, ']');
  EXPECT_TRUE(parse_json(ok, "x").ok());
  std::string deep = std::string(kJsonMaxDepth + 1, '[') + std::string(kJsonMaxDepth + 1, ']');
  auto j = parse_json(deep, "manifest sha256:ab");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.error().message(), "parse manifest sha256:ab: nested deeper than 256 levels");
  // Brackets in strings, escaped quotes included, do not nest.
  std::string in_string = "[\"\\\"" + std::string(1000, '[') + "\"]";
  EXPECT_TRUE(parse_json(in_string, "x").ok());
}

TEST(ParseJson, HostileDocumentsFailFast) {
  // 400 kB nested 200,000 deep: nlohmann alone would recurse through all of it.
  std::string deep = std::string(200000, '[') + std::string(200000, ']');
  auto t = Clock::now();
  auto j = parse_json(deep, "manifest sha256:ab");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.error().message(), "parse manifest sha256:ab: nested deeper than 256 levels");
  EXPECT_TRUE(parse_json_or_discarded(deep).is_discarded());
  // 50 MB: refused by its size before any parsing.
  std::string big = "{\"a\":\"" + std::string(50 << 20, 'x') + "\"}";
  auto big_j = parse_json(big, "manifest sha256:ab");
  ASSERT_FALSE(big_j.ok());
  EXPECT_EQ(big_j.error().message(), "parse manifest sha256:ab: the document is " +
                                         std::to_string(big.size()) +
                                         " bytes, more than the 16777216 allowed");
  EXPECT_LT(seconds_since(t), 1.0);
}

TEST(ParseYaml, DepthAndSizeLimits) {
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto t = Clock::now();
  auto y = parse_yaml(deep, "deep.yaml");
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.error().message(), "parse YAML deep.yaml: nested deeper than 256 levels");
  std::string big = "a: \"" + std::string(17 << 20, 'x') + "\"\n";
  y = parse_yaml(big, "big.yaml");
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.error().message(), "parse YAML big.yaml: the document is " +
                                     std::to_string(big.size()) +
                                     " bytes, more than the 16777216 allowed");
  EXPECT_LT(seconds_since(t), 1.0);
}

TEST(ParseYaml, BillionLaughsIsRefusedQuickly) {
  // The classic anchor bomb: nine levels of ten aliases each, 10^9 "lol"s when expanded.
  std::string bomb =
      "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n";
  for (char c = 'b'; c <= 'i'; ++c) {
    std::string prev(1, static_cast<char>(c - 1));
    bomb += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 9; ++i) bomb += (i ? ",*" : "*") + prev;
    bomb += "]\n";
  }
  auto t = Clock::now();
  auto y = parse_yaml(bomb, "bomb.yaml");
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.error().message(), "parse YAML bomb.yaml: aliases are not supported");
  EXPECT_LT(seconds_since(t), 1.0);
}

TEST(ImageConfig, WrongTypesAreOneLineErrors) {
  auto c = parse_image_config(R"({"os":"linux","architecture":5})", "sha256:cf");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message(),
            "parse config sha256:cf: malformed image config: architecture is not a string");
  c = parse_image_config(std::string(300, '[') + std::string(300, ']'), "sha256:cf");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message(),
            "parse config sha256:cf: malformed image config: nested deeper than 256 levels");
  c = parse_image_config("[]", "sha256:cf");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message(),
            "parse config sha256:cf: malformed image config: not a JSON object");
  c = parse_image_config(
      R"({"os":"linux","architecture":"arm64","variant":null,"rootfs":{"diff_ids":["sha256:a"]}})",
      "sha256:cf");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->platform.str(), "linux/arm64");
  EXPECT_EQ(c->diff_ids, (std::vector<std::string>{"sha256:a"}));
}

TEST(CdiLimits, NumericDeviceNameIsNotAMatchNorACrash) {
  TempDir d;
  d.write("cdi/vendor.json", R"({"cdiVersion":"0.6.0","kind":"vendor.com/dev",
    "devices":[{"name":5,"containerEdits":{"env":["A=1"]}},
               {"name":"b","containerEdits":{"env":[7]}}]})");
  std::vector<std::string> warnings;
  auto specs = load_cdi_specs({d / "cdi"}, &warnings);
  ASSERT_TRUE(specs.ok());
  ContainerSpec s;
  // The spec fails validation as a whole (as the reference library refuses it): asking for any
  // of its devices is that one line, without the JSON library's exception tag.
  for (const char* dev : {"vendor.com/dev=5", "vendor.com/dev=b"}) {
    auto r = apply_cdi_device(*specs, dev, s);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message(),
              std::string("--device ") + dev + ": its spec is invalid: CDI spec " +
                  (d / "cdi/vendor.json") + ": malformed: type must be string, but is number");
  }
}

TEST(CdiLimits, DeepJsonSpecIsSkippedWithOneLine) {
  TempDir d;
  d.write("cdi/deep.json", std::string(100000, '[') + std::string(100000, ']'));
  std::vector<std::string> warnings;
  auto specs = load_cdi_specs({d / "cdi"}, &warnings);
  ASSERT_TRUE(specs.ok());
  EXPECT_TRUE(specs->empty());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0],
            "parse CDI spec " + (d / "cdi/deep.json") + ": nested deeper than 256 levels; skipped");
}

TEST(NvidiaLimits, AbsurdDeviceMinorIsAWarning) {
  testing::FakeHost h;
  testing::write_text(h.root + "/proc/driver/nvidia/gpus/0000:07:00.0/information",
                      "Model: \t\t X\nGPU UUID: \t GPU-1\nBus Location: \t 0000:07:00.0\n"
                      "Device Minor: \t 99999999999999999999\n");
  DiscoveryOptions o;
  o.driver_root = h.root;
  o.dev_root = h.dev;
  auto r = discover_nvidia(o);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->gpus.size(), 2u);
  EXPECT_EQ(r->gpus[0].minor, -1);
  EXPECT_FALSE(r->gpus[0].has_node);
  std::string want = h.root +
                     "/proc/driver/nvidia/gpus/0000:07:00.0/information: Device Minor "
                     "\"99999999999999999999\" is not a GPU minor number";
  EXPECT_NE(std::find(r->warnings.begin(), r->warnings.end(), want), r->warnings.end());
}

TEST(ConfigLimits, SiteConfigIsParsedWithLimits) {
  auto c = parse_site_config(std::string(300, '[') + std::string(300, ']'), "/etc/berth.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message(), "read config /etc/berth.json: nested deeper than 256 levels");
  c = parse_site_config("{", "/etc/berth.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message().find("json.exception"), std::string::npos) << c.error().message();
}

}  // namespace
}  // namespace berth
