#!/bin/sh
# gpu_train_check.sh BUILD OUTDIR -- make gpu-check's training part: the GPU step (experiments/train/gstep.h)
# through build/fp8lab-cuda, against the harness (build/fp8lab) on this machine's CPU.
#   1. 50 steps of the demo's model and optimiser on the device (SwiGLU under bf16, fp32, fp8-delayed with and
#      without --fp8-gemm, fp8-delayed --pow2 --fp8-adam (the paper's recipe), and paper-gaudi2; GeLU and PolyReLU r=3 under bf16: every kind of activation kernel but PolyNorm's, whose
#      harness reruns in other orders drift too far for the bound to tell: TRAINING.md),
#      judged by `fp8lab compare` against the harness's run within the envelope of its --gemm-kchunk K
#      --attn-kchunk K reruns, K 16 / 64 / 256 (window bound, factor 4: TRAINING.md, "How far a GPU run may
#      differ", stage 3);
#   2. the bf16 and fp8-delayed GPU runs resumed from their step-25 checkpoints: metrics.csv and sites.csv
#      byte-identical; `demo --device` over its nine arms (1 seed, 40 steps) runs to a verdict;
#   3. speed at the 124m preset (bf16, fp8-delayed, fp8-delayed --fp8-gemm, paper-gaudi2 with and without the
#      bf16 GEMMs of its exact FP8 values (FP8LAB_GSTEP_BF16_EXACT=0), one micro-batch of 16 x 1024
#      tokens per step, 10 steps each): steps/s after the first step from summary.json, tokens/s, the FP8/BF16 ratios, and model
#      FLOPs per second from the plan's FLOPs per token, beside 989 TFLOP/s (the dense BF16 peak NVIDIA
#      gives for the H100 SXM and H200); the step's device tensors beside the plan's peak; then 4 profiled
#      steps (FP8LAB_GSTEP_PROFILE=1): where the step's time goes.
# Writes OUTDIR/train-check.md.  Without a device it says so and exits 0; exit 1 when a check fails.
# GPU_TRAIN_CHECK_DEVICE=twins: checks 1 and 2 with --device twins through build/fp8lab, no device needed
# (the script's own test, tests/test_compare.c); no speed.  GPU_TRAIN_CHECK_FLAGS: flags added to the
# device runs only (the test's way to make one wrong: --clip 0 must fail the check).
set -u
build=$1
out=$2/train
cli=$build/fp8lab
cuda=$build/fp8lab-cuda
dev=${GPU_TRAIN_CHECK_DEVICE:-cuda}
mkdir -p "$out" || exit 1
report=$2/train-check.md
if [ "$dev" = twins ]; then
    cuda=$cli
elif ! "$build/tests/gpu_bench" info 2>/dev/null | grep -q "^device:"; then
    echo "gpu-train-check: no CUDA device found; skipped"
    exit 0
