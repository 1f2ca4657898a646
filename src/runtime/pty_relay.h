// `berth exec -t` into a container whose /dev/pts is its own (a run without -t): the caller's
// terminal is a pty of the host's devpts, which the container cannot name, so `tty` there says
// "not a tty". As `docker exec -t` does, the command then gets a new pty of the container's own
// devpts (its /dev/ptmx), and berth copies between it and the caller's terminal, which is put
// in raw mode meanwhile so that ^C, ^Z and the line editing reach the container's line
// discipline.
#pragma once

#include <sys/types.h>

#include "core/error.h"
#include "core/fs.h"

namespace berth {

/// A pty made in the container's devpts: berth keeps the master, the command gets the slave.
struct ContainerPty {
  UniqueFd master;
  UniqueFd slave;
};

/// Whether the caller's terminal `tty_fd` is the same file under the root at `root_fd` (a
/// container's, as /proc/PID/root opens it), as it is when the container's /dev/pts is the host's.
bool terminal_visible_in(int root_fd, int tty_fd);

/// A new pty of the devpts at /dev/ptmx of the root at `root_fd`, with the modes and window
/// size of `tty_fd`.
Result<ContainerPty> open_container_pty(int root_fd, int tty_fd);

/// Copies the pty's output to stdout, and stdin to it when `input`, until the process `pid`
/// has ended (it is not reaped) and the output is drained; the caller's terminal `tty_fd` is in
/// raw mode meanwhile, and its window size follows to the pty.
void relay_pty(int master, int tty_fd, bool input, pid_t pid);

}  // namespace berth
