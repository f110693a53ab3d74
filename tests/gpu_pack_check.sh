#!/bin/sh
# gpu_pack_check.sh PACK.tar.xz -- checks a tests/gpu_pack.sh archive here, without a GPU (make cuda runs it):
#   1. it holds the four binaries, run.sh, REVISION and SYSTEM;
#   2. with LD_LIBRARY_PATH = its lib/, then CUDA_HOME/lib64 (as run.sh sets it), every library of every
#      binary is found, and each one not named in SYSTEM (the C library's, the CUDA driver's and toolkit's,
#      which gpu_pack.sh leaves to the GPU machine) is loaded from lib/, not from this machine;
#   3. run.sh refuses a wrong call (no OUTDIR; outside a checkout) with exit 2, and from the checkout's root
#      runs tests/gpu_check.sh on the packed binaries: here, with no device, "no CUDA device found; skipped",
#      exit 0.
# Exit 0 when all hold, 1 naming the first that does not.
set -u
[ $# -eq 1 ] || { echo "usage: sh tests/gpu_pack_check.sh PACK.tar.xz" >&2; exit 2; }
pack=$1
x=$(mktemp -d)
trap 'rm -rf "$x"' EXIT INT TERM
fail() {
    echo "gpu_pack_check: FAIL: $*" >&2
    exit 1
}
tar -xJf "$pack" -C "$x" || fail "$pack does not extract"
for f in b/fp8lab b/fp8lab-cuda b/tests/test_gpu_twins b/tests/gpu_bench run.sh REVISION SYSTEM; do
    [ -f "$x/$f" ] || fail "$pack has no $f"
done
n=0
for f in b/fp8lab b/fp8lab-cuda b/tests/test_gpu_twins b/tests/gpu_bench; do
    out=$(LD_LIBRARY_PATH="$x/lib:${CUDA_HOME:-/usr/local/cuda}/lib64" ldd "$x/$f") || fail "ldd $f"
    echo "$out" | grep -q "not found" && fail "$f: a library is not found: $(echo "$out" | grep 'not found')"
    bad=$(echo "$out" | awk -v lib="$x/lib/" 'NR == FNR { sys[$1] = 1; next }
        $2 == "=>" && $3 ~ /^\// && !($1 in sys) && index($3, lib) != 1 { print $1 " from " $3 }' "$x/SYSTEM" -)
    [ -z "$bad" ] || fail "$f loads $bad instead of the pack's lib/"
    n=$((n + 1))
done
sh "$x/run.sh" >/dev/null 2>&1
[ $? -eq 2 ] || fail "run.sh without OUTDIR did not exit 2"
(cd "$x" && sh ./run.sh "$x/out-outside" >/dev/null 2>&1)
[ $? -eq 2 ] || fail "run.sh outside a checkout did not exit 2"
log=$(sh "$x/run.sh" "$x/out" 2>&1)
rc=$?
if echo "$log" | grep -q "^device:"; then # a machine with a GPU: the check ran; its exit status is its verdict
    [ $rc -eq 0 ] || fail "run.sh: gpu_check.sh failed on this machine's GPU (exit $rc)"
else
    echo "$log" | grep -q "no CUDA device found; skipped" || fail "run.sh printed: $log"
    [ $rc -eq 0 ] || fail "run.sh without a device exited $rc"
fi
echo "gpu_pack_check: $pack: $n binaries, every library found, the packed ones from its lib/ ($(ls "$x/lib" | wc -l) files); run.sh: $(echo "$log" | tail -1)"
