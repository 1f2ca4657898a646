// The signals Berth forwards to what it runs (the workload, its init, an engine
// tool), as one table, and the handler swap each runner does around a child.
#pragma once

#include <signal.h>

#include <array>
#include <cstddef>

namespace berth {

/// Signals forwarded to the workload: a user's kill of berth reaches the container.
inline constexpr int kForwardedSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
/// How many signals kForwardedSignals holds.
inline constexpr size_t kForwardedSignalCount = std::size(kForwardedSignals);

/// The actions the forwarded signals had before set_forward_handlers, in table order.
using ForwardedActions = std::array<struct sigaction, kForwardedSignalCount>;

/// Adds every forwarded signal to `set`.
void add_forwarded_signals(sigset_t* set);
/// Makes `handler` (SA_SIGINFO | SA_RESTART) the action of every forwarded signal, saving the
/// previous actions in `old` when it is not null. Allocates nothing, so the child between clone
/// and exec may call it.
void set_forward_handlers(void (*handler)(int, siginfo_t*, void*), ForwardedActions* old);
/// Puts every forwarded signal back to SIG_DFL (a child about to exec its workload).
void reset_forwarded_signals();
/// Puts back the actions set_forward_handlers saved.
void restore_forward_handlers(const ForwardedActions& old);

}  // namespace berth
