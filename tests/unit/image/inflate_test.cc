#include "image/inflate.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>

#include "core/sha256.h"

namespace berth {
namespace {

/// `data` as one gzip member (zlib's gzip wrapper, level 6).
std::string gzip(const std::string& data) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, data.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

/// Everything `bytes` inflates to, fed in pieces of `piece` bytes, out in pieces of `cap`.
Result<std::string> inflate_all(const std::string& bytes, size_t piece, size_t cap) {
  GzipInflater g;
  std::string plain, out(cap, '\0');
  for (size_t at = 0; at < bytes.size(); at += piece) {
    std::string_view in(bytes.data() + at, std::min(piece, bytes.size() - at));
    for (;;) {
      size_t made = BERTH_TRY(g.inflate(&in, out.data(), out.size()));
      plain.append(out.data(), made);
      if (made == 0) break;
    }
  }
  for (;;) {  // flush what it holds
    std::string_view none;
    size_t made = BERTH_TRY(g.inflate(&none, out.data(), out.size()));
    if (made == 0) break;
    plain.append(out.data(), made);
  }
  if (!g.at_end()) return make_error("decompress", "gzip", "truncated gzip data");
  return plain;
}

class Inflate : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fast_gzip_available()) GTEST_SKIP() << "libisal2 is not installed (or BERTH_GZIP=zlib)";
    for (size_t i = 0; i < (size_t{3} << 20); ++i)
      data_.push_back(static_cast<char>("layer bytes "[i % 12] ^ ((i * 2654435761u) >> 29)));
  }
  std::string data_;
};

TEST_F(Inflate, GivesTheBytesWhateverThePieces) {
  std::string z = gzip(data_);
  for (auto [piece, cap] :
       {std::pair<size_t, size_t>{1 << 20, 1 << 20}, {4096, 1000}, {7, 65536}}) {
    auto got = inflate_all(z, piece, cap);
    ASSERT_TRUE(got.ok()) << got.error().message();
    EXPECT_EQ(sha256_digest(*got), sha256_digest(data_)) << piece << " " << cap;
  }
}

TEST_F(Inflate, ReadsEveryMemberAndStopsAtTrailingBytes) {
  std::string two = gzip("first ") + gzip("second");
  auto got = inflate_all(two, 5, 3);
  ASSERT_TRUE(got.ok()) << got.error().message();
  EXPECT_EQ(*got, "first second");
  auto padded = inflate_all(gzip("only") + std::string(512, '\0'), 100, 64);
  ASSERT_TRUE(padded.ok()) << padded.error().message();
  EXPECT_EQ(*padded, "only");
}

TEST_F(Inflate, RefusesTruncatedAndCorruptStreams) {
  std::string z = gzip(data_);
  auto cut = inflate_all(z.substr(0, z.size() / 2), 4096, 65536);
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.error().message(), "decompress gzip: truncated gzip data");
  std::string bad_crc = z;
  bad_crc[bad_crc.size() - 6] ^= 0x40;  // the CRC-32 of the trailer
  auto crc = inflate_all(bad_crc, 65536, 65536);
  ASSERT_FALSE(crc.ok());
  EXPECT_EQ(crc.error().detail, "corrupt gzip data: CRC or length mismatch");
  auto garbage = inflate_all(std::string(100, 'z'), 10, 10);
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.error().detail, "corrupt gzip data: not a gzip header");
}

}  // namespace
}  // namespace berth
