#!/bin/sh
# make demo: the README's main job -- the FP8 SwiGLU instability reproduction (fp8lab demo).
# Usage: experiments/demo.sh [path/to/fp8lab] [output folder]
# Writes the three run folders, the plots (*.png), demo.json and a readable summary into the folder
# (default demo-out).  The quantisation study that `make demo` ran before stays available as
# `fp8lab quant`.
set -eu
cli=${1:-build/fp8lab}
out=${2:-demo-out}
"$cli" demo --out "$out" --json "$out/demo-runs.json"
