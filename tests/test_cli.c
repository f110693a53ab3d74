/* test_cli.c — contracts every fp8lab subcommand keeps: `fp8lab --help` lists it, `CMD --help`
 * exits 0 and prints a usage line, an unknown flag exits 2 naming the flag, and no stdout garbage
 * on errors.  The subcommands are read from `fp8lab --help`, so new ones are covered
 * automatically.  Also: `fp8lab quant` on bad input files. */
#include "check.h"
#include "cli_test.h"

#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
    cli_init();
    static char out[1 << 16], line[256];
    CHECK(run_sh(out, sizeof out, "--help") == 0, "fp8lab --help failed");
    CHECK(run_sh(line, sizeof line, "") == 2, "fp8lab with no command must exit 2");

    /* Commands are the lines "  NAME  summary" after "commands:". */
    char *p = strstr(out, "commands:");
    CHECK(p, "no 'commands:' in fp8lab --help");
    int ncmd = 0;
    for (char *l = strchr(p, '\n'); l && l[1] == ' ' && l[2] == ' '; l = strchr(l + 1, '\n')) {
        char name[64];
        CHECK(sscanf(l + 1, "%63s", name) == 1, "bad command line in --help");
        char args[128], buf[1 << 14];
        snprintf(args, sizeof args, "%s --help", name);
        CHECK(run_sh(buf, sizeof buf, args) == 0, "'fp8lab %s' exited non-zero", args);
        CHECK(strstr(buf, "usage: fp8lab"), "'fp8lab %s' prints no usage line: %s", args, buf);
        snprintf(args, sizeof args, "%s --definitely-bogus-flag", name);
        CHECK(run_sh(buf, sizeof buf, args) == 2, "'fp8lab %s' must exit 2", args);
        CHECK(strstr(buf, "--definitely-bogus-flag"), "'fp8lab %s' does not name the bad flag: %s", args, buf);
        ncmd++;
    }
    CHECK(ncmd >= 3, "found only %d commands in fp8lab --help", ncmd);

    /* quant: bad values and bad files. */
    char buf[4096];
    CHECK(run_sh(buf, sizeof buf, "quant --rows 0") == 2 && strstr(buf, "--rows"), "quant --rows 0: %s", buf);
    CHECK(run_sh(buf, sizeof buf, "quant --input /nonexistent/x.npy") == 1 && strstr(buf, "/nonexistent/x.npy"),
          "quant on a missing file: %s", buf);
    char dir[] = "/tmp/fp8lab-cli-XXXXXX", path[128];
    CHECK(mkdtemp(dir), "mkdtemp");
    snprintf(path, sizeof path, "%s/nan.npy", dir);
    FILE *f = fopen(path, "wb");
    const char hdr[] = "\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
    char header[128];
    memset(header, ' ', sizeof header);
    memcpy(header, hdr, sizeof hdr - 1);
    header[127] = '\n';
    const float vals[2] = { 1.0f, __builtin_nanf("") };
    CHECK(f && fwrite(header, 1, 128, f) == 128 && fwrite(vals, 4, 2, f) == 2 && fclose(f) == 0, "write %s", path);
    char args[256];
    snprintf(args, sizeof args, "quant --input %s", path);
    CHECK(run_sh(buf, sizeof buf, args) == 1 && strstr(buf, "NaN") && strstr(buf, "nan.npy"), "quant on NaN data: %s", buf);
    snprintf(args, sizeof args, "rm -rf %s", dir);
    CHECK(system(args) == 0, "cleanup");
    CHECK(run_sh(buf, sizeof buf, "quant --rows 64 --cols 256 --json") == 0 && strstr(buf, "\"results\""), "quant --json: %s", buf);
    CHECK(run_sh(buf, sizeof buf, "quant --rows 64 --cols 256 --json | grep -c '\"scaling\": \"nvfp4'") == 0 && atoi(buf) == 2,
          "quant --json has not the two NVFP4 rows: %s", buf);
    printf("checked %d subcommands\n", ncmd);
    PASS("test_cli");
}
