/* act_list.h — the one list of activations, and of the elementary functions they are built from (exp,
 * expm1, log1p, erf: reference-only rows, so that a kernel's building blocks and libm can be judged
 * with `fp8lab ulp`).  Every table that names an activation is generated from the rows below
 * (X-macros), so a function exists everywhere or nowhere:
 *   reference/ref.h, ref.c     fl_ref_id (FL_REF_ID), the evaluator prototypes, fl_ref_table
 *   experiments/ulp/ulp_fast.c  the fast path's table (fast_fns, fl_fast_lookup)
 *   experiments/train/ffn_act.{h,c}  fl_act_kind (FL_ACT_ID), fl_act_table, the forward/backward dispatch
 *   experiments/polyorder/polyorder.{h,c}  fl_order_act (FL_ORDER_ID): the polynomial activations
 *   tests/test_ref.c            which golden files (tests/golden/NAME.txt, NAME_dx.txt) must exist
 * and tests/test_act_list.c checks the parts that a compiler cannot (the lookups agree with the list).
 *
 * A row:  X(M, ID, name, REF, FAST, TRAIN)   (M is passed through for the selectors below)
 *   ID, name   FL_REF_ID / FL_ACT_ID / FL_ORDER_ID; the name of the CLI, the reports and the files
 *   REF        (NONE), or (REF, shape, gold_dx, definition, params, defaults):
 *                shape      which inputs and evaluators reference/NAME.c defines (FL_ACT_SHAPE_* below);
 *                           the evaluators are int fl_ref_eval_NAME[_SUFFIX] (fl_ref_row_* for ROW*)
 *                gold_dx    1: tests/golden/NAME_dx.txt holds mpmath derivatives (unary shapes only)
 *                definition, params   the text of `fp8lab ref --list`
 *                defaults   "name=value ..." applied by fl_ref_params_init over the common defaults
 *   FAST       (NONE): no fast path, `fp8lab ulp` asks MPFR for every input; or (FAST, eval, eval2):
 *              the double-double enclosure of experiments/ulp/ulp_fast.c, one input (eval) or two (eval2)
 *   TRAIN      (NONE), or (TRAIN, kind, impl, gated, smooth, order_min, order_max, order_default, note):
 *                kind       the value of FL_ACT_ID.  Stored in checkpoints: never renumber; a new
 *                           activation takes the next free number (the values are checked to be
 *                           0 .. FL_ACT_COUNT-1, each once)
 *                impl       experiments/train/ffn_act.c defines fwd_IMPL and bwd_IMPL (one can serve
 *                           several rows: the SwiGLU family)
 *                gated      1: the FFN's first Linear makes two planes (gate, up)
 *                smooth     -1: h is cast as is; 0 / 1: Smooth-SwiGLU scaling of h per channel / per
 *                           token at its FP8 cast (fl_smooth.axis)
 *                order_*    the polynomial orders r the CLI takes (polyrelu2 .. polyrelu4), 0 0 0 if none
 *                note       shown after the name in `fp8lab train --help`, or NULL
 * The row order is the order of `fp8lab ref --list` and of FL_REF_*; append new rows where they belong
 * in that listing.  A row with REF (NONE) is a training variant of another row (smooth_swiglu_token).
 */
#ifndef FL_ACT_LIST_H
#define FL_ACT_LIST_H

