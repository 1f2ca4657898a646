// The text encodings core/ keeps the one copy of: base64 in both alphabets (core/base64.h),
// HMAC-SHA256 (core/sha256.h) and RFC 3339 times and Go durations (core/clock.h).
#include <gtest/gtest.h>

#include <ctime>
#include <string>

#include "core/base64.h"
#include "core/clock.h"
#include "core/sha256.h"

namespace berth {
namespace {

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

TEST(Base64, StandardIsPaddedAndUrlIsNot) {
  // RFC 4648 section 10.
  const char* vectors[][3] = {{"", "", ""},
                              {"f", "Zg==", "Zg"},
                              {"fo", "Zm8=", "Zm8"},
                              {"foo", "Zm9v", "Zm9v"},
                              {"foob", "Zm9vYg==", "Zm9vYg"},
                              {"fooba", "Zm9vYmE=", "Zm9vYmE"},
                              {"foobar", "Zm9vYmFy", "Zm9vYmFy"}};
  for (const auto& v : vectors) {
    SCOPED_TRACE(v[0]);
    EXPECT_EQ(base64_encode(v[0]), v[1]);
    EXPECT_EQ(base64url_encode(v[0]), v[2]);
    EXPECT_EQ(base64_decode(v[1]), v[0]);
    EXPECT_EQ(base64_decode(v[2]), v[0]);  // padding dropped by the writer
    EXPECT_EQ(base64url_decode(v[1]), v[0]);
    EXPECT_EQ(base64url_decode(v[2]), v[0]);
  }
}

TEST(Base64, TheAlphabetsDifferInTwoCharacters) {
  std::string bytes = "\xfb\xff\xbf";
  EXPECT_EQ(base64_encode(bytes), "+/+/");
  EXPECT_EQ(base64url_encode(bytes), "-_-_");
  EXPECT_EQ(base64_decode("+/+/"), bytes);
  EXPECT_EQ(base64url_decode("-_-_"), bytes);
  EXPECT_FALSE(base64_decode("-_-_"));
  EXPECT_FALSE(base64url_decode("+/+/"));
  EXPECT_EQ(base64url_encode("\xfb\xff"), "-_8");
  EXPECT_EQ(base64url_decode("-_8="), "\xfb\xff");
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  EXPECT_EQ(base64_decode(base64_encode(all)), all);
  EXPECT_EQ(base64url_decode(base64url_encode(all)), all);
}

TEST(Base64, MalformedTextIsRefused) {
  // White space is skipped in the standard alphabet (wrapped lines), refused in base64url.
  EXPECT_EQ(base64_decode("Zm9v\nYmFy\r\n"), "foobar");
  EXPECT_FALSE(base64url_decode("Zm9v YmFy"));
  for (const char* bad : {"a!b=", "Zg=a", "Zg===", "Zm9v=", "Zm9=v", "Z", "Zm9vY", "===="}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(base64_decode(bad));
    EXPECT_FALSE(base64url_decode(bad));
  }
}

TEST(Hmac, Rfc4231Vectors) {
  EXPECT_EQ(hex(hmac_sha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // A key longer than the block is hashed first (test case 6).
  EXPECT_EQ(hex(hmac_sha256(std::string(131, '\xaa'),
                            "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  EXPECT_EQ(hex(hmac_sha256("", "")),
            "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
}

TEST(Clock, Rfc3339ToTheSecondMillisecondAndNanosecond) {
  EXPECT_EQ(rfc3339(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(rfc3339(1795407631), "2026-11-23T04:20:31Z");
  EXPECT_EQ(rfc3339_ms(1795654969042), "2026-11-26T01:02:49.042Z");
  EXPECT_EQ(rfc3339_ms(1795654969000), "2026-11-26T01:02:49.000Z");
  // Before 1970 the fraction counts up from the second below.
  EXPECT_EQ(rfc3339_ms(-1), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(rfc3339_ms(-1000), "1969-12-31T23:59:59.000Z");
  EXPECT_EQ(rfc3339_nano(int64_t{1795407631} * 1000000000 + 5), "2026-11-23T04:20:31.000000005Z");
  EXPECT_EQ(rfc3339_nano(-1), "1969-12-31T23:59:59.999999999Z");
  int64_t before = std::time(nullptr);
  int64_t now = parse_rfc3339(now_rfc3339());
  EXPECT_GE(now, before);
  EXPECT_LE(now, std::time(nullptr));
}

TEST(Clock, ParsesMillisecondsWithAndWithoutAFraction) {
  EXPECT_EQ(parse_rfc3339_ms("2026-11-26T01:02:49Z"), 1795654969000);
  EXPECT_EQ(parse_rfc3339_ms("2026-11-26T01:02:49.042Z"), 1795654969042);
  EXPECT_EQ(parse_rfc3339_ms("2026-11-26T01:02:49.4Z"), 1795654969400);
  EXPECT_EQ(parse_rfc3339_ms("2026-11-26T01:02:49.123456789Z"), 1795654969123);
  EXPECT_EQ(parse_rfc3339_ms("2026-11-26T02:02:49.5+01:00"), 1795654969500);
  EXPECT_EQ(parse_rfc3339_ms("1969-12-31T23:59:59.999Z"), -1);
  EXPECT_EQ(parse_rfc3339_ms(rfc3339_ms(-1234567)), -1234567);
  EXPECT_EQ(parse_rfc3339("1969-12-31T23:59:59.5Z"), -1);  // the second it falls in
  for (const char* bad : {"", "2026-11-26T01:02:49", "2026-11-26T01:02:49.Z",
                          "2026-11-26 01:02:49Z", "2026-11-26T01:02:49Zjunk", "yesterday"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(parse_rfc3339_ms(bad));
    EXPECT_FALSE(parse_rfc3339_ns(bad));
  }
  EXPECT_EQ(parse_rfc3339_ms("0001-01-01T00:00:00Z"), -62135596800000);  // Go's zero time
}

TEST(Clock, ParsesNanosecondsAsLogsTimestampsPrintThem) {
  int64_t t = int64_t{1795407631} * 1000000000 + 5;
  EXPECT_EQ(parse_rfc3339_ns(rfc3339_nano(t)), t);
  EXPECT_EQ(parse_rfc3339_ns(rfc3339_nano(-1)), -1);
  EXPECT_EQ(parse_rfc3339_ns("2026-11-23T05:20:31.5+01:00"), t - 5 + 500000000);
  EXPECT_EQ(parse_rfc3339_ns("2026-11-23T04:20:31.0000000059Z"), t);  // a tenth digit dropped
  EXPECT_FALSE(parse_rfc3339_ns("0001-01-01T00:00:00Z"));             // beyond int64's nanoseconds
  EXPECT_FALSE(parse_rfc3339_ns("2300-01-01T00:00:00Z"));
}

TEST(Clock, ParsesGoDurations) {
  constexpr int64_t kSecond = 1000000000;
  EXPECT_EQ(parse_go_duration("42m"), 42 * 60 * kSecond);
  EXPECT_EQ(parse_go_duration("1h30m"), 90 * 60 * kSecond);
  EXPECT_EQ(parse_go_duration("1.5h"), 90 * 60 * kSecond);
  EXPECT_EQ(parse_go_duration(".5s"), kSecond / 2);
  EXPECT_EQ(parse_go_duration("1.s"), kSecond);
  EXPECT_EQ(parse_go_duration("300ms"), 300 * 1000000);
  EXPECT_EQ(parse_go_duration("2us"), 2000);
  EXPECT_EQ(parse_go_duration("2\u00b5s"), 2000);
  EXPECT_EQ(parse_go_duration("7ns"), 7);
  EXPECT_EQ(parse_go_duration("-2h"), -2 * 3600 * kSecond);
  EXPECT_EQ(parse_go_duration("+1m1s"), 61 * kSecond);
  EXPECT_EQ(parse_go_duration("0"), 0);
  EXPECT_EQ(parse_go_duration("2562047h"), int64_t{2562047} * 3600 * kSecond);
  for (const char* bad : {"", "5", "-", ".", "1d", "h", "5 m", "1h-2m", "1.2.3s", "2562048h",
                          "9223372036854775808ns", "yesterday"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(parse_go_duration(bad));
  }
}

}  // namespace
}  // namespace berth
