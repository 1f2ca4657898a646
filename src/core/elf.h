// A small reader for the few ELF facts Berth needs: the class (32/64-bit), the
// machine, DT_SONAME (driver discovery) and PT_INTERP (the fakechroot engine's
// loader). It follows the program headers the way the dynamic loader does
// (PT_DYNAMIC, then DT_STRTAB mapped through the PT_LOAD segments), so stripped
// objects without section headers work too. It never reads out of bounds.
#pragma once

#include <string>

#include "core/error.h"

namespace berth {

struct ElfInfo {
  int elf_class = 0;             ///< 32 or 64
  int machine = 0;               ///< e_machine: EM_X86_64 (62), EM_386 (3), EM_AARCH64 (183), ...
  bool program_headers = false;  ///< the object has a program header table of the right shape
  std::string soname;            ///< DT_SONAME, empty when the object has none
  std::string interpreter;       ///< PT_INTERP (the program's loader), empty for a static program
};

/// Reads the ELF header, program headers and dynamic section of `path`.
/// Fails with "read ELF <path>: not an ELF file" for anything else.
Result<ElfInfo> read_elf_info(const std::string& path);

/// The loader (PT_INTERP) of the program open at `fd`, "" for a statically linked one. Fails
/// with "exec <what>: not an ELF executable" for a non-ELF file and refuses an object that is
/// not 64-bit for this machine.
Result<std::string> elf_interpreter(int fd, const std::string& what);

/// The e_machine value of the objects this build of Berth runs (EM_X86_64 on x86-64).
int host_elf_machine();

}  // namespace berth
