// Text from outside (a registry's error message, a tag, an image's label) made safe to print on
// a terminal: a registry must not be able to forge a `berth: hint:` line, clear the screen or
// move the cursor with what it sends.
#pragma once

#include <string>
#include <string_view>

namespace berth {

/// `text` with control characters escaped: C0 controls and DEL as \n, \r, \t, \e or \xHH, C1
/// controls (U+0080..U+009F) as \u0080.., bytes that are not UTF-8 as \xHH; a backslash stays
/// as it is. Printable ASCII and valid UTF-8 pass unchanged.
std::string safe_text(std::string_view text);

/// `text` as Go's strconv.Quote writes it (Docker's `ps` COMMAND): in double quotes, '"' and
/// '\\' escaped, \a \b \f \n \r \t \v, the other C0 controls and DEL as \xHH, C1 controls as
/// \u00HH, bytes that are not UTF-8 as \xHH. Other valid UTF-8 passes unchanged (Go escapes a
/// few more code points it deems unprintable, such as U+00AD).
std::string go_quote(std::string_view text);

}  // namespace berth
