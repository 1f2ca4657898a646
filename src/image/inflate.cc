#include "image/inflate.h"

#include <isa-l/igzip_lib.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "core/dynlib.h"

namespace berth {
namespace {

/// The three functions of ISA-L's inflate API Berth calls.
struct IsalApi {
  BERTH_LAZY_FUNCTION(libisal(), inflate_init, isal_inflate_init);
  BERTH_LAZY_FUNCTION(libisal(), inflate_reset, isal_inflate_reset);
  BERTH_LAZY_FUNCTION(libisal(), inflate, isal_inflate);
};

const IsalApi& isal() {
  static const IsalApi api;
  return api;
}

const char* isal_message(int r) {
  switch (r) {
    case ISAL_INVALID_BLOCK:
      return "invalid deflate block";
    case ISAL_INVALID_SYMBOL:
      return "invalid deflate symbol";
    case ISAL_INVALID_LOOKBACK:
      return "invalid back-reference distance";
    case ISAL_INVALID_WRAPPER:
      return "not a gzip header";
    case ISAL_UNSUPPORTED_METHOD:
      return "unsupported compression method";
    case ISAL_INCORRECT_CHECKSUM:
      return "CRC or length mismatch";
    default:
      return "unknown error";
  }
}

}  // namespace

bool fast_gzip_available() {
  static const bool ok = [] {
    const char* choice = std::getenv("BERTH_GZIP");
    if (choice != nullptr && std::strcmp(choice, "zlib") == 0) return false;
    return libisal().available();
  }();
  return ok;
}

struct GzipInflater::State {
  inflate_state s;  // 85 KiB: on the heap, never on a thread's stack
};

GzipInflater::GzipInflater() : state_(std::make_unique<State>()) {
  isal().inflate_init(&state_->s);
  state_->s.crc_flag = ISAL_GZIP;
}

GzipInflater::~GzipInflater() = default;

Result<size_t> GzipInflater::inflate(std::string_view* in, char* out, size_t cap) {
  inflate_state& s = state_->s;
  size_t made = 0;
  // With no input left, inflate is still called: it may hold decompressed bytes to flush.
  while (made < cap && !over_) {
    if (s.block_state == ISAL_BLOCK_FINISH) {  // a member ended: another, or the end
      if (in->empty()) break;
      if (static_cast<unsigned char>(in->front()) != 0x1f) {
        over_ = true;  // trailing bytes that are not gzip: the stream is over
        break;
      }
      isal().inflate_reset(&s);
      s.crc_flag = ISAL_GZIP;
      at_end_ = false;
    }
    constexpr size_t kMax = std::numeric_limits<uint32_t>::max();
    s.next_in = reinterpret_cast<uint8_t*>(const_cast<char*>(in->data()));
    s.avail_in = static_cast<uint32_t>(std::min(in->size(), kMax));
    s.next_out = reinterpret_cast<uint8_t*>(out + made);
    s.avail_out = static_cast<uint32_t>(std::min(cap - made, kMax));
    uint32_t before_in = s.avail_in, before_out = s.avail_out;
    int r = isal().inflate(&s);
    in->remove_prefix(before_in - s.avail_in);
    made += before_out - s.avail_out;
    if (r < 0)
      return make_error("decompress", "gzip", std::string("corrupt gzip data: ") + isal_message(r));
    if (s.block_state == ISAL_BLOCK_FINISH) at_end_ = true;
    if (before_in == s.avail_in && before_out == s.avail_out) break;  // needs more input
  }
  return made;
}

}  // namespace berth
