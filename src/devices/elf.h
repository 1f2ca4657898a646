// A small reader for the few ELF facts driver discovery needs: the class
// (32/64-bit), the machine and DT_SONAME. It follows the program headers the
// way the dynamic loader does (PT_DYNAMIC, then DT_STRTAB mapped through the
// PT_LOAD segments), so stripped libraries without section headers work too.
#pragma once

#include <string>

#include "core/error.h"

namespace berth {

struct ElfInfo {
  int elf_class = 0;    ///< 32 or 64
  int machine = 0;      ///< e_machine: EM_X86_64 (62), EM_386 (3), EM_AARCH64 (183), ...
  std::string soname;   ///< DT_SONAME, empty when the object has none
};

/// Reads the ELF header, program headers and dynamic section of `path`.
/// Fails with "not an ELF file" for anything else; never reads out of bounds.
Result<ElfInfo> read_elf_info(const std::string& path);

/// The e_machine value of the objects this build of Berth runs (EM_X86_64 on x86-64).
int host_elf_machine();

}  // namespace berth
