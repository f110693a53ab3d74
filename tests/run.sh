#!/bin/sh
# Run every test binary in BUILD/tests (not the benchmarks), count passed/failed/skipped.
# A binary passes with exit 0, is skipped with exit 77 (it prints "SKIP: why"), fails otherwise.
# Exits non-zero when anything failed.  The last line is "N passed, N failed, N skipped".
build=${1:-build}
pass=0; fail=0; skip=0; failed=""
for t in "$build"/tests/test_*; do
    case "$t" in *.d|*.o) continue ;; esac
    [ -x "$t" ] || continue
    name=$(basename "$t")
    start=$(date +%s)
    out=$(FP8LAB="$build/fp8lab" "$t" 2>&1); rc=$?
    secs=$(( $(date +%s) - start ))
    if [ $rc -eq 0 ]; then
        pass=$((pass + 1)); printf '%-28s ok    (%ss) %s\n' "$name" "$secs" "$(printf '%s\n' "$out" | tail -n 1)"
    elif [ $rc -eq 77 ]; then
        skip=$((skip + 1)); printf '%-28s SKIP  %s\n' "$name" "$(printf '%s\n' "$out" | grep '^SKIP' | head -n 1)"
    else
        fail=$((fail + 1)); failed="$failed $name"
        printf '%-28s FAIL  (exit %s, %ss)\n' "$name" "$rc" "$secs"
        printf '%s\n' "$out" | tail -n 20 | sed 's/^/    /'
    fi
done
[ -n "$failed" ] && echo "failed:$failed"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
