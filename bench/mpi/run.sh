#!/bin/bash
# bench/mpi: MPI ping-pong (8 B latency, 1 MiB bandwidth) between two ranks on this host, bare
# metal against the same two ranks in a container with --mpi, printing the ratios.
#
# Needs Debian's mpich and libmpich-dev (scripts/setup.sh). Run as root: it writes a site policy
# declaring the host's MPICH (policy files must be root's), then measures as the unprivileged
# user berthtest. Two ways, each against bare metal: the ranks share one container, started
# with `berth exec` (one container per node, as pyxis runs them), and one container per rank
# (`mpiexec -n 2 berth run --mpi`, which shares the host's IPC namespace and /dev/shm, as
# Apptainer does; docs/ib-mpi.md). No transport variable is set.
#
# Variables: BERTH (binary, default build/src/berth), BENCH_DIR (work dir), ROUNDS (3).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BERTH=${BERTH:-$here/../../build/src/berth}
ROUNDS=${ROUNDS:-3}
command -v mpicc.mpich >/dev/null || { echo "bench: mpich and libmpich-dev are not installed" >&2; exit 1; }

if [ "$(id -u)" -eq 0 ]; then
  BENCH_DIR=${BENCH_DIR:-$(mktemp -d /tmp/berth-bench-mpi.XXXXXX)}
  chmod 755 "$BENCH_DIR"
  lib=$(readlink -f /usr/lib/x86_64-linux-gnu/libmpich.so.12)
  policy_dir=$(mktemp -d /tmp/berth-bench-mpi-policy.XXXXXX)
  chmod 755 "$policy_dir"
  printf 'mpi_default = "mpich"\n[mpi.mpich]\nlibraries = ["%s"]\nabi = "full"\n' "$lib" \
    > "$policy_dir/berth.conf"
  chmod 644 "$policy_dir/berth.conf"
  id berthtest >/dev/null 2>&1 || useradd --create-home --shell /bin/bash berthtest
  cp "$BERTH" "$BENCH_DIR/berth"
  cp "$here/pingpong.c" "$0" "$BENCH_DIR/"
  chown -R berthtest: "$BENCH_DIR"
  mkdir -p "$BENCH_DIR/home" && chown berthtest: "$BENCH_DIR/home"
  exec setpriv --reuid=berthtest --regid=berthtest --init-groups --reset-env \
    env PATH=/usr/local/bin:/usr/bin:/bin USER=berthtest HOME="$BENCH_DIR/home" \
    BERTH_HOME="$BENCH_DIR/home/store" BERTH="$BENCH_DIR/berth" BENCH_DIR="$BENCH_DIR" \
    BERTH_SITE_CONF="$policy_dir/berth.conf" ROUNDS="$ROUNDS" bash "$BENCH_DIR/run.sh"
fi

