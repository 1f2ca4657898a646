#include "image/platform.h"

#include <gtest/gtest.h>

#include <ostream>
#include <string>

namespace berth {

inline void PrintTo(const Platform& p, std::ostream* os) {
  *os << '"' << p.str() << '"';
}

namespace {

TEST(Platform, Str) {
  EXPECT_EQ((Platform{"linux", "amd64", ""}).str(), "linux/amd64");
  EXPECT_EQ((Platform{"linux", "arm", "v7"}).str(), "linux/arm/v7");
}

TEST(Platform, ParsesAndNormalises) {
  const std::pair<std::string, Platform> cases[] = {
      {"linux/amd64", {"linux", "amd64", ""}},
      {"linux/arm/v7", {"linux", "arm", "v7"}},
      {"linux/arm/v6", {"linux", "arm", "v6"}},
      {"linux/arm64", {"linux", "arm64", ""}},
      {"linux/arm64/v8", {"linux", "arm64", "v8"}},  // kept as declared; matches arm64
      {"linux/aarch64", {"linux", "arm64", ""}},
      {"linux/aarch64/v8", {"linux", "arm64", "v8"}},
      {"linux/x86_64", {"linux", "amd64", ""}},
      {"linux/x86-64", {"linux", "amd64", ""}},
      {"linux/armhf", {"linux", "arm", "v7"}},
      {"linux/armel", {"linux", "arm", "v6"}},
      {"linux/i386", {"linux", "386", ""}},
      {"linux/i686", {"linux", "386", ""}},
      {"linux/ppc64el", {"linux", "ppc64le", ""}},
      {"linux/ppc64le", {"linux", "ppc64le", ""}},
      {"linux/s390x", {"linux", "s390x", ""}},
      {"linux/riscv64", {"linux", "riscv64", ""}},
      {"linux/mips64el", {"linux", "mips64le", ""}},
      // What uname -m says on 32-bit ARM boards.
      {"linux/armv7l", {"linux", "arm", "v7"}},
      {"linux/armv6l", {"linux", "arm", "v6"}},
      {"linux/armv5tel", {"linux", "arm", "v5"}},
      // Case does not matter.
      {"Linux/AMD64", {"linux", "amd64", ""}},
      {"linux/ARM/V7", {"linux", "arm", "v7"}},
      // One component: an architecture on Linux.
      {"arm64", {"linux", "arm64", ""}},
      {"x86_64", {"linux", "amd64", ""}},
      {"windows/amd64", {"windows", "amd64", ""}},
      {"linux/amd64/v3", {"linux", "amd64", "v3"}},
  };
  for (const auto& [in, want] : cases) {
    SCOPED_TRACE(in);
    auto p = parse_platform(in);
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_EQ(*p, want);
  }
}

TEST(Platform, OneWordIsAnOsOrAnArchitecture) {
  auto os = parse_platform("linux");
  ASSERT_TRUE(os.ok());
  EXPECT_EQ(*os, host_platform());  // not "linux/linux"
  auto arch = parse_platform("arm64");
  ASSERT_TRUE(arch.ok());
  EXPECT_EQ(*arch, (Platform{"linux", "arm64", ""}));
}

TEST(Platform, RejectsMalformed) {
  for (std::string in : {"", "/", "linux/", "/amd64", "linux//v7", "linux/arm/", "a/b/c/d",
                         "linux/am d64", "linux/arm/v7$", "linux//x$"}) {
    SCOPED_TRACE(in);
    auto p = parse_platform(in);
    ASSERT_FALSE(p.ok()) << p->str();
    EXPECT_EQ(p.error().op.word(), "parse platform");
    EXPECT_EQ(p.error().subject, in);
    EXPECT_EQ(p.error().detail, "expected os/arch[/variant]");
  }
}

TEST(Platform, HostPlatformIsNormalised) {
  Platform host = host_platform();
  EXPECT_EQ(host.os, "linux");
  EXPECT_FALSE(host.architecture.empty());
  EXPECT_NE(host.architecture, "x86_64");
  EXPECT_NE(host.architecture, "aarch64");
  auto again = parse_platform(host.str());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, host);
}

struct Match {
  Platform want, have;
  bool matches;
};

TEST(Platform, Matches) {
  const Match cases[] = {
      {{"linux", "amd64", ""}, {"linux", "amd64", ""}, true},
      {{"linux", "amd64", ""}, {"linux", "arm64", ""}, false},
      {{"linux", "amd64", ""}, {"windows", "amd64", ""}, false},
      {{"linux", "arm", "v7"}, {"linux", "arm", "v7"}, true},
      {{"linux", "arm", "v7"}, {"linux", "arm", "v6"}, false},
      {{"linux", "arm", "v6"}, {"linux", "arm", "v7"}, false},
      {{"linux", "arm", ""}, {"linux", "arm", "v6"}, true},  // no variant wanted: any
      {{"linux", "arm", "v7"}, {"linux", "arm", ""}, true},  // image without variant
      {{"linux", "arm64", ""}, {"linux", "arm64", "v8"}, true},
      {{"linux", "arm64", "v8"}, {"linux", "arm64", ""}, true},
      {{"linux", "arm64", "v8"}, {"linux", "arm64", "v8"}, true},
      {{"linux", "arm64", "v9"}, {"linux", "arm64", "v8"}, true},  // v8 counts as unset
      {{"linux", "arm", "v8"}, {"linux", "arm", ""}, true},
  };
  for (const Match& c : cases) {
    EXPECT_EQ(platform_matches(c.want, c.have), c.matches)
        << "want " << c.want.str() << " have " << c.have.str();
  }
}

}  // namespace
}  // namespace berth
