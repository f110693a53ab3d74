#!/bin/sh
# sass_proxy.sh BUILD — the static cost proxy of the CUDA kernels (`make sass-proxy`): SASS instructions
# of the sm_90 code, counted by cuobjdump -sass, written to BUILD/sass-proxy.md and printed.
#
#   1. Per element function of activations.h: kernels/sass_proxy.cu (one tiny fp32 kernel per
#      function, one element per thread) minus the copy kernel of the same inputs and outputs, so the
#      count is the function's own arithmetic.  Two counts per function:
#        all paths    every instruction of the kernel (the cold branches and the CALL'd slow-path
#                     subroutines of division included), minus the copy kernel's
#        common path  the instructions issued by a thread that takes no cold branch: from the entry to
#                     the first unpredicated EXIT, following fall-through past every predicated
#                     branch and predicated EXIT, jumping at every unconditional BRA, and counting a
#                     CALL as one instruction without its subroutine; the one exception: a predicated
#                     forward branch over at most 4 instructions that include a CALL is taken (it is
#                     the guard that skips the slow-path subroutine of a division or square root for
#                     ordinary operands).  Predicated-off instructions on the path count (they issue).
#      NOP and the trailing self-branch after the last EXIT are not counted anywhere.
#   2. Per kernel of BUILD/kernels/*.cu.o (libfp8lab_cuda.a): all-path static instructions.
#
# SASS_BASE=REV (environment): also compile kernels/sass_proxy.cu against activations.h as of git
# revision REV and show its counts beside the working tree's.
# NVCC, NVCCFLAGS: from the Makefile.  CUOBJDUMP: a cuobjdump to use (nvdisasm beside it or on PATH).
# Without cuobjdump + nvdisasm (not in the CUDA toolkit's nvcc-only layout) it tries PyPI's wheels
# nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm (pip download, unzip) into BUILD/tools; if that fails too it says so and
# exits 0 without numbers: this is a report, not a test.
set -u
B=${1:?usage: sass_proxy.sh BUILD}
NVCC=${NVCC:-nvcc}
NVCCFLAGS=${NVCCFLAGS:--std=c++17 -O3 --fmad=false -I. -Inumerics -Ikernels -Ireference}
OUT=$B/sass-proxy.md
W=$B/sass-proxy
mkdir -p "$W" || exit 1

# ---- find cuobjdump and nvdisasm -------------------------------------------------------------------
have_tools() { # $1: a folder holding both, or "" for PATH
    if [ -n "$1" ]; then [ -x "$1/cuobjdump" ] && [ -x "$1/nvdisasm" ]; else
        command -v cuobjdump >/dev/null 2>&1 && command -v nvdisasm >/dev/null 2>&1; fi
}
TOOLDIR=
found=0
if [ -n "${CUOBJDUMP:-}" ]; then
    d=$(dirname "$CUOBJDUMP")
    if [ -x "$d/nvdisasm" ]; then TOOLDIR=$d; found=1
    elif command -v nvdisasm >/dev/null 2>&1; then TOOLDIR=$d; found=1; fi
fi
[ $found = 1 ] || { have_tools "" && found=1; }
for d in "${CUDA_HOME:-}/bin" /usr/local/cuda/bin "$B/tools/bin"; do
    [ $found = 1 ] && break
    have_tools "$d" && { TOOLDIR=$d; found=1; }
