#!/bin/sh
# Install the Debian packages fp8lab needs to build and test, when they are missing.
# Safe to run repeatedly: it only calls apt-get when a package is absent, and only as root.
# Usage: .ci/deps.sh            (the Makefile calls it before building)
set -eu

# python3-numpy and python3-pytest run tests/test_py_fp8lab.py (the Python module experiments/python/fp8lab.py;
# python3-pip and python3-setuptools: its test that `pip install ./experiments/python` works);
# without them that test is skipped.  PyTorch is not a Debian package: `make torch-table` takes it from a venv.
# clang, libclang-rt-14-dev (libFuzzer and the sanitizer runtimes), libomp-14-dev (clang's OpenMP) and llvm
# (llvm-symbolizer: file:line in sanitizer reports) build and run the fuzz targets: make fuzz.  xz-utils: make
# gpu-pack's archive (tests/gpu_pack.sh).
PKGS="make gcc g++ xz-utils libmpfr-dev libgmp-dev libopenblas-dev libopenblas0-openmp libjansson-dev gnuplot-nox libopenmpi-dev openmpi-bin fortunes python3-numpy python3-pytest python3-pip python3-setuptools clang libclang-rt-14-dev libomp-14-dev llvm"

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "fp8lab: missing Debian packages:$missing" >&2
    echo "fp8lab: run as root:  apt-get install -y$missing" >&2
    exit 1
fi

echo "fp8lab: installing Debian packages:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2 || true
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >&2
