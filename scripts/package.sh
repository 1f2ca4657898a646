#!/usr/bin/env bash
# Builds Berth's Debian packages (berth, berth-slurm, berthd; debian/) into dist/, then checks
# them: lintian on each (an error fails), systemd-analyze verify on berthd's unit.
# Usage: scripts/package.sh [--no-check]
# Builds from a copy of the tree as git sees it (tracked files and untracked ones .gitignore
# keeps), in build-deb/, with dpkg-buildpackage; only what the packages ship is compiled (no
# tests). The commit is that of HEAD, "-dirty" when the tree differs from it. Needs the build
# dependencies of debian/control (scripts/setup.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."

check=1
for arg in "$@"; do
  case "$arg" in
    --no-check) check=0 ;;
    *) echo "usage: scripts/package.sh [--no-check]" >&2; exit 2 ;;
  esac
done

version=$(dpkg-parsechangelog -S Version)
work=build-deb
src="$work/berth-$version"
rm -rf "$src" "$work"/*.deb "$work"/*.changes "$work"/*.buildinfo
mkdir -p "$src" dist
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -cf - | tar -xf - -C "$src"

commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
if [ "$commit" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  commit="$commit-dirty"
fi
# The same folder every time, so that ccache (where installed) finds its compilations again.
if command -v ccache >/dev/null 2>&1; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache
fi
# No -dbgsym packages: dist/ holds the three packages sites install.
export BERTH_GIT_COMMIT="$commit"
export DEB_BUILD_OPTIONS="parallel=$(nproc) noautodbgsym ${DEB_BUILD_OPTIONS:-}"
start=$(date +%s)
(cd "$src" && dpkg-buildpackage -b -us -uc --no-sign) >"$work/build.log" 2>&1 || {
  tail -40 "$work/build.log"
  echo "package: dpkg-buildpackage failed (the whole log: $work/build.log)" >&2
  exit 1
}
rm -f dist/*.deb
for p in berth berth-slurm berthd; do mv "$work/${p}_${version}_"*.deb dist/; done
echo "package: built $(cd dist && ls *.deb | tr '\n' ' ')in $(( $(date +%s) - start ))s (commit $commit)"
[ "$check" -eq 1 ] || exit 0

rc=0
for deb in dist/*.deb; do
  # Errors fail; warnings and the rest are shown.
  lrc=0
  out=$(lintian --fail-on error --tag-display-limit 0 "$deb" 2>&1) || lrc=$?
  [ "$lrc" -eq 0 ] || rc=1
  out=$(printf '%s\n' "$out" | grep -v '^running with root privileges is not recommended!$' || true)
  [ -z "$out" ] || printf '%s\n' "$out"
done
[ "$rc" -eq 0 ] && echo "package: lintian finds no error"

# The unit as the package ships it, its ExecStart= pointed at the berthd unpacked beside it
# (verify checks that the program exists) and its man page found there (Documentation=).
# Any message fails: systemd only warns about a value it cannot parse.
unit_root=$(mktemp -d /tmp/berth-unit.XXXXXX)
trap 'rm -rf "$unit_root"' EXIT
dpkg-deb -x dist/berthd_*.deb "$unit_root"
sed "s|^ExecStart=/usr/sbin/berthd|ExecStart=$unit_root/usr/sbin/berthd|" \
  "$unit_root/lib/systemd/system/berthd.service" >"$unit_root/berthd.service"
if out=$(MANPATH="$unit_root/usr/share/man" SYSTEMD_LOG_LEVEL=notice \
         systemd-analyze verify "$unit_root/berthd.service" 2>&1) && [ -z "$out" ]; then
  echo "package: systemd-analyze verify accepts berthd.service"
else
  printf '%s\n' "$out"
  echo "package: systemd-analyze verify refuses berthd.service" >&2
  rc=1
fi
exit "$rc"
