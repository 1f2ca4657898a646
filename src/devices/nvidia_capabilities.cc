#include "devices/nvidia_capabilities.h"

namespace berth {
namespace {

/// Driver libraries by capability. A name ending in '*' matches by prefix.
struct LibraryRule {
  const char* base;
  CapabilitySet caps;
};
const LibraryRule kLibraries[] = {
    {"libnvidia-ml", kCapUtility},
    {"libnvidia-cfg", kCapUtility},
    {"libnvidia-nscq", kCapUtility},
    {"libcuda", kCapCompute},
    {"libcudadebugger", kCapCompute},
    {"libnvidia-opencl", kCapCompute},
    {"libnvidia-gpucomp", kCapCompute},
    {"libnvidia-ptxjitcompiler", kCapCompute},
    {"libnvidia-fatbinaryloader", kCapCompute},
    {"libnvidia-allocator", kCapCompute},
    {"libnvidia-compiler", kCapCompute},
    {"libnvidia-pkcs11*", kCapCompute},
    {"libnvidia-nvvm", kCapCompute},
    {"libnvcuvid", kCapVideo},
    {"libnvidia-encode", kCapVideo},
    {"libnvidia-opticalflow", kCapVideo},
    {"libvdpau_nvidia", kCapVideo},
    {"libGLX_nvidia", kCapGraphics},
    {"libEGL_nvidia", kCapGraphics},
    {"libGLESv2_nvidia", kCapGraphics},
    {"libGLESv1_CM_nvidia", kCapGraphics},
    {"libnvidia-glcore", kCapGraphics},
    {"libnvidia-tls", kCapGraphics},
    {"libnvidia-glsi", kCapGraphics},
    {"libnvidia-eglcore", kCapGraphics},
    {"libnvidia-glvkspirv", kCapGraphics},
    {"libnvidia-rtcore", kCapGraphics},
    {"libnvoptix", kCapGraphics},
    {"libnvidia-fbc", kCapGraphics | kCapDisplay},
    {"libnvidia-ngx", kCapNgx},
};

}  // namespace

const std::vector<CapabilityName>& capability_names() {
  static const std::vector<CapabilityName> names = {
      {"utility", kCapUtility},   {"compute", kCapCompute}, {"video", kCapVideo},
      {"graphics", kCapGraphics}, {"display", kCapDisplay}, {"ngx", kCapNgx},
      {"compat32", kCapCompat32},
  };
  return names;
}

std::string capabilities_str(CapabilitySet caps) {
  std::string s;
  for (const auto& c : capability_names()) {
    if (!(caps & c.cap)) continue;
    if (!s.empty()) s += ',';
    s += c.name;
  }
  return s;
}

CapabilitySet library_capabilities(std::string_view base) {
  for (const auto& r : kLibraries) {
    std::string_view rule = r.base;
    if (rule.back() == '*' ? base.substr(0, rule.size() - 1) == rule.substr(0, rule.size() - 1)
                           : base == rule)
      return r.caps;
  }
  return 0;
}

}  // namespace berth
