// The host's /etc/ld.so.cache (or one under a driver root), in any of glibc's layouts.
#include "devices/ld_cache.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)berth::parse_ld_cache(berth::fuzz::as_text(data, size), "fuzz");
  return 0;
}
