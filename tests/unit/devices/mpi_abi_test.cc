#include "devices/mpi_abi.h"

#include <gtest/gtest.h>

namespace berth {
namespace {

TEST(MpiAbi, LinkerNameParsing) {
  struct Case {
    std::string file;
    bool ok;
    std::string linker;
    std::vector<int> version;
  } cases[] = {
      {"libmpi.so.12.1.11", true, "libmpi.so", {12, 1, 11}},
      {"libmpi.so.12", true, "libmpi.so", {12}},
      {"libmpi.so", true, "libmpi.so", {}},
      {"libmpich.so.0.0.0", true, "libmpich.so", {0, 0, 0}},
      {"libmpi_cxx.so.40.30.1", true, "libmpi_cxx.so", {40, 30, 1}},
      {"libmpi.so.12.x", false, "", {}},
      {"libmpi.so.", false, "", {}},
      {"libmpi.sox", false, "", {}},
      {"libmpi.a", false, "", {}},
      {".so.1", false, "", {}},
  };
  for (const Case& c : cases) {
    auto n = parse_library_name(c.file);
    ASSERT_EQ(n.has_value(), c.ok) << c.file;
    if (!n) continue;
    EXPECT_EQ(n->linker_name, c.linker) << c.file;
    EXPECT_EQ(n->version, c.version) << c.file;
  }
}

TEST(MpiAbi, PairwiseRuleTable) {
  using V = AbiVerdict;
  using R = MpiAbiRule;
  struct Case {
    std::string host, image;
    V major, full, strict;
  } cases[] = {
      // host                image                 major             full              strict
      {"libmpi.so.12.1.0", "libmpi.so.12.1.0", V::kOver, V::kOver, V::kOver},
      {"libmpi.so.12.1.9", "libmpi.so.12.1.0", V::kOver, V::kOver, V::kOver},  // patch ignored
      {"libmpi.so.12.2.0", "libmpi.so.12.1.5", V::kOver, V::kOver, V::kIncompatible},
      {"libmpi.so.12.1.0", "libmpi.so.12.2.0", V::kOver, V::kBeside, V::kIncompatible},
      {"libmpi.so.12", "libmpi.so.12.0.3", V::kOver, V::kOver, V::kOver},  // missing minor = 0
      {"libmpi.so.12", "libmpi.so.12.1", V::kOver, V::kBeside, V::kIncompatible},
      {"libmpi.so.12.3", "libmpi.so.12", V::kOver, V::kOver, V::kIncompatible},
      {"libmpi.so.40.1.0", "libmpi.so.12.1.0", V::kIncompatible, V::kIncompatible,
       V::kIncompatible},
      {"libmpi.so", "libmpi.so.12", V::kIncompatible, V::kIncompatible, V::kIncompatible},
      {"libmpi.so.12", "libmpi.so", V::kIncompatible, V::kIncompatible, V::kIncompatible},
  };
  for (const Case& c : cases) {
    auto h = *parse_library_name(c.host);
    auto i = *parse_library_name(c.image);
    EXPECT_EQ(check_mpi_abi(h, i, R::kMajor), c.major) << c.host << " vs " << c.image;
    EXPECT_EQ(check_mpi_abi(h, i, R::kFull), c.full) << c.host << " vs " << c.image;
    EXPECT_EQ(check_mpi_abi(h, i, R::kStrict), c.strict) << c.host << " vs " << c.image;
  }
}

TEST(MpiAbi, RuleNames) {
  EXPECT_EQ(parse_mpi_abi_rule("full"), MpiAbiRule::kFull);
  EXPECT_EQ(parse_mpi_abi_rule("major"), MpiAbiRule::kMajor);
  EXPECT_EQ(parse_mpi_abi_rule("strict"), MpiAbiRule::kStrict);
  EXPECT_FALSE(parse_mpi_abi_rule("Full"));
  EXPECT_EQ(mpi_abi_rule_name(MpiAbiRule::kStrict), "strict");
}

TEST(MpiAbi, ChoiceAmongCandidates) {
  std::vector<std::string> files = {"libmpi.so.12.0.5", "libmpi.so.12.1.1", "libmpi.so"};
  EXPECT_EQ(choose_image_library(files, "libmpi.so.12.0.5"), 0);  // what the cache loads
  EXPECT_EQ(choose_image_library(files, ""), 1);                  // else the highest
  EXPECT_EQ(choose_image_library({}, ""), -1);
}

TEST(MpiAbi, MatchNamesBothFilesWhenIncompatible) {
  std::vector<std::string> warnings;
  auto ok =
      match_mpi_libraries({"libmpi.so.12.1.0", "libmpifort.so.12.1.0"},
                          {"libmpi.so.12.2.0", "libmpi.so.12.0.0"}, MpiAbiRule::kFull, &warnings);
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  ASSERT_EQ(ok->size(), 2U);
  EXPECT_EQ((*ok)[0].image, "libmpi.so.12.2.0");
  EXPECT_EQ((*ok)[0].verdict, AbiVerdict::kBeside);
  EXPECT_EQ((*ok)[1].image, "");  // the image lacks it: beside
  ASSERT_EQ(warnings.size(), 1U);
  EXPECT_EQ(warnings[0],
            "host libmpi.so.12.1.0 (12.1.0) and image libmpi.so.12.2.0 (12.2.0): only the "
            "majors agree; the host's is injected beside the image's, not over it");
  auto bad =
      match_mpi_libraries({"libmpi.so.40.1.0"}, {"libmpi.so.12.1.0"}, MpiAbiRule::kMajor, nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(),
            "inject MPI libmpi.so: host libmpi.so.40.1.0 (40.1.0) and image libmpi.so.12.1.0 "
            "(12.1.0) are not ABI-compatible under the major rule");
}

}  // namespace
}  // namespace berth

namespace berth {
namespace {

TEST(MpiAbi, GlibcVersionNames) {
  using namespace std::string_literals;
  EXPECT_EQ(highest_glibc_version("x\0GLIBC_2.2.5\0GLIBC_2.34\0GLIBC_2.4\0GLIBC_PRIVATE\0"s),
            (std::vector<int>{2, 34}));
  EXPECT_EQ(highest_glibc_version("GLIBC_2.36"s), (std::vector<int>{2, 36}));
  EXPECT_EQ(highest_glibc_version("GLIBC_2.3x\0GLIBC_2\0"s), std::vector<int>{});
  EXPECT_EQ(highest_glibc_version("nothing"s), std::vector<int>{});
  EXPECT_EQ(version_string({2, 2, 5}), "2.2.5");
}

}  // namespace
}  // namespace berth
