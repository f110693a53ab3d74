/* test_gpu_plan.c — the GPU step's plan (experiments/train/gpu_plan.h), on the host.
 *
 *  1. A tiny model, bf16 and fp8-delayed, every total computed by hand here: parameters (also equal to
 *     the harness's own fl_model_param_sizes), persistent / saved / transient bytes, the peak, the
 *     launches per micro-batch and step, tokens and model FLOPs per step; ZeRO-1 over 4 ranks.
 *  2. The presets: SwiGLU and GeLU parameter-matched exactly, 524,288 tokens per step, the flags after
 *     --preset override it.
 *  3. Refusals: no vocabulary, an FP4 recipe; through the CLI, --device cuda without --plan, an
 *     unknown preset, --ranks without --plan and --accum 2 with --chan-every exit 2; --plan exits 0 without --out and prints the peak,
 *     3 when the peak does not fit in --device-mem.
 */
#include "check.h"
#include "cli_test.h"
#include "train/gpu_plan.h"
#include "train/model.h"
#include "train/train_opts.h"

static void tiny(fl_train_cfg *c, const char *recipe)
{
    fl_train_cfg_default(c);
    const char *argv[] = { "--width", "16", "--layers", "1", "--heads", "2", "--ffn", "32", "--seq", "8", "--batch", "2",
                           "--recipe", recipe, NULL };
    for (int i = 0; argv[i]; i += 2) {
        int used = 0;
        CHECK(fl_train_parse_flag(c, "test", argv[i], argv[i + 1], &used) == 0 && used == 1, "flag %s", argv[i]);
    }
    c->model.V = 64; /* the plan takes any vocabulary */
}

static void check_tiny(void)
{
    fl_train_cfg c;
    fl_gpu_plan p;
    char err[512];
    tiny(&c, "bf16");
    CHECK(fl_gpu_plan_build(&p, &c, 3, 1, 0, err, sizeof err) == 0, "%s", err);
    size_t sz[FL_P_COUNT];
    /* wte 64*16, wpe 8*16, ln1 16, qkv 3*16*16, proj 16*16, ln2 16, fc 2*32*16, down 16*32, acoef 5, lnf 16, head 64*16 */
    CHECK(p.params == 4789 && p.params == fl_model_param_sizes(&c.model, sz), "parameters %llu", (unsigned long long)p.params);
    CHECK(p.params_gemm == 768 + 256 + 1024 + 512 + 1024, "GEMM parameters %llu", (unsigned long long)p.params_gemm);
    CHECK(p.bytes[FL_PLAN_PERSISTENT] == 16 * 4789 + 2 * 3584, "persistent %llu", (unsigned long long)p.bytes[0]);
    /* N = 16 tokens: residuals 2*16*16*4, 1/rms 2*16*4, GEMM inputs 2*16*(48 + 32), qkv 2*16*48, probabilities
       2*2*2*8*8, pre-activation 2*16*64, final in 16*16*4 + 16*4, final out 2*16*16, logits 2*16*64, tokens 2*16*4 */
    CHECK(p.bytes[FL_PLAN_SAVED] == 2048 + 128 + 2560 + 1536 + 512 + 2048 + 1088 + 512 + 2048 + 128, "saved %llu",
          (unsigned long long)p.bytes[1]);
    CHECK(p.bytes[FL_PLAN_TRANSIENT] == 2048 + 512 + 3072 + FL_PLAN_CUBLASLT_WORKSPACE, "transient %llu",
          (unsigned long long)p.bytes[2]);
    CHECK(p.peak == p.bytes[0] + p.bytes[1] + p.bytes[2] && p.peak == 83792 + 12608 + 33560064, "peak %llu",
          (unsigned long long)p.peak);
    uint64_t sum = 0;
    for (int i = 0; i < p.nbuf; i++)
        sum += p.buf[i].bytes;
    CHECK(sum == p.peak, "the rows add up to the peak");
    CHECK(p.launch_fwd == 16 && p.launch_bwd == 20 && p.launch_opt == 4 && p.launch_step == 3 * 36 + 4, "launches %u %u %u",
          p.launch_fwd, p.launch_bwd, p.launch_opt);
    CHECK(p.tokens_micro == 16 && p.tokens_step == 48 && p.flops_token == 6.0 * 3584 + 12.0 * 16 * 8, "tokens, flops");

    fl_gpu_plan q;
    tiny(&c, "fp8-delayed"); /* + e4m3 weights 2 * 2560, 12 sites x (scale, amax, 1024 history) x 4, dY 2 * 16 * 64 */
    CHECK(fl_gpu_plan_build(&q, &c, 3, 1, 0, err, sizeof err) == 0, "%s", err);
    CHECK(q.bytes[0] == p.bytes[0] + 5120 + 12 * 4 * 1026 && q.bytes[1] == p.bytes[1] && q.bytes[2] == p.bytes[2] + 2048,
          "fp8-delayed: %llu %llu %llu", (unsigned long long)q.bytes[0], (unsigned long long)q.bytes[1],
          (unsigned long long)q.bytes[2]);
    CHECK(q.launch_fwd == 19 && q.launch_bwd == 24 && q.launch_opt == 5, "fp8 launches");
    tiny(&c, "fp8-current");
    CHECK(fl_gpu_plan_build(&q, &c, 1, 4, 1, err, sizeof err) == 0, "%s", err);
    CHECK(q.bytes[0] == 4 * 4789 / 4 + 4 * 4789 + 8 * 4789 / 4 + 2 * 3584 + 5120 + 12 * 4 * 2 && q.tokens_step == 64 &&
              q.launch_opt == 4,
          "ZeRO-1 over 4 ranks: %llu", (unsigned long long)q.bytes[0]);
    tiny(&c, "nvfp4");
    CHECK(fl_gpu_plan_build(&q, &c, 1, 1, 0, err, sizeof err) == -1 && strstr(err, "nvfp4"), "FP4 refused: %s", err);
    tiny(&c, "bf16");
    c.model.V = 0;
    CHECK(fl_gpu_plan_build(&q, &c, 1, 1, 0, err, sizeof err) == -1 && strstr(err, "--vocab"), "no vocabulary: %s", err);
    printf("  tiny model, bf16 / fp8-delayed / fp8-current ZeRO-1: every total as computed by hand\n");
}

