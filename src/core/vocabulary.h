// A vocabulary: the words with which a command line, a policy file or a record spells the
// values of an enum, as one table. The text is parsed once, at that edge; past it the value is
// the enum, and nothing compares the text again. Header only, so that a room may read another's
// table of words without linking it.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace berth {

/// One value and the word that spells it.
template <class E>
struct Word {
  E value;
  std::string_view text;
};

/// The value `text` spells in `words`; nullopt for any other text (case matters).
template <class E, size_t N>
constexpr std::optional<E> parse_word(const Word<E> (&words)[N], std::string_view text) {
  for (const Word<E>& w : words)
    if (w.text == text) return w.value;
  return std::nullopt;
}

/// The word that spells `value` ("" when the table lacks it).
template <class E, size_t N>
constexpr std::string_view word_of(const Word<E> (&words)[N], E value) {
  for (const Word<E>& w : words)
    if (w.value == value) return w.text;
  return {};
}

/// The words in table order, for a message: "a, b or c" by default; `quote` around each.
template <class E, size_t N>
std::string word_list(const Word<E> (&words)[N], std::string_view separator = ", ",
                      std::string_view last = " or ", std::string_view quote = "") {
  std::string out;
  for (size_t i = 0; i < N; ++i) {
    if (i > 0) out += i + 1 == N ? last : separator;
    out.append(quote).append(words[i].text).append(quote);
  }
  return out;
}

}  // namespace berth
