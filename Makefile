# fp8lab — build, test, benchmark.
#
#   make            library build/libfp8lab.a and the CLI build/fp8lab
#   make test       every test binary under tests/ (the CI command)
#   make sanitize   the same suite built and run under AddressSanitizer + UBSan (build-asan/)
#   make bench      benchmarks (throughput next to memcpy, measured in the same run)
#   make check-exhaustive   all 2^32 float32 inputs through every RNE conversion vs NVIDIA's own
#   make cuda       the CUDA kernels (when nvcc exists; otherwise says so and does nothing)
#   make sass-proxy static SASS instruction counts per element function and kernel (no GPU needed)
#   make gpu-check  on a machine with a GPU: gpu-test, gpu-bench, the device ULP sweep, one results file
#   make demo       the README's main job
#   make fuzz       libFuzzer harnesses of the file readers (clang; build-fuzz/), each run for
#                   FUZZ_SECONDS=60 seconds, or FUZZ_RUNS=N executions, under ASan + UBSan
#
# Conventions that let new files build without editing this file:
#   numerics/*.c reference/*.c kernels/*.c experiments/*/*.c  -> build/libfp8lab.a
#   experiments/ has one folder per subsystem: cli/ (the fp8lab command and the small commands),
#   ulp/ (the ULP validation engine), train/ (the training harness and the demo), polyorder/ (the
#   polynomial-order study), and common/ below them (what the commands share: exit codes, argument
#   parsing, sh quoting, JSON printing, the gnuplot runner, the run plots).  Includes point down
#   only: cli/ is the top, no other folder of the library includes its headers; each subsystem
#   declares its commands in its own commands.h (tests/test_layout.c checks this).  A new .c in any
#   of them builds with no edit here.
#   experiments/cli/fp8lab.c holds main() of the CLI and is the one file kept out of the library.
#   tests/test_*.c   -> build/tests/test_*    (C, linked with the library)
#   tests/test_*.cpp -> build/tests/test_*    (C++, for oracles from NVIDIA's host headers)
#   tests/test_*.cu  -> build/tests/test_*    (CUDA, where nvcc exists; skipped without a device)
#   bench/ lives under tests/bench_*.c        -> build/tests/bench_*  (run by make bench, not make test)

BUILD    ?= build
CC       ?= gcc
CXX      ?= g++
NVCC     ?= $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
CUDA_HOME ?= $(if $(NVCC),$(abspath $(dir $(NVCC))/..),/usr/local/cuda)

# No fast-math anywhere: everything here is compared with a reference.  Contraction of a*b+c into
# an FMA is switched off so that results do not depend on what the compiler chose to fuse.
OPT      ?= -O3 -march=native
WARN     := -Wall -Wextra -Wshadow -Wno-unused-function
INC      := -I. -Inumerics -Ireference -Ikernels -Iexperiments
CFLAGS   += -std=c11 -D_GNU_SOURCE $(OPT) $(WARN) -ffp-contract=off -fno-fast-math -fopenmp $(INC) -MMD -MP
CXXFLAGS += -std=c++17 $(OPT) $(WARN) -ffp-contract=off -fno-fast-math -fopenmp $(INC) -MMD -MP
LDLIBS   += -lopenblas -ljansson -lmpfr -lgmp -lm
LDFLAGS  += -fopenmp
# OpenBLAS built on OpenMP (libopenblas0-openmp, installed by .ci/deps.sh) shares the OpenMP thread
# team of the harness's own loops.  Debian's default libopenblas.so.0 runs its own pthreads, which
# contend with the idle, spinning OpenMP team: `fp8lab train --threads 2` ran at half the speed of
# one thread.  Both builds have the same soname, ABI and kernels; the run path picks the OpenMP one
# where it is installed (and is harmless where it is not).
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
BLAS_RPATH := -Wl,-rpath,/usr/lib/$(MULTIARCH)/openblas-openmp
LDFLAGS  += $(if $(MULTIARCH),$(BLAS_RPATH))