fi
fail=0
# A command that ran to its summary and then failed only because gnuplot is missing (a device machine may
# have none): its output says so.
no_gnuplot() { grep -q "gnuplot not found" "$1"; }
# Each device command under a limit (GPU_TRAIN_CHECK_RUN_S seconds, default 900): a run asked to stop by
# SIGTERM checkpoints after its step, so a step that never ends is killed 10 s later (a hang is a failure).
lim=
command -v timeout >/dev/null 2>&1 && lim="timeout -k 10 ${GPU_TRAIN_CHECK_RUN_S:-900}"
model="--width 64 --layers 2 --heads 4 --ffn 256 --seq 64 --batch 16 --lr 3e-3 --schedule constant --warmup 100 --wd 1 --seed 1 --steps 50 --log-every 1 --quiet"
{
    echo "# GPU training step: make gpu-check's training part"
    echo
    echo "--device $dev ($(sed -n 's/^device: //p' "$2/device.txt" 2>/dev/null | head -1)), $(date -u +%Y-%m-%d)."
    echo
    echo "| activation | recipe | GPU run against the harness (50 steps) | largest ratio to the bound |"
    echo "|---|---|---|---|"
} >"$report"
for row in swiglu:bf16 swiglu:fp32 swiglu:fp8-delayed swiglu:paper-gaudi2 gelu:bf16 polyrelu3:bf16 swiglu:fp8-delayed:fp8-gemm \
    swiglu:fp8-delayed:fp8-adam; do
    act=${row%%:*}
    rec=${row#*:}
    g8=   # flags of the device run only
    both= # flags of every run (the paper's recipe with FP8 Adam moments)
    case $rec in
    *:fp8-gemm) rec=${rec%:fp8-gemm}; g8=--fp8-gemm ;;
    *:fp8-adam) rec=${rec%:fp8-adam}; both="--pow2 --fp8-adam" ;;
    esac
    d=$out/$act-$rec${g8:+-g8}${both:+-adam}
    rm -rf "$d" && mkdir -p "$d"
    "$cli" train $model --act $act --recipe $rec $both --out "$d/ref" || fail=1
    for k in 16 64 256; do
        "$cli" train $model --act $act --recipe $rec $both --gemm-kchunk $k --attn-kchunk $k --out "$d/k$k" || fail=1
    done
    chan= # the per-channel telemetry on the device, in the bf16 SwiGLU run (its resume compares the files)
    [ "$row" = swiglu:bf16 ] && chan="--chan-every 10"
    if ! $lim "$cuda" train $model --act $act --recipe $rec $both --device $dev --keep-ckpt 25 $chan $g8 ${GPU_TRAIN_CHECK_FLAGS:-} --out "$d/gpu"; then
        # one step again with FP8LAB_GSTEP_TRACE=1: the last operation started, for the report
        FP8LAB_GSTEP_TRACE=1 $lim "$cuda" train $model --act $act --recipe $rec $both --device $dev $g8 --steps 1 \
            --out "$d/trace" >"$d/trace.txt" 2>&1
        echo "| $act | $rec $g8 $both | the GPU run failed; the last operation traced: \`$(grep "gstep trace: line" "$d/trace.txt" | tail -1 | cut -c1-160)\` | |" >>"$report"
        fail=1
        continue
    fi
    "$cli" compare "$d/ref" "$d/gpu" --envelope "$d/k16" --envelope "$d/k64" --envelope "$d/k256" >"$d/compare.txt"
    rc=$? # compare's own status (0 AGREE, 3 DISAGREE, 4 UNDETERMINED), not a pipe's
    cat "$d/compare.txt"
    "$cli" compare "$d/ref" "$d/gpu" --envelope "$d/k16" --envelope "$d/k64" --envelope "$d/k256" --json >"$d/compare.json"
    ratio=$(sed -n 's/.*"worst_ratio": \([^,]*\),*/\1/p' "$d/compare.json")
    echo "| $act | $rec${g8:+ $g8}${both:+ $both} | $(tail -1 "$d/compare.txt") | $ratio |" >>"$report"
    [ $rc -eq 0 ] || fail=1
done
# resume bit-exactly on the device: bf16, and fp8-delayed (its delayed histories in the checkpoint; sites.csv too)
for rec in bf16 fp8-delayed; do
    d=$out/swiglu-$rec
    if [ ! -f "$d/gpu/checkpoint-25.bin" ]; then
        echo "- swiglu $rec: **no checkpoint-25.bin** to resume from." >>"$report"
        fail=1
        continue
    fi
    files="metrics.csv sites.csv"
    [ -f "$d/gpu/channels.csv" ] && files="$files channels.csv records.csv"
    ok=1
    for f in $files; do cp "$d/gpu/$f" "$d/full-$f" || ok=0; done
    cp "$d/gpu/checkpoint-25.bin" "$d/gpu/checkpoint.bin" && $lim "$cuda" train --resume "$d/gpu" --quiet || ok=0
    for f in $files; do cmp "$d/full-$f" "$d/gpu/$f" || ok=0; done
    if [ $ok -eq 1 ]; then
        echo "- swiglu $rec resumed from step 25 on the device: $files byte-identical to the uninterrupted run." >>"$report"
    else
        echo "- swiglu $rec resumed from step 25 on the device: **one of $files differs** from the uninterrupted run." >>"$report"
        fail=1
    fi
done
# the demo on the device: its nine arms (every arm's activation, recipe and site overrides), one seed, 40
# steps, through to its verdict (--continue: tests/test_demo_continue.c)
rm -rf "$out/demo"
jobs=1
[ "$dev" = twins ] && jobs=2
$lim "$cuda" demo --device $dev --steps 40 --seeds 1 --jobs $jobs --out "$out/demo" >"$out/demo.txt" 2>&1
rc=$? # 0 REPRODUCED, 3 NOT REPRODUCED, 4 INCONCLUSIVE: a verdict; else a failure
if [ $rc -eq 0 -o $rc -eq 3 -o $rc -eq 4 ] && grep -q "verdict:" "$out/demo.txt"; then
    echo "- demo --device $dev (9 arms, 1 seed, 40 steps): ran; $(sed -n 's/^  verdict: \([A-Z ]*\):.*/\1/p' "$out/demo.txt") (too short to measure the precondition, as expected)." >>"$report"
