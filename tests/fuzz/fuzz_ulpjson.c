/* fuzz_ulpjson.c — libFuzzer harness of the report reader of `fp8lab ulp --merge`
 * (experiments/ulp/ulp_output.c: ulp_report_parse, and the merge built on it).
 *
 * One input is one or two `ulp --json` reports separated by a line "##" (fuzz.h).  Each is parsed from
 * memory; a report that parses is written back as text and as JSON (to /dev/null).  Then both are
 * written to files and merged through the command's own entry, gated by --max-ulp 0.5 and with
 * --json, as `fp8lab ulp --merge A.json B.json --json --max-ulp 0.5` does.  make fuzz runs it. */
#include "fuzz.h"
#include "ulp/cmd_ulp_internal.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* the reports go to stdout; libFuzzer speaks on stderr */
    if (!freopen("/dev/null", "w", stdout))
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[2][512], err[512];
    int nparts = 0;
    for (int k = 0; k < 2; k++) {
        const uint8_t *p;
        size_t n;
        if (!fuzz_part(&p, &n, data, size, k))
            break;
        nparts++;
        ulp_report_doc d;
        err[0] = 0;
        if (ulp_report_parse(&d, (const char *)p, n, err, sizeof err) == 0) {
            if (!d.root)
                abort();
            ulp_emit_report(&d.rep, &d.meta, NULL, 0.5, 1, 0);
            ulp_emit_report(&d.rep, &d.meta, NULL, 0.5, 1, 1);
            ulp_report_doc_free(&d);
        } else if (d.root || !err[0]) {
            abort(); /* a failure leaves *d zeroed and says why */
        }
        fuzz_file(path[k], sizeof path[k], k ? "b.json" : "a.json", p, n);
    }
    char *argv[] = { "ulp", "--merge", path[0], path[1], "--json", "--max-ulp", "0.5", NULL };
    if (nparts == 1) { /* one report: --merge A.json --json --max-ulp 0.5 */
        argv[3] = "--json";
        argv[4] = "--max-ulp";
        argv[5] = "0.5";
        argv[6] = NULL;
    }
    ulp_merge_main(nparts == 1 ? 6 : 7, argv, 2, 0, 0, 0.0);
    fflush(stdout);
    return 0;
}