#define FL_ACT_LIST(X, M)                                                                                   \
    X(M, RELU, relu, (REF, X1, 0, "max(x, 0); relu(-0) = +0; relu'(0) = 0", "", ""), (NONE),                \
      (TRAIN, 0, relu, 0, -1, 0, 0, 0, NULL))                                                               \
    X(M, RELU2, relu2, (REF, X1, 0, "relu(x)^2 (ReLU squared)", "", ""), (NONE), (NONE))                     \
    X(M, LEAKY_RELU, leaky_relu, (REF, X1, 0, "x if x > 0 else alpha x", "alpha=0.01", ""), (NONE), (NONE))  \
    X(M, PRELU, prelu, (REF, X1_ALPHA, 0, "x if x > 0 else alpha x (alpha learned)", "alpha=0.25",          \
                        "alpha=0.25"), (NONE), (NONE))                                                      \
    X(M, ELU, elu, (REF, X1, 1, "x if x > 0 else alpha (e^x - 1)", "alpha=1", "alpha=1"), (NONE), (NONE))    \
    X(M, SELU, selu,                                                                                        \
      (REF, X1, 1, "scale (x if x > 0 else alpha (e^x - 1)), scale = 1.0507009873554804934193349852946, "  \
       "alpha = 1.6732632423543772848170429916717 (PyTorch's constants, exact decimals)", "", ""),          \
      (NONE), (NONE))                                                                                       \
    X(M, GELU, gelu, (REF, X1, 1, "x Phi(x) = x erfc(-x/sqrt2)/2 (exact GELU)", "", ""),                    \
      (FAST, fast_gelu, NULL), (TRAIN, 1, gelu, 0, -1, 0, 0, 0, NULL))                                      \
    X(M, GELU_TANH, gelu_tanh,                                                                              \
      (REF, X1, 1, "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), 0.044715 exact decimal", "", ""),     \
      (FAST, fast_gelu_tanh, NULL), (NONE))                                                                 \
    X(M, SIGMOID, sigmoid, (REF, X1, 1, "1 / (1 + e^-x)", "", ""), (FAST, fast_sigmoid, NULL), (NONE))      \
    X(M, TANH, tanh, (REF, X1, 1, "tanh(x)", "", ""), (FAST, fast_tanh, NULL), (NONE))                      \
    X(M, SILU, silu, (REF, X1, 1, "x sigmoid(x)", "", ""), (FAST, fast_silu, NULL), (NONE))                 \
    X(M, SWISH, swish, (REF, X1, 0, "x sigmoid(beta x)", "beta=1", ""), (NONE), (NONE))                     \
    X(M, MISH, mish, (REF, X1, 1, "x tanh(softplus(x))", "", ""), (NONE), (NONE))                           \
    X(M, SOFTPLUS, softplus, (REF, X1, 1, "log(1 + e^(beta x)) / beta, exact (no threshold)", "beta=1", ""), \
      (NONE), (NONE))                                                                                       \
    X(M, POLYRELU, polyrelu,                                                                                \
      (REF, X1_POLY, 0, "sum_{i=0..r} a_i relu(x)^i (PolyCom)", "order=3 a0=0 a1..ar=1/order (exact rational)", \
       ""), (NONE), (TRAIN, 5, polyrelu, 0, -1, 2, 4, 3, NULL))                                             \
    X(M, GLU, glu, (REF, GU, 0, "sigmoid(g) u", "", ""), (NONE), (NONE))                                    \
    X(M, BILINEAR, bilinear, (REF, GU, 0, "g u", "", ""), (NONE), (NONE))                                   \
    X(M, REGLU, reglu, (REF, GU, 0, "relu(g) u", "", ""), (NONE), (NONE))                                   \
    X(M, GEGLU, geglu, (REF, GU, 0, "gelu(g) u (exact gelu)", "", ""), (NONE), (NONE))                      \
    X(M, SWIGLU, swiglu, (REF, GU, 0, "silu(g) u", "", ""), (FAST, NULL, fast_swiglu),                      \
      (TRAIN, 2, swiglu, 1, -1, 0, 0, 0, NULL))                                                             \
    X(M, SMOOTH_SWIGLU, smooth_swiglu,                                                                      \
      (REF, GUS, 0, "s silu(g) u: the value a Smooth-SwiGLU kernel casts to FP8 (s broadcast per channel or " \
       "per token by the caller)", "", ""), (NONE), (TRAIN, 3, swiglu, 1, 0, 0, 0, 0, "per channel"))      \
    X(M, SMOOTH_SWIGLU_TOKEN, smooth_swiglu_token, (NONE), (NONE),                                          \
      (TRAIN, 4, swiglu, 1, 1, 0, 0, 0, "per token"))                                                       \
    X(M, POLYNORM, polynorm,                                                                                \
      (REF, ROW_POLY, 0, "sum_{i=1..r} a_i N(x^i) + a0 per row, N(v) = v / sqrt(mean(v^2) + eps)",         \
       "order=3 a0=0 a1..ar=1/order eps=1e-6", ""), (NONE), (TRAIN, 6, polynorm, 0, -1, 2, 4, 3, NULL))     \
    X(M, SOFTMAX, softmax, (REF, ROW, 0, "e^x_j / sum_i e^x_i per row", "", ""), (NONE), (NONE))            \
    X(M, PATTENTION, pattention, (REF, ROW, 0, "gelu(tau A_j / ||A||_2) per row (TokenFormer)", "tau=sqrt(n)", \
                                  ""), (NONE), (NONE))                                                      \
    X(M, EXP, exp, (REF, X1_VALUE, 0, "e^x (elementary)", "", ""), (NONE), (NONE))                          \
    X(M, EXPM1, expm1, (REF, X1_VALUE, 0, "e^x - 1 (elementary)", "", ""), (NONE), (NONE))                  \
    X(M, LOG1P, log1p, (REF, X1_VALUE, 0, "log(1 + x) (elementary); log1p(-1) = -Inf, x < -1: NaN", "", ""), \
      (NONE), (NONE))                                                                                       \
    X(M, ERF, erf, (REF, X1_VALUE, 0, "erf(x) = 2/sqrt(pi) int_0^x e^-t^2 dt (elementary)", "", ""), (NONE), \
      (NONE))

