// Small string helpers used across Berth: trimming, splitting, ASCII case, hex
// checks, and the few path-as-text questions (last component, "is this path
// under that folder") that need no file system.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace berth {

/// `s` without leading and trailing ASCII white space (" \t\n\v\f\r"); a view into `s`.
std::string_view trim(std::string_view s);
/// `s` with ASCII letters lowered; other bytes unchanged.
std::string lower(std::string_view s);
/// The pieces of `s` between each `sep`: n separators give n+1 pieces, empty ones kept
/// ("a::b" gives "a", "", "b"; "" gives one empty piece). Views into `s`.
std::vector<std::string_view> split(std::string_view s, char sep);
/// The lines of `text`: split at '\n', a final newline ending the last line rather than
/// starting an empty one ("a\n\nb\n" gives "a", "", "b"; "" gives none). Views into `text`.
std::vector<std::string_view> split_lines(std::string_view text);
/// As split(), each piece trimmed and copied; empty pieces kept.
std::vector<std::string> split_trimmed(std::string_view s, char sep);
/// True when every byte of `s` is 0-9 or a-f (digests and IDs are lowercase); true for "".
bool is_lower_hex(std::string_view s);
/// The last component of a slash-separated path ("/a/b.so" gives "b.so"; "x" gives "x").
std::string basename_of(std::string_view path);
/// True when `path` lies strictly beneath folder `dir` ("/a/b" under "/a"; "/a" is not).
bool is_under(std::string_view path, std::string_view dir);
/// True when `path` is `dir` or lies beneath it.
bool is_at_or_under(std::string_view path, std::string_view dir);

/// A word for a POSIX shell: 'text', each ' written as '\''.
std::string shell_quote(std::string_view s);

}  // namespace berth
