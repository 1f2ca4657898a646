#include "core/safe_text.h"

#include <gtest/gtest.h>

namespace berth {
namespace {

TEST(SafeText, PrintableAndUtf8PassUnchanged) {
  EXPECT_EQ(safe_text("registry 127.0.0.1:5000 said: manifest unknown"),
            "registry 127.0.0.1:5000 said: manifest unknown");
  EXPECT_EQ(safe_text("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\xb3 C:\\dir"),
            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\xb3 C:\\dir");
}

TEST(SafeText, ControlsAreEscaped) {
  EXPECT_EQ(safe_text("a\nberth: hint: x"), "a\\nberth: hint: x");
  EXPECT_EQ(safe_text("\x1b[2J\r\t\x07\x7f"), "\\e[2J\\r\\t\\x07\\x7f");
  EXPECT_EQ(safe_text(std::string("nul\0here", 8)), "nul\\x00here");
  EXPECT_EQ(safe_text("c1 \xc2\x85 \xc2\x9b"), "c1 \\u0085 \\u009b");  // NEL, CSI
}

TEST(SafeText, InvalidUtf8IsEscapedByteByByte) {
  EXPECT_EQ(safe_text("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(safe_text("\xc3"), "\\xc3");                    // truncated sequence
  EXPECT_EQ(safe_text("\xc0\xaf"), "\\xc0\\xaf");           // overlong '/'
  EXPECT_EQ(safe_text("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a UTF-16 surrogate
}

TEST(GoQuote, AsStrconvQuoteWritesIt) {
  EXPECT_EQ(go_quote(""), R"("")");
  EXPECT_EQ(go_quote(R"(/bin/sh -c echo "ready" C:\dir)"),
            R"("/bin/sh -c echo \"ready\" C:\\dir")");
  EXPECT_EQ(go_quote("\a\b\f\n\r\t\v"), R"("\a\b\f\n\r\t\v")");
  EXPECT_EQ(go_quote(std::string("\x1b\0\x7f", 3)), R"("\x1b\x00\x7f")");
  EXPECT_EQ(go_quote("caf\xc3\xa9 \xe2\x80\xa6"), "\"caf\xc3\xa9 \xe2\x80\xa6\"");
  EXPECT_EQ(go_quote("c1 \xc2\x85"), R"("c1 \u0085")");
  EXPECT_EQ(go_quote("bad \xff\xc3"), R"("bad \xff\xc3")");
}

}  // namespace
}  // namespace berth
