#!/bin/sh
# envelope.sh — the summation-order envelope experiment (TRAINING.md, "How far a GPU run may differ").
#
#   [BOUND=window|running] [HELD_K="4 12 48"] [ATTN=0|1] sh experiments/train/envelope.sh FP8LAB OUT_DIR [STEPS]
#
# For SwiGLU and GeLU under bf16, fp8-delayed (the paper's stack) and fp8-current, on the demo's model
# and optimiser: a reference run, its reruns with --gemm-kchunk 16, 64, 256 (the envelope) and HELD_K
# (held out; stage 1 used 8 32 128, stage 2 4 12 48), and two negative controls (seed 2; the fp8-delayed run against the bf16 reference).
# Prints one line per comparison (fp8lab compare's verdict and largest ratio) and the envelope e_t at a
# few steps, under fp8lab compare's --bound BOUND (default window; stage 1 used running).  ATTN=1 (the
# default since stage 3): every rerun with --gemm-kchunk K also takes --attn-kchunk K (the attention's order
# perturbed too); ATTN=0 reproduces stages 1 and 2.  STEPS defaults to 50 (make gpu-check's length).  Finished runs of the same
# length are reused (keep stages in separate OUT_DIRs).
set -eu
FP8LAB=${1:?usage: envelope.sh FP8LAB OUT_DIR [STEPS]}
OUT=${2:?usage: envelope.sh FP8LAB OUT_DIR [STEPS]}
STEPS=${3:-50}
ENV_K="16 64 256"
HELD_K=${HELD_K:-4 12 48}
BOUND=${BOUND:-window}
ATTN=${ATTN:-1}
mkdir -p "$OUT"
order() { # K -> the rerun's order flags
    if [ "$ATTN" = 1 ]; then echo "--gemm-kchunk $1 --attn-kchunk $1"; else echo "--gemm-kchunk $1"; fi
}

model() { # act -> the model flags (GeLU parameter-matched to SwiGLU F 256)
    if [ "$1" = swiglu ]; then f=256; else f=384; fi
    echo "--act $1 --width 64 --layers 2 --heads 4 --ffn $f --seq 64 --batch 16 --lr 3e-3 --schedule constant --warmup 100 --wd 1"
}
recipe() {
    case $1 in
    bf16) echo "--recipe bf16" ;;
    fp8-delayed) echo "--recipe fp8-delayed --amax-history 1 --pow2 --grad-sr" ;;
    fp8-current) echo "--recipe fp8-current" ;;
    esac
}
run() { # dir, flags...
    d=$1
    shift
    # a finished run of this length is reused
    grep -q "\"steps\": $STEPS, \"steps_done\": $STEPS," "$d/summary.json" 2>/dev/null ||
        "$FP8LAB" train --out "$d" --overwrite --steps "$STEPS" --log-every 1 --ckpt-every 100000 --quiet "$@" >/dev/null
}
verdict() { # ref test envdirs...: "VERDICT ratio"
    ref=$1 test=$2
    shift 2
    set -- $(for e in "$@"; do printf -- '--envelope %s ' "$e"; done)
    j=$("$FP8LAB" compare "$ref" "$test" "$@" --bound "$BOUND" --json || true)
    v=$(printf '%s\n' "$j" | sed -n 's/.*"verdict": "\([A-Z]*\)".*/\1/p')
    r=$(printf '%s\n' "$j" | sed -n 's/.*"worst_ratio": \([^,]*\),*/\1/p')
    fs=$(printf '%s\n' "$j" | sed -n 's/.*"first_outside": \([^,]*\),*/\1/p')
    echo "$v ratio $r first_outside $fs"
}

printf '%-8s %-12s %-22s %s\n' act recipe comparison verdict
for act in swiglu gelu; do
    for rec in bf16 fp8-delayed fp8-current; do
        base="$OUT/$act-$rec"
        flags="$(model $act) $(recipe $rec)"
        run "$base-ref" $flags
        envs=
        for k in $ENV_K; do
            run "$base-k$k" $flags $(order "$k")
            envs="$envs $base-k$k"
        done
        for k in $HELD_K; do
            run "$base-k$k" $flags $(order "$k")
            printf '%-8s %-12s %-22s %s\n' $act $rec "held-out K $k" "$(verdict "$base-ref" "$base-k$k" $envs)"
        done
        run "$base-seed2" $flags --seed 2
        printf '%-8s %-12s %-22s %s\n' $act $rec "control: seed 2" "$(verdict "$base-ref" "$base-seed2" $envs)"
        # e_t at a few steps: the running maximum over the envelope reruns of |loss - loss_ref|
        for e in $envs; do cut -d, -f2 "$e/metrics.csv" | tail -n +2 >"$e.loss"; done
        cut -d, -f2 "$base-ref/metrics.csv" | tail -n +2 >"$base-ref.loss"
        set -- $envs
        paste -d' ' "$base-ref.loss" "$1.loss" "$2.loss" "$3.loss" | awk -v n="$STEPS" '
            { for (i = 2; i <= 4; i++) { d = $i - $1; if (d < 0) d = -d; if (d > e) e = d }
              t = NR - 1
              if (t == 0 || t == 10 || t == 25 || t == 49 || t == 100 || t == 299 || t == n - 1) s = s sprintf(" e_%d %.3g", t, e) }
            END { print "    envelope" s }'
    done
    printf '%-8s %-12s %-22s %s\n' $act fp8-delayed "control: vs bf16 ref" \
        "$(verdict "$OUT/$act-bf16-ref" "$OUT/$act-fp8-delayed-ref" $(for k in $ENV_K; do echo "$OUT/$act-bf16-k$k"; done))"
done
