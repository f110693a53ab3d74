/* train_opts.h — the options of `fp8lab train`, one table (train_opts.c).
 *
 * A row is one option of the command line or one stored field of the configuration (fl_train_cfg,
 * train.h): its flag, its key, its type, its default and range, its help text, and whether a fork
 * may change it.  The table drives
 *   - the parser fl_train_parse_flag (train.h), which train, demo and mechanism share;
 *   - the defaults, fl_train_cfg_default, and the per-field part of fl_train_cfg_check;
 *   - the options part of `train --help` (fl_train_opts_help);
 *   - config.json (fl_train_cfg_json) and the train_args echo (fl_train_cfg_args);
 *   - the configuration record of a checkpoint (fl_train_cfg_store, fl_train_cfg_load);
 *   - which options a fork keeps from its parent (FL_OPT_FIXED: the model's shapes, the seed, the data).
 * A new option is one row plus the code that uses its field.
 *
 * Every value has one canonical text: what its flag takes (a bool: 0 or 1), and what the record, the
 * echo and the checks use.  A field's value is valid when its text parses back to the same bytes.
 *
 * The configuration record (a checkpoint's configuration section) is text:
 *   fp8lab-train-config 1\n     the record's format (FL_TRAIN_CFG_FORMAT)
 *   key=value\n                  one line per row with a key, in table order
 * In value, '\' is written "\\", a newline "\n", every other byte below 0x20 and 0x7f "\xHH"; other
 * bytes stand for themselves (paths need not be UTF-8).  A reader takes the lines in any order:
 *   - a key it does not know is refused (a newer fp8lab wrote an option this build lacks);
 *   - a missing key takes the table's default (an older fp8lab wrote the record before the option
 *     existed), so a new option's default must be the behaviour from before the option;
 *   - a format above FL_TRAIN_CFG_FORMAT is refused (the syntax or a key's meaning changed: raise the
 *     format then, and only then);
 *   - a repeated key, a line without '=', a bad escape or a NUL byte is refused; each value is parsed
 *     as its flag's value is, and the whole configuration checked (fl_train_cfg_check).
 */
#ifndef FL_TRAIN_OPTS_H
#define FL_TRAIN_OPTS_H

#include "train.h"

#include <stddef.h>
#include <stdio.h>

#define FL_TRAIN_CFG_FORMAT 1

typedef enum {
    FL_OPT_U32,    /* uint32_t in [lo, hi] */
    FL_OPT_U64,    /* uint64_t in [lo, hi] */
    FL_OPT_I32,    /* int32_t in [lo, hi] (the flag takes an integral number) */
    FL_OPT_F32,    /* a finite float in [lo, hi]; FL_OPT_LO_OPEN / FL_OPT_HI_OPEN leave an end out */
    FL_OPT_ENUM,   /* uint32_t: the index of its name (names) */
    FL_OPT_BOOL,   /* uint32_t 0 or 1: flag sets 1, flag_off sets 0; neither takes a value */
    FL_OPT_PATH,   /* char[size], "" none; the flag takes a non-empty path */
    FL_OPT_HEX,    /* uint32_t or uint64_t (size), written in hex: stored only (a CRC, a hash) */
    FL_OPT_CUSTOM, /* ops: several fields, or a value with a structure */
    FL_OPT_RUN,    /* an option of the invocation (--out, --threads, ...): parsed by cmd_train.c, in the help */
} fl_opt_type;

enum {
    FL_OPT_FIXED = 1 << 0,    /* a fork keeps the parent's value (the model's shapes, the seed, the data) */
    FL_OPT_ECHO_SET = 1 << 1, /* train_args show it only when it is not the default */
    FL_OPT_LO_OPEN = 1 << 2,  /* FL_OPT_F32: lo itself is out of range */
    FL_OPT_HI_OPEN = 1 << 3,  /* FL_OPT_F32: hi itself is out of range */
    FL_OPT_NEWLINE = 1 << 4,  /* --help: the option starts a new line of its group */
};

