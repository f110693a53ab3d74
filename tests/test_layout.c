/* test_layout.c — the layering of experiments/: arrows point only down.
 *
 *   cli/                       the fp8lab command (fp8lab.c) and the small commands: the top
 *   ulp/ train/ polyorder/     the subsystems, each with its commands
 *   common/                    what the commands share (exit codes, argument parsing, gnuplot, ...)
 *   numerics/ reference/ kernels/   the library under all of them
 *
 * 1. Includes (every .c/.h/.cu/.cuh/.cpp under numerics/, reference/, kernels/, experiments/, read
 *    from the source tree: run from the repository root, as `make test` does): nothing outside
 *    experiments/cli/ includes a header of cli/; experiments/common/ includes nothing of another
 *    folder of experiments/; numerics/, reference/ and kernels/ include nothing of experiments/.
 * 2. Commands: no cmd_*.o calls (or uses) a symbol that another cmd_*.o defines — what two commands
 *    share lives below them.  Read with nm from the objects beside $FP8LAB (else build/fp8lab); the
 *    check first makes sure nm shows the commands' calls (common/'s fl_cli_usage_error in several).
 */
#include "check.h"

#include <dirent.h>
#include <glob.h>
#include <libgen.h>
#include <string.h>
#include <sys/stat.h>

/* ---- 1. includes --------------------------------------------------------------------------------- */

static int nfiles, saw_main, saw_common;

static int is_source(const char *name)
{
    static const char *const ext[] = { ".c", ".h", ".cu", ".cuh", ".cpp" };
    const char *dot = strrchr(name, '.');
    for (size_t i = 0; dot && i < sizeof ext / sizeof ext[0]; i++)
        if (!strcmp(dot, ext[i]))
            return 1;
    return 0;
}

static int is_dir(const char *path)
{
    struct stat sb;
    return !stat(path, &sb) && S_ISDIR(sb.st_mode);
}

/* The folder of experiments/ that the quoted include inc names ("train/train.h", "../cli/cli.h",
   "experiments/cli/cli.h": train, cli, cli), into out; "" when it names none (a bare name: the
   includer's own folder or numerics/, reference/, kernels/ through -I). */
static void target_folder(char *out, size_t n, const char *inc)
{
    while (!strncmp(inc, "../", 3))
        inc += 3;
    if (!strncmp(inc, "experiments/", 12))
        inc += 12;
    const char *slash = strchr(inc, '/');
    out[0] = 0;
    if (!slash || (size_t)(slash - inc) >= n)
        return;
    char d[12 + 256]; /* "experiments/" and out (at most 255 characters) */
    memcpy(out, inc, (size_t)(slash - inc));
    out[slash - inc] = 0;
    snprintf(d, sizeof d, "experiments/%s", out);
    if (!is_dir(d))
        out[0] = 0;
}

/* Check every include of the file path, which lies in top/ (numerics, reference, kernels,
   experiments) and, under experiments/, in the folder sub. */
static void check_file(const char *path, const char *top, const char *sub)
{
    FILE *f = fopen(path, "r");
    CHECK(f, "%s: cannot read", path);
    nfiles++;
    saw_main |= !strcmp(path, "experiments/cli/fp8lab.c");
    saw_common |= !strcmp(path, "experiments/common/cli.h");
    char line[4096];
    for (int ln = 1; fgets(line, sizeof line, f); ln++) {
        const char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p++ != '#')
            continue;
        while (*p == ' ' || *p == '\t')
            p++;
        if (strncmp(p, "include", 7))
            continue;
        p += 7;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p++ != '"')
            continue;
        const char *q = strchr(p, '"');
        if (!q)
            continue;
        char inc[1024], folder[256];
        snprintf(inc, sizeof inc, "%.*s", (int)(q - p), p);
        target_folder(folder, sizeof folder, inc);
        if (!folder[0] || !strcmp(folder, sub))
            continue;
        CHECK(!strcmp(top, "experiments"), "%s:%d: #include \"%s\": %s/ includes nothing of experiments/", path, ln,
              inc, top);
        CHECK(strcmp(folder, "cli"), "%s:%d: #include \"%s\": only experiments/cli/ includes a header of cli/ (the top)",
              path, ln, inc);
        CHECK(strcmp(sub, "common"), "%s:%d: #include \"%s\": experiments/common/ includes nothing of %s/ (it lies below)",
              path, ln, inc, folder);
    }
    fclose(f);
}

