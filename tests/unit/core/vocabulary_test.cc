// The vocabularies (core/vocabulary.h): every value of each enum round-trips through its word,
// other words are refused, and the lists messages print come from the tables.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/vocabulary.h"
#include "devices/mpi_abi.h"
#include "runtime/root_emulation.h"

namespace berth {
namespace {

enum class Colour { kRed, kGreen, kBlue };
constexpr Word<Colour> kColours[] = {
    {Colour::kRed, "red"}, {Colour::kGreen, "green"}, {Colour::kBlue, "blue"}};

TEST(Vocabulary, ParseNameAndList) {
  static_assert(parse_word(kColours, "green") == Colour::kGreen);
  static_assert(word_of(kColours, Colour::kBlue) == "blue");
  EXPECT_EQ(parse_word(kColours, "Green"), std::nullopt);  // case matters
  EXPECT_EQ(parse_word(kColours, ""), std::nullopt);
  EXPECT_EQ(word_list(kColours), "red, green or blue");
  EXPECT_EQ(word_list(kColours, " or ", " or ", "\""), "\"red\" or \"green\" or \"blue\"");
  constexpr Word<Colour> kOne[] = {{Colour::kRed, "red"}};
  EXPECT_EQ(word_list(kOne), "red");
}

/// Every value of `words` has one word, which parses back to it.
template <class E, size_t N>
void expect_round_trips(const Word<E> (&words)[N], size_t values) {
  std::set<std::string_view> seen;
  for (const Word<E>& w : words) {
    EXPECT_TRUE(seen.insert(w.text).second) << w.text << " twice";
    EXPECT_EQ(parse_word(words, w.text), w.value) << w.text;
    EXPECT_EQ(word_of(words, w.value), w.text);
  }
  EXPECT_EQ(seen.size(), values);
}

TEST(Vocabulary, RootEmulationModes) {
  expect_round_trips(kRootEmulationWords, 4);
  for (RootEmulation m : {RootEmulation::kNone, RootEmulation::kSeccomp, RootEmulation::kSubids,
                          RootEmulation::kAuto})
    EXPECT_EQ(parse_root_emulation(root_emulation_name(m)), m);
  EXPECT_EQ(parse_root_emulation("fake"), std::nullopt);
  // The order the messages of --root-emulation and the policy list them in.
  EXPECT_EQ(word_list(kRootEmulationWords), "auto, subids, seccomp or none");
}

TEST(Vocabulary, MpiAbiRules) {
  expect_round_trips(kMpiAbiRuleWords, 3);
  for (MpiAbiRule r : {MpiAbiRule::kMajor, MpiAbiRule::kFull, MpiAbiRule::kStrict})
    EXPECT_EQ(parse_mpi_abi_rule(mpi_abi_rule_name(r)), r);
  EXPECT_EQ(parse_mpi_abi_rule("loose"), std::nullopt);
  EXPECT_EQ(word_list(kMpiAbiRuleWords), "major, full or strict");
}

}  // namespace
}  // namespace berth