struct json_t;

/* How a custom row reads and writes its fields. */
typedef struct {
    /* Apply the text v to c: from the flag (stored 0: --site appends) or from a record (stored 1:
       the whole value as format wrote it).  NULL, or what a good value looks like. */
    const char *(*parse)(fl_train_cfg *c, const char *v, int stored);
    /* The canonical text of the value into buf (n bytes). */
    void (*format)(char *buf, size_t n, const fl_train_cfg *c);
    /* config.json: set key (and any key of its own) in obj; NULL: the canonical text as a string. */
    void (*json)(struct json_t *obj, const char *key, const fl_train_cfg *c);
    /* --help's %V: the values, one space apart (a space inside one written as '\x1f'); or NULL. */
    void (*values)(char *buf, size_t n);
    /* 1: train_args give the flag once per ';'-separated item of the text (--site); 0: once */
    int repeat;
} fl_opt_ops;

typedef struct {
    const char *flag;     /* "--width"; NULL: stored only, no flag (vocab, data_hash, ...) */
    const char *flag_off; /* FL_OPT_BOOL: the flag that sets 0 ("--no-pow2"), or NULL */
    const char *key;      /* config.json's and the record's key; NULL: not part of the configuration */
    fl_opt_type type;
    size_t offset, size;  /* the field in fl_train_cfg (a custom row: its first field) */
    const char *def;      /* the default, as the flag takes it */
    double lo, hi;        /* numbers: the range */
    const char *(*names)(unsigned k); /* FL_OPT_ENUM: the name of value k, NULL past the last */
    const fl_opt_ops *ops;            /* FL_OPT_CUSTOM */
    unsigned attr;                    /* FL_OPT_FIXED | ... */
    const char *group;    /* --help: "model", ...; NULL: the leading block, one option a line */
    const char *arg;      /* --help: the value's placeholder ("C"); NULL for an enum: its names, default first */
    const char *help;     /* --help: after flag and arg; %D the default, %V the values; '\x1f' a space that
                             never breaks a line */
} fl_train_opt;

extern const fl_train_opt fl_train_opt_table[];
extern const int fl_train_opt_count;

/* The row of a flag (either of a bool's two), or NULL. */
const fl_train_opt *fl_train_opt_find(const char *flag);
/* The row's name in messages: its flag, else its key. */
const char *fl_train_opt_name(const fl_train_opt *o);
/* The first row (with all attribute bits of mask; 0: any row) whose value differs between a and b,
   or NULL. */
const fl_train_opt *fl_train_cfg_diff(const fl_train_cfg *a, const fl_train_cfg *b, unsigned mask);
/* The per-field checks of fl_train_cfg_check: every row's value parses back from its text (in
   range, a name the flag knows, ...).  NULL, or what is wrong (in buf, n bytes). */
const char *fl_train_cfg_check_fields(const fl_train_cfg *c, char *buf, size_t n);

/* The options part of `train --help`: the leading block, then one paragraph a group. */
void fl_train_opts_help(FILE *f);

/* config.json's object of c (a new reference; NULL when out of memory). */
struct json_t *fl_train_cfg_json_obj(const fl_train_cfg *c);

/* The configuration record of c (format above): a malloc'd buffer of *len bytes, or NULL when out
   of memory. */
char *fl_train_cfg_store(const fl_train_cfg *c, size_t *len);
/* Read a record (len bytes at rec) into c.  0, or -1 with what is wrong in err (n bytes). */
int fl_train_cfg_load(fl_train_cfg *c, const void *rec, size_t len, char *err, size_t n);
/* Read the configuration of a version-5 checkpoint (the raw 1640-byte struct of that version;
   train_cfg_v5.c) into c, the fields added since at their defaults, checked as a record is.  0, or -1
   with what is wrong in err (n bytes). */
int fl_train_cfg_load_v5(fl_train_cfg *c, const void *raw, size_t len, char *err, size_t n);

#endif /* FL_TRAIN_OPTS_H */
