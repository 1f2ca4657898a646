// ELF files: driver libraries (soname, class, machine) and programs (their loader).
#include "core/elf.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string path = berth::fuzz::scratch() + "/object";
  berth::fuzz::put_file(path, berth::fuzz::as_text(data, size));
  (void)berth::read_elf_info(path);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) std::abort();
  (void)berth::elf_interpreter(fd, path);
  ::close(fd);
  return 0;
}
