// The --format template subset (core/go_template.h) and ps's durations (core/clock.h).
#include <gtest/gtest.h>

#include "core/clock.h"
#include "core/go_template.h"

namespace berth {
namespace {

const nlohmann::json kData = nlohmann::json::parse(R"({
  "Id": "abc", "State": {"Status": "running", "Pid": 42, "Running": true},
  "Config": {"Env": ["A=1", "B=2"], "Labels": {"x": "y", "a": "b"}, "Cmd": null},
  "Empty": [], "Ratio": 1.5, "NoLabels": {}
})");

std::string render(const std::string& t) {
  auto r = render_template(t, kData);
  return r.ok() ? *r : "ERROR: " + r.error().message();
}

TEST(GoTemplate, FieldPathsAndGoPrinting) {
  EXPECT_EQ(render("{{.Id}} {{.State.Status}} {{.State.Pid}} {{.State.Running}}"),
            "abc running 42 true");
  EXPECT_EQ(render("{{.Config.Env}}"), "[A=1 B=2]");
  EXPECT_EQ(render("{{.Config.Labels}}"), "map[a:b x:y]");
  EXPECT_EQ(render("{{.Config.Cmd}}"), "<nil>");
  EXPECT_EQ(render("{{.Ratio}}"), "1.5");
  EXPECT_EQ(render("plain text"), "plain text");
}

TEST(GoTemplate, Functions) {
  EXPECT_EQ(render("{{json .Config.Env}}"), R"(["A=1","B=2"])");
  EXPECT_EQ(render("{{.Config.Env | json}}"), R"(["A=1","B=2"])");
  EXPECT_EQ(render("{{index .Config.Env 1}}"), "B=2");
  EXPECT_EQ(render(R"({{index .Config.Labels "x"}})"), "y");
  // A missing key: Go's zero value of the element, "" for a map of strings (Docker's Labels,
  // also when empty), <no value> for a map of other values.
  EXPECT_EQ(render(R"({{index .Config.Labels "nope"}})"), "");
  EXPECT_EQ(render(R"({{index .NoLabels "nope"}})"), "");
  EXPECT_EQ(render(R"({{index .State "nope"}})"), "<no value>");
  EXPECT_EQ(render(R"({{join .Config.Env ","}})"), "A=1,B=2");
  EXPECT_EQ(render("{{len .Config.Env}}"), "2");
  EXPECT_EQ(render("{{upper .State.Status}}"), "RUNNING");
}

TEST(GoTemplate, RangeIfAndTrim) {
  EXPECT_EQ(render("{{range .Config.Env}}[{{.}}]{{end}}"), "[A=1][B=2]");
  EXPECT_EQ(render("{{range .Empty}}x{{else}}none{{end}}"), "none");
  EXPECT_EQ(render("{{if .State.Running}}up{{else}}down{{end}}"), "up");
  EXPECT_EQ(render("{{if .Empty}}up{{else}}down{{end}}"), "down");
  EXPECT_EQ(render("a  {{- .Id -}}  b"), "aabcb");
  EXPECT_EQ(render("{{range .Config.Env}}{{println .}}{{end}}"), "A=1\nB=2\n");
}

TEST(GoTemplate, ErrorsNameTheTemplate) {
  EXPECT_EQ(render("{{.Nope}}"),
            "ERROR: template {{.Nope}}: can't evaluate field .Nope: no such field");
  EXPECT_EQ(render("{{.Id"), "ERROR: template {{.Id: unclosed action");
  EXPECT_EQ(render("{{range .Config.Env}}x"),
            "ERROR: template {{range .Config.Env}}x: missing {{end}}");
  EXPECT_EQ(render("{{end}}"), "ERROR: template {{end}}: {{end}} without {{range}} or {{if}}");
  EXPECT_EQ(render("{{frobnicate .Id}}"),
            "ERROR: template {{frobnicate .Id}}: unknown word frobnicate");
  EXPECT_EQ(render("{{range .Id}}x{{end}}"),
            "ERROR: template {{range .Id}}x{{end}}: range over abc, which is not a list or map");
}

TEST(Clock, HumanDurationAsDockerSaysIt) {
  EXPECT_EQ(human_duration(0), "Less than a second");
  EXPECT_EQ(human_duration(1), "1 second");
  EXPECT_EQ(human_duration(5), "5 seconds");
  EXPECT_EQ(human_duration(60), "About a minute");
  EXPECT_EQ(human_duration(150), "2 minutes");
  EXPECT_EQ(human_duration(3600), "About an hour");
  EXPECT_EQ(human_duration(int64_t{5} * 3600), "5 hours");
  EXPECT_EQ(human_duration(int64_t{3} * 86400), "3 days");
  EXPECT_EQ(human_duration(int64_t{20} * 86400), "2 weeks");
  EXPECT_EQ(human_duration(int64_t{90} * 86400), "3 months");
  EXPECT_EQ(human_duration(int64_t{800} * 86400), "2 years");
}

TEST(Clock, ParsesWhatItWrites) {
  EXPECT_EQ(parse_rfc3339("1970-01-01T00:01:00Z"), 60);
  EXPECT_EQ(parse_rfc3339("2026-11-23T04:20:31Z"), 1795407631);
  EXPECT_EQ(parse_rfc3339("yesterday"), -1);
  EXPECT_EQ(parse_rfc3339("2026-11-23T04:20:31Z+junk"), -1);
  // As image configs write it: nanoseconds, an offset.
  EXPECT_EQ(parse_rfc3339("2026-11-23T04:20:31.123456789Z"), 1795407631);
  EXPECT_EQ(parse_rfc3339("2026-11-23T05:20:31+01:00"), 1795407631);
  EXPECT_EQ(parse_rfc3339("2026-11-23T03:50:31-00:30"), 1795407631);
  EXPECT_EQ(parse_rfc3339("2026-11-23T04:20:31.Z"), -1);
  EXPECT_EQ(parse_rfc3339("2026-11-23T04:20:31"), -1);
  EXPECT_EQ(parse_rfc3339("2026-11-23T04:20:31+1:00"), -1);
}

}  // namespace
}  // namespace berth