elif no_gnuplot "$out/demo.txt" && grep -q "verdict:" "$out/demo.txt"; then
    echo "- demo --device $dev (9 arms, 1 seed, 40 steps): ran; $(sed -n 's/^  verdict: \([A-Z ]*\):.*/\1/p' "$out/demo.txt") (too short to measure the precondition, as expected); no plots: this machine has no gnuplot (exit $rc)." >>"$report"
else
    cat "$out/demo.txt"
    echo "- demo --device $dev: **failed** ($out/demo.txt)." >>"$report"
    fail=1
fi
# the mechanism on the device: trajectories, forks at the tau marks, interventions, dose-response and
# attribution of a tiny model (test_mechanism runs it in twins mode)
if [ "$dev" = cuda ]; then
    rm -rf "$out/mech"
    $lim "$cuda" mechanism --device cuda --jobs 1 --width 16 --layers 1 --heads 2 --ffn 32 --seq 16 --batch 4 --data-len 20000 \
        --lr 0.03 --horizon-tau 9 --chan-every 10 --ckpt-every 50 --out "$out/mech" >"$out/mech.txt" 2>&1
    rc=$?
    if [ $rc -eq 0 -o $rc -eq 3 -o $rc -eq 4 ] && grep -q "predictions held:" "$out/mech.txt"; then
        echo "- mechanism --device cuda (a tiny model's trajectories, forks and interventions): ran to its summary." >>"$report"
    elif no_gnuplot "$out/mech.txt" && grep -q "predictions held:" "$out/mech.txt"; then
        echo "- mechanism --device cuda (a tiny model's trajectories, forks and interventions): ran to its summary; no plots: this machine has no gnuplot (exit $rc)." >>"$report"
    else
        cat "$out/mech.txt"
        echo "- mechanism --device cuda: **failed** ($out/mech.txt)." >>"$report"
        fail=1
    fi
fi
# speed at the 124m preset
if [ "$dev" = twins ]; then
    cat "$report"
    [ $fail -eq 0 ] && echo "gpu-train-check (twins): passed" || echo "gpu-train-check (twins): FAILED"
    exit $fail