done
if [ $found = 0 ] && command -v python3 >/dev/null 2>&1; then
    major=$("$NVCC" --version 2>/dev/null | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
    pin=${major:+==$major.*}
    echo "sass-proxy: no cuobjdump + nvdisasm here; fetching the PyPI wheels nvidia-cuda-cuobjdump$pin, nvidia-cuda-nvdisasm$pin into $B/tools"
    rm -rf "$B/tools" && mkdir -p "$B/tools/wheels" "$B/tools/bin"
    to=; command -v timeout >/dev/null 2>&1 && to="timeout 120"
    if $to python3 -m pip download --quiet --no-deps --only-binary=:all: --timeout 20 --retries 1 \
        --dest "$B/tools/wheels" "nvidia-cuda-cuobjdump$pin" "nvidia-cuda-nvdisasm$pin" >"$B/tools/pip.log" 2>&1; then
        for whl in "$B"/tools/wheels/*.whl; do python3 -m zipfile -e "$whl" "$B/tools/x" || break; done
        for t in cuobjdump nvdisasm; do
            f=$(find "$B/tools/x" -type f -name $t | head -n 1)
            [ -n "$f" ] && cp "$f" "$B/tools/bin/$t" && chmod +x "$B/tools/bin/$t"
        done
        have_tools "$B/tools/bin" && { TOOLDIR=$B/tools/bin; found=1; }
    fi
fi
if [ $found = 0 ]; then
    echo "sass-proxy: SKIPPED: cuobjdump and nvdisasm not found (CUOBJDUMP=, PATH, CUDA_HOME/bin, /usr/local/cuda/bin)"
    echo "sass-proxy: and the wheels nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm could not be had from PyPI ($B/tools/pip.log)."
    echo "sass-proxy: to run it: python3 -m pip download --no-deps nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm, unzip both, and"
    echo "sass-proxy: make sass-proxy CUOBJDUMP=<unzipped>/nvidia/cu13/bin/cuobjdump"
    exit 0
fi
[ -n "$TOOLDIR" ] && PATH=$TOOLDIR:$PATH && export PATH
echo "sass-proxy: $(command -v cuobjdump), $(command -v nvdisasm)"

# ---- compile the proxy kernels (sm_90 only) --------------------------------------------------------
compile() { # $1: source, $2: object, $3: extra -I first
    # shellcheck disable=SC2086
    "$NVCC" $3 $NVCCFLAGS -gencode arch=compute_90,code=sm_90 -c "$1" -o "$2" || exit 1
}
compile kernels/sass_proxy.cu "$W/sass_proxy.cu.o" ""
BASE_OBJ=
if [ -n "${SASS_BASE:-}" ]; then
    # activations.h of the base revision beside a copy of sass_proxy.cu, so that its #include "..."
    # finds that header first
    rm -rf "$W/base" && mkdir -p "$W/base"
    git show "$SASS_BASE:kernels/activations.h" >"$W/base/activations.h" || exit 1
    cp kernels/sass_proxy.cu "$W/base/sass_proxy.cu"
    compile "$W/base/sass_proxy.cu" "$W/base/sass_proxy.cu.o" "-I$W/base"
    BASE_OBJ=$W/base/sass_proxy.cu.o
fi

# ---- count ----------------------------------------------------------------------------------------
# sass_count OBJ: one line per sm_90 function: NAME STATIC COMMON (COMMON "?" where the walk loops)
sass_count() {
    cuobjdump -sass -arch sm_90 "$1" | awk '
    function hex(s,   i, c, v) { s = tolower(s); sub(/^0x/, "", s); v = 0
        for (i = 1; i <= length(s); i++) { c = index("0123456789abcdef", substr(s, i, 1)); v = v * 16 + c - 1 }
        return v }
    function flush(   i, k, st, pc, steps, cnt, j, tgt, ncall) {
        if (fn == "") return
        st = 0
        for (i = 0; i < n; i++) if (!(op[i] == "NOP" || (op[i] ~ /^BRA/ && guard[i] == "" && tg[i] == ad[i]))) st++
        pc = 0; cnt = 0; steps = 0
        while (pc < n) {
            if (++steps > n + 1) { cnt = "?"; break }
            cnt++
            if (op[pc] ~ /^EXIT/ && guard[pc] == "") break
            if (op[pc] ~ /^RET/ && guard[pc] == "") break
            if (op[pc] ~ /^(BRA|JMP|BRX|JMX)/) {
                if (!(tg[pc] in at)) { if (op[pc] ~ /^(BRA|JMP)/ && guard[pc] == "") { cnt = "?"; break } pc++; continue }
                tgt = at[tg[pc]]
                if (guard[pc] == "" && op[pc] ~ /^(BRA|BRA\.U|JMP)$/ && !cond[pc]) { if (tgt == pc) { cnt = "?"; break } pc = tgt; continue }
                if (tgt > pc + 1 && tgt - pc - 1 <= 4) {
                    ncall = 0
                    for (j = pc + 1; j < tgt; j++) if (op[j] ~ /^CALL/) ncall++
                    if (ncall) { pc = tgt; continue }
                }
            }
            pc++
        }
        print fn, st, cnt
        fn = ""; n = 0; delete at
    }
    /Function : / { flush(); fn = $NF; n = 0; next }
    /^[ \t]*\/\*[0-9a-f]+\*\/[ \t]/ {
        line = $0; sub(/^[ \t]*\/\*/, "", line); a = line; sub(/\*\/.*/, "", a)
        sub(/^[0-9a-f]+\*\/[ \t]*/, "", line); sub(/;.*/, "", line)
        g = ""; if (line ~ /^@/) { g = line; sub(/[ \t].*/, "", g); sub(/^@[^ \t]*[ \t]+/, "", line); if (g == "@PT") g = "" }
        o = line; sub(/[ \t].*/, "", o); rest = line; sub(/^[^ \t]*[ \t]*/, "", rest)
        ad[n] = hex(a); at[hex(a)] = n; op[n] = o; guard[n] = g; tg[n] = -1; cond[n] = 0
        if (o ~ /^(BRA|JMP|BRX|JMX)/) {
            if (match(rest, /0x[0-9a-f]+[ \t]*$/)) { t = substr(rest, RSTART, RLENGTH); sub(/[ \t]+$/, "", t); tg[n] = hex(t) }
            if (rest ~ /(^|[ \t,!])U?P[0-6T]/ || o ~ /\.(DIV|CONV)/) cond[n] = 1
        }
        n++; next }
    END { flush() }'
}

