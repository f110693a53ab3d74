/* convert.h — array conversions between float32/double and any fl_format.
 *
 * Storage of encodings in arrays: 8-bit and narrower formats one uint8 per element (sub-byte
 * formats in the low bits), bf16/fp16 one uint16, fp32 one uint32 (a float's bits).
 *
 * Stochastic rounding draws its 32 random bits for element i of a conversion from a counter-based
 * generator, fl_sr_bits(seed, offset + i) of fl_round.h, so a conversion
 * gives the same bits however it is chunked or threaded; pass the element index of src[0] within
 * the whole tensor as offset.
 *
 * fl_convert_from_f32 runs on the OpenMP threads in force (omp_get_max_threads) for arrays of
 * 2^18 elements or more, outside a parallel region; the bits do not depend on the thread count.
 */
#ifndef FL_CONVERT_H
#define FL_CONVERT_H

#include "fl_format.h"
#include "fl_round.h" /* fl_sr_bits */

/* src: n float32 -> dst: n encodings of `to`. */
void fl_convert_from_f32(void *dst, fl_format to, const float *src, size_t n, fl_rounding mode,
                         fl_overflow ovf, uint64_t seed, uint64_t offset);
/* src: n double -> dst: n encodings of `to`. */
void fl_convert_from_f64(void *dst, fl_format to, const double *src, size_t n, fl_rounding mode,
                         fl_overflow ovf, uint64_t seed, uint64_t offset);
/* src: n encodings of `from` -> dst: n float32 (exact). */
void fl_convert_to_f32(float *dst, fl_format from, const void *src, size_t n);

/* The instruction set the float32 conversions (both ways) run on (convert_simd.h: FL_ISA_SCALAR ..): the best
   the CPU has, capped by the environment variable FP8LAB_ISA (scalar, avx2, avx512, avx512bf16)
   when it is set; every level gives the same bits.  fl_convert_set_isa caps it from the program
   (tests, benchmarks) and returns the level now in force; -1 goes back to the default. */
int fl_convert_isa(void);
int fl_convert_set_isa(int cap);

/* Bytes one stored encoding takes (1, 2 or 4). */
size_t fl_format_storage_bytes(fl_format f);

#endif /* FL_CONVERT_H */