BENCH_DIR=${BENCH_DIR:?run as root, or set BENCH_DIR}
cd "$BENCH_DIR"
mpicc.mpich -O2 -o pingpong pingpong.c
# The image has its own MPICH: a copy of the host's libraries the program needs (and UCX's
# modules), with a loader cache written for its tree; --mpi then binds the host's MPICH over the
# image's by the ABI rule, as it would over an image built elsewhere.
rm -rf tree && mkdir -p tree/{usr/lib,usr/lib64,usr/bin,usr/sbin,etc,tmp,proc,sys,dev,app}
for l in lib lib64 bin sbin; do [ -e tree/$l ] || ln -s usr/$l tree/$l; done
copy_deps() {
  ldd "$1" | awk '/=> \// {print $3} /^\t\/lib64/ {print $1}' | while read -r f; do
    mkdir -p "tree$(dirname "$f")" && cp -L "$f" "tree$f"
  done
}
copy_deps pingpong
ucx=/usr/lib/x86_64-linux-gnu/ucx
if [ -d $ucx ]; then
  mkdir -p tree$ucx && cp -L $ucx/*.so* tree$ucx/ 2>/dev/null || true
  for m in $ucx/*.so*; do copy_deps "$m"; done
fi
real=$(readlink -f /usr/lib/x86_64-linux-gnu/libmpich.so.12)
cp "$real" "tree$real" && rm -f tree/usr/lib/x86_64-linux-gnu/libmpich.so.12 &&
  ln -s "$(basename "$real")" tree/usr/lib/x86_64-linux-gnu/libmpich.so.12
cp /bin/busybox tree/usr/bin/busybox && ln -s busybox tree/usr/bin/sh && ln -s busybox tree/usr/bin/sleep
printf 'include /etc/ld.so.conf.d/*.conf\n' > tree/etc/ld.so.conf
mkdir -p tree/etc/ld.so.conf.d && echo /usr/lib/x86_64-linux-gnu > tree/etc/ld.so.conf.d/x86_64.conf
# Not -r (a chroot, root only): the image's paths are the host's, so the host's folder is
# scanned and entries the image lacks are ignored by --mpi.
echo /usr/lib/x86_64-linux-gnu > ld.conf
/sbin/ldconfig -X -f ld.conf -C tree/etc/ld.so.cache
cp pingpong tree/app/
printf 'root:x:0:0:root:/root:/bin/sh\n' > tree/etc/passwd
printf 'root:x:0:\n' > tree/etc/group
tar -C tree -cf image.tar .
"$BERTH" import image.tar bench-mpi >/dev/null
"$BERTH" rm -f mpibench >/dev/null 2>&1 || true
"$BERTH" run -d --name mpibench --mpi bench-mpi /bin/sh -c 'echo ready; exec sleep 600' >/dev/null
for _ in $(seq 100); do "$BERTH" logs mpibench | grep -q ready && break; sleep 0.1; done
trap '"$BERTH" rm -f mpibench >/dev/null 2>&1 || true' EXIT

# One line per size from the program: "size N latency_us L bandwidth_MBps B".
measure() { "$@" 8 1048576 | awk '/^size/ {print $2, $4, $6}'; }
best() {  # best of ROUNDS runs: lowest 8 B latency, highest 1 MiB bandwidth
  local lat="" bw=""
  for _ in $(seq "$ROUNDS"); do
    while read -r size l b; do
      if [ "$size" = 8 ]; then lat=$(awk -v a="$lat" -v b="$l" 'BEGIN{print (a=="" || b<a) ? b : a}'); fi
      if [ "$size" = 1048576 ]; then bw=$(awk -v a="$bw" -v b="$b" 'BEGIN{print (a=="" || b>a) ? b : a}'); fi
    done < <(measure "$@")
  done
  echo "$lat $bw"
}
read -r bare_lat bare_bw < <(best mpiexec.mpich -n 2 ./pingpong)
read -r ctr_lat ctr_bw < <(best mpiexec.mpich -n 2 "$BERTH" exec mpibench /app/pingpong)
read -r rank_lat rank_bw < <(best mpiexec.mpich -n 2 "$BERTH" run --rm --mpi bench-mpi /app/pingpong)
"$BERTH" exec mpibench /app/pingpong | head -1 | sed 's/^/container library: /'
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", a/b}'; }
printf '%-24s %10s %12s %12s\n' "" "bare" "exec --mpi" "run per rank"
printf '%-24s %10s %12s %12s   ratio %s / %s (target <= 1.05)\n' "latency 8 B (us)" "$bare_lat" \
  "$ctr_lat" "$rank_lat" "$(ratio "$ctr_lat" "$bare_lat")" "$(ratio "$rank_lat" "$bare_lat")"
printf '%-24s %10s %12s %12s   ratio %s / %s (target >= 0.98)\n' "bandwidth 1 MiB (MB/s)" \
  "$bare_bw" "$ctr_bw" "$rank_bw" "$(ratio "$ctr_bw" "$bare_bw")" "$(ratio "$rank_bw" "$bare_bw")"
