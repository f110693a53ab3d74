/* convert_simd.h — the vector conversion kernels behind fl_convert_from_f32 and (at the end of this
 * file) fl_convert_to_f32, chosen at run time.
 *
 * Instruction sets, each including the ones before it:
 *   FL_ISA_SCALAR      the plain loops of convert.c (compiled for whatever OPT targets)
 *   FL_ISA_AVX2        256-bit kernels; fp16 round-to-nearest-even by F16C's VCVTPS2PH
 *   FL_ISA_AVX512      512-bit kernels (AVX-512 F, BW, VL, DQ); fp16 RNE by VCVTPS2PH on zmm
 *   FL_ISA_AVX512BF16  and bf16 RNE by VCVTNEPS2BF16 (AVX512_BF16), its special lanes re-done
 * The kernels cover float32 -> e4m3, e5m2, bf16, fp16, RNE and stochastic rounding, saturating or
 * not; everything else stays on convert.c's loops.  Every kernel gives the bits of
 * fl_encode_f32_bits (tests/test_convert_fast.c: every kernel of every instruction set the machine
 * has, all 2^32 inputs for RNE).  They are built with GCC's target attributes, so a binary built for
 * any x86-64 (make OPT=-O2) still runs them where the CPU has them.
 */
#ifndef FL_CONVERT_SIMD_H
#define FL_CONVERT_SIMD_H

#include "fl_format.h"

enum { FL_ISA_SCALAR, FL_ISA_AVX2, FL_ISA_AVX512, FL_ISA_AVX512BF16, FL_ISA_COUNT };

/* The GCC target attributes of the levels' kernels (fl_cpu_isa checks these features before it
   reports the level): the integer code of FL_ISA_AVX2, and FL_ISA_AVX512's F, BW, VL and DQ. */
#define FL_TARGET_AVX2 __attribute__((target("avx2,bmi2")))
#define FL_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

/* dst[i] = encoding of src[i], i < n; element i draws fl_sr_bits(seed, off + i) under SR. */
typedef void (*fl_cvt_fn)(void *dst, const float *src, size_t n, uint64_t seed, uint64_t off);

/* The best instruction set of this CPU (and OS), detected once. */
int fl_cpu_isa(void);
const char *fl_isa_name(int isa);
/* The name's level (scalar, avx2, avx512, avx512bf16), or -1. */
int fl_isa_parse(const char *name);

/* Which of an instruction set's kernels fl_cvt_kernel gives: the one fl_convert_from_f32 uses
   (BEST: the conversion instruction for fp16 and, with AVX512_BF16, bf16 RNE), the integer one
   written with intrinsics (INTEGER; AVX-512 only), or the one written with GCC's vector extensions
   (GENERIC, convert_vec.h).  Where a set has no such variant the nearest one comes back, so that
   the tests can walk every variant of every set and compare them all with the scalar encoder. */
enum { FL_CVT_BEST, FL_CVT_INTEGER, FL_CVT_GENERIC, FL_CVT_VARIANTS };

/* The kernel of instruction set isa for a conversion, or NULL where that set has none (then the
   caller uses convert.c's loops). */
fl_cvt_fn fl_cvt_kernel(int isa, fl_format to, fl_rounding mode, fl_overflow ovf, int variant);

/* Conversions whose output reaches FL_STREAM_MIN_BYTES (per thread) write it past the caches: the
   kernel converts FL_STREAM_CHUNK elements at a time into a buffer that stays in L1, and
   fl_stream_store copies the buffer out with non-temporal stores (VMOVNTDQ; memcpy without AVX2),
   which saves reading each destination line into the cache before it is overwritten.  The bits are
   the kernel's.  fl_stream_fence (SFENCE) orders those stores before the conversion returns. */
#define FL_STREAM_MIN_BYTES ((size_t)8 << 20)
#define FL_STREAM_CHUNK 2048
void fl_stream_store(void *dst, const void *src, size_t bytes);
void fl_stream_fence(void);

/* ---- decode (numerics/convert_decode_simd.c) ----
   dst[i] = fl_decode_f32 of code src[i], i < n, bit for bit (NaN encodings included: all of them
   decode to 0x7FC00000), the codes stored as convert.h says (1 byte for 8-bit and narrower
   formats, 2 for bf16 and fp16).  AVX2 and AVX-512 kernels for every 1-byte format (a table of the
   256 results), bf16 (a shift) and fp16 (VCVTPH2PS). */
typedef void (*fl_dec_fn)(float *dst, const void *src, size_t n);

/* The decode kernel of instruction set isa for a format, or NULL where that set (or this CPU) has
   none: then fl_convert_to_f32 runs convert.c's loop. */
fl_dec_fn fl_dec_kernel(int isa, fl_format from);

/* VCVTNEPS2BF16 itself, with no correction, on n (a multiple of 16) float32: for the tests that
   measure where it departs from fl_round.h.  Returns 0 (and writes nothing) without AVX512_BF16. */
int fl_bf16_native_raw(uint16_t *dst, const float *src, size_t n);

#endif /* FL_CONVERT_SIMD_H */
