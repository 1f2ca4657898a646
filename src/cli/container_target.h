// What `run` and `create` share: finding the container a command names, or creating one from
// an image (pulled first when it is not here), and Docker's "Berth itself failed" status.
#pragma once

#include <string>
#include <vector>

#include "cli/command.h"
#include "core/error.h"
#include "runtime/containers.h"

namespace berth::cli {

/// Docker's status for "Berth itself failed" (bad flag, missing image, mount failure).
inline constexpr int kExitBerthFailed = 125;

/// prefix_command() hands an unknown option over as if it were the image: say what it is. A
/// Docker flag Berth cannot honour rootless (-p, --privileged, --memory, ...) gets a line
/// saying why and what to do instead.
Error unknown_flag(Op command, const std::string& flag);

/// Checks --pull's value: always, missing (the default) or never, as Docker takes it.
Status check_pull_policy(Op command, const std::string& pull);

/// Whether `what` names a squashfs file (a path, as `run` tells one from a directory: a file,
/// or a missing path with an image file's suffix) rather than an image or a container.
bool is_squashfs_file_argument(const std::string& what);

/// A new container (named `name`, may be empty) made from the image `what` names, pulling the
/// image first as `pull` says: "missing" when it is not in the store, "always" even when it is
/// (the registry's newer image then), "never" not at all. `op` (run, create) names the command
/// in a refusal. A squashfs file `what` is extracted into the container (image/unsquash.h).
/// `platform` (--platform os/arch[/variant], "" none): a stored image of another platform is
/// pulled again for this one (unless `pull` is "never": refused), an image the registry has
/// not for it is refused (image/pull.h), and one that is not this host's is warned about.
Result<ContainerRecord> create_from_image(const GlobalOptions& g, ContainerStore& cs,
                                          const std::string& what, const std::string& name, Op op,
                                          const std::vector<std::string>& command = {},
                                          const std::string& pull = "missing",
                                          const std::string& platform = "");

}  // namespace berth::cli
