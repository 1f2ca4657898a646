#!/usr/bin/env bash
# Install what Berth needs to build, test and benchmark on Debian 12, then build it.
# Usage: scripts/setup.sh [--demo] [--no-build]
#   --demo      only what scripts/demo.sh needs (demo_packages below), and build only the
#               programs it runs (berth, berth-squashfs, the fake GPU driver's libraries) in
#               build-demo/
#   --no-build  install the packages, build nothing
# Runs apt-get through sudo when not root. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

demo=0
build=1
for arg in "$@"; do
  case "$arg" in
    --demo) demo=1 ;;
    --no-build) build=0 ;;
    *) echo "usage: scripts/setup.sh [--demo] [--no-build]" >&2; exit 2 ;;
  esac
done

# What the demo needs: CMake's configure of the whole tree (every find_package of the top
# CMakeLists.txt and src/, GoogleTest for tests/), the build of berth, berth-squashfs and the
# fake GPU driver's libraries (tests/fake_gpu), and at run time a registry on 127.0.0.1, the
# image's busybox, python3 for the push (tests/e2e/imagelib.py), curl, setpriv (util-linux).
demo_packages=(
  build-essential cmake ninja-build pkg-config
  libcurl4-openssl-dev libssl-dev nlohmann-json3-dev libcli11-dev libfmt-dev
  libarchive-dev libyaml-dev libtomlplusplus-dev libgtest-dev
  # ISA-L's gzip decompressor for layers (headers; libisal2 is loaded at run time when present)
  libisal-dev
  # berth squash / inspect FILE.sqsh: squashfs-tools-ng's libsquashfs (headers; loaded at run time)
  libsquashfs-dev
  # berth-squashfs, the squashfs FUSE daemon (src/site/squashfs_fuse): libfuse3 low-level API;
  # it links libsquashfs, libfuse3 and the compressors' static archives (CMakeLists.txt says why);
  # liblzo2: lzo images (enroot's default), which Debian's libsquashfs cannot read, berth and
  # berth-squashfs both
  libfuse3-dev liblz4-dev libzstd-dev liblzma-dev zlib1g-dev liblzo2-dev
  # berthd's libraries: configured (src/CMakeLists.txt), not built by the demo
  libcpp-httplib-dev libsqlite3-dev
  # the demo's run
  docker-registry python3 busybox-static curl ca-certificates util-linux
)

