// Layer tars through the unpacker: each input is applied as a layer onto a fresh root.
#include "fuzz_util.h"
#include "image/unpack.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = berth::fuzz::scratch();
  static unsigned n = 0;
  std::string layer = dir + "/layer", root = dir + "/root";
  berth::fuzz::put_file(layer, berth::fuzz::as_text(data, size));
  // The previous input's root goes; should a layer have made it unremovable, the next name is
  // used rather than failing an input that is not at fault.
  while (berth::remove_tree(root).ok() == false || ::mkdir(root.c_str(), 0755) != 0)
    root = dir + "/root." + std::to_string(++n);
  (void)berth::apply_layer(root, berth::LayerInput(layer));
  return 0;
}
