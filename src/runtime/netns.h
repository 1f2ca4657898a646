// `--network none`: the container gets a network namespace of its own (CLONE_NEWNET, made with
// its user namespace, so rootless), holding only a loopback interface, which starts down.
#pragma once

namespace berth {

/// Brings up `lo` in the caller's network namespace; 0, or -1 with errno. Allocates nothing
/// (the child between clone and exec calls it).
int loopback_up();

}  // namespace berth
