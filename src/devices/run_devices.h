// The device part of `berth run`: GPUs (--gpus, NVIDIA_VISIBLE_DEVICES, AMD), CDI devices
// (--device vendor.com/class=name) and host device nodes (--device /dev/X), all added to a
// built ContainerSpec as the same DeviceEdit type (runtime/container_spec.h) that every engine
// applies. The CLI calls add_run_devices() and nothing else here.
#pragma once

#include "core/error.h"
#include "runtime/container_config.h"
#include "runtime/container_spec.h"

namespace berth {

/// Discovers and plans what `opts` and the container's environment ask for and adds it to
/// `spec`. Nothing is probed when nothing is asked. An image's own NVIDIA_VISIBLE_DEVICES
/// (CUDA images set "all") injects GPUs where there is a driver and is ignored where there is
/// none, so GPU images still run on a login node; asked by the caller (--gpus, -e,
/// --env-file), a missing driver is an error.
Status add_run_devices(const RunOptions& opts, const HostContext& host, ContainerSpec& spec);

}  // namespace berth
