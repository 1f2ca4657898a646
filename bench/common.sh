# Shared by the runtime benchmarks (bench/start, bench/metadata): a busybox root filesystem with a
# tree of small files, pushed as an image to a local docker-registry, pulled by berth, and made
# into a container. Sourced, not run.
#
# Variables read: BENCH_DIR (work dir), BERTH (binary), FILES (files in the tree).

bench_die() { echo "bench: $*" >&2; exit 1; }

# Re-runs the calling script as an unprivileged user when started as root: Berth, ch-run and PRoot
# are all meant to run unprivileged, and so they are measured.
# Usage: bench_drop_root SCRIPT ARGS... (the script and the binary are copied where that user can
# read them).
bench_drop_root() {
  [ "$(id -u)" -eq 0 ] || return 0
  id berthtest >/dev/null 2>&1 || useradd --create-home --shell /bin/bash berthtest
  local bin_dir script=$1
  shift
  bin_dir=$(mktemp -d /tmp/berth-bench-bin.XXXXXX)
  cp "$BERTH" "$bin_dir/berth"
  # The squashfs mounts' daemon lives beside the binary (src/site/squashfs_mount.h).
  [ -f "$(dirname "$BERTH")/berth-squashfs" ] && cp "$(dirname "$BERTH")/berth-squashfs" "$bin_dir/"
  cp -r "$(dirname "$script")" "$bin_dir/bench"
  chmod -R a+rX "$bin_dir"
  chown -R berthtest: "$BENCH_DIR" 2>/dev/null || true  # may not exist yet: created below as the user
  exec setpriv --reuid=berthtest --regid=berthtest --init-groups --reset-env \
    env PATH=/usr/local/bin:/usr/bin:/bin USER=berthtest HOME=/home/berthtest \
    BERTH="$bin_dir/berth" BENCH_DIR="$BENCH_DIR" FILES="$FILES" \
    "$bin_dir/bench/$(basename "$script")" "$@"
}

# Builds $BENCH_DIR/rootfs: static busybox with its applets, /etc files, and $FILES small files
# under /data in 100-file directories; plus the host's GNU `true` and `ls` as /usr/bin/gnu-true
# and /usr/bin/gnu-ls with their glibc libraries, for the fakechroot engine (which covers only
# dynamically linked programs). Kept between runs.
bench_make_rootfs() {
  local root=$BENCH_DIR/rootfs
  [ -f "$root/.complete-$FILES-glibc" ] && return 0
  rm -rf "$root"
  mkdir -p "$root"/{bin,etc,dev,proc,sys,tmp,home,root,data}
  cp /bin/busybox "$root/bin/busybox"
  local applet
  for applet in $("$root/bin/busybox" --list); do
    [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
  printf 'root:x:0:\n' >"$root/etc/group"
  : >"$root/etc/hosts"
  : >"$root/etc/resolv.conf"
  python3 - "$root/data" "$FILES" <<'PY'
import os, sys
top, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(top, "d%03d" % (i // 100))
    if i % 100 == 0:
        os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%05d.txt" % i), "w") as f:
        f.write("file %d\n" % i)
PY
  mkdir -p "$root/usr/bin" "$root/lib64"
  local prog lib
  for prog in true ls; do
    cp "$(type -P "$prog")" "$root/usr/bin/gnu-$prog"
    for lib in $(ldd "$(type -P "$prog")" | awk '$3 ~ /^\// {print $3} $1 ~ /^\/lib64/ {print $1}'); do
      mkdir -p "$root$(dirname "$lib")"
      cp -L "$lib" "$root$lib"
    done
  done
  touch "$root/.complete-$FILES-glibc"
}

# The engines measured besides the default userns one, each on a container of its own (fakechroot
# rewrites the rootfs's absolute links for itself).
BENCH_ENGINES="proot fakechroot oci"

# Prints the ratio of two hyperfine means: bench_ratio NUMERATOR DENOMINATOR.
bench_ratio() { python3 -c 'import sys; print("%.2f" % (float(sys.argv[1]) / float(sys.argv[2])))' "$1" "$2"; }

# Starts docker-registry on a free loopback port; sets REGISTRY (host:port) and REGISTRY_PID.
bench_start_registry() {
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  mkdir -p "$BENCH_DIR/registry"
  cat >"$BENCH_DIR/registry.yml" <<YML
version: 0.1
log: {level: error}
storage: {filesystem: {rootdirectory: $BENCH_DIR/registry}}
http: {addr: 127.0.0.1:$port}
YML
  docker-registry serve "$BENCH_DIR/registry.yml" >"$BENCH_DIR/registry.log" 2>&1 &
  REGISTRY_PID=$!
  REGISTRY=127.0.0.1:$port
  local i
  for i in $(seq 50); do
    curl -fs "http://$REGISTRY/v2/" >/dev/null && return 0
    sleep 0.1
  done
  bench_die "docker-registry did not start; see $BENCH_DIR/registry.log"
}

bench_stop_registry() {
  [ -n "${REGISTRY_PID:-}" ] && kill "$REGISTRY_PID" 2>/dev/null
  wait 2>/dev/null || true  # the registry's exit status after SIGTERM is of no interest
}

# Packs $BENCH_DIR/rootfs into an OCI image with umoci, pushes it with skopeo, pulls it with berth
# and creates container $1 from it (recreated every run, so that it matches the rootfs), and one
# container $1-ENGINE per engine of $BENCH_ENGINES, set up for that engine.
bench_make_container() {
  local name=$1 oci=$BENCH_DIR/oci bundle=$BENCH_DIR/bundle engine
  rm -rf "$oci" "$bundle"
  umoci init --layout "$oci"
  umoci new --image "$oci:bench"
  umoci unpack --rootless --image "$oci:bench" "$bundle"
  cp -a "$BENCH_DIR/rootfs/." "$bundle/rootfs/"
  umoci repack --image "$oci:bench" "$bundle"
  umoci config --image "$oci:bench" --config.cmd /bin/sh
  bench_skopeo_copy --dest-tls-verify=false "oci:$oci:bench" "docker://$REGISTRY/bench/busybox:latest"
  export BERTH_HOME=$BENCH_DIR/home
  "$BERTH" -q pull "$REGISTRY/bench/busybox:latest" >/dev/null
  "$BERTH" rm -f "$name" >/dev/null 2>&1 || true  # absent on the first run
  "$BERTH" create --name "$name" "$REGISTRY/bench/busybox:latest" >/dev/null
  for engine in $BENCH_ENGINES; do
    "$BERTH" rm -f "$name-$engine" >/dev/null 2>&1 || true  # absent on the first run
    "$BERTH" create --name "$name-$engine" "$REGISTRY/bench/busybox:latest" >/dev/null
    "$BERTH" setup --engine="$engine" "$name-$engine"
  done
}

# skopeo copy with a credentials file of our own: skopeo's default, /run/containers/$UID/auth.json,
# is unreadable when a Podman install left /run/containers root-owned. (Not REGISTRY_AUTH_FILE in
# the environment: docker-registry would read that as a configuration override.)
bench_skopeo_copy() {
  [ -f "$BENCH_DIR/auth.json" ] || echo '{}' >"$BENCH_DIR/auth.json"
  skopeo copy -q --authfile "$BENCH_DIR/auth.json" "$@"
}

# Prints the mean in milliseconds from a hyperfine JSON export: bench_mean FILE INDEX.
bench_mean() {
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][int(sys.argv[2])]; print("%.2f" % (r["mean"]*1000))' "$1" "$2"
}
