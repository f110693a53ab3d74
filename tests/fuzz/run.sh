#!/bin/sh
# Run the fuzz targets built by `make fuzz` (Makefile; tests/fuzz/README.md).
# Usage: sh tests/fuzz/run.sh BUILD SECONDS RUNS JOBS TARGET...
#   each BUILD/fuzz/fuzz_TARGET runs from the committed seeds tests/fuzz/corpus/TARGET/ (read only) and
#   its own growing corpus BUILD/fuzz/corpus/TARGET/, for SECONDS seconds, or RUNS executions when RUNS
#   is not empty; JOBS targets at a time.  A crash, leak, sanitizer report or an input slower than
#   10 s is written to BUILD/fuzz/artifacts/TARGET/ and fails the run.  The log of each target is
#   BUILD/fuzz/TARGET.log; its last lines (executions, rate) are printed.
# The last line is "fuzz: N of N targets clean" (not a test count: make test's line stays the closing one).
set -u
build=$1 secs=$2 runs=$3 jobs=$4
shift 4
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
fuzz_one() {
    t=$1
    bin=$build/fuzz/fuzz_$t
    mkdir -p "$build/fuzz/corpus/$t" "$build/fuzz/artifacts/$t"
    if [ -n "$runs" ]; then limit="-runs=$runs"; else limit="-max_total_time=$secs"; fi
    dict=""
    [ -f "tests/fuzz/$t.dict" ] && dict="-dict=tests/fuzz/$t.dict"
    # -timeout: an input slower than 10 s is a hang; -rss_limit_mb: a reader that believes a size
    # field and allocates gigabytes is a bug here (the default malloc limit follows it);
    # -close_fd_mask=3: the readers' own error lines are not logged (sanitizer reports still are)
    # the harness's scratch files (fuzz.h), on tmpfs where there is one, removed even after a crash
    tmp=$(mktemp -d /dev/shm/fp8lab-fuzz-"$t".XXXXXX 2>/dev/null || mktemp -d)
    FP8LAB_FUZZ_TMP=$tmp "$bin" $limit $dict -timeout=10 -rss_limit_mb=2048 -close_fd_mask=3 -print_final_stats=1 \
        -artifact_prefix="$build/fuzz/artifacts/$t/" "$build/fuzz/corpus/$t" "tests/fuzz/corpus/$t" \
        > "$build/fuzz/$t.log" 2>&1 &
    pid=$!
    wait $pid
    echo $? > "$build/fuzz/$t.rc"
    # a crashed process leaves its scratch folder and clang's OpenMP runtime's registration file behind
    rm -rf "$tmp" "/dev/shm/__KMP_REGISTERED_LIB_${pid}_0"
}
running=0
for t in "$@"; do
    if [ ! -x "$build/fuzz/fuzz_$t" ]; then
        echo "fuzz: $build/fuzz/fuzz_$t missing (make fuzz builds it)"
        echo 1 > "$build/fuzz/$t.rc"
        continue
    fi
    if [ -n "$runs" ]; then echo "fuzz: $t, $runs executions ..."; else echo "fuzz: $t, $secs s ..."; fi
    fuzz_one "$t" &
    running=$((running + 1))
    if [ $running -ge "$jobs" ]; then
        wait
        running=0
    fi
done
wait
pass=0 fail=0 failed=""
for t in "$@"; do
    rc=$(cat "$build/fuzz/$t.rc" 2>/dev/null || echo 1)
    runs_done=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build/fuzz/$t.log" 2>/dev/null | grep -o '[0-9]*$')
    secs_done=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$build/fuzz/$t.log" 2>/dev/null | grep -o 'in [0-9]*' | grep -o '[0-9]*')
    cov=$(grep -o 'cov: [0-9]*' "$build/fuzz/$t.log" 2>/dev/null | tail -n 1)
    if [ "$rc" = 0 ]; then
        pass=$((pass + 1))
        printf 'fuzz_%-12s ok    %s executions in %s s (%s exec/s), %s\n' "$t" "${runs_done:-?}" "${secs_done:-?}" \
            "$( [ -n "${runs_done:-}" ] && [ "${secs_done:-0}" -gt 0 ] && echo $((runs_done / secs_done)) || echo '?')" "${cov:-cov: ?}"
    else
        fail=$((fail + 1)) failed="$failed $t"
        printf 'fuzz_%-12s FAIL  (exit %s) log %s, inputs in %s/fuzz/artifacts/%s/\n' "$t" "$rc" "$build/fuzz/$t.log" "$build" "$t"
        grep -E 'ERROR|SUMMARY|runtime error|==[0-9]+==|#0 |#1 |#2 |#3 |Test unit written|Base64' "$build/fuzz/$t.log" | head -n 25 | sed 's/^/    /'
    fi
done
[ -n "$failed" ] && echo "fuzz: failed:$failed"
echo "fuzz: $pass of $((pass + fail)) targets clean"
[ $fail -eq 0 ]
