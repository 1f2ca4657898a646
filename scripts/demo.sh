#!/usr/bin/env bash
# Demo of what Berth does today: a registry on 127.0.0.1, a busybox image
# built here and pushed to it, then berth pulling, listing, inspecting,
# verifying and unpacking it. Run as root, berth runs as the unprivileged
# user "berthtest", as it would for a researcher on a login node.
# Usage: scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

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
berth_bin="$PWD/build/src/berth"
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

# --- PLACE FOR THE RUNTIME LAYER: `berth run` (not implemented yet).
# When it exists: berth run "$image" /bin/busybox echo "hello from a rootless container"
say "berth run: not implemented yet (runtime layer)"

# --- PLACE FOR THE DEVICES LAYER: `berth gpu info` (not implemented yet).
# When it exists: berth gpu info
say "berth gpu info: not implemented yet (devices layer)"

say "done; the registry stops and $work is removed on exit"
