/* fuzz_runcsv.c — libFuzzer harness of the run-folder readers of `fp8lab attribute` and `fp8lab
 * mechanism` (experiments/train/attrib.c: fl_attrib_load and the analysis and JSON that follow it).
 *
 * One input is a run folder: config.json, metrics.csv, channels.csv and records.csv, in that order,
 * separated by lines "##" (fuzz.h); a missing part is a missing file.  A folder that loads is analysed
 * over the whole run and from t/tau = 0.5, and written as JSON, as `fp8lab attribute --json` does.
 * make fuzz runs it (Makefile). */
#include "fuzz.h"
#include "train/attrib.h"

#include <jansson.h>
#include <math.h>

static const char *const files[] = { "config.json", "metrics.csv", "channels.csv", "records.csv" };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512], err[4608];
    for (int k = 0; k < 4; k++) {
        const uint8_t *p;
        size_t n;
        const int have = fuzz_part(&p, &n, data, size, k);
        fuzz_file(path, sizeof path, files[k], have ? p : NULL, have ? n : 0);
    }
    const char *dir = fuzz_dir();
    fl_attrib_run run;
    err[0] = 0;
    if (fl_attrib_load(&run, dir, err, sizeof err)) {
        if (!err[0])
            abort();
        return 0;
    }
    const fl_attrib_window w[2] = { { -1, -1, NAN }, { -1, -1, 0.5 } };
    for (int k = 0; k < 2; k++) {
        fl_attrib_result res;
        if (fl_attrib_analyse(&res, &run, &w[k], err, sizeof err))
            continue;
        json_t *j = fl_attrib_json(&res, &run, dir);
        char *s = j ? json_dumps(j, 0) : NULL;
        free(s);
        json_decref(j);
        fl_attrib_result_free(&res);
    }
    fl_attrib_free(&run);
    return 0;
}
