#include "core/json.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace berth