packages=(
  "${demo_packages[@]}"
  # build
  git libgmock-dev
  # berthd, the REST job gateway (src/gateway): its e2e tests' OIDC issuer signs tokens with
  # jwcrypto and jobs go through slurmrestd
  python3-jwcrypto slurmrestd slurm-wlm-jwt-plugin
  # fuzzing (scripts/fuzz.sh): clang with libFuzzer and the sanitizer runtimes
  clang-14 libclang-rt-14-dev
  # static analysis (scripts/test.sh tidy): clang-tidy-14 and run-clang-tidy-14; the format
  # stage's clang-format-14 (scripts/check-format.sh)
  clang-tidy-14 clang-format-14
  # end-to-end tier: a real registry and real image tools
  docker-registry umoci skopeo apache2-utils openssl python3 python3-pytest
  busybox-static zstd gzip tar util-linux procps curl ca-certificates
  # squashfs images (berth run FILE.sqsh): fusermount3 (the daemon is Berth's berth-squashfs);
  # squashfuse (squashfuse_ll and squashfuse) as the peers of bench/sqrun and bench/sqwalk;
  # squashfs-tools' mksquashfs and unsquashfs for tests and bench/squash
  squashfuse fuse3 squashfs-tools
  # fallback engines (berth run --engine=proot|fakechroot|oci), also peers for the benchmarks
  proot fakechroot libfakechroot runc crun
  # the CDI comparison with real Podman (tests/e2e/test_cdi_podman.py)
  podman
  # package managers inside (tests/e2e/test_root_emulation.py): a real Debian 12 image built
  # from Debian's archive; newuidmap/newgidmap for subordinate-ID mappings. mmdebstrap also
  # builds the Slurm 24.11 tier's Debian 13 root (tests/e2e/debian_root.py; Debian 12's
  # keyring holds Debian 13's keys), which that tier enters with util-linux's unshare and
  # nsenter; its slurmdbd keeps its records in a MariaDB server of this machine's (below)
  mmdebstrap debian-archive-keyring uidmap
  # Slurm: the SPANK plugin is built against libslurm-dev; the Slurm tests (tests/e2e/slurm.py) run
  # munge, slurmctld and two slurmd on 127.0.0.1
  libslurm-dev slurmctld slurmd slurm-client munge
  # srun --mpi=pmix (Slurm's mpi_pmix dlopens libpmix; the test's PMIx client builds against
  # libpmix-dev) and REST submissions (tests/e2e/test_slurmrestd.py)
  libpmix2 libpmix-dev pkg-config slurmrestd
  # Slurm's accounting (GET /v1/accounting from sacct, tests/e2e/slurmdbd.py): slurmdbd on a
  # private MariaDB server (their services, where they start, are stopped below)
  slurmdbd mariadb-server
  # berthd's GET /metrics is checked with promtool (tests/e2e), which comes with Debian's
  # prometheus package (its service, where one starts, is stopped below)
  prometheus
  # packages and install (scripts/package.sh, tests/e2e/test_install.py, test_packages.py):
  # man pages made with pandoc and read with man-db, Debian packages built with debhelper and
  # checked with lintian, berthd's unit with systemd-analyze
  pandoc man-db debhelper dpkg-dev lintian systemd
  # peers measured by the benchmarks
  charliecloud-runtime hyperfine
  # MPI launches (tests/e2e/test_launcher.py's MPICH ranks, bench/mpi): Debian's MPICH
  mpich libmpich-dev
  # the broker's manifests checked offline with real client models (test_broker_manifests.py)
  python3-kubernetes python3-jsonschema
)

[ "$demo" -eq 1 ] && packages=("${demo_packages[@]}")

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian's docker-registry package starts a system service on port 5000 (prometheus one on
# 9090, mariadb-server one on 3306, slurmdbd one reading /etc/slurm/slurmdbd.conf); the tests
# start their own instances on free ports, so the system ones are not needed.
for service in docker-registry prometheus mariadb slurmdbd; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$service" 2>/dev/null; then
    $sudo systemctl stop "$service" || true   # not needed; failure to stop is harmless
    $sudo systemctl disable "$service" 2>/dev/null || true
  fi
done

# Rootless FUSE mounts (berth run FILE.sqsh) need /dev/fuse open to users: udev's rule makes it
# 0666 on an ordinary Debian host; machines without udev (these VMs, some containers) leave it
# 0600 root.
if [ -c /dev/fuse ] && [ "$(stat -c %a /dev/fuse)" != 666 ]; then
  $sudo chmod 0666 /dev/fuse
fi

[ "$build" -eq 1 ] || exit 0
# ccache, where a developer installed it, shares compilations between work trees (CI has none).
launcher=()
command -v ccache >/dev/null 2>&1 &&
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
if [ "$demo" -eq 1 ]; then
  # The demo's programs only (berth builds berth-squashfs first), in build-demo/, unoptimised
  # and without debug information (CMake's build type None adds no flags): half the CPU time
  # of build/'s RelWithDebInfo (200 s against 412 s on the 2-core VM), for a demo that runs
  # for a second.
  cmake -S . -B build-demo -G Ninja -DCMAKE_BUILD_TYPE=None -DBERTH_WERROR=ON \
    "${launcher[@]}" >/dev/null
  cmake --build build-demo --target berth berth_fake_gpu_libs
  exit 0
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBERTH_WERROR=ON \
  "${launcher[@]}" >/dev/null
cmake --build build
