// Image references, platforms and search terms, as users and registries write them.
#include "fuzz_util.h"
#include "image/platform.h"
#include "image/reference.h"
#include "image/search.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text = berth::fuzz::as_text(data, size);
  if (auto r = berth::parse_reference(text); r.ok()) {
    // A parsed reference prints as one that parses to the same thing.
    auto again = berth::parse_reference(r->str());
    if (!again.ok() || again->str() != r->str()) __builtin_trap();
    (void)r->manifest_ref();
  }
  if (auto p = berth::parse_platform(text); p.ok()) (void)berth::platform_matches(*p, *p);
  (void)berth::split_search_term(text);
  return 0;
}
