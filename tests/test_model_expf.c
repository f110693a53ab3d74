/* test_model_expf.c — the training harness's vectorised softmax exp (experiments/train/model.c) returns
 * the bits of the libm's expf.
 *
 * The harness replaces expf(x - max) in its softmaxes by a vectorised copy of glibc's main path, so
 * that training runs stay bit-identical to the scalar code.  This checks every 61st float32 pattern
 * (70 million inputs, every binade, both signs, NaN and Inf included) through the same entry
 * (expf_sub, vector blocks and masked tails) against expf itself.  Where the vectorised path is not
 * in use (another libm, no FMA/AVX2), expf runs and the test says so and skips.
 * Usage: test_model_expf [STRIDE]   (default 61) */
#include "check.h"
#include "train/model.h"

#include <stdint.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    const uint64_t stride = argc > 1 ? strtoull(argv[1], NULL, 0) : 61;
    const long bad = fl_model_expf_mismatches(0, 1ull << 32, stride);
    if (bad < 0)
        SKIP("the vectorised exp is not in use on this machine/libm (expf is called instead)");
    printf("vectorised expf vs libm expf: %llu inputs (stride %llu), %ld differ\n",
           (unsigned long long)(((1ull << 32) + stride - 1) / stride), (unsigned long long)stride, bad);
    CHECK(bad == 0, "%ld inputs differ from expf", bad);
    PASS("test_model_expf");
}
