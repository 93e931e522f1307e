#!/usr/bin/env bash
# Time the stages of `make test` and print a summary at the end, so that a slow stage shows.
#   scripts/stages.sh NAME COMMAND...   run one stage, record its time and exit status
#   scripts/stages.sh --summary         print the table; exit 1 if any stage failed
# A stage after a failed "set-up" is skipped: without the environment it can only fail.
set -uo pipefail
LOG=_build/test-stages.tsv
mkdir -p _build

if [ "${1:-}" = "--summary" ]; then
  echo
  echo "make test, stage by stage:"
  failed=0; total=0
  while IFS=$'\t' read -r name seconds status; do
    printf '  %-14s %5d s   %s\n' "$name" "$seconds" "$status"
    total=$((total + seconds))
    [ "$status" = "passed" ] || failed=1
  done < "$LOG"
  printf '  %-14s %5d s (%d min %02d s)\n' "total" "$total" $((total / 60)) $((total % 60))
  rm -f "$LOG"
  exit $failed
fi

name=$1; shift
[ "$name" = "set-up" ] && rm -f "$LOG"
if grep -q "^set-up"$'\t'".*failed" "$LOG" 2>/dev/null; then
  printf '%s\t0\tskipped\n' "$name" >> "$LOG"
  exit 1
fi
echo "=== $name"
start=$(date +%s)
"$@"
rc=$?
status=passed; [ $rc -eq 0 ] || status="failed (exit $rc)"
printf '%s\t%d\t%s\n' "$name" $(( $(date +%s) - start )) "$status" >> "$LOG"
exit $rc
