#include "core/safe_text.h"

#include <fmt/core.h>

namespace berth {
namespace {

/// The length of the valid UTF-8 sequence starting at `s[i]` (2 to 4), 0 when there is none.
size_t utf8_length(std::string_view s, size_t i) {
  auto cont = [&](size_t k) {
    return i + k < s.size() && (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
  };
  unsigned char c = static_cast<unsigned char>(s[i]);
  unsigned char c1 = i + 1 < s.size() ? static_cast<unsigned char>(s[i + 1]) : 0;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F)) return 0;  // overlong, surrogate
    return cont(1) && cont(2) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if ((c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F)) return 0;  // overlong, > U+10FFFF
    return cont(1) && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

}  // namespace

std::string safe_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    if (c < 0x80) {
      switch (c) {
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        case 0x1B:
          out += "\\e";
          break;
        default:
          out += fmt::format("\\x{:02x}", c);
      }
      ++i;
      continue;
    }
    size_t n = utf8_length(text, i);
    if (n == 0) {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    } else if (n == 2 && c == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(text[i + 1]));  // C1 control
      i += 2;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string go_quote(std::string_view text) {
  std::string out = "\"";
  out.reserve(text.size() + 2);
  for (size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      static constexpr std::string_view kNamed = "\a\b\f\n\r\t\v\"\\";
      static constexpr std::string_view kLetters = "abfnrtv\"\\";
      if (size_t k = kNamed.find(static_cast<char>(c)); k != std::string_view::npos) {
        out += '\\';
        out += kLetters[k];
      } else if (c < 0x20 || c == 0x7F) {
        out += fmt::format("\\x{:02x}", c);
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    size_t n = utf8_length(text, i);
    if (n == 0) {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    } else if (n == 2 && c == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(text[i + 1]));  // C1 control
      i += 2;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out + "\"";
}

}  // namespace berth
