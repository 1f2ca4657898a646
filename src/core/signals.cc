#include "core/signals.h"

#include <cstring>

namespace berth {
namespace {

/// Where forward_to_target sends signals: a pid, minus a process group, or 0 (nowhere).
volatile pid_t g_forward_target = 0;

void forward_to_target(int sig, siginfo_t* info, void*) {
  if (info != nullptr && info->si_code == SI_KERNEL) return;  // the terminal's group has it
  pid_t target = g_forward_target;
  if (target != 0) (void)::kill(target, sig);
}

}  // namespace

void add_forwarded_signals(sigset_t* set) {
  for (int sig : kForwardedSignals) sigaddset(set, sig);
}

void forward_signals_to(pid_t target, ForwardedActions* old) {
  g_forward_target = target;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = forward_to_target;
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

void stop_forwarding(const ForwardedActions& old) {
  g_forward_target = 0;
  for (size_t i = 0; i < kForwardedSignalCount; ++i)
    ::sigaction(kForwardedSignals[i], &old[i], nullptr);
}

}  // namespace berth
