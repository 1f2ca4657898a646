#include "core/json.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace berth {
namespace {

TEST(Json, TextOfValidDocumentsIsNlohmannsOwn) {
  nlohmann::json j = {{"a", 1}, {"b", {"x", "y"}}};
  EXPECT_EQ(to_text(j), j.dump());
  EXPECT_EQ(to_text(j, 2), j.dump(2));
  nlohmann::ordered_json o = {{"z", 1}, {"a", 2}};
  EXPECT_EQ(to_text(o), R"({"z":1,"a":2})");
}

TEST(Json, BytesThatAreNotUtf8DoNotThrow) {
  // A byte 0xff from an argument or an environment variable: dump() alone throws.
  nlohmann::json j = {{"Cmd", {"echo", "caf\xff"}}};
  EXPECT_THROW((void)j.dump(), nlohmann::json::type_error);
  EXPECT_EQ(to_text(j), "{\"Cmd\":[\"echo\",\"caf\xef\xbf\xbd\"]}");       // U+FFFD in its place
  EXPECT_EQ(to_text(nlohmann::ordered_json("\xc3")), "\"\xef\xbf\xbd\"");  // a cut-off sequence
}

TEST(Json, AppendedStringsAndNumbersAreToTextsOwn) {
  for (std::string s :
       std::vector<std::string>{"", "plain", "a \"quote\"", "back\\slash", "tab\there", "new\nline",
                                std::string("nul\0x", 5), "\x01\x1f\x7f", "caf\xc3\xa9", "caf\xff",
                                "\xc3", "/slash/", "\xe2\x82\xac and \xf0\x9f\x99\x82"}) {
    std::string out = "[";
    append_json_string(out, s);
    EXPECT_EQ(out, "[" + to_text(nlohmann::json(s))) << s;
  }
  for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{42}, INT64_MAX, INT64_MIN}) {
    std::string out;
    append_json_number(out, v);
    EXPECT_EQ(out, to_text(nlohmann::json(v)));
  }
}

}  // namespace
}  // namespace berth
