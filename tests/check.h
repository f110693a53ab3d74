/* check.h — the few macros every fp8lab test binary uses.
 *
 * A test binary exits non-zero at the first failure, after printing a reproducer in hex
 * (hex floats for values, hex for encodings).  A test that cannot run here (no GPU, no NVIDIA
 * headers) prints "SKIP: <why>" and exits with FL_TEST_SKIP (77, the automake convention), which
 * tests/run.sh counts as skipped, never as passed.
 */
#ifndef FL_CHECK_H
#define FL_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define FL_TEST_SKIP 77

static long fl_checks_run;

/* CHECK(cond, fmt, ...): on failure print "FAIL file:line: <message>" and exit 1. */
#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        fl_checks_run++;                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                           \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

#define SKIP(...)                                                                          \
    do {                                                                                   \
        printf("SKIP: ");                                                                  \
        printf(__VA_ARGS__);                                                               \
        putchar('\n');                                                                     \
        exit(FL_TEST_SKIP);                                                                \
    } while (0)

/* Print the closing line of a test binary: its name and how many checks it made. */
#define PASS(name)                                                                         \
    do {                                                                                   \
        printf("PASS %s (%ld checks)\n", (name), fl_checks_run);                           \
        return 0;                                                                          \
    } while (0)

#endif /* FL_CHECK_H */
