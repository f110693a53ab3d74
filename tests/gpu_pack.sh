#!/bin/sh
# gpu_pack.sh BUILD OUT.tar.xz -- `make gpu-pack`: what `make gpu-check` runs, for a GPU machine that has
# the NVIDIA driver and the CUDA toolkit but not this project's Debian libraries.  One tar.xz with
#   b/        BUILD's fp8lab, fp8lab-cuda, tests/test_gpu_twins and tests/gpu_bench;
#   lib/      every shared library ldd resolves for them except the C library's own (libc, libm, libdl,
#             libpthread, librt, the loader), the driver's (libcuda, libnvidia-*) and the toolkit's
#             (libcublas*, libcudart*): MPFR, GMP, OpenBLAS, jansson, libgomp, libgfortran, libstdc++ ...;
#   bin/time  GNU time, which the device sweep calls, where this machine has it;
#   run.sh    the runner (below); REVISION, the commit the binaries were built from (-dirty: with changes
#             not committed); SYSTEM, the libraries left to the GPU machine.
# On the GPU machine, in a checkout of that commit, from its root:
#     tar xJf fp8lab-gpu.tar.xz -C PACK && sh PACK/run.sh OUTDIR
# runs tests/gpu_check.sh on the packed binaries (GPU_CHECK_QUICK=1 etc. as gpu_check.sh takes them) with
# LD_LIBRARY_PATH = PACK/lib, then CUDA_HOME/lib64 (default /usr/local/cuda).  Build with a portable OPT:
# the default -march=native binaries run only on CPUs with this machine's instruction set
# (make gpu-pack BUILD=build-gpu OPT="-O3 -march=x86-64-v3").  Exit 2 when a binary is missing.
set -eu
[ $# -eq 2 ] || { echo "usage: sh tests/gpu_pack.sh BUILD OUT.tar.xz" >&2; exit 2; }
build=$1
out=$2
bins="fp8lab fp8lab-cuda tests/test_gpu_twins tests/gpu_bench"
for f in $bins; do
    [ -x "$build/$f" ] || { echo "gpu_pack: $build/$f is missing (make BUILD=$build cuda builds it)" >&2; exit 2; }
done
stage=$(mktemp -d)
trap 'rm -rf "$stage" "$out.tmp"' EXIT INT TERM
chmod 755 "$stage"
mkdir -p "$stage/b/tests" "$stage/lib"
for f in $bins; do
    cp "$build/$f" "$stage/b/$f"
done
# ldd's "name => path (address)" lines; the libraries a GPU machine brings itself are left out and named in
# SYSTEM (tests/gpu_pack_check.sh reads it)
: >"$stage/SYSTEM"
for f in $bins; do
    ldd "$build/$f"
done | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u | while read -r name path; do
    case $name in
    linux-vdso* | ld-linux* | libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | libcuda.so* | \
        libnvidia* | libcublas* | libcudart*) grep -qx "$name" "$stage/SYSTEM" || echo "$name" >>"$stage/SYSTEM" ;;
    *) cp -L "$path" "$stage/lib/$name" ;;
    esac
done
if ldd "$build/fp8lab-cuda" | grep -q "not found"; then
    echo "gpu_pack: some of $build/fp8lab-cuda's libraries are not found here:" >&2
    ldd "$build/fp8lab-cuda" | grep "not found" >&2
fi
t=$(command -v time 2>/dev/null || true)
case $t in /*) mkdir -p "$stage/bin" && cp -L "$t" "$stage/bin/time" ;; esac
rev=$(git rev-parse HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- 2>/dev/null || rev="$rev-dirty" # built from a tree with changes not committed
echo "$rev" >"$stage/REVISION"
cat >"$stage/run.sh" <<'EOF'
#!/bin/sh
# run.sh OUTDIR -- tests/gpu_check.sh on the packed binaries (tests/gpu_pack.sh), from the root of a checkout
# of the commit in REVISION.  GPU_CHECK_QUICK=1: gpu-test, the training part and gpu-bench, no sweep.
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -ne 1 ]; then
    echo "usage: sh $0 OUTDIR   (from the fp8lab checkout's root; GPU_CHECK_QUICK=1 for a short check)" >&2
    exit 2
fi
if [ ! -f tests/gpu_check.sh ]; then
    echo "run.sh: run it from the root of an fp8lab checkout (no tests/gpu_check.sh here)" >&2
    exit 2
fi
rev=$(git rev-parse HEAD 2>/dev/null || echo unknown)
[ "$rev" = "$(cat "$here/REVISION")" ] ||
    echo "run.sh: note: the binaries were built from $(cat "$here/REVISION"), this checkout is $rev" >&2
cuda=${CUDA_HOME:-/usr/local/cuda}
LD_LIBRARY_PATH="$here/lib:$cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
[ -d "$here/bin" ] && PATH="$here/bin:$PATH" && export PATH
exec sh tests/gpu_check.sh "$here/b" "$1"
EOF
mkdir -p "$(dirname "$out")"
tar -cf - -C "$stage" . | xz -T2 -6 >"$out.tmp"
mv "$out.tmp" "$out"
echo "gpu_pack: wrote $out ($(du -k "$out" | cut -f1) KiB: $(ls "$stage/lib" | wc -l) libraries; revision $(cat "$stage/REVISION"))"
