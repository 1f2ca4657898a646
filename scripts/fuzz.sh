#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang in build-fuzz/ and runs them.
# Usage: scripts/fuzz.sh [smoke]            each target over its seed corpus, 2000 runs from a
#                                           fixed random seed, the same inputs each time (CI)
#        scripts/fuzz.sh long SECONDS [T..] each target (or the named ones) for SECONDS,
#                                           new inputs kept in build-fuzz/corpus/<target>
# A crash, leak or timeout fails the run; libFuzzer saves the input as build-fuzz/crash-*.
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${1:-smoke}"
secs="${2:-600}"
shift $(( $# > 2 ? 2 : $# ))
targets=(fuzz_reference fuzz_manifest fuzz_www_authenticate fuzz_unpack fuzz_cdi fuzz_ld_cache
         fuzz_elf fuzz_nvidia_proc fuzz_policy)
[ $# -gt 0 ] && targets=("$@")

launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
if [ ! -f build-fuzz/build.ninja ]; then
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Fuzz -DBERTH_FUZZ=ON -DBUILD_TESTING=OFF \
    -DCMAKE_CXX_COMPILER=clang++-14 "${launcher[@]}" >/dev/null
fi
cmake --build build-fuzz -j"$(nproc)" --target berth_fuzzers

status=0
for t in "${targets[@]}"; do
  if [ "$mode" = "long" ]; then
    work="build-fuzz/corpus/$t"
    args=(-max_total_time="$secs")
  else
    work=$(mktemp -d /tmp/berth-fuzz-corpus.XXXXXX)  # new inputs are not kept
    # A fixed seed: CI runs the same inputs each time, so it fails for a change, not by the
    # luck of the draw (the long runs explore; what they find joins tests/fuzz/corpus).
    args=(-runs=2000 -max_total_time=20 -seed=1)
  fi
  mkdir -p "$work"
  printf '== %s: ' "$t"
  if build-fuzz/tests/fuzz/"$t" "$work" "tests/fuzz/corpus/$t" "${args[@]}" -timeout=20 \
      -rss_limit_mb=2048 -artifact_prefix=build-fuzz/ -print_final_stats=1 \
      >"build-fuzz/$t.log" 2>&1; then
    grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE|INITED)' "build-fuzz/$t.log" | tail -1 || true
  else
    echo "FAILED (build-fuzz/$t.log)"
    grep -E 'ERROR|SUMMARY|Test unit written' "build-fuzz/$t.log" | head -5
    status=1
  fi
  [ "$mode" = "long" ] || rm -rf "$work"
done
exit "$status"
