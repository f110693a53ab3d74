/* ulp_impls.h — the implementations `fp8lab ulp --impl NAME` sweeps, in one registry of fl_twin
 * entries (kernels/twins.h): the kernels' CPU twins (kernels/twins.c) and the plain-C examples
 * (examples.c: common float shortcuts such as x / (1 + expf(-x)), not kernels).  Names are unique
 * across both.  The entries are constant: a lookup hands out a pointer into the tables. */
#ifndef FL_ULP_IMPLS_H
#define FL_ULP_IMPLS_H

#include <stddef.h>
#include <stdio.h>

#include "twins.h"

/* The examples (examples.c). */
extern const fl_twin fl_ulp_examples[];
extern const size_t fl_ulp_example_count;

/* The kernel twin or example called name, or NULL. */
const fl_twin *fl_ulp_impl_find(const char *name);

/* `fp8lab ulp --list`: every entry, by section. */
void fl_ulp_impl_list(FILE *out);

#endif /* FL_ULP_IMPLS_H */
