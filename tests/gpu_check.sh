#!/bin/sh
# gpu_check.sh BUILD OUTDIR -- `make gpu-check`: everything a lent GPU must answer, in one command.
#   1. the device, driver and CUDA versions;
#   2. gpu-test: every kernel bit-identical to its CPU twin, the FP8 GEMM within its derived bound;
#   3. gpu-bench: bandwidth beside a copy kernel, FP8 vs BF16 GEMMs, Smooth-SwiGLU's overhead;
#   4. the device ULP sweep: every input of each twin of the registry (kernels/twins.h) with narrow inputs
#      (all bf16 / e4m3 codes, all 2^32 bf16 SwiGLU pairs) run on the GPU, compared with the twin bit for
#      bit and judged by `fp8lab ulp`;
#   5. OUTDIR/gpu-check.json (all of it, machine-readable) and OUTDIR/gpu-check.md (tables for
#      kernels/README.md);
#   6. the training part (tests/gpu_train_check.sh): the GPU step against the harness, resume, speed at
#      124m, into OUTDIR/train-check.md.
# Without a device it says so and exits 0.  The 2^32 bf16 SwiGLU pairs come in 16 chunks of 2^28 (for the
# derivatives chunk c is every g with u = c mod 16): GPU_CHECK_PAIR_CHUNKS (default 16: all pairs) for the forward kernels,
# GPU_CHECK_BWD_PAIR_CHUNKS (default 1; MPFR judges every derivative output) for the backward ones.
# GPU_CHECK_JUDGE=0: the sweep runs the same inputs and compares them with the twins bit for bit, without
# `fp8lab ulp` (MPFR judging is nearly all of the sweep's time); gpu-check.json/md then say that the sweep
# was not judged and carry no accuracy table.
# Every run times the training step's kernels at the 124m preset's shapes after gpu-test (gpu_bench step:
# step-kernels.md; a failure there is reported and the check goes on).
# GPU_CHECK_QUICK=1 (a short loan of a device): gpu-test, the training part, gpu-bench, in that order, and
# no sweep (gpu-check.json/md are not written; each part's own files are).  GPU_CHECK_PART_S=N: every part
# runs under N seconds, killed 10 s after, so that a hung part fails and the next one runs (unset: no limit;
# a judged sweep can take hours).
set -u
lim=
[ -n "${GPU_CHECK_PART_S:-}" ] && command -v timeout >/dev/null 2>&1 && lim="timeout -k 10 $GPU_CHECK_PART_S"
build=$1
out=$2
mkdir -p "$out" || exit 1
bench=$build/tests/gpu_bench
if ! "$bench" info | tee "$out/device.txt" | grep -q "^device:"; then
    echo "gpu-check: no CUDA device found; skipped"
    exit 0
fi
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv | tee -a "$out/device.txt"
echo "== gpu-test"
$lim "$build/tests/test_gpu_twins" >"$out/gpu_test.log" 2>&1
test_rc=$?
cat "$out/gpu_test.log"
echo "== the training step's kernels at 124m shapes"
$lim "$bench" step "$out" >"$out/step-kernels.log" 2>&1
step_rc=$?
cat "$out/step-kernels.log"
if [ "${GPU_CHECK_QUICK:-0}" = 1 ]; then
    echo "== training step"
    $lim sh "$(dirname "$0")/gpu_train_check.sh" "$build" "$out"
    train_rc=$?
    echo "== gpu-bench"
    $lim "$bench" bench "$out" >"$out/bench.log" 2>&1
    bench_rc=$?
    cat "$out/bench.log"
    echo "gpu-check (GPU_CHECK_QUICK=1, no sweep): gpu-test exit $test_rc, step kernels exit $step_rc, training exit $train_rc, gpu-bench exit $bench_rc"
    [ "$test_rc" -eq 0 ] && [ "$step_rc" -eq 0 ] && [ "$train_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ]
    exit $?
fi
echo "== gpu-bench"
$lim "$bench" bench "$out" >"$out/bench.log" 2>&1 || { cat "$out/bench.log"; echo "gpu-check: gpu-bench failed"; exit 1; }
cat "$out/bench.log"
judge=
if [ "${GPU_CHECK_JUDGE:-1}" = 0 ]; then
    judge=--no-judge
    echo "== device sweep (GPU_CHECK_JUDGE=0: compared with the CPU twins bit for bit, not judged)"
else
    echo "== device ULP sweep"
fi
$lim /usr/bin/env time -f "   sweep wall %e s" "$bench" sweep "$build/fp8lab" "$out" $judge --pairs-chunks "${GPU_CHECK_PAIR_CHUNKS:-16}" --bwd-pairs-chunks "${GPU_CHECK_BWD_PAIR_CHUNKS:-1}"
sweep_rc=$?
"$bench" assemble "$out" "$test_rc" || exit 1
cat "$out/gpu-check.md"
echo "== training step"
$lim sh "$(dirname "$0")/gpu_train_check.sh" "$build" "$out"
train_rc=$?
if [ "$test_rc" -ne 0 ] || [ "$step_rc" -ne 0 ] || [ "$sweep_rc" -ne 0 ] || [ "$train_rc" -ne 0 ]; then
    echo "gpu-check: FAILED (gpu-test exit $test_rc, step kernels exit $step_rc, sweep exit $sweep_rc, training exit $train_rc)"
    exit 1
fi
echo "gpu-check: passed"
