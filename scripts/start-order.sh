#!/usr/bin/env bash
# scripts/start-order.sh: rewrites src/start-order.txt, the functions of berth that a container
# start runs, which the link puts side by side at the head of the text (src/CMakeLists.txt).
# Scattered over 3.5 MB, they cost a page fault each 64 KB window they touch (about 30 per start;
# about 8 when gathered, bench/results/start.md).
#
# Each round links berth with the list so far, runs `berth run CONTAINER /bin/true` under perf
# (page-fault samples of the user's own processes), and adds each function of berth whose first
# touch faulted outside the gathered section; it stops when a round adds nothing. A function that
# the start path no longer runs stays listed until a --fresh run (which starts from the empty
# list): harmless, it only widens the section.
#
# Usage: scripts/start-order.sh [--fresh] BUILD_DIR CONTAINER
#   needs perf; the runs are the caller's, or START_ORDER_RUN_AS's (a command prefix, such as
#   "setpriv --reuid=U --regid=G --init-groups --", for a build tree that user cannot write),
#   with the BERTH_HOME that holds CONTAINER.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
list=$here/src/start-order.txt
if [ "${1:-}" = "--fresh" ]; then
  : >"$list"
  shift
fi
[ $# -eq 2 ] || { echo "usage: $0 [--fresh] BUILD_DIR CONTAINER" >&2; exit 2; }
build=$1 container=$2
command -v perf >/dev/null || { echo "start-order: perf is needed" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 0777 "$work"  # the runs may be another user's (START_ORDER_RUN_AS)
read -r -a run_as <<<"${START_ORDER_RUN_AS:-}"

for round in $(seq 1 20); do
  rm -f "$build/src/berth"  # relinked with the list as it is now
  cmake --build "$build" --target berth >/dev/null
  berth=$(realpath "$build/src/berth")
  start=$(readelf -SW "$berth" | awk '$2 == ".text.berth_start" {print $4}')
  size=$(readelf -SW "$berth" | awk '$2 == ".text.berth_start" {print $6}')
  for _ in 1 2 3; do
    "${run_as[@]}" perf record -q -e page-faults:u -c 1 -d -o "$work/pf.data" -- \
      "$berth" run "$container" /bin/true >/dev/null
    # Faults on berth's code: the address is the instruction's own (ip == addr).
    perf script -f -i "$work/pf.data" --no-demangle -F ip,addr,sym,dso 2>/dev/null |
      awk -v bin="($berth)" '$1 == $4 && $3 == bin {print $1, $2}'
  done >"$work/faults"
  new=$(python3 - "$work/faults" "$berth" "$list" "${start:-0}" "${size:-0}" <<'PY'
import subprocess, sys
faults, berth, listed, start, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4], 16), int(sys.argv[5], 16)
have = set(open(listed).read().split())
# Symbol -> its address in the file, to tell which faults lie in the gathered section.
addr = {}
for line in subprocess.run(["nm", "--defined-only", berth], capture_output=True, text=True).stdout.splitlines():
    parts = line.split()
    if len(parts) == 3 and parts[1] in "tTwW":
        addr.setdefault(parts[2], int(parts[0], 16))
new = []
for line in open(faults):
    sym = line.split()[1]
    if sym in have or sym in new or sym not in addr or sym.startswith(("_init", "_fini", "_start")):
        continue
    if start <= addr[sym] < start + size:
        continue  # in the section already (a window of it faulting, as it must once)
    new.append(sym)
with open(listed, "a") as f:
    for sym in new:
        f.write(sym + "\n")
print(len(new))
PY
)
  echo "start-order: round $round: $new function(s) added"
  [ "$new" -eq 0 ] && break
done
rm -f "$build/src/berth"
cmake --build "$build" --target berth >/dev/null
echo "start-order: $(wc -l <"$list") functions in $list"
