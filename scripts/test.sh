#!/usr/bin/env bash
# The one test command: install dependencies and build (scripts/setup.sh), then run the test
# tiers as named, timed stages, so that a failure says where:
#   tree   scripts/check-tree.sh: no core dumps, packages or large binaries in the tree
#   format scripts/check-format.sh: every C and C++ file as clang-format-14 writes it
#   build  scripts/setup.sh: Debian packages, then the build in build/
#   unit   the unit tier (ctest), and again as the unprivileged user berthtest when root
#   asan   the unit tier built with AddressSanitizer and UBSan (build-asan/)
#   tidy   clang-tidy over every source of src/ (.clang-tidy's checks)
#   fuzz   a short smoke run of each fuzzer (scripts/fuzz.sh, its own clang build in build-fuzz/)
#   package  the Debian packages into dist/ (scripts/package.sh: lintian, systemd-analyze
#          verify), which the e2e tier then installs into a fresh Debian 12 root
#   e2e    the end-to-end tier (pytest, tests/e2e)
# Usage: scripts/test.sh [unit|tidy|fuzz|package|e2e] [-- extra pytest arguments]
# (unit runs unit and asan.) Works as root (berth then runs as the unprivileged user "berthtest")
# or as a sudo-capable user. Exits non-zero when any stage fails; the last lines are a table of
# the stages with their times and results.
set -euo pipefail
cd "$(dirname "$0")/.."

tier="all"
case "${1:-}" in
  unit|tidy|fuzz|package|e2e) tier="$1"; shift ;;
  all) shift ;;
esac
[ "${1:-}" = "--" ] && shift

status=0
summary=()
# stage NAME COMMAND...: runs COMMAND under a heading, times it and records how it ended.
stage() {
  local name="$1" start rc=0
  shift
  echo "== stage $name"
  start=$(date +%s)
  "$@" || rc=$?
  local took=$(( $(date +%s) - start ))
  if [ "$rc" -eq 0 ]; then
    summary+=("$(printf '%-8s %5ss  ok' "$name" "$took")")
  else
    summary+=("$(printf '%-8s %5ss  FAILED (exit %s)' "$name" "$took" "$rc")")
    status=1
  fi
  echo "== stage $name: $([ "$rc" -eq 0 ] && echo ok || echo "FAILED (exit $rc)") in ${took}s"
  return 0
}
report() {
  echo "== stages"
  printf '%s\n' "${summary[@]}"
}
trap report EXIT

stage tree bash scripts/check-tree.sh
stage build bash scripts/setup.sh
if [[ "${summary[-1]}" == *FAILED* ]]; then
  exit 1  # nothing to test without a build
fi
stage format bash scripts/check-format.sh

# pytest comes from Debian's python3-pytest: use Debian's interpreter even when
# another python3 comes first in PATH.
python=python3
if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import pytest' 2>/dev/null; then
  python=/usr/bin/python3
fi

# As root, a copy of a unit binary run again as the unprivileged user berthtest (the engine's
# unit tests skip as root). Usage: as_berthtest BUILD_DIR [extra files...]
as_berthtest() {
  local dir="$1" copy rc=0
  shift
  id berthtest >/dev/null 2>&1 || useradd --no-create-home --shell /bin/sh berthtest
  copy=$(mktemp -d /tmp/berth-unit.XXXXXX)
  cp "$dir/tests/berth_unit_tests" "$dir/tests/berth_probe" "$@" "$copy/"
  chmod -R a+rX "$copy"
  (cd "$copy" && setpriv --reuid=berthtest --regid=berthtest --init-groups \
    env HOME="$copy" BERTH_PROBE="$copy/berth_probe" ASAN_OPTIONS="${ASAN_OPTIONS:-}" \
    UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" LSAN_OPTIONS="suppressions=$copy/lsan.supp" \
    ./berth_unit_tests --gtest_brief=1) || rc=$?
  rm -rf "$copy"
  return "$rc"
}

unit() {
  local rc=0
  ctest --test-dir build -j2 --output-on-failure || rc=1
  if [ "$(id -u)" -eq 0 ]; then
    echo "== unit tests as the unprivileged user berthtest"
    as_berthtest build tests/lsan.supp || rc=1
  fi
  return "$rc"
}

# The same unit tier once more built with AddressSanitizer and UBSan (a Debug build, so that
# configuration is built too), in its own folder: a memory error or undefined behaviour fails.
asan() {
  local rc=0
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DBERTH_WERROR=ON \
    -DBERTH_SANITIZE=ON >/dev/null
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp"
  # Only what ctest runs (the unit tests and the probe they put in images): the programs'
  # own files (the CLI's commands, berthd's main) are not under test here.
  cmake --build build-asan --target berth_unit_tests || return 1
  ctest --test-dir build-asan -j2 --output-on-failure || rc=1
  if [ "$(id -u)" -eq 0 ]; then
    echo "== unit tests under AddressSanitizer and UBSan as the unprivileged user berthtest"
    as_berthtest build-asan tests/lsan.supp || rc=1
  fi
  return "$rc"
}

# Every translation unit of src/ and the probe, and the project's headers through them; any
# finding fails (WarningsAsErrors in .clang-tidy). Not tests/unit's files: they are a third of
# the tier's 17 minutes on 2 cores for one finding in its first run over them (a missing
# reserve()), which `clang-tidy-14 -p build-tidy FILE` finds where a test's author runs it.
# The compilation database comes from a configure of its own (build-tidy, nothing built
# there). The command files are checked as build/ compiles them, one unit (BERTH_CLI_UNITY):
# each of them alone parses and matches all of CLI11 again, 7 of the tier's minutes for 36
# files, against 1 for the unit. The findings are the same, in the files' own lines (tried
# with a copy, a move and a value parameter planted in one of them); only
# bugprone-suspicious-include is left out there, for the unit's own #include of each .cc.
# Only the findings are shown: not the colour codes, the per-file command lines or the
# counts of warnings suppressed in system headers.
tidy() {
  local log rc=0
  cmake -S . -B build-tidy -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBERTH_CLI_UNITY=ON >/dev/null
  log=$(mktemp /tmp/berth-tidy.XXXXXX)
  run-clang-tidy-14 -p build-tidy -j2 -quiet '^(?!.*/Unity/).*(/src/|/tests/probe/)' >"$log" 2>&1 ||
    rc=1
  run-clang-tidy-14 -p build-tidy -j2 -quiet -checks=-bugprone-suspicious-include \
    '/Unity/unity_[0-9]+_cxx[.]cxx$' >>"$log" 2>&1 || rc=1
  if [ "$rc" -ne 0 ]; then
    sed 's/\x1b\[[0-9;]*m//g' "$log" |
      grep -v -E '^clang-tidy-14 |^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$' || true
  fi
  rm -f "$log"
  return "$rc"
}

# The slowest tests are listed after the summary: where the tier's time goes, run by run.
e2e() {
  BERTH_BIN="$PWD/build/src/berth" "$python" -m pytest -q --durations=15 tests/e2e "$@"
}

want() { [ "$tier" = "$1" ] || [ "$tier" = all ]; }
if want unit; then stage unit unit; stage asan asan; fi
if want tidy; then stage tidy tidy; fi
if want fuzz; then stage fuzz bash scripts/fuzz.sh smoke; fi
if want package; then
  stage package bash scripts/package.sh
  # The e2e tier's test_packages.py installs them; missing ones fail there.
  export BERTH_DEBS="$PWD/dist"
fi
if want e2e; then stage e2e e2e "$@"; fi
exit "$status"
