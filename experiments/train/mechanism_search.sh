#!/bin/sh
# mechanism_search.sh — the search for the late regime (TRAINING.md, "The mechanism", P0): each
# lever as a SwiGLU / parameter-matched GeLU pair in BF16, the demo's optimiser (lr 3e-3, wd 1,
# constant after 100 warm-up steps), 12050 steps = 36 weight-decay timescales (the long lever:
# 36050 = 108), per-channel telemetry every 100 steps.
# Judge the folders with `fp8lab mechanism --judge-search OUT`.
# Usage: experiments/train/mechanism_search.sh OUT [JOBS]      (resumable: run it again)
set -eu
out=${1:?usage: mechanism_search.sh OUT [JOBS]}
jobs=${2:-2}
fp8lab=${FP8LAB:-build/fp8lab}
mkdir -p "$out"
common="--recipe bf16 --steps 12050 --seed 1 --lr 3e-3 --wd 1 --schedule constant --warmup 100 --log-every 100 --ckpt-every 1000 --chan-every 100 --threads 1 --quiet"
# lever name | train flags (SwiGLU's F; GeLU gets 1.5 F); a later --steps overrides the common one
levers='base|--width 64 --layers 2 --heads 4 --ffn 256
bos|--width 64 --layers 2 --heads 4 --ffn 256 --bos
fortunes|--width 64 --layers 2 --heads 4 --ffn 256 --data fortunes
fortunes-bos|--width 64 --layers 2 --heads 4 --ffn 256 --data fortunes --bos
triggers|--width 64 --layers 2 --heads 4 --ffn 256 --data triggers
wide-fortunes-bos|--width 128 --layers 4 --heads 4 --ffn 512 --data fortunes --bos
long-fortunes-bos|--width 64 --layers 2 --heads 4 --ffn 256 --data fortunes --bos --steps 36050'
# one line per run: DIR then its train flags; run --jobs at a time with xargs (resumable: a
# finished run is skipped, an interrupted one resumed from its checkpoint)
echo "$levers" | while IFS='|' read -r name flags; do
    f=$(echo "$flags" | sed -n 's/.*--ffn \([0-9]*\).*/\1/p')
    gflags=$(echo "$flags" | sed "s/--ffn $f/--ffn $((f * 3 / 2))/")
    echo "$out/$name-swiglu --act swiglu $common $flags"
    echo "$out/$name-gelu --act gelu $common $gflags"
done > "$out/runs.txt"
export fp8lab
# shellcheck disable=SC2016
xargs -P "$jobs" -L 1 sh -c '
    dir=$0
    done=$(sed -n "s/.*\"steps\": \([0-9]*\), \"steps_done\": \([0-9]*\).*/\1=\2/p" "$dir/summary.json" 2>/dev/null)
    if [ -n "$done" ] && [ "${done%=*}" = "${done#*=}" ]; then exit 0; fi
    if [ -f "$dir/checkpoint.bin" ]; then "$fp8lab" train --resume "$dir" --quiet; else "$fp8lab" train "$@" --out "$dir" --overwrite; fi  # a run killed before its first checkpoint starts again
    echo "done $dir"' < "$out/runs.txt"