/* Every source file of the folder dir (top/ or experiments/sub/), and of its sub-folders. */
static void walk(const char *dir, const char *top, const char *sub)
{
    DIR *d = opendir(dir);
    CHECK(d, "%s: cannot open (run from the repository root)", dir);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (is_dir(p))
            walk(p, top, !strcmp(top, "experiments") && !sub[0] ? e->d_name : sub);
        else if (is_source(e->d_name))
            check_file(p, top, sub);
    }
    closedir(d);
}

/* ---- 2. commands --------------------------------------------------------------------------------- */

enum { MAXSYM = 4096 };

typedef struct {
    char name[64]; /* the object's base name */
    char **def, **und;
    int ndef, nund;
} obj;

/* The global symbols nm lists for path with flags ("--defined-only" or "-u"), into *syms. */
static int nm_symbols(char ***syms, const char *path, const char *flags)
{
    char cmd[1200], line[1024];
    snprintf(cmd, sizeof cmd, "nm -P -g %s '%s'", flags, path);
    FILE *p = popen(cmd, "r");
    CHECK(p, "popen %s", cmd);
    *syms = calloc(MAXSYM, sizeof **syms);
    CHECK(*syms, "out of memory");
    int n = 0;
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, " \n")] = 0;
        CHECK(n < MAXSYM, "%s: over %d symbols", path, MAXSYM);
        (*syms)[n] = strdup(line);
        CHECK((*syms)[n], "out of memory");
        n++;
    }
    CHECK(pclose(p) == 0, "%s failed (nm from binutils is needed)", cmd);
    return n;
}

static void check_commands(const char *build)
{
    char pat[1100];
    snprintf(pat, sizeof pat, "%s/experiments/*/cmd_*.o", build);
    glob_t g;
    CHECK(glob(pat, 0, NULL, &g) == 0 && g.gl_pathc >= 2, "no objects %s (build the library first)", pat);
    obj *o = calloc(g.gl_pathc, sizeof *o);
    CHECK(o, "out of memory");
    for (size_t i = 0; i < g.gl_pathc; i++) {
        snprintf(o[i].name, sizeof o[i].name, "%s", strrchr(g.gl_pathv[i], '/') + 1);
        o[i].ndef = nm_symbols(&o[i].def, g.gl_pathv[i], "--defined-only");
        o[i].nund = nm_symbols(&o[i].und, g.gl_pathv[i], "-u");
        CHECK(o[i].ndef > 0, "%s: nm lists no symbol it defines", g.gl_pathv[i]);
    }
    int seen_common = 0; /* uses of common/'s usage error: proof that nm -u shows the calls at all */
    for (size_t i = 0; i < g.gl_pathc; i++)
        for (int u = 0; u < o[i].nund; u++)
            for (size_t j = 0; j < g.gl_pathc; j++)
                for (int d = 0; j != i && d < o[j].ndef; d++) {
                    if (strcmp(o[i].und[u], o[j].def[d]))
                        continue;
                    CHECK(0, "%s uses %s, defined by the command %s: move what two commands share below them "
                             "(experiments/common/)", o[i].name, o[i].und[u], o[j].name);
                }
    for (size_t i = 0; i < g.gl_pathc; i++)
        for (int u = 0; u < o[i].nund; u++)
            seen_common += !strcmp(o[i].und[u], "fl_cli_usage_error");
    CHECK(seen_common >= 2, "nm -u shows fl_cli_usage_error in %d command objects: the check sees no calls",
          seen_common);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        for (int k = 0; k < o[i].ndef; k++)
            free(o[i].def[k]);
        for (int k = 0; k < o[i].nund; k++)
            free(o[i].und[k]);
        free(o[i].def);
        free(o[i].und);
    }
    free(o);
    printf("%zu command objects\n", g.gl_pathc);
    globfree(&g);
}

int main(void)
{
    static const char *const tops[] = { "numerics", "reference", "kernels", "experiments" };
    for (size_t i = 0; i < sizeof tops / sizeof tops[0]; i++)
        walk(tops[i], tops[i], "");
    CHECK(saw_main && saw_common, "the walk missed experiments/cli/fp8lab.c or experiments/common/cli.h (%d files)",
          nfiles);
    printf("%d source files\n", nfiles);

    const char *cli = getenv("FP8LAB");
    char build[1024];
    snprintf(build, sizeof build, "%s", cli && *cli ? cli : "build/fp8lab");
    check_commands(dirname(build));
    PASS("test_layout");
}