static void check_presets(void)
{
    for (int k = 0; k < 2; k++) {
        const char *name = k ? "350m" : "124m";
        fl_train_cfg s, g;
        fl_train_cfg_default(&s);
        fl_train_cfg_default(&g);
        const fl_act sw = { FL_ACT_SWIGLU, 0 }, ge = { FL_ACT_GELU, 0 };
        CHECK(fl_train_preset(&s, name, sw) == 0 && fl_train_preset(&g, name, ge) == 0, "preset %s", name);
        const uint32_t as = s.accum, ag = g.accum;
        s.model.act = sw;
        g.model.act = ge;
        s.model.V = g.model.V = s.vocab_req = g.vocab_req = 50257; /* GPT-2's tokens in llm.c's shards */
        s.data_kind = g.data_kind = FL_DATA_SHARDS;
        strcpy(s.data_path, "fineweb_train_*.bin");
        strcpy(g.data_path, "fineweb_train_*.bin");
        size_t z[FL_P_COUNT];
        CHECK(fl_model_param_sizes(&s.model, z) == fl_model_param_sizes(&g.model, z), "%s: SwiGLU and GeLU parameter-matched",
              name);
        CHECK((uint64_t)as * s.model.B * s.model.T == 524288 && as == ag, "%s: 524288 tokens per step", name);
        CHECK(!fl_train_cfg_check(&s), "%s: a valid configuration", name);
    }
    fl_train_cfg c;
    fl_train_cfg_default(&c);
    CHECK(fl_train_preset(&c, "7b", (fl_act){ FL_ACT_SWIGLU, 0 }) == -1, "unknown preset");
    printf("  presets 124m, 350m: parameter-matched, 524288 tokens per step\n");
}

static void check_cli(void)
{
    char out[8192];
    CHECK(run_sh(out, sizeof out, "train --device cuda --out /tmp/never_fl_plan") == 2 && strstr(out, "--plan"),
          "--device cuda without --plan: %s", out);
    CHECK(run_sh(out, sizeof out, "train --preset 7b --plan") == 2 && strstr(out, "124m"), "unknown preset: %s", out);
    CHECK(run_sh(out, sizeof out, "train --ranks 4 --out /tmp/never_fl_plan") == 2 && strstr(out, "--plan"),
          "--ranks without --plan: %s", out);
    CHECK(run_sh(out, sizeof out, "train --accum 2 --chan-every 1 --out /tmp/never_fl_plan") == 2 &&
              strstr(out, "--accum"),
          "--accum 2 with --chan-every: %s", out);
    CHECK(access("/tmp/never_fl_plan", F_OK) != 0, "no run folder");
    CHECK(run_sh(out, sizeof out, "train --preset 124m --act gelu --ffn 4096 --device cuda --plan --device-mem 80") == 0 &&
              strstr(out, "ffn 4096 (gelu)") && strstr(out, "peak") && strstr(out, "fits") && strstr(out, "524288 tokens"),
          "the plan: %s", out);
    CHECK(run_sh(out, sizeof out, "train --preset 350m --device cuda --plan --device-mem 8") == 3 && strstr(out, "DOES NOT FIT"),
          "350m in 8 GiB: exit 3: %s", out);
    printf("  CLI: --plan prints the plan (flags over the preset); --device cuda alone, bad presets, --ranks without --plan, --accum 2 with --chan-every: exit 2\n");
}

int main(void)
{
    cli_init();
    check_tiny();
    check_presets();
    check_cli();
    PASS("test_gpu_plan");
}
