#!/usr/bin/env bash
# Fails when a C or C++ file git would commit is not as clang-format-14 writes it (.clang-format:
# Google's style, 100 columns). Prints the files and the command that formats them.
# Usage: scripts/check-format.sh [--fix]   (--fix formats them in place)
set -euo pipefail
cd "$(dirname "$0")/.."

fix=0
case "${1:-}" in
  --fix) fix=1 ;;
  "") ;;
  *) echo "usage: scripts/check-format.sh [--fix]" >&2; exit 2 ;;
esac
files=()
while IFS= read -r -d '' f; do
  [ -f "$f" ] && files+=("$f")
done < <(git ls-files -z --cached --others --exclude-standard -- '*.cc' '*.h' '*.c')
if [ "$fix" -eq 1 ]; then
  printf '%s\0' "${files[@]}" | xargs -0 -n 50 clang-format-14 -i
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format-14 --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  printf 'check-format: %s is not clang-format-14'"'"'s\n' "${bad[@]}"
  echo "check-format: ${#bad[@]} files to format: bash scripts/check-format.sh --fix" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files as clang-format-14 writes them"
