// Moved to core/root_path.h; this forwarder goes once cli/run.cc (being split) includes that.
#pragma once

#include "core/root_path.h"
