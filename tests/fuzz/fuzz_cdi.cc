// CDI specs, JSON or YAML (the first byte picks), loaded and applied as `--device` would.
#include "devices/cdi.h"
#include "devices/yaml.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string& dir = berth::fuzz::scratch();
  std::string specs_dir = dir + "/cdi", rootfs = dir + "/rootfs";
  (void)berth::remove_tree(specs_dir);  // the previous input's spec; absent the first time
  if (::mkdir(specs_dir.c_str(), 0755) != 0) std::abort();
  (void)::mkdir(rootfs.c_str(), 0755);  // exists after the first input
  bool yaml = data[0] & 1;
  std::string_view text = berth::fuzz::as_text(data + 1, size - 1);
  if (yaml) (void)berth::parse_yaml(text, "fuzz.yaml");
  berth::fuzz::put_file(specs_dir + (yaml ? "/spec.yaml" : "/spec.json"), text);
  std::vector<std::string> warnings;
  auto specs = berth::load_cdi_specs({specs_dir}, &warnings);
  if (!specs.ok()) return 0;
  for (const auto& s : *specs) {
    const auto& devices = s.doc["devices"];
    for (const auto& d : devices) {
      berth::ContainerSpec spec;
      spec.rootfs = rootfs;
      std::string name = d.is_object() && d.contains("name") && d["name"].is_string()
                             ? d["name"].get<std::string>()
                             : "x";
      (void)berth::apply_cdi_device(*specs, s.kind + "=" + name, spec);
    }
  }
  return 0;
}