/* ---- shapes: a reference function's inputs and evaluators ---------------------------------------------
 * FL_ACT_SHAPE_<shape>(f, E) calls E(wrt, evaluator, KIND, n_inputs) for the value ("") and each
 * derivative, KIND EVAL (fl_ref_eval_*) or ROW (fl_ref_row_*).  A row-wise VJP reads dy too (2 inputs).
 *   X1        x: value, d/dx (f_dx)                  X1_ALPHA  X1 and d/dalpha (f_dalpha)
 *   X1_POLY   X1 and d/da0 .. d/da4 (f_da0 ..)       GU        g, u: value, f_dg, f_du
 *   GUS       g, u, s: value, f_dg, f_du, f_ds       ROW       a row x: value, the VJP (f_vjp)
 *   ROW_POLY  ROW and d/da0 .. d/da4
 *   X1_VALUE  x: the value only (the elementary functions: no derivative evaluators)
 * A shape's inputs (FL_ACT_NIN_, FL_ACT_INPUTS_), row-wise flag and polynomial coefficients
 * (FL_ACT_POLY_: the activations of the polynomial-order study) follow it. */
#define FL_ACT_SHAPE_X1(f, E) E("", f, EVAL, 1) E("x", f##_dx, EVAL, 1)
#define FL_ACT_SHAPE_X1_VALUE(f, E) E("", f, EVAL, 1)
#define FL_ACT_SHAPE_X1_ALPHA(f, E) FL_ACT_SHAPE_X1(f, E) E("alpha", f##_dalpha, EVAL, 1)
#define FL_ACT_SHAPE_X1_POLY(f, E) FL_ACT_SHAPE_X1(f, E) FL_ACT_COEFS_(f, E, EVAL)
#define FL_ACT_SHAPE_GU(f, E) E("", f, EVAL, 2) E("g", f##_dg, EVAL, 2) E("u", f##_du, EVAL, 2)
#define FL_ACT_SHAPE_GUS(f, E) \
    E("", f, EVAL, 3) E("g", f##_dg, EVAL, 3) E("u", f##_du, EVAL, 3) E("s", f##_ds, EVAL, 3)
#define FL_ACT_SHAPE_ROW(f, E) E("", f, ROW, 1) E("x", f##_vjp, ROW, 2)
#define FL_ACT_SHAPE_ROW_POLY(f, E) FL_ACT_SHAPE_ROW(f, E) FL_ACT_COEFS_(f, E, ROW)
#define FL_ACT_COEFS_(f, E, K) \
    E("a0", f##_da0, K, 1) E("a1", f##_da1, K, 1) E("a2", f##_da2, K, 1) E("a3", f##_da3, K, 1) E("a4", f##_da4, K, 1)

#define FL_ACT_NIN_X1 1
#define FL_ACT_NIN_X1_VALUE 1
#define FL_ACT_NIN_X1_ALPHA 1
#define FL_ACT_NIN_X1_POLY 1
#define FL_ACT_NIN_GU 2
#define FL_ACT_NIN_GUS 3
#define FL_ACT_NIN_ROW 1
#define FL_ACT_NIN_ROW_POLY 1
#define FL_ACT_INPUTS_X1 "x"
#define FL_ACT_INPUTS_X1_VALUE "x"
#define FL_ACT_INPUTS_X1_ALPHA "x"
#define FL_ACT_INPUTS_X1_POLY "x"
#define FL_ACT_INPUTS_GU "g,u"
#define FL_ACT_INPUTS_GUS "g,u,s"
#define FL_ACT_INPUTS_ROW "x"
#define FL_ACT_INPUTS_ROW_POLY "x"
#define FL_ACT_ROWWISE_X1 0
#define FL_ACT_ROWWISE_X1_VALUE 0
#define FL_ACT_ROWWISE_X1_ALPHA 0
#define FL_ACT_ROWWISE_X1_POLY 0
#define FL_ACT_ROWWISE_GU 0
#define FL_ACT_ROWWISE_GUS 0
#define FL_ACT_ROWWISE_ROW 1
#define FL_ACT_ROWWISE_ROW_POLY 1
#define FL_ACT_POLY_X1 0
#define FL_ACT_POLY_X1_VALUE 0
#define FL_ACT_POLY_X1_ALPHA 0
#define FL_ACT_POLY_X1_POLY 1
#define FL_ACT_POLY_GU 0
#define FL_ACT_POLY_GUS 0
#define FL_ACT_POLY_ROW 0
#define FL_ACT_POLY_ROW_POLY 1
#define FL_ACT_POLY_NONE 0 /* a row without a reference */

/* ---- selectors: the rows that have a part, with that part's columns -------------------------------- */

/* M(ID, name, shape, gold_dx, definition, params, defaults) for every row with a reference. */
#define FL_ACT_REFS(M) FL_ACT_LIST(FL_ACT_REF_ROW_, M)
/* M(ID, name, eval, eval2) for every row with a fast path. */
#define FL_ACT_FASTS(M) FL_ACT_LIST(FL_ACT_FAST_ROW_, M)
/* M(ID, name, kind, impl, gated, smooth, order_min, order_max, order_default, note) for every
   training activation. */
#define FL_ACT_TRAINS(M) FL_ACT_LIST(FL_ACT_TRAIN_ROW_, M)
/* M(ID, name) for every reference function with polynomial coefficients (shape *_POLY). */
#define FL_ACT_POLYS(M) FL_ACT_LIST(FL_ACT_POLY_ROW_, M)

/* The machinery: a part is a parenthesised tuple whose first element (REF, FAST, TRAIN or NONE) picks
   FL_ACT_PICK_<first>, which calls M without it or drops the row. */
#define FL_ACT_UNPAREN_(...) __VA_ARGS__
#define FL_ACT_CALL_(m, ...) m(__VA_ARGS__)
#define FL_ACT_CAT_(a, b) FL_ACT_CAT2_(a, b)
#define FL_ACT_CAT2_(a, b) a##b
#define FL_ACT_HEAD_(a, ...) a
#define FL_ACT_SEL_(M, ID, name, ...) \
    FL_ACT_CAT_(FL_ACT_PICK_, FL_ACT_HEAD_(__VA_ARGS__, ~))(M, ID, name, __VA_ARGS__)
#define FL_ACT_PICK_NONE(...)
#define FL_ACT_PICK_REF(M, ID, name, lead, ...) M(ID, name, __VA_ARGS__)
#define FL_ACT_PICK_FAST(M, ID, name, lead, ...) M(ID, name, __VA_ARGS__)
#define FL_ACT_PICK_TRAIN(M, ID, name, lead, ...) M(ID, name, __VA_ARGS__)
#define FL_ACT_REF_ROW_(M, ID, name, ref, fast, train) FL_ACT_CALL_(FL_ACT_SEL_, M, ID, name, FL_ACT_UNPAREN_ ref)
#define FL_ACT_FAST_ROW_(M, ID, name, ref, fast, train) FL_ACT_CALL_(FL_ACT_SEL_, M, ID, name, FL_ACT_UNPAREN_ fast)
#define FL_ACT_TRAIN_ROW_(M, ID, name, ref, fast, train) \
    FL_ACT_CALL_(FL_ACT_SEL_, M, ID, name, FL_ACT_UNPAREN_ train)
#define FL_ACT_POLY_ROW_(M, ID, name, ref, fast, train) \
    FL_ACT_CALL_(FL_ACT_POLY_SEL_, M, ID, name, FL_ACT_UNPAREN_ ref, NONE, NONE)
#define FL_ACT_POLY_SEL_(M, ID, name, lead, shape, ...) \
    FL_ACT_CAT_(FL_ACT_IF_, FL_ACT_CAT_(FL_ACT_POLY_, shape))(M(ID, name))
#define FL_ACT_IF_0(...)
#define FL_ACT_IF_1(...) __VA_ARGS__

#endif /* FL_ACT_LIST_H */
