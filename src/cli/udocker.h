// The udocker drop-in: invoked through a link named `udocker`, Berth takes udocker's command
// line (global options, commands, `--opt=value` options, output formats scripts parse) and
// runs it as Berth's own commands. One translation layer, here; docs/udocker.md has the table
// of every udocker command and option and what Berth does with it.
#pragma once

#include <string>

#include "core/error.h"

namespace berth::cli {

/// Whether argv[0]'s base name is "udocker" (a link to the berth binary).
bool invoked_as_udocker(const char* argv0);

/// `berth setup --udocker-link DIR`: makes DIR/udocker a symbolic link to this binary.
Status make_udocker_link(const std::string& dir);

/// Runs a udocker command line (argv[0] included); returns the exit status.
int udocker_main(int argc, char** argv);

}  // namespace berth::cli
