#include "core/signals.h"

#include <cstring>

namespace berth {

void add_forwarded_signals(sigset_t* set) {
  for (int sig : kForwardedSignals) sigaddset(set, sig);
}

void set_forward_handlers(void (*handler)(int, siginfo_t*, void*), ForwardedActions* old) {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = handler;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < kForwardedSignalCount; ++i)
    ::sigaction(kForwardedSignals[i], &sa, old != nullptr ? &(*old)[i] : nullptr);
}

void reset_forwarded_signals() {
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig : kForwardedSignals) (void)::sigaction(sig, &dfl, nullptr);  // cannot fail for these
}

void restore_forward_handlers(const ForwardedActions& old) {
  for (size_t i = 0; i < kForwardedSignalCount; ++i)
    ::sigaction(kForwardedSignals[i], &old[i], nullptr);
}

}  // namespace berth
