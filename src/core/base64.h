// Base64 (RFC 4648), both alphabets Berth meets: the standard one with padding, as Docker's
// config.json "auth" entries and HTTP Basic credentials carry it (section 4), and base64url
// without padding, as JSON Web Tokens and JWKs do (section 5; RFC 7515 section 2).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace berth {

/// `bytes` in the standard alphabet (A-Z a-z 0-9 + /), padded with '=' to a multiple of 4.
std::string base64_encode(std::string_view bytes);
/// The bytes of standard base64 `text`; the padding is optional (some writers drop it) and ASCII
/// white space (line breaks) is skipped. nullopt for any other character, a '=' before the end
/// or beyond the last group of 4, or a length no bytes give (4n+1 characters).
std::optional<std::string> base64_decode(std::string_view text);

/// `bytes` in the URL-safe alphabet (A-Z a-z 0-9 - _), without padding.
std::string base64url_encode(std::string_view bytes);
/// The bytes of base64url `text`, padding optional; as base64_decode() but in the URL-safe
/// alphabet, and white space is refused as any other character is.
std::optional<std::string> base64url_decode(std::string_view text);

}  // namespace berth