sass_count "$W/sass_proxy.cu.o" >"$W/proxy.txt" || exit 1
[ -n "$BASE_OBJ" ] && { sass_count "$BASE_OBJ" >"$W/base.txt" || exit 1; }
: >"$W/lib.txt"
for o in "$B"/kernels/*.cu.o; do
    [ -f "$o" ] || continue
    sass_count "$o" | sed "s|^|$(basename "$o" .cu.o) |" >>"$W/lib.txt" || exit 1
done

# ---- the tables ------------------------------------------------------------------------------------
demangle() { if command -v c++filt >/dev/null 2>&1; then c++filt; else cat; fi; }
nvcc_ver=$("$NVCC" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\),.*/\1/p')
{
    echo "Static cost proxy: SASS instructions of the sm_90 code (nvcc $nvcc_ver, \`make sass-proxy\`)."
    echo
    echo "Per element function of \`activations.h\` (kernels/sass_proxy.cu: one fp32 element per thread, minus the"
    echo "copy kernel of the same inputs and outputs).  all = every instruction, cold branches and slow-path"
    echo "subroutines included; common = the fall-through path of a thread that takes no cold branch."
    echo
    awk -v base="${SASS_BASE:-}" -v file="$W/proxy.txt" -v basefile="$W/base.txt" '
    function split_name(s) { sub(/^fl_sp_/, "", s); sub(/_i[0-9]+o[0-9]+$/, "", s); return s }
    function load(file, S, C,   line, f, nm, io) {
        while ((getline line < file) > 0) { split(line, f, " "); nm = f[1]; if (nm !~ /^fl_sp_/) continue
            io = nm; sub(/^.*_/, "", io); nm = split_name(nm)
            if (nm == "copy") { S["copy_" io] = f[2]; C["copy_" io] = f[3] } else { S[nm] = f[2]; C[nm] = f[3]; IO[nm] = io; if (!(nm in seen)) { seen[nm] = 1; order[++k] = nm } } }
        close(file) }
    function d(S, C, nm, which) { if (!(nm in S) || !(("copy_" IO[nm]) in S)) return "-"
        if (which == "s") return S[nm] - S["copy_" IO[nm]]
        if (C[nm] == "?" || C["copy_" IO[nm]] == "?") return "?"
        return C[nm] - C["copy_" IO[nm]] }
    BEGIN { k = 0; load(file, S, C); if (base != "") load(basefile, BS, BC)
        if (base != "") { print "| element function | in/out | all (" base ") | all | common (" base ") | common |"; print "|---|---|---:|---:|---:|---:|" }
        else { print "| element function | in/out | all | common |"; print "|---|---|---:|---:|" }
        for (i = k; i >= 1; i--) { nm = order[i]; # cuobjdump lists the kernels last first
            io = IO[nm]; gsub(/[io]/, " ", io); split(io, q, " ")
            if (base != "") printf "| %s | %s/%s | %s | %s | %s | %s |\n", nm, q[1], q[2], d(BS, BC, nm, "s"), d(S, C, nm, "s"), d(BS, BC, nm, "c"), d(S, C, nm, "c")
            else printf "| %s | %s/%s | %s | %s |\n", nm, q[1], q[2], d(S, C, nm, "s"), d(S, C, nm, "c") }
        printf "\nThe frame (copy kernel, 1 input / 1 output): %s instructions, %s on the common path.\n", S["copy_i1o1"], C["copy_i1o1"] }'
    if [ -s "$W/lib.txt" ]; then
        echo
        echo "Per kernel of libfp8lab_cuda.a ($B/kernels/*.cu.o): static instructions, all paths."
        echo
        echo "| object | kernel | instructions |"
        echo "|---|---|---:|"
        while read -r obj name st cm; do
            nm=$(echo "$name" | demangle | sed 's/(anonymous namespace):://g; s/fl_io_//g; s/unsigned int/unsigned/g')
            echo "| $obj | \`$nm\` | $st |"
        done <"$W/lib.txt"
    fi
} >"$OUT"
cat "$OUT"
echo "sass-proxy: wrote $OUT"