# The harness's fixed-order GEMM (experiments/train/gemm.c: intrinsics in always-inline register blocks)
# runs about 30x slower at -O1 than at -O2, which made every training run of the sanitizer build
# (OPT="-O1 -g") take minutes; that build compiles it at -O2, instrumented like the rest.  (Not the
# fuzz build: clang with -fsanitize=fuzzer takes more than 10 minutes on it at -O2, and its targets
# do not train.)
ifeq ($(SAN)$(filter -O1,$(OPT)),1-O1)
$(BUILD)/experiments/train/gemm.o: override OPT := $(patsubst -O1,-O2,$(OPT))
endif

ifeq ($(SAN),1)
CFLAGS   += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
CXXFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS  += -fsanitize=address,undefined
endif

# NVIDIA's host-side conversion headers (cuda_fp8.h, cuda_bf16.h) serve as an independent oracle.
NV_HEADERS := $(wildcard $(CUDA_HOME)/include/cuda_fp8.h)
ifneq ($(NV_HEADERS),)
NVFLAGS := -DFL_HAVE_NV_HEADERS -isystem $(CUDA_HOME)/include
endif

LIB_SRC  := $(wildcard numerics/*.c reference/*.c kernels/*.c experiments/*/*.c)
LIB_SRC  := $(filter-out experiments/cli/fp8lab.c,$(LIB_SRC))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_C   := $(wildcard tests/test_*.c)
TEST_CXX := $(wildcard tests/test_*.cpp)
TESTS    := $(TEST_C:tests/%.c=$(BUILD)/tests/%) $(TEST_CXX:tests/%.cpp=$(BUILD)/tests/%)
# tests/test_*.cu (CUDA; they skip with exit 77 where there is no device): in the suite wherever nvcc
# exists, except in the sanitizer build (nvcc's objects are not instrumented)
TEST_CU  := $(if $(NVCC),$(if $(filter 1,$(SAN)),,$(wildcard tests/test_*.cu)))
TESTS    += $(TEST_CU:tests/%.cu=$(BUILD)/tests/%)
BENCH_C  := $(wildcard tests/bench_*.c)
BENCHES  := $(BENCH_C:tests/%.c=$(BUILD)/tests/%)
CLI      := $(BUILD)/fp8lab
DEPS_OK  := $(BUILD)/.deps-ok

.PHONY: all test sanitize bench bench-avx2 check-exhaustive cuda demo deps clean
all: $(CLI)

deps: $(DEPS_OK)
$(DEPS_OK): .ci/deps.sh
	@mkdir -p $(BUILD)
	@sh .ci/deps.sh
	@touch $@

$(BUILD)/%.o: %.c | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libfp8lab.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(CLI): $(BUILD)/experiments/cli/fp8lab.o $(BUILD)/libfp8lab.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(BUILD)/libfp8lab.a | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libfp8lab.a $(LDLIBS)

