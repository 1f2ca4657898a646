#!/usr/bin/env bash
# Demo of what Berth does today: a registry on 127.0.0.1, a busybox image
# built here and pushed to it, then berth pulling, listing, inspecting,
# verifying and unpacking it, running containers from it, and GPU discovery.
# Run as root, berth runs as the unprivileged user "berthtest", as it would for
# a researcher on a login node.
# Usage: scripts/demo.sh
# Installs only the packages the demo needs and builds only the programs it runs
# (scripts/setup.sh --demo); scripts/test.sh installs and builds the rest.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh --demo

work=$(mktemp -d /tmp/berth-demo.XXXXXX)
chmod 755 "$work"
registry_pid=""
cleanup() {
  if [ -n "$registry_pid" ]; then
    kill "$registry_pid" 2>/dev/null || true   # already gone is fine
    wait "$registry_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

say() { printf '\n== %s\n' "$*"; }

# --- a registry on a free loopback port, storage in the temp folder
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
registry="127.0.0.1:$port"
mkdir -p "$work/registry"
cat > "$work/registry/config.yml" <<YAML
version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $work/registry/storage
http:
  addr: $registry
YAML
say "starting docker-registry on $registry"
docker-registry serve "$work/registry/config.yml" >"$work/registry/log" 2>&1 &
registry_pid=$!
for _ in $(seq 100); do
  curl -fsS "http://$registry/v2/" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "http://$registry/v2/" >/dev/null

# --- an image built here from busybox-static, pushed through the registry API
say "building a busybox image and pushing it"
python3 tests/e2e/imagelib.py push-busybox --registry "$registry" --repo demo/busybox --tag 1.0
image="$registry/demo/busybox:1.0"

# --- berth, as an unprivileged user
berth_bin="$PWD/build-demo/src/berth"
home="$work/home"
mkdir -p "$home"
runas=()
if [ "$(id -u)" -eq 0 ]; then
  id berthtest >/dev/null 2>&1 || useradd --no-create-home --shell /bin/sh berthtest
  chown berthtest: "$home"
  runas=(setpriv --reuid=berthtest --regid=berthtest --init-groups --)
  if ! "${runas[@]}" test -x "$berth_bin"; then
    # The build tree is not reachable for that user: run a copy.
    install -D -m 755 "$berth_bin" "$work/bin/berth"
    berth_bin="$work/bin/berth"
  fi
fi
berth() {
  printf '\n$ berth %s\n' "$*"
  env -i PATH=/usr/bin:/bin HOME="$home" BERTH_HOME="$home/berth" LANG=C.UTF-8 \
    "${runas[@]}" "$berth_bin" "$@"
}
say "berth runs as $(${runas[@]+"${runas[@]}"} id -un), store in $home/berth"

berth pull "$image"
berth images
berth inspect "$image"
berth verify "$image"
berth unpack "$image" "$home/rootfs"
echo "unpacked into $home/rootfs: $(ls "$home/rootfs" | tr "\n" " ")"
echo "  bin/: $(ls "$home/rootfs/bin" | tr "\n" " ")"

say "a rootless container: user + mount namespaces, no setuid helper, no daemon"
berth run --rm "$image" /bin/sh -c 'echo "hello from a rootless container: uid $(id -u), $(cat /etc/os-release | head -1)"'
berth create --name demo "$image"
berth run demo /bin/sh -c 'echo kept > /kept.txt'
berth run demo /bin/cat /kept.txt
berth ps -a
say "archives: save and load an image; export the container and import it as an image"
berth save -o "$home/image.tar" "$image"
berth rmi "$image"
berth load -i "$home/image.tar"
berth export -o "$home/demo.tar" demo
berth import "$home/demo.tar" demo/exported:1
berth images
berth rm demo

say "GPU discovery on this host"
berth gpu info || echo "(no GPU driver on this machine: berth gpu info exits 1, as nvidia-smi does)"

# A fabricated driver tree, as the tests build it: real ELF libraries carrying the driver's
# sonames and version suffix, /proc/driver/nvidia files and stand-in device nodes.
fake="$work/fake-driver"
libs=build-demo/tests/fake_gpu_libs
if [ -f "$libs/libcuda.so.550.54.15" ]; then
  say "GPU discovery on a fabricated driver root (BERTH_DRIVER_ROOT=$fake)"
  ver=550.54.15
  mkdir -p "$fake/usr/lib/x86_64-linux-gnu" "$fake/proc/driver/nvidia/gpus/0000:07:00.0" "$fake/dev"
  for l in libcuda libnvidia-ml libnvidia-ptxjitcompiler; do
    cp "$libs/$l.so.$ver" "$fake/usr/lib/x86_64-linux-gnu/"
  done
  echo "NVRM version: NVIDIA UNIX x86_64 Kernel Module  $ver  Tue Mar  5 22:23:56 UTC 2024" \
    >"$fake/proc/driver/nvidia/version"
  printf 'Model: \t\t NVIDIA H100 80GB HBM3\nGPU UUID: \t GPU-11111111-2222-3333-4444-555555555555\nBus Location: \t 0000:07:00.0\nDevice Minor: \t 0\n' \
    >"$fake/proc/driver/nvidia/gpus/0000:07:00.0/information"
  touch "$fake/dev/nvidiactl" "$fake/dev/nvidia0" "$fake/dev/nvidia-uvm"
  chmod -R a+rX "$fake"
  printf '\n$ BERTH_DRIVER_ROOT=%s berth gpu info\n' "$fake"
  env -i PATH=/usr/bin:/bin HOME="$home" BERTH_HOME="$home/berth" BERTH_DRIVER_ROOT="$fake" \
    "${runas[@]}" "$berth_bin" gpu info
  say "the same driver injected into an unmodified image: berth run --gpus all"
  printf '\n$ BERTH_DRIVER_ROOT=%s berth run --rm --gpus all %s /bin/sh -c ...\n' "$fake" "$image"
  env -i PATH=/usr/bin:/bin HOME="$home" BERTH_HOME="$home/berth" BERTH_DRIVER_ROOT="$fake" \
    "${runas[@]}" "$berth_bin" run --rm --gpus all "$image" /bin/sh -c \
    'echo "devices: $(ls /dev | grep nvidia | tr "\n" " ")"; echo "driver libraries: $(ls /usr/lib/berth/nvidia | tr "\n" " ")"; env | grep -E "^(NVIDIA_|LD_LIBRARY_PATH)" | sort'
fi

say "done; the registry stops and $work is removed on exit"
