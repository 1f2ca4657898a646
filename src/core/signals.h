// The signals Berth forwards to what it runs (the workload, its init, an engine
// tool), as one table, and the one handler that forwards them.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <array>
#include <cstddef>

namespace berth {

/// Signals forwarded to the workload: a user's kill of berth reaches the container.
inline constexpr int kForwardedSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
/// How many signals kForwardedSignals holds.
inline constexpr size_t kForwardedSignalCount = std::size(kForwardedSignals);

/// The actions the forwarded signals had before forward_signals_to, in table order.
using ForwardedActions = std::array<struct sigaction, kForwardedSignalCount>;

/// Adds every forwarded signal to `set`.
void add_forwarded_signals(sigset_t* set);
/// From now on sends each forwarded signal this process gets on to `target` (a pid, or minus a
/// process group), except one a terminal sent (SI_KERNEL): that already reached the terminal's
/// process group. Saves the previous actions in `old` when it is not null. Allocates nothing,
/// so the child between clone and exec (the container's init) may call it.
void forward_signals_to(pid_t target, ForwardedActions* old);
/// Stops forwarding and puts back the actions forward_signals_to saved.
void stop_forwarding(const ForwardedActions& old);
/// Puts every forwarded signal back to SIG_DFL (a child about to exec its workload).
void reset_forwarded_signals();

}  // namespace berth
