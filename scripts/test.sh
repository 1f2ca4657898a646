#!/usr/bin/env bash
# The one test command: install dependencies and build (scripts/setup.sh), then
# run the unit tier (ctest), clang-tidy over every source (.clang-tidy's checks), a short smoke
# run of each fuzzer (scripts/fuzz.sh, its own clang build in build-fuzz/) and the end-to-end
# tier (pytest, tests/e2e).
# Usage: scripts/test.sh [unit|tidy|fuzz|e2e] [-- extra pytest arguments]
# Works as root (berth then runs as the unprivileged user "berthtest") or as a
# sudo-capable user. Exits non-zero when any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."

tier="all"
case "${1:-}" in
  unit|tidy|fuzz|e2e) tier="$1"; shift ;;
  all) shift ;;
esac
[ "${1:-}" = "--" ] && shift

bash scripts/setup.sh

# pytest comes from Debian's python3-pytest: use Debian's interpreter even when
# another python3 comes first in PATH.
python=python3
if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import pytest' 2>/dev/null; then
  python=/usr/bin/python3
fi

status=0
if [ "$tier" = "unit" ] || [ "$tier" = "all" ]; then
  echo "== unit tests"
  ctest --test-dir build -j2 --output-on-failure || status=1
  if [ "$(id -u)" -eq 0 ]; then
    # The engine's unit tests need an unprivileged user (they skip as root): run the whole
    # unit binary again as one, from a copy that user can read.
    echo "== unit tests as the unprivileged user berthtest"
    id berthtest >/dev/null 2>&1 || useradd --no-create-home --shell /bin/sh berthtest
    copy=$(mktemp -d /tmp/berth-unit.XXXXXX)
    cp build/tests/berth_unit_tests build/tests/berth_probe "$copy/"
    chmod -R a+rX "$copy"
    (cd "$copy" && setpriv --reuid=berthtest --regid=berthtest --init-groups \
      env HOME="$copy" BERTH_PROBE="$copy/berth_probe" ./berth_unit_tests --gtest_brief=1) || status=1
    rm -rf "$copy"
  fi
  # The same unit tier once more built with AddressSanitizer and UBSan (a Debug build, so that
  # configuration is built too), in its own folder: a memory error or undefined behaviour
  # fails the run.
  echo "== unit tests under AddressSanitizer and UBSan (build-asan)"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DBERTH_WERROR=ON \
    -DBERTH_SANITIZE=ON >/dev/null
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp"
  if cmake --build build-asan; then
    ctest --test-dir build-asan -j2 --output-on-failure || status=1
    if [ "$(id -u)" -eq 0 ]; then
      echo "== unit tests under AddressSanitizer and UBSan as the unprivileged user berthtest"
      copy=$(mktemp -d /tmp/berth-unit.XXXXXX)
      cp build-asan/tests/berth_unit_tests build-asan/tests/berth_probe tests/lsan.supp "$copy/"
      chmod -R a+rX "$copy"
      (cd "$copy" && setpriv --reuid=berthtest --regid=berthtest --init-groups \
        env HOME="$copy" BERTH_PROBE="$copy/berth_probe" ASAN_OPTIONS="$ASAN_OPTIONS" \
        UBSAN_OPTIONS="$UBSAN_OPTIONS" LSAN_OPTIONS="suppressions=$copy/lsan.supp" \
        ./berth_unit_tests --gtest_brief=1) || status=1
      rm -rf "$copy"
    fi
  else
    status=1
  fi
fi
if [ "$tier" = "tidy" ] || [ "$tier" = "all" ]; then
  # Every translation unit (src/, tests/unit, the probe), and the project's headers through
  # them; any finding fails (WarningsAsErrors in .clang-tidy). The compilation database comes
  # from a configure of its own (build-tidy, nothing built there): build/ compiles the command
  # files as one unit (BERTH_CLI_UNITY), which would hide them from the per-file checks.
  # Only the findings are shown: not the colour codes, the per-file command lines or the
  # counts of warnings suppressed in system headers.
  echo "== clang-tidy (.clang-tidy's checks)"
  cmake -S . -B build-tidy -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBERTH_CLI_UNITY=OFF >/dev/null
  log=$(mktemp /tmp/berth-tidy.XXXXXX)
  if ! run-clang-tidy-14 -p build-tidy -j2 -quiet >"$log" 2>&1; then
    sed 's/\x1b\[[0-9;]*m//g' "$log" |
      grep -v -E '^clang-tidy-14 |^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$' || true
    status=1
  fi
  rm -f "$log"
fi
if [ "$tier" = "fuzz" ] || [ "$tier" = "all" ]; then
  echo "== fuzzers (smoke run)"
  bash scripts/fuzz.sh smoke || status=1
fi
if [ "$tier" = "e2e" ] || [ "$tier" = "all" ]; then
  echo "== end-to-end tests"
  BERTH_BIN="$PWD/build/src/berth" "$python" -m pytest -q tests/e2e "$@" || status=1
fi
exit "$status"
