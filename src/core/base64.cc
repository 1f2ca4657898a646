#include "core/base64.h"

#include <cstdint>

namespace berth {
namespace {

constexpr char kStandard[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr char kUrl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string encode(std::string_view bytes, const char* alphabet, bool pad) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : bytes) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(alphabet[(acc >> bits) & 0x3f]);
    }
  }
  if (bits > 0) out.push_back(alphabet[(acc << (6 - bits)) & 0x3f]);
  while (pad && out.size() % 4 != 0) out.push_back('=');
  return out;
}

/// The value of `c` in the alphabet, or -1.
int value_of(char c, bool url) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == (url ? '-' : '+')) return 62;
  if (c == (url ? '_' : '/')) return 63;
  return -1;
}

bool is_space(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r');
}

std::optional<std::string> decode(std::string_view text, bool url) {
  std::string out;
  out.reserve(text.size() / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  size_t digits = 0, pad = 0;
  for (char c : text) {
    if (!url && is_space(c)) continue;
    if (c == '=') {
      ++pad;
      continue;
    }
    int v = value_of(c, url);
    if (v < 0 || pad > 0) return std::nullopt;  // another character, or one after the padding
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    ++digits;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  // 4n+1 characters hold 6 bits of a byte: no bytes give that. The padding, where there is
  // some, only fills the last group of 4.
  if (digits % 4 == 1 || pad > (4 - digits % 4) % 4) return std::nullopt;
  return out;
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
  return encode(bytes, kStandard, true);
}

std::optional<std::string> base64_decode(std::string_view text) {
  return decode(text, false);
}

std::string base64url_encode(std::string_view bytes) {
  return encode(bytes, kUrl, false);
}

std::optional<std::string> base64url_decode(std::string_view text) {
  return decode(text, true);
}

}  // namespace berth
