#include "broker/version.h"

#include <gtest/gtest.h>

namespace berth::broker {
namespace {

TEST(VersionTest, ComparesPartByPartAsNumbers) {
  EXPECT_EQ(compare_versions("12.10", "12.9"), 1);
  EXPECT_EQ(compare_versions("8.0", "9.0"), -1);
  EXPECT_EQ(compare_versions("12", "12.0"), 0);
  EXPECT_EQ(compare_versions("550.54.15", "550.54"), 1);
  EXPECT_EQ(compare_versions("535", "550.54.15"), -1);
}

TEST(VersionTest, WhatIsNotAVersionComparesToNothing) {
  EXPECT_EQ(compare_versions("", "1"), std::nullopt);
  EXPECT_EQ(compare_versions("12.x", "12"), std::nullopt);
  EXPECT_EQ(compare_versions("1..2", "1"), std::nullopt);
  EXPECT_EQ(compare_versions("-1", "1"), std::nullopt);
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
}  // namespace berth::broker
