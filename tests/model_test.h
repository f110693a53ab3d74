/* model_test.h — a harness model with its recipe, for the tests that build one directly: the cast
 * sites' names, the recipe (its kind's defaults) and the model initialised from a seed, in one struct,
 * freed together.  Include after check.h. */
#ifndef FL_MODEL_TEST_H
#define FL_MODEL_TEST_H

#include "train/model.h"
#include "train/recipe.h"

typedef struct {
    fl_model m;
    fl_recipe rec;
    char store[64 * 40]; /* the site names (fl_model_site_names) */
    const char *names[64];
    uint32_t roles[64];
    uint8_t hp[64];
} test_model;

static void test_model_init(test_model *t, const fl_model_cfg *cfg, fl_recipe_kind kind, uint64_t seed)
{
    fl_recipe_cfg rc;
    fl_recipe_cfg_default(&rc, kind);
    const int ns = fl_model_nsites(cfg);
    CHECK(ns <= 64, "%d cast sites: at most 64 here", ns);
    fl_model_site_names(cfg, t->store, t->names, t->roles, t->hp);
    CHECK(!fl_recipe_init(&t->rec, &rc, ns, t->names, t->roles, t->hp), "recipe init");
    CHECK(!fl_model_init(&t->m, cfg, &t->rec, seed), "model init");
}

static void test_model_free(test_model *t)
{
    fl_model_free(&t->m);
    fl_recipe_free(&t->rec);
}

#endif /* FL_MODEL_TEST_H */
