#!/usr/bin/env bash
# Refuses what must never be committed: core dumps, packages, and binary files over 1 MB; and
# a unit test outside the folder of its room (tests/unit mirrors src/).
# Usage: scripts/check-tree.sh
# Looks at every file git would commit: the tracked ones and the untracked ones .gitignore does
# not exclude (so a stray file fails here before a blind `git add` takes it). Prints one line
# per offending file and exits 1 when there is any. Run by scripts/test.sh as its first stage.
set -euo pipefail
cd "$(dirname "$0")/.."

limit=$((1024 * 1024))
bad=0
say() { echo "check-tree: $1: $2"; bad=1; }

while IFS= read -r -d '' path; do
  [ -f "$path" ] && [ ! -L "$path" ] || continue   # deleted in the work tree, or a link
  name=${path##*/}
  case "$name" in
    core | core.[0-9]* | vgcore.[0-9]*)
      say "$path" "a core dump's name (remove it; .gitignore keeps such files out)"; continue ;;
    *.deb | *.udeb | *.ddeb | *.rpm | *.changes | *.buildinfo | *.dsc)
      say "$path" "a package (build packages into dist/ with scripts/package.sh)"; continue ;;
  esac
  # An ELF core whatever its name: e_type (bytes 16-17, little-endian) is ET_CORE (4).
  if [ "$(head -c 4 "$path" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ] &&
     [ "$(od -An -tx1 -j16 -N2 "$path" | tr -d ' \n')" = 0400 ]; then
    say "$path" "an ELF core dump"; continue
  fi
  size=$(stat -c %s "$path")
  if [ "$size" -gt "$limit" ] && [ "$(head -c 8192 "$path" | tr -d '\0' | wc -c)" -ne \
       "$(head -c 8192 "$path" | wc -c)" ]; then
    say "$path" "a binary file of $size bytes (over 1 MB; keep build outputs and data out of git)"
  fi
done < <(git ls-files -z --cached --others --exclude-standard)

# tests/unit mirrors src/: each test file in the folder of the room it tests (tests/CMakeLists.txt).
while IFS= read -r -d '' path; do
  rel=${path#tests/unit/}
  case "$rel" in
    */*) [ -d "src/${rel%%/*}" ] ||
           say "$path" "tests/unit/${rel%%/*} names no room of src/ (tests/unit mirrors src/)" ;;
    *) say "$path" "a unit test outside its room's folder (move it to tests/unit/<room>/)" ;;
  esac
done < <(git ls-files -z --cached --others --exclude-standard -- 'tests/unit/*_test.cc')

if [ "$bad" -ne 0 ]; then
  echo "check-tree: the tree holds files that must not be committed (above)" >&2
  exit 1
fi
echo "check-tree: no core dumps, packages or large binaries; tests/unit mirrors src/"