fi
# One report line: recipe $1's run $2 (steps/s after the first step, tokens/s, model FLOP/s; $fpt: the plan's
# model FLOPs per token).
# a run's steps/s after its first step (summary.json)
sps_of() { sed -n 's/.*"steps_per_s_after_first": \([^,}]*\).*/\1/p' "$1/summary.json"; }
speed_line() {
    sps_=$(sps_of "$2")
    first_=$(sed -n 's/.*"first_step_s": \([^,}]*\).*/\1/p' "$2/summary.json")
    awk -v r="$1" -v sps="$sps_" -v fpt="$fpt" -v first="$first_" 'BEGIN {
        tps = sps * 16 * 1024
        printf "- 124m preset, %s, 16 x 1024 tokens per step: %.3g steps/s over steps 1-9 (step 0 took %s s), %.0f tokens/s, %.3g model TFLOP/s = %.1f%% of 989 TFLOP/s.\n", r, sps, first, tps, tps * fpt / 1e12, 100 * tps * fpt / 989e12 }' >>"$report"
}
s=$out/s124m
rm -rf "$s"
if $lim "$cuda" train --preset 124m --accum 1 --recipe bf16 --device cuda --steps 10 --log-every 1 --quiet --out "$s"; then
    fpt=$("$cli" train --preset 124m --recipe bf16 --device cuda --plan | sed -n 's/.*model FLOPs: \([0-9.e+]*\) per token.*/\1/p')
    # steps/s over steps 1-9 of a 10-step run: bf16, then fp8-delayed (its values on fp32 GEMMs, not FP8 ones)
    sps8=
    rm -rf "$s-fp8"
    if $lim "$cuda" train --preset 124m --accum 1 --recipe fp8-delayed --device cuda --steps 10 --log-every 1 --quiet --out "$s-fp8"; then
        sps8=$(sps_of "$s-fp8")
        rm -f "$s-fp8"/checkpoint*.bin
    else
        echo "- 124m preset, fp8-delayed: **the GPU run failed**." >>"$report"
        fail=1
    fi
    # and fp8-delayed with --fp8-gemm: the Linears' GEMMs in cuBLASLt's FP8
    sg8=
    rm -rf "$s-g8"
    if $lim "$cuda" train --preset 124m --accum 1 --recipe fp8-delayed --fp8-gemm --device cuda --steps 10 --log-every 1 --quiet --out "$s-g8"; then
        sg8=$(sps_of "$s-g8")
        rm -f "$s-g8"/checkpoint*.bin
    else
        echo "- 124m preset, fp8-delayed --fp8-gemm: **the GPU run failed**." >>"$report"
        fail=1
    fi
    # and paper-gaudi2 (the demo's recipe): power-of-two scales, so its FP8 values are exact in bf16 and its
    # Linears multiply them in bf16 GEMMs; FP8LAB_GSTEP_BF16_EXACT=0 the same run on fp32 GEMMs
    spg= spg0=
    rm -rf "$s-g2" "$s-g20"
    if $lim "$cuda" train --preset 124m --accum 1 --recipe paper-gaudi2 --device cuda --steps 10 --log-every 1 --quiet --out "$s-g2" &&
        FP8LAB_GSTEP_BF16_EXACT=0 $lim "$cuda" train --preset 124m --accum 1 --recipe paper-gaudi2 --device cuda --steps 10 \
            --log-every 1 --quiet --out "$s-g20"; then
        spg=$(sps_of "$s-g2")
        spg0=$(sps_of "$s-g20")
        rm -f "$s-g2"/checkpoint*.bin "$s-g20"/checkpoint*.bin
    else
        echo "- 124m preset, paper-gaudi2: **a GPU run failed**." >>"$report"
        fail=1
    fi
    speed_line bf16 "$s"
    [ -f "$s-fp8/summary.json" ] && speed_line fp8-delayed "$s-fp8"
    [ -n "$spg" ] && speed_line "paper-gaudi2 (bf16 GEMMs of the exact FP8 values)" "$s-g2"
    [ -n "$spg0" ] && speed_line "paper-gaudi2 with FP8LAB_GSTEP_BF16_EXACT=0 (fp32 GEMMs)" "$s-g20"
    [ -f "$s-g8/summary.json" ] && speed_line "fp8-delayed --fp8-gemm" "$s-g8"
    sps=$(sps_of "$s")
    [ -n "$sps8" ] && awk -v a="$sps8" -v b="$sps" 'BEGIN { printf "- fp8-delayed / bf16 tokens/s at 124m: %.3g (casts on the device, the values multiplied in fp32 GEMMs).\n", a / b }' >>"$report"
    [ -n "$sg8" ] && awk -v a="$sg8" -v b="$sps" 'BEGIN { printf "- fp8-delayed --fp8-gemm / bf16 tokens/s at 124m: %.3g (the Linears in FP8 GEMMs; the attention stays fp32).\n", a / b }' >>"$report"
    [ -n "$spg" ] && awk -v a="$spg" -v z="$spg0" -v b="$sps" 'BEGIN { printf "- paper-gaudi2 / bf16 tokens/s at 124m: %.3g with bf16 GEMMs of the exact FP8 values, %.3g with fp32 GEMMs.\n", a / b, z / b }' >>"$report"
    # memory: the step's tensors as built (summary.json) beside the plan's peak for one micro-batch
    tb=$(sed -n 's/.*"device_tensor_bytes": \([0-9]*\).*/\1/p' "$s/summary.json")
    pk=$("$cli" train --preset 124m --recipe bf16 --device cuda --plan --accum 1 | sed -n 's/.*= peak .* (\([0-9]*\) bytes).*/\1/p')
    awk -v tb="$tb" -v pk="$pk" 'BEGIN { printf "- 124m preset memory: the step'"'"'s tensors %.2f GiB as built (fp32 activations), the plan'"'"'s peak %.2f GiB (bf16 activations, one micro-batch).\n", tb / 2^30, pk / 2^30 }' >>"$report"
    rm -f "$s"/checkpoint*.bin
    # where the time goes: 4 steps with the device drained around every operation (gstep.h, fl_gstep_prof)
    rm -rf "$s-prof"
    if FP8LAB_GSTEP_PROFILE=1 $lim "$cuda" train --preset 124m --accum 1 --recipe bf16 --device cuda --steps 4 --quiet --out "$s-prof" \
        2>"$out/profile.txt"; then
        { echo; echo '```'; cat "$out/profile.txt"; echo '```'; } >>"$report"
    else
        cat "$out/profile.txt"
        echo "- 124m preset, profiled: **the GPU run failed**." >>"$report"
        fail=1
    fi
    rm -f "$s-prof"/checkpoint*.bin
else
    echo "- 124m preset: **the GPU run failed**." >>"$report"
    fail=1
fi
cat "$report"
[ $fail -eq 0 ] && echo "gpu-train-check: passed" || echo "gpu-train-check: FAILED"
exit $fail