$(BUILD)/tests/%: tests/%.cpp $(BUILD)/libfp8lab.a | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) $(NVFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libfp8lab.a $(LDLIBS)

# The MPI build of the ulp validator is part of the suite wherever Open MPI is installed (.ci/deps.sh
# installs it): tests/test_cli_ulp.c runs it under mpirun -np 2.  Not in the sanitizer build, where
# Open MPI's own allocations would trip LeakSanitizer.
HAVE_MPICC := $(shell command -v mpicc 2>/dev/null)
test: $(CLI) $(TESTS) $(if $(HAVE_MPICC),$(if $(filter 1,$(SAN)),,ulp-mpi))
	@sh tests/run.sh $(BUILD)

sanitize:
	$(MAKE) BUILD=build-asan SAN=1 OPT="-O1 -g" test

# bench_convert runs the peers (PyTorch, ml_dtypes: tests/bench_convert_peers.py) with $(PYTHON) in the
# same run, where that Python has them, and says why not otherwise:  make bench PYTHON=ENV/bin/python
PYTHON ?= python3
bench: $(CLI) $(BENCHES)
	@for b in $(BENCHES); do echo "== $$b"; PYTHON=$(PYTHON) $$b || exit 1; done
	@$(if $(and $(HAVE_AVX512),$(filter-out build-avx2,$(BUILD))),$(MAKE) --no-print-directory bench-avx2 PYTHON=$(PYTHON))

# On a CPU with AVX-512, make bench measures again with genuine AVX2 code, what most cloud CPUs run: a
# -march=haswell build (build-avx2; a -march=native build's avx2 level may use AVX-512VL encodings)
# with every level capped at AVX2, the peers' too (PyTorch's ATen kernels, MKL and oneDNN).
HAVE_AVX512  := $(shell grep -qw avx512f /proc/cpuinfo 2>/dev/null && echo 1)
AVX2_ENV     := FP8LAB_ISA=avx2 OPENBLAS_CORETYPE=Haswell ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2
AVX2_BENCHES := bench_convert bench_cast bench_train
bench-avx2:
	@$(MAKE) --no-print-directory BUILD=build-avx2 OPT="-O3 -march=haswell" build-avx2/fp8lab $(AVX2_BENCHES:%=build-avx2/tests/%) >/dev/null
	@for b in $(AVX2_BENCHES); do echo "== build-avx2/tests/$$b (-march=haswell; $(AVX2_ENV))"; \
	    $(AVX2_ENV) FP8LAB=build-avx2/fp8lab PYTHON=$(PYTHON) build-avx2/tests/$$b || exit 1; done

check-exhaustive: $(BUILD)/tests/test_nv_oracle
	$(BUILD)/tests/test_nv_oracle --exhaustive

# CUDA: every kernels/*.cu compiles on its own to PTX (sm_90) and to SASS for sm_89, sm_90 and
# sm_100 when the toolkit has it, into build/libfp8lab_cuda.a.  --fmad=false: no contraction of
# a*b+c into FMA, so the kernels' arithmetic is the CPU twins' (which build with -ffp-contract=off).
# ptxas -v reports are kept beside the objects and checked for register spills.  -Wall -Wextra for the
# host compiler too (gcc's -Winfinite-recursion, -Wint-in-bool-context, ... on the launchers).
# (kernels/sass_proxy.cu is not in the library: make sass-proxy compiles it for sm_90 on its own)
CUDA_SRC     := $(filter-out kernels/sass_proxy.cu,$(wildcard kernels/*.cu))
CUDA_ARCHS   := 89 90 $(if $(NVCC),$(shell $(NVCC) --list-gpu-arch 2>/dev/null | grep -qx compute_100 && echo 100))
NVCCFLAGS    := -std=c++17 -O3 --fmad=false -I. -Inumerics -Ikernels -Ireference -Xcompiler -Wall,-Wextra
CUDA_OBJ     := $(CUDA_SRC:%.cu=$(BUILD)/%.cu.o)
CUDA_PTX     := $(CUDA_SRC:%.cu=$(BUILD)/%.ptx)
# every .cu includes kernels/ and numerics/ headers: a header change rebuilds them
CUDA_HDR     := $(wildcard kernels/*.h numerics/*.h)

$(BUILD)/kernels/%.ptx: kernels/%.cu $(CUDA_HDR)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -arch=sm_90 -ptx $< -o $@

$(BUILD)/kernels/%.cu.o: kernels/%.cu $(CUDA_HDR)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a)) -Xptxas -v -c $< -o $@ 2> $@.ptxas
	@if grep -E "[1-9][0-9]* bytes spill (stores|loads)" $@.ptxas; then echo "register spills in $<"; rm -f $@; exit 1; fi

$(BUILD)/libfp8lab_cuda.a: $(CUDA_OBJ)
	@rm -f $@
	ar rcs $@ $^

# build/fp8lab-cuda: the CLI with the GPU training step's CUDA table (experiments/train/gstep_cuda.c, the
# one library file that needs libfp8lab_cuda.a) for `fp8lab train --device cuda`.  train.c reaches the
# table through a weak reference, so build/fp8lab links without CUDA and says the step is not in it.
CLI_CUDA := $(BUILD)/fp8lab-cuda
$(CLI_CUDA): $(BUILD)/experiments/cli/fp8lab.o $(BUILD)/experiments/train/gstep_cuda.o $(BUILD)/libfp8lab_cuda.a \
		$(BUILD)/libfp8lab.a
	$(NVCC) $(NVCCFLAGS) -o $@ $^ -lcublasLt -Xcompiler -fopenmp $(LDLIBS)

# make test checks fp8lab-cuda's refusal of --device cuda without a device (tests/test_compare.c), where
# the suite builds the CUDA tests (nvcc, no sanitizer)
test: $(if $(TEST_CU),$(CLI_CUDA))

cuda:
ifeq ($(NVCC),)
	@echo "make cuda: nvcc not found; skipping the CUDA build (the CPU twins are built by 'make')"
else
	@$(MAKE) --no-print-directory $(CUDA_PTX) $(BUILD)/libfp8lab_cuda.a $(GPU_TEST) $(GPU_BENCH) $(CLI) $(CLI_CUDA)
	@echo "make cuda: built $(BUILD)/libfp8lab_cuda.a (PTX sm_90; SASS for compute capabilities $(strip $(CUDA_ARCHS))) with $(NVCC); no register spills; $(CLI_CUDA)"
	@echo "make cuda: built $(GPU_TEST) and $(GPU_BENCH); running gpu-check here:"
	@sh tests/gpu_check.sh $(BUILD) $(GPU_OUT)
	@sh tests/gpu_pack.sh $(BUILD) $(GPU_PACK) && sh tests/gpu_pack_check.sh $(GPU_PACK)
	@$(MAKE) --no-print-directory sass-proxy || echo "make cuda: sass-proxy failed (a report, not a test)"
endif

# sass-proxy: a static cost proxy that needs no GPU (the elementwise kernels are compute-bound, so time
# follows issued instructions per element): SASS instructions of the sm_90 code from cuobjdump -sass, per
# element function of activations.h (kernels/sass_proxy.cu: one tiny kernel each, minus a copy kernel)
# and per kernel of libfp8lab_cuda.a, into $(BUILD)/sass-proxy.md (kernels/sass_proxy.sh).  cuobjdump and
# nvdisasm: CUOBJDUMP=, PATH, the toolkit, else PyPI's wheels into $(BUILD)/tools; with none it says so
# and exits 0.  SASS_BASE=REV: also the counts with activations.h as of git revision REV.
.PHONY: sass-proxy
sass-proxy:
ifeq ($(NVCC),)
	@echo "sass-proxy: nvcc not found; skipped"
else
	@$(MAKE) --no-print-directory $(CUDA_OBJ)
	@NVCC="$(NVCC)" NVCCFLAGS="$(NVCCFLAGS)" CUDA_HOME="$(CUDA_HOME)" CUOBJDUMP="$(CUOBJDUMP)" SASS_BASE="$(SASS_BASE)" \
		sh kernels/sass_proxy.sh $(BUILD)
endif

# gpu-test: every CUDA kernel against its CPU twin, bit for bit, and the FP8 GEMM wrapper against its
# twin within the derived bound (tests/test_gpu_twins.cu).  It is part of `make test` wherever nvcc
# exists; without a device it prints "SKIP: no CUDA device" and exits 77 (counted as skipped).
GPU_TEST := $(BUILD)/tests/test_gpu_twins
$(BUILD)/tests/%: tests/%.cu tests/cuda_test.h tests/check.h $(BUILD)/libfp8lab_cuda.a $(BUILD)/libfp8lab.a
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a)) -Itests -o $@ $< \
		$(BUILD)/libfp8lab_cuda.a $(BUILD)/libfp8lab.a -lcublasLt -Xcompiler -fopenmp $(LDLIBS)

.PHONY: gpu-test
gpu-test:
ifeq ($(NVCC),)
	@echo "gpu-test: nvcc not found; skipped"
else
	@$(MAKE) --no-print-directory $(GPU_TEST)
	@$(GPU_TEST); rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 77 ]
endif

# gpu-bench: GB/s of every kernel family and pass beside a copy kernel of the same bytes, cuBLASLt FP8
# vs BF16 GEMMs, Smooth-SwiGLU's overhead (tests/gpu_bench.cu; host arithmetic and writers in
# kernels/gpu_report.c) -> $(GPU_OUT)/bench.json and bench.md.
# gpu-check: gpu-test, gpu-bench, then every input of the elementwise kernels (all bf16 codes, all 2^32
# bf16 SwiGLU pairs) run on the device and judged by `fp8lab ulp`, all in $(GPU_OUT)/gpu-check.json and
# gpu-check.md (tests/gpu_check.sh; GPU_CHECK_QUICK=1: gpu-test, the training part and gpu-bench only, for a
# short loan of a device; GPU_CHECK_JUDGE=0: the sweep compared with the twins bit for bit only,
# not judged, and no accuracy table).  Without a device both say so and exit 0.
GPU_BENCH := $(BUILD)/tests/gpu_bench
GPU_OUT   ?= $(BUILD)/gpu-check
$(GPU_BENCH): tests/gpu_bench.cu tests/cuda_test.h tests/check.h $(BUILD)/libfp8lab_cuda.a $(BUILD)/libfp8lab.a
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a)) -Itests -Xptxas -v -o $@ $< \
		$(BUILD)/libfp8lab_cuda.a $(BUILD)/libfp8lab.a -lcublasLt -Xcompiler -fopenmp $(LDLIBS) 2> $@.ptxas || { cat $@.ptxas; exit 1; }
	@if grep -E "[1-9][0-9]* bytes spill (stores|loads)" $@.ptxas; then echo "register spills in $<"; rm -f $@; exit 1; fi

.PHONY: gpu-bench gpu-check
gpu-bench:
ifeq ($(NVCC),)
	@echo "gpu-bench: nvcc not found; skipped"
else
	@$(MAKE) --no-print-directory $(GPU_BENCH)
	@mkdir -p $(GPU_OUT) && $(GPU_BENCH) bench $(GPU_OUT)
endif

# gpu-pack: $(GPU_PACK), the binaries gpu-check runs with the shared libraries a GPU machine without this
# project's Debian packages lacks, and run.sh (tests/gpu_pack.sh; checked by tests/gpu_pack_check.sh, which
# make cuda runs).  On the GPU machine, from the root of a checkout of the same commit:
#   tar xJf fp8lab-gpu.tar.xz -C PACK && GPU_CHECK_QUICK=1 sh PACK/run.sh OUTDIR
# For another machine build with a portable OPT: make gpu-pack BUILD=build-gpu OPT="-O3 -march=x86-64-v3"
GPU_PACK ?= $(BUILD)/fp8lab-gpu.tar.xz
.PHONY: gpu-pack
gpu-pack:
ifeq ($(NVCC),)
	@echo "gpu-pack: nvcc not found; skipped"
else
	@$(MAKE) --no-print-directory $(GPU_TEST) $(GPU_BENCH) $(CLI) $(CLI_CUDA)
	@case "$(OPT)" in *native*) echo "gpu-pack: note: OPT=\"$(OPT)\" -- these binaries run only on CPUs with this machine's instruction set";; esac
	@sh tests/gpu_pack.sh $(BUILD) $(GPU_PACK)
endif

gpu-check:
ifeq ($(NVCC),)
	@echo "gpu-check: nvcc not found; skipped"
else
	@$(MAKE) --no-print-directory $(GPU_TEST) $(GPU_BENCH) $(CLI) $(CLI_CUDA)
	@sh tests/gpu_check.sh $(BUILD) $(GPU_OUT)
endif

# ulp-mpi: build/fp8lab-mpi, `fp8lab ulp` with one sweep spread over MPI ranks (experiments/ulp/ulp_mpi.c;
# Debian packages libopenmpi-dev openmpi-bin).  Run: mpirun -np 2 build/fp8lab-mpi ulp ARGS...
ULP_MPI := $(BUILD)/fp8lab-mpi
MPICC   ?= mpicc
.PHONY: ulp-mpi ulp-sweeps
ulp-mpi: $(BUILD)/libfp8lab.a
	@command -v $(MPICC) >/dev/null 2>&1 || { echo "make ulp-mpi: $(MPICC) not found (Debian: apt-get install libopenmpi-dev openmpi-bin)"; exit 1; }
	$(MPICC) $(filter-out -MMD -MP,$(CFLAGS)) -DFL_MPI_BUILD $(LDFLAGS) -o $(ULP_MPI) experiments/ulp/ulp_mpi.c $(BUILD)/libfp8lab.a $(LDLIBS)

# ulp-sweeps: every binary32 input of silu, gelu, sigmoid and tanh through the ulp validator (the
# fast path), timed, then the same 2^22-input range with the fast path and with --mpfr-only.
ULP_SWEEPS := silu_f32_naive gelu_erff_f32 sigmoid_via_tanhf_f32 tanhf_f32
ulp-sweeps: $(CLI)
	@for i in $(ULP_SWEEPS); do echo "== $$i, all 2^32 inputs"; \
		/usr/bin/env time -f "   wall %e s, cpu %U s user" $(CLI) ulp --impl $$i --exhaustive --no-progress || exit 1; done
	@for i in $(ULP_SWEEPS); do for m in "" --mpfr-only; do echo "== $$i, 2^22 inputs in [0.5, 1) $$m"; \
		$(CLI) ulp --impl $$i --range 0x3f000000:0x3f400000 --no-progress $$m | tail -n 1 || exit 1; done; done

# twin-table: every CPU twin of kernels/twins.c against MPFR (experiments/ulp/twin_table.sh), into
# build/twin-table/table.md and, once all have run, kernels/README.md's accuracy table (between its
# twin-table markers).  TWINS="silu_bf16 polyrelu3_bf16": only those, README untouched (a quick check).
.PHONY: twin-table
twin-table: $(CLI)
	@TWINS="$(TWINS)" sh experiments/ulp/twin_table.sh $(CLI) $(BUILD)/twin-table kernels/README.md

# torch-table: PyTorch's activation kernels judged by `fp8lab ulp` (experiments/torchval/torch_table.py;
# explained in experiments/torchval/TORCH.md), into $(BUILD)/torch-table/torch-table.{md,json}.  Needs a
# Python with torch and numpy: make torch-table PYTHON=ENV/bin/python.  Without one it says how to get
# it and prints SKIPPED (exit 0).  TORCH_TABLE_ARGS: more options (e.g. --parts bf16).  PYTHON: see bench.
.PHONY: torch-table
torch-table: $(CLI)
	@if command -v "$(PYTHON)" >/dev/null 2>&1; then \
		FP8LAB=$(CLI) "$(PYTHON)" experiments/torchval/torch_table.py --out $(BUILD)/torch-table $(TORCH_TABLE_ARGS); \
	else \
		echo "torch-table: SKIPPED: no Python '$(PYTHON)'.  To run it: python3 -m venv ENV && ENV/bin/pip install torch numpy; then: make torch-table PYTHON=ENV/bin/python"; \
	fi

# peers-table: PyTorch's and ml_dtypes' conversions probed next to `fp8lab convert` (Inf and overflow,
# NaN, ties, subnormals, float64 inputs; experiments/torchval/peers_semantics.py), rewritten into
# numerics/CONVERT.md between its peers-table markers.  peers-check writes nothing and fails when that
# table differs from a fresh probe.  Needs a Python with numpy, torch and ml_dtypes; else SKIPPED (exit 0).
.PHONY: peers-table peers-check
peers-table peers-check: $(CLI)
	@if command -v "$(PYTHON)" >/dev/null 2>&1; then \
		FP8LAB=$(CLI) "$(PYTHON)" experiments/torchval/peers_semantics.py $(if $(filter peers-check,$@),--check); \
	else \
		echo "$@: SKIPPED: no Python '$(PYTHON)'.  To run it: python3 -m venv ENV && ENV/bin/pip install numpy torch ml_dtypes; then: make $@ PYTHON=ENV/bin/python"; \
	fi

demo: $(CLI)
	@sh experiments/train/demo.sh $(CLI)

# ---- fuzz: libFuzzer harnesses of the file readers (tests/fuzz/README.md) ---------------------------
# tests/fuzz/fuzz_*.c -> build-fuzz/fuzz/fuzz_*, built with clang (Debian: clang libclang-rt-14-dev
# libomp-14-dev llvm, installed by .ci/deps.sh): the library is compiled again into build-fuzz/ with
# -fsanitize=fuzzer-no-link,address,undefined and each harness linked with -fsanitize=fuzzer.
# tests/fuzz/run.sh runs each target from its committed seed corpus tests/fuzz/corpus/<target>/ (new
# inputs go to build-fuzz/fuzz/corpus/<target>/, crashes to build-fuzz/fuzz/artifacts/) and fails when
# any target crashes, leaks, trips a sanitizer or times out.
#   make fuzz                     every target for FUZZ_SECONDS (60) seconds
#   make fuzz FUZZ_RUNS=1000000   every target for that many executions instead
#   make fuzz FUZZ_TARGETS=npy    only tests/fuzz/fuzz_npy.c;  FUZZ_JOBS=2: two targets at a time
FUZZ_CC      ?= clang
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_RUNS    ?=
FUZZ_JOBS    ?= 1
FUZZ_TARGETS ?= $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
ifeq ($(FUZZ),1)
# -Wno-psabi: clang notes that model.c's 64-byte vector type (attention, GCC vector extension) would be
# passed in another way without -mavx512f, as this portable -O1 build is; it is passed only to
# always-inline functions of the same file, so no call crosses an ABI.
CFLAGS   += -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all -Wno-psabi
LDFLAGS  += -fsanitize=address,undefined
endif
.PHONY: fuzz fuzz-build
fuzz:
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=$(FUZZ_CC) OPT="-O1 -g" FUZZ=1 fuzz-build
	@sh tests/fuzz/run.sh $(FUZZ_BUILD) "$(FUZZ_SECONDS)" "$(FUZZ_RUNS)" "$(FUZZ_JOBS)" $(FUZZ_TARGETS)
fuzz-build: $(FUZZ_TARGETS:%=$(BUILD)/fuzz/fuzz_%)
$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(BUILD)/libfp8lab.a | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/fuzz -fsanitize=fuzzer $(LDFLAGS) -o $@ $< $(BUILD)/libfp8lab.a $(LDLIBS)
-include $(wildcard $(BUILD)/fuzz/fuzz_*.d)

# The CLI into $(PREFIX)/bin (the Python module finds it on PATH): make install PREFIX=$$HOME/.local
PREFIX ?= /usr/local
.PHONY: install
install: $(CLI)
	install -D -m 755 $(CLI) $(DESTDIR)$(PREFIX)/bin/fp8lab

clean:
	rm -rf build build-asan build-fuzz

-include $(LIB_OBJ:.o=.d) $(BUILD)/experiments/cli/fp8lab.d $(TESTS:=.d)
