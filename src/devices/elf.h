// Moved to core/elf.h; this forwarder goes once devices/nvidia.cc (being split) includes that.
#pragma once

#include "core/elf.h"
