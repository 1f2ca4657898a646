// WWW-Authenticate challenges as a registry sends them.
#include "fuzz_util.h"
#include "image/auth.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)berth::parse_www_authenticate(berth::fuzz::as_text(data, size));
  return 0;
}
