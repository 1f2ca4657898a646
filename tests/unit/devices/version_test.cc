#include "devices/version.h"

#include <gtest/gtest.h>

namespace berth {
namespace {

int cmp(std::string_view a, std::string_view b) {
  return compare_versions(*parse_version(a), *parse_version(b));
}

TEST(VersionTest, ComparesPartByPartAsNumbers) {
  EXPECT_EQ(cmp("12.10", "12.9"), 1);
  EXPECT_EQ(cmp("8.0", "9.0"), -1);
  EXPECT_EQ(cmp("12", "12.0"), 0);
  EXPECT_EQ(cmp("550.54.15", "550.54"), 1);
  EXPECT_EQ(cmp("535", "550.54.15"), -1);
}

TEST(VersionTest, WhatIsNotAVersionDoesNotParse) {
  EXPECT_EQ(parse_version(""), std::nullopt);
  EXPECT_EQ(parse_version("12.x"), std::nullopt);
  EXPECT_EQ(parse_version("1..2"), std::nullopt);
  EXPECT_EQ(parse_version("-1"), std::nullopt);
}

TEST(VersionTest, AMinimumIsAMinimumNotAnEquality) {
  EXPECT_TRUE(version_at_least("12.4", "12.2"));  // INDIGO's equality would refuse this
  EXPECT_TRUE(version_at_least("12.2", "12.2"));
  EXPECT_FALSE(version_at_least("12.1", "12.2"));
  EXPECT_TRUE(version_at_least("", ""));
  EXPECT_FALSE(version_at_least("", "12.2"));  // unknown never passes a minimum
  EXPECT_FALSE(version_at_least("abc", "1"));
}

}  // namespace
}  // namespace berth
