// /proc/driver/nvidia under a driver root: the input is the version file, a GPU's information
// file and the params file, separated by NUL bytes; GPU discovery reads them.
#include "devices/nvidia_discover.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text = berth::fuzz::as_text(data, size);
  std::string_view parts[3];
  for (auto& p : parts) {
    size_t nul = text.find('\0');
    p = text.substr(0, nul);
    text = nul == std::string_view::npos ? std::string_view() : text.substr(nul + 1);
  }
  (void)berth::parse_nvrm_version(parts[0]);
  const std::string root = berth::fuzz::scratch() + "/driver-root";
  static const bool made = [&] {
    return berth::make_dirs(root + "/proc/driver/nvidia/gpus/0000:01:00.0", 0755).ok();
  }();
  if (!made) std::abort();
  berth::fuzz::put_file(root + "/proc/driver/nvidia/version", parts[0]);
  berth::fuzz::put_file(root + "/proc/driver/nvidia/gpus/0000:01:00.0/information", parts[1]);
  berth::fuzz::put_file(root + "/proc/driver/nvidia/params", parts[2]);
  berth::DiscoveryOptions o;
  o.driver_root = root;
  o.dev_root = root + "/dev";
  o.cuda_probe = berth::CudaProbe::kNever;
  (void)berth::discover_nvidia(o);
  return 0;
}
