/* train_cfg_v5.c — the configuration of a version-5 checkpoint (checkpoint.h), read into today's
 * fl_train_cfg.
 *
 * Version 5 stored the configuration as the raw bytes of fl_train_cfg as it was then (1640 bytes,
 * x86-64 layout).  Its layout is frozen here, field by field, so that today's fl_train_cfg may gain
 * options: a field that came later takes its table default (train_opts.h), as a record without its
 * key does.  The values are then checked as a record's are (fl_train_cfg_check: every field's text
 * parses back to the same bytes), so a damaged version-5 configuration is refused as a damaged record is.
 */
#include "train.h"
#include "train_opts.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    /* fl_model_cfg */
    uint32_t V, C, L, H, F, T, B;
    uint32_t act_kind, act_order;
    float init_std;
    /* fl_recipe_cfg */
    uint32_t kind, history, algo;
    int32_t margin;
    uint32_t pow2, nosat, fast_accum, fp8_adam, grad_current, fp8_start, grad_sr, pad0_;
    char sites[256];
    /* the rest of fl_train_cfg */
    uint64_t steps, seed;
    float lr, lr_min_frac, wd, beta1, beta2, adam_eps, clip;
    uint32_t warmup, schedule;
    uint32_t data_kind;
    uint64_t data_len, data_hash;
    char data_path[512];
    uint32_t log_every, ckpt_every;
    float div_margin, div_ema;
    uint32_t div_window, stop_on_div;
    float trigger_rate;
    uint32_t trigger_len;
    uint32_t chan_every, bos, decor_mode, decor_k;
    uint32_t keep_n, pad2_;
    uint64_t keep[16];
    uint64_t fork_step;
    uint32_t fork_crc, pad3_;
    char fork_from[512];
} cfg_v5;
_Static_assert(sizeof(cfg_v5) == 1640, "version 5's configuration is 1640 bytes");

/* Today's fields hold version 5's (a copied array is checked afterwards like a record's value: a
   string without its NUL, or more kept steps than the table takes, is refused there). */
#define FITS(dst, src) _Static_assert(sizeof(((fl_train_cfg *)0)->dst) >= sizeof(((cfg_v5 *)0)->src), #dst)
FITS(recipe.sites, sites);
FITS(data_path, data_path);
FITS(fork_from, fork_from);
FITS(keep, keep);

int fl_train_cfg_load_v5(fl_train_cfg *c, const void *raw, size_t len, char *err, size_t n)
{
    if (len != sizeof(cfg_v5)) {
        snprintf(err, n, "a version-5 configuration has %zu bytes, not %zu", sizeof(cfg_v5), len);
        return -1;
    }
    cfg_v5 v;
    memcpy(&v, raw, sizeof v);
    fl_train_cfg_default(c);
    fl_model_cfg *m = &c->model;
    m->V = v.V, m->C = v.C, m->L = v.L, m->H = v.H, m->F = v.F, m->T = v.T, m->B = v.B;
    m->act.kind = v.act_kind, m->act.order = v.act_order, m->init_std = v.init_std;
    fl_recipe_cfg *r = &c->recipe;
    r->kind = v.kind, r->history = v.history, r->algo = v.algo, r->margin = v.margin, r->pow2 = v.pow2;
    r->nosat = v.nosat, r->fast_accum = v.fast_accum, r->fp8_adam = v.fp8_adam, r->grad_current = v.grad_current;
    r->fp8_start = v.fp8_start, r->grad_sr = v.grad_sr;
    c->steps = v.steps, c->seed = v.seed;
    c->lr = v.lr, c->lr_min_frac = v.lr_min_frac, c->wd = v.wd, c->beta1 = v.beta1, c->beta2 = v.beta2;
    c->adam_eps = v.adam_eps, c->clip = v.clip, c->warmup = v.warmup, c->schedule = v.schedule;
    c->data_kind = v.data_kind, c->data_len = v.data_len, c->data_hash = v.data_hash;
    c->log_every = v.log_every, c->ckpt_every = v.ckpt_every;
    c->div_margin = v.div_margin, c->div_ema = v.div_ema, c->div_window = v.div_window, c->stop_on_div = v.stop_on_div;
    c->trigger_rate = v.trigger_rate, c->trigger_len = v.trigger_len;
    c->chan_every = v.chan_every, c->bos = v.bos, c->decor_mode = v.decor_mode, c->decor_k = v.decor_k;
    c->keep_n = v.keep_n;
    memcpy(c->keep, v.keep, sizeof v.keep);
    c->fork_step = v.fork_step, c->fork_crc = v.fork_crc;
    memcpy(r->sites, v.sites, sizeof v.sites);
    memcpy(c->data_path, v.data_path, sizeof v.data_path);
    memcpy(c->fork_from, v.fork_from, sizeof v.fork_from);
    const char *why = fl_train_cfg_check(c);
    if (why) {
        snprintf(err, n, "%s", why);
        return -1;
    }
    return 0;
}
