#!/bin/sh
# make demo: the README's main job.  Until the training harness lands this is the format table and
# a quantisation study of a heavy-tailed activation tensor.
set -eu
cli=${1:-build/fp8lab}
"$cli" formats
echo
"$cli" quant
