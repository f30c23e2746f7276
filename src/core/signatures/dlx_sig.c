/* dlx_sig.c - the signature grammar (interface.md, "Kernel signatures") to a plan.
 *
 * A hand-written recursive descent over the text: the text comes from a kernel
 * library (untrusted), so every limit is checked and every fault names its column.
 * The parser fills a builder on the stack and copies it into one exact-size block. */
#include "dlx_sig.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIMS DLX_SIG_MAX_DIMS
#define MAX_NUMS 256 /* elements over all list defaults */
#define MAX_POOL 4096

typedef union dlx_sig_num num_t;

typedef struct builder {
  const char *text, *p;
  char *err;
  size_t errlen;
  int32_t column;
  dlx_sig_param params[DLX_SIG_MAX_PARAMS];
  dlx_sig_type results[DLX_SIG_MAX_RESULTS];
  dlx_sig_dim dims[MAX_DIMS];
  uint16_t symbols[DLX_SIG_MAX_SYMBOLS];
  num_t nums[MAX_NUMS];
  char pool[MAX_POOL];
  int32_t nparams, nresults, ndims, nsymbols, nnums, npool, has_results;
  uint32_t options;
  uint32_t independent;                     /* symbols marked "*" */
  const char *marked[DLX_SIG_MAX_SYMBOLS]; /* where each was first marked, for messages */
} builder;

static const char *const dtype_names[DLX_SIG_NUM_DTYPES] = {
    "f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64",
    "u8",  "u16",  "u32", "u64", "bool", "c64", "c128"};

/* The DLDataType of each named dtype, in dtype_names order. */
static const DLDataType dtype_values[DLX_SIG_NUM_DTYPES] = {
    {kDLFloat, 16, 1}, {kDLBfloat, 16, 1}, {kDLFloat, 32, 1}, {kDLFloat, 64, 1},
    {kDLInt, 8, 1},    {kDLInt, 16, 1},    {kDLInt, 32, 1},   {kDLInt, 64, 1},
    {kDLUInt, 8, 1},   {kDLUInt, 16, 1},   {kDLUInt, 32, 1},  {kDLUInt, 64, 1},
    {kDLBool, 8, 1},   {kDLComplex, 64, 1}, {kDLComplex, 128, 1}};

static const struct {
  const char *word;
  int kind;
} scalar_words[] = {{"int", DLX_SIG_INT},   {"float", DLX_SIG_FLOAT}, {"str", DLX_SIG_STR},
                    {"ints", DLX_SIG_INTS}, {"floats", DLX_SIG_FLOATS}};

static const struct {
  const char *word;
  uint16_t flag;
} flag_words[] = {{"mut", DLX_SIG_MUT},   {"contig", DLX_SIG_CONTIG}, {"cpu", DLX_SIG_CPU},
                  {"cuda", DLX_SIG_CUDA}, {"rocm", DLX_SIG_ROCM},     {"npu", DLX_SIG_NPU},
                  {"gpu", DLX_SIG_GPU}};

/* Python keywords cannot name a parameter: no keyword argument could reach it. */
static const char *const py_keywords[] = {
    "False", "None",   "True",    "and",      "as",       "assert", "async",  "await",
    "break", "class",  "continue", "def",     "del",      "elif",   "else",   "except",
    "finally", "for",  "from",    "global",   "if",       "import", "in",     "is",
    "lambda", "nonlocal", "not",  "or",       "pass",     "raise",  "return", "try",
    "while", "with",   "yield"};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static int fault_at(builder *b, const char *at, const char *fmt, ...) {
  if (b->err && b->errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->err, b->errlen, fmt, ap);
    va_end(ap);
  }
  b->column = (int32_t)(at - b->text) + 1;
  return -1;
}

static void skip_ws(builder *b) {
  while (*b->p == ' ' || *b->p == '\t' || *b->p == '\n' || *b->p == '\r') ++b->p;
}

static int is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static int is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Length of the NAME at p (0 when none). */
static size_t name_len(const char *p) {
  size_t n = 0;
  if (!is_name_start(p[0])) return 0;
  while (is_name_char(p[n])) ++n;
  return n;
}

static int word_is(const char *p, size_t n, const char *w) {
  return strlen(w) == n && memcmp(p, w, n) == 0;
}

/* A short, printable quote of the text at p, for messages. */
static const char *quote(const char *p, char *buf, size_t len) {
  if (!*p) return "the end";
  size_t n = 0;
  buf[n++] = '\'';
  while (*p && n + 3 < len && n < 14) {
    char c = *p++;
    buf[n++] = (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  buf[n++] = '\'';
  buf[n] = 0;
  return buf;
}

/* The length of the UTF-8 sequence at p (1-4), or 0 when it is not one: Python's strict
 * decoder's rules (no overlong forms, no surrogates, nothing past U+10FFFF), so every
 * accepted string default becomes a Python str. */
static size_t utf8_len(const unsigned char *p) {
  if (p[0] < 0x80) return 1;
  size_t n = p[0] >= 0xc2 && p[0] <= 0xdf ? 2 : p[0] >= 0xe0 && p[0] <= 0xef ? 3
           : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : 0;
  for (size_t i = 1; i < n; ++i)
    if ((p[i] & 0xc0) != 0x80) return 0;
  if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] > 0x9f) ||
      (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] > 0x8f))
    return 0;
  return n;
}

static int expected(builder *b, const char *what) {
  char q[24];
  return fault_at(b, b->p, "expected %s, got %s", what, quote(b->p, q, sizeof q));
}

static int pool_add(builder *b, const char *s, size_t n, const char *at, uint16_t *off) {
  if (b->npool + (int32_t)n + 1 > MAX_POOL)
    return fault_at(b, at, "signature too long (names and strings over %d bytes)", MAX_POOL);
  memcpy(b->pool + b->npool, s, n);
  b->pool[b->npool + n] = 0;
  *off = (uint16_t)b->npool;
  b->npool += (int32_t)n + 1;
  return 0;
}

/* A decimal integer (optionally negative) at b->p; advances. */
static int parse_int(builder *b, int allow_negative, int64_t *out) {
  const char *start = b->p, *q = b->p;
  int neg = 0;
  if (*q == '-' && allow_negative) neg = 1, ++q;
  if (!is_digit(*q)) return expected(b, allow_negative ? "an integer" : "an extent");
  uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  while (is_digit(*q)) {
    unsigned d = (unsigned)(*q - '0');
    if (v > (limit - d) / 10) return fault_at(b, start, "integer out of range (64 bits)");
    v = v * 10 + d;
    ++q;
  }
  if (is_name_char(*q) || *q == '.') return fault_at(b, q, "unexpected '%c' in a number", *q);
  *out = neg ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v) : (int64_t)v;
  b->p = q;
  return 0;
}

/* A number (INTEGER or FLOAT); *is_float says which. */
static int parse_number(builder *b, int64_t *i, double *f, int *is_float) {
  const char *start = b->p, *q = b->p;
  if (*q == '-' || *q == '+') ++q;
  int digits = 0, dot = 0, exp = 0;
  while (is_digit(*q)) ++q, ++digits;
  if (*q == '.') {
    dot = 1;
    ++q;
    while (is_digit(*q)) ++q, ++digits;
  }
  if (!digits) return expected(b, "a number");
  if (*q == 'e' || *q == 'E') {
    exp = 1;
    ++q;
    if (*q == '-' || *q == '+') ++q;
    if (!is_digit(*q)) return fault_at(b, q, "expected the exponent's digits");
    while (is_digit(*q)) ++q;
  }
  if (is_name_char(*q) || *q == '.') return fault_at(b, q, "unexpected '%c' in a number", *q);
  *is_float = dot || exp;
  if (!*is_float) {
    if (*start == '+') ++b->p;
    return parse_int(b, 1, i);
  }
  char tmp[64];
  size_t n = (size_t)(q - start);
  if (n >= sizeof tmp) return fault_at(b, start, "number too long");
  memcpy(tmp, start, n);
  tmp[n] = 0;
  errno = 0;
  *f = strtod(tmp, NULL);
  if (!isfinite(*f)) return fault_at(b, start, "float out of range");
  b->p = q;
  return 0;
}

static int parse_dims(builder *b, dlx_sig_type *t) {
  /* at '[' */
  ++b->p;
  skip_ws(b);
  t->dim0 = (uint16_t)b->ndims;
  t->ndims = 0;
  t->ellipsis = -1;
  if (*b->p == ']') {
    ++b->p;
    return 0;
  }
  for (;;) {
    skip_ws(b);
    if (t->ndims >= DLX_SIG_MAX_TENSOR_DIMS)
      return fault_at(b, b->p, "too many dimensions (at most %d)", DLX_SIG_MAX_TENSOR_DIMS);
    if (b->ndims >= MAX_DIMS)
      return fault_at(b, b->p, "too many dimensions in the signature (at most %d)", MAX_DIMS);
    dlx_sig_dim *d = &b->dims[b->ndims];
    d->sym = -1;
    d->extent = 0;
    size_t n = name_len(b->p);
    if (strncmp(b->p, "...", 3) == 0) {
      if (t->ellipsis >= 0) return fault_at(b, b->p, "'...' may appear once in a shape");
      d->kind = DLX_DIM_ELLIPSIS;
      t->ellipsis = t->ndims;
      b->p += 3;
    } else if (n == 1 && b->p[0] == '_') {
      d->kind = DLX_DIM_ANY;
      ++b->p;
    } else if (n) {
      int32_t k;
      for (k = 0; k < b->nsymbols; ++k)
        if (word_is(b->p, n, b->pool + b->symbols[k])) break;
      if (k == b->nsymbols) {
        if (b->nsymbols >= DLX_SIG_MAX_SYMBOLS)
          return fault_at(b, b->p, "too many size symbols (at most %d)", DLX_SIG_MAX_SYMBOLS);
        if (pool_add(b, b->p, n, b->p, &b->symbols[k])) return -1;
        ++b->nsymbols;
      }
      d->kind = DLX_DIM_SYMBOL;
      d->sym = k;
      b->p += n;
    } else if (is_digit(*b->p)) {
      d->kind = DLX_DIM_FIXED;
      if (parse_int(b, 0, &d->extent)) return -1;
    } else {
      return expected(b, "a dimension (a name, an extent, '_' or '...')");
    }
    ++b->ndims;
    ++t->ndims;
    skip_ws(b);
    if (*b->p == '*') { /* "n*": an independent dimension */
      if (d->kind != DLX_DIM_SYMBOL)
        return fault_at(b, b->p, "only a size symbol may be marked independent ('n*')");
      if (!(b->independent & (1u << d->sym))) b->marked[d->sym] = b->p;
      b->independent |= 1u << d->sym;
      ++b->p;
      skip_ws(b);
    }
    if (*b->p == ',') {
      ++b->p;
      continue;
    }
    if (*b->p == ']') {
      ++b->p;
      return 0;
    }
    return expected(b, "',' or ']'");
  }
}

static int parse_type(builder *b, dlx_sig_type *t) {
  memset(t, 0, sizeof *t);
  t->ndims = -1;
  t->ellipsis = -1;
  t->dtype_exact = DLX_SIG_NO_EXACT;
  skip_ws(b);
  t->column = (uint16_t)(b->p - b->text + 1);
  const char *start = b->p;
  size_t n = name_len(b->p);
  if (!n) return expected(b, "a type");
  for (size_t k = 0; k < N_OF(scalar_words); ++k) {
    if (word_is(b->p, n, scalar_words[k].word)) {
      t->kind = (uint8_t)scalar_words[k].kind;
      b->p += n;
      goto optional;
    }
  }
  /* A tensor: dtypes ("|"-separated), then dims, then flags. "bool" alone is the scalar. */
  t->kind = DLX_SIG_TENSOR;
  int ndtypes = 0;
  for (;;) {
    n = name_len(b->p);
    size_t k;
    uint32_t bit = 0;
    if (n && word_is(b->p, n, "tensor")) {
      bit = DLX_SIG_DT_ANY;
    } else {
      for (k = 0; k < DLX_SIG_NUM_DTYPES; ++k)
        if (n && word_is(b->p, n, dtype_names[k])) break;
      if (k == DLX_SIG_NUM_DTYPES) {
        if (ndtypes) return expected(b, "a dtype");
        return expected(b, "a type (a dtype, 'tensor', 'int', 'float', 'bool', 'str', 'ints' "
                           "or 'floats')");
      }
      bit = 1u << k;
    }
    if (t->dtypes & bit & ~DLX_SIG_DT_OTHER)
      return fault_at(b, b->p, "dtype '%.*s' listed twice", (int)n, b->p);
    t->dtypes |= bit;
    ++ndtypes;
    b->p += n;
    skip_ws(b);
    if (*b->p != '|') break;
    ++b->p;
    skip_ws(b);
  }
  if (*b->p == '[') {
    if (parse_dims(b, t)) return -1;
  }
  for (;;) {
    skip_ws(b);
    n = name_len(b->p);
    if (!n) break;
    size_t k;
    for (k = 0; k < N_OF(flag_words); ++k)
      if (word_is(b->p, n, flag_words[k].word)) break;
    if (k == N_OF(flag_words)) break; /* not a flag: the caller judges what follows */
    if (t->flags & flag_words[k].flag)
      return fault_at(b, b->p, "flag '%s' given twice", flag_words[k].word);
    t->flags |= flag_words[k].flag;
    b->p += n;
  }
  if (ndtypes == 1 && t->dtypes == (1u << DLX_SIG_BOOLT) && t->ndims < 0 && !t->flags) {
    t->kind = DLX_SIG_BOOL; /* "bool" alone: the scalar */
    t->dtypes = 0;
  } else if (ndtypes == 1 && t->dtypes != DLX_SIG_DT_ANY) {
    t->dtype_exact = dlx_sig_dtype_packed(dtype_values[__builtin_ctz(t->dtypes)]);
  }
  (void)start;
optional:
  skip_ws(b);
  if (*b->p == '?') {
    t->optional = 1;
    ++b->p;
  }
  return 0;
}

/* A list default "(1, 2, 3)"; floats lists take numbers. */
static int parse_list_default(builder *b, dlx_sig_param *p) {
  int floats = p->type.kind == DLX_SIG_FLOATS;
  ++b->p; /* '(' */
  p->def_kind = floats ? DLX_DEF_FLOATS : DLX_DEF_INTS;
  p->def_off = (uint16_t)b->nnums;
  p->def_len = 0;
  for (;;) {
    skip_ws(b);
    if (*b->p == ')') break;
    if (b->nnums >= MAX_NUMS)
      return fault_at(b, b->p, "list defaults too long (at most %d elements)", MAX_NUMS);
    int64_t i = 0;
    double f = 0;
    int is_float = 0;
    const char *at = b->p;
    if (floats ? parse_number(b, &i, &f, &is_float) : parse_int(b, 1, &i)) return -1;
    (void)at;
    if (floats)
      b->nums[b->nnums].f = is_float ? f : (double)i;
    else
      b->nums[b->nnums].i = i;
    ++b->nnums;
    ++p->def_len;
    skip_ws(b);
    if (*b->p == ',') {
      ++b->p;
      continue;
    }
    if (*b->p != ')') return expected(b, "',' or ')'");
  }
  ++b->p;
  return 0;
}

static int parse_default(builder *b, dlx_sig_param *p) {
  skip_ws(b);
  const char *at = b->p;
  const dlx_sig_type *t = &p->type;
  size_t n = name_len(b->p);
  char q[24];
  if (n && word_is(b->p, n, "None")) {
    if (!t->optional)
      return fault_at(b, at, "default None needs an optional type (add '?')");
    p->def_kind = DLX_DEF_NONE;
    b->p += n;
    return 0;
  }
  switch (t->kind) {
    case DLX_SIG_TENSOR:
      return fault_at(b, at, "a tensor's default can only be None");
    case DLX_SIG_BOOL:
      if (n && (word_is(b->p, n, "True") || word_is(b->p, n, "False"))) {
        p->def_kind = DLX_DEF_BOOL;
        p->def.i = b->p[0] == 'T';
        b->p += n;
        return 0;
      }
      return expected(b, "True, False or None");
    case DLX_SIG_INT:
      p->def_kind = DLX_DEF_INT;
      if (*b->p != '-' && !is_digit(*b->p)) return expected(b, "an integer or None");
      return parse_int(b, 1, &p->def.i);
    case DLX_SIG_FLOAT: {
      int is_float = 0;
      int64_t i = 0;
      if (*b->p != '-' && *b->p != '+' && *b->p != '.' && !is_digit(*b->p))
        return expected(b, "a number or None");
      if (parse_number(b, &i, &p->def.f, &is_float)) return -1;
      if (!is_float) p->def.f = (double)i;
      p->def_kind = DLX_DEF_FLOAT;
      return 0;
    }
    case DLX_SIG_STR: {
      char open = *b->p;
      if (open != '\'' && open != '"') return expected(b, "a quoted string or None");
      const char *s = b->p + 1, *e = s;
      while (*e && *e != open) {
        if (*e == '\\') return fault_at(b, e, "escapes are not supported in string defaults");
        if ((unsigned char)*e < 0x20) return fault_at(b, e, "control character in a string");
        size_t n = utf8_len((const unsigned char *)e);
        if (!n)
          return fault_at(b, e, "a string default must be UTF-8 (byte 0x%02x here is not)",
                          (unsigned char)*e);
        e += n;
      }
      if (!*e) return fault_at(b, at, "unterminated string");
      if (pool_add(b, s, (size_t)(e - s), at, &p->def_off)) return -1;
      p->def_len = (uint16_t)(e - s);
      p->def_kind = DLX_DEF_STR;
      b->p = e + 1;
      return 0;
    }
    case DLX_SIG_INTS:
    case DLX_SIG_FLOATS:
      if (*b->p != '(') return expected(b, "'(' (a list default) or None");
      return parse_list_default(b, p);
    default:
      return fault_at(b, at, "unexpected default %s", quote(at, q, sizeof q));
  }
}

static int parse_param(builder *b) {
  skip_ws(b);
  const char *at = b->p;
  size_t n = name_len(b->p);
  if (!n) return expected(b, "a parameter name");
  for (size_t k = 0; k < N_OF(py_keywords); ++k)
    if (word_is(b->p, n, py_keywords[k]))
      return fault_at(b, at, "'%s' is a Python keyword, not a parameter name", py_keywords[k]);
  for (int32_t k = 0; k < b->nparams; ++k)
    if (word_is(b->p, n, b->pool + b->params[k].name))
      return fault_at(b, at, "duplicate parameter '%.*s'", (int)n, b->p);
  if (b->nparams >= DLX_SIG_MAX_PARAMS)
    return fault_at(b, at, "too many parameters (at most %d)", DLX_SIG_MAX_PARAMS);
  dlx_sig_param *p = &b->params[b->nparams];
  memset(p, 0, sizeof *p);
  if (pool_add(b, b->p, n, at, &p->name)) return -1;
  b->p += n;
  skip_ws(b);
  if (*b->p != ':') return expected(b, "':' after the parameter name");
  ++b->p;
  if (parse_type(b, &p->type)) return -1;
  skip_ws(b);
  if (*b->p == '=') {
    ++b->p;
    if (parse_default(b, p)) return -1;
  } else if (b->nparams && b->params[b->nparams - 1].def_kind != DLX_DEF_REQUIRED) {
    return fault_at(b, at, "parameter without a default follows a parameter with one");
  }
  ++b->nparams;
  return 0;
}

static int parse_results(builder *b) {
  skip_ws(b);
  b->has_results = 1;
  int paren = *b->p == '(';
  if (paren) {
    ++b->p;
    skip_ws(b);
    if (*b->p == ')') { /* "()": declared to return nothing */
      ++b->p;
      return 0;
    }
  }
  for (;;) {
    if (b->nresults >= DLX_SIG_MAX_RESULTS)
      return fault_at(b, b->p, "too many results (at most %d)", DLX_SIG_MAX_RESULTS);
    if (parse_type(b, &b->results[b->nresults])) return -1;
    ++b->nresults;
    skip_ws(b);
    if (!paren) return 0;
    if (*b->p == ',') {
      ++b->p;
      continue;
    }
    if (*b->p == ')') {
      ++b->p;
      return 0;
    }
    return expected(b, "',' or ')'");
  }
}

static int parse_options(builder *b) {
  for (;;) {
    skip_ws(b);
    size_t n = name_len(b->p);
    uint32_t bit = 0;
    if (n && word_is(b->p, n, "nogil")) bit = DLX_SIG_NOGIL;
    else if (n && word_is(b->p, n, "effects")) bit = DLX_SIG_EFFECTS;
    if (!bit) return expected(b, "an option ('nogil' or 'effects')");
    if (b->options & bit)
      return fault_at(b, b->p, "option '%.*s' given twice", (int)n, b->p);
    b->options |= bit;
    b->p += n;
    skip_ws(b);
    if (*b->p != ',') return 0;
    ++b->p;
  }
}

/* How often symbol k appears in type t (0 for a type without brackets). */
static int symbol_count(const builder *b, const dlx_sig_type *t, int32_t k) {
  int c = 0;
  if (t->kind == DLX_SIG_TENSOR)
    for (int32_t d = 0; d < t->ndims; ++d)
      c += b->dims[t->dim0 + d].kind == DLX_DIM_SYMBOL && b->dims[t->dim0 + d].sym == k;
  return c;
}

/* A symbol marked independent ("n*") must be one every output keeps and every input can
 * give a slice of: in some parameter, at most once per tensor, in every result and every
 * mut parameter (an output without it reduces over it, so a slice's result would be
 * partial). Contradictions are faults of the declaration, at the first mark. */
static int check_independent(builder *b) {
  for (int32_t k = 0; k < b->nsymbols; ++k) {
    if (!(b->independent & (1u << k))) continue;
    const char *name = b->pool + b->symbols[k], *at = b->marked[k];
    int in_param = 0;
    for (int32_t i = 0; i < b->nparams; ++i) {
      const dlx_sig_type *t = &b->params[i].type;
      int c = symbol_count(b, t, k);
      if (c > 1)
        return fault_at(b, at, "'%s' is marked independent but appears twice in '%s'", name,
                        b->pool + b->params[i].name);
      in_param |= c;
      if (t->kind == DLX_SIG_TENSOR && (t->flags & DLX_SIG_MUT) && !c)
        return fault_at(b, at, "'%s' is marked independent but mut parameter '%s' has no "
                        "dimension '%s' (it would reduce over it)", name,
                        b->pool + b->params[i].name, name);
    }
    if (!in_param)
      return fault_at(b, at, "'%s' is marked independent but no parameter has it (a result "
                      "size the data decides cannot be split)", name);
    for (int32_t r = 0; r < b->nresults; ++r) {
      int c = symbol_count(b, &b->results[r], k);
      if (c > 1)
        return fault_at(b, at, "'%s' is marked independent but appears twice in result %d",
                        name, (int)r);
      if (!c)
        return fault_at(b, at, "'%s' is marked independent but result %d has no dimension "
                        "'%s' (it would reduce over it)", name, (int)r, name);
    }
  }
  return 0;
}

static int parse_all(builder *b) {
  size_t len = strnlen(b->text, DLX_SIG_MAX_LEN + 1);
  if (len > DLX_SIG_MAX_LEN)
    return fault_at(b, b->text + DLX_SIG_MAX_LEN, "signature longer than %d characters",
                    DLX_SIG_MAX_LEN);
  skip_ws(b);
  if (*b->p && *b->p != ';' && strncmp(b->p, "->", 2) != 0) {
    for (;;) {
      if (parse_param(b)) return -1;
      skip_ws(b);
      if (*b->p != ',') break;
      ++b->p;
    }
  }
  skip_ws(b);
  if (strncmp(b->p, "->", 2) == 0) {
    b->p += 2;
    if (parse_results(b)) return -1;
  }
  skip_ws(b);
  if (*b->p == ';') {
    ++b->p;
    if (parse_options(b)) return -1;
  }
  skip_ws(b);
  if (*b->p) {
    if (b->nparams && !b->has_results && !b->options && is_name_start(*b->p))
      return expected(b, "',', '->' or ';' (an unknown flag?)");
    return expected(b, b->has_results || b->options ? "the end" : "',', '->', ';' or the end");
  }
  return check_independent(b);
}

dlx_sig *dlx_sig_parse(const char *text, char *err, size_t errlen, int32_t *column) {
  if (column) *column = 0;
  builder *b = calloc(1, sizeof *b); /* ~20 KB: off the stack of whoever loads */
  if (!b) {
    if (err && errlen) snprintf(err, errlen, "out of memory");
    return NULL;
  }
  b->text = b->p = text ? text : "";
  b->err = err;
  b->errlen = errlen;
  if (parse_all(b)) {
    if (column) *column = b->column;
    free(b);
    return NULL;
  }
  int32_t nreq = 0;
  while (nreq < b->nparams && b->params[nreq].def_kind == DLX_DEF_REQUIRED) ++nreq;
  size_t sz_params = sizeof(dlx_sig_param) * (size_t)b->nparams;
  size_t sz_results = sizeof(dlx_sig_type) * (size_t)b->nresults;
  size_t sz_dims = sizeof(dlx_sig_dim) * (size_t)b->ndims;
  size_t sz_nums = sizeof(num_t) * (size_t)b->nnums;
  size_t sz_syms = sizeof(uint16_t) * (size_t)b->nsymbols;
  /* Ordered by alignment: 8-byte members first. */
  size_t total = sizeof(dlx_sig) + sz_params + sz_dims + sz_nums + sz_results + sz_syms +
                 (size_t)b->npool + 1;
  char *block = malloc(total);
  if (!block) {
    if (err && errlen) snprintf(err, errlen, "out of memory");
    free(b);
    return NULL;
  }
  dlx_sig *s = (dlx_sig *)block;
  char *q = block + sizeof(dlx_sig);
  memcpy(q, b->params, sz_params), s->params = (const dlx_sig_param *)q, q += sz_params;
  memcpy(q, b->dims, sz_dims), s->dims = (const dlx_sig_dim *)q, q += sz_dims;
  memcpy(q, b->nums, sz_nums), s->nums = (const num_t *)q, q += sz_nums;
  memcpy(q, b->results, sz_results), s->results = (const dlx_sig_type *)q, q += sz_results;
  memcpy(q, b->symbols, sz_syms), s->symbols = (const uint16_t *)q, q += sz_syms;
  memcpy(q, b->pool, (size_t)b->npool), q[b->npool] = 0, s->pool = q;
  s->nparams = b->nparams;
  s->nrequired = nreq;
  s->nresults = b->nresults;
  s->nsymbols = b->nsymbols;
  s->options = b->options;
  s->has_results = b->has_results;
  s->independent = b->independent;
  free(b);
  return s;
}

void dlx_sig_free(dlx_sig *sig) { free(sig); }

int32_t dlx_sig_symbol_index(const dlx_sig *s, const char *name) {
  for (int32_t k = 0; k < s->nsymbols; ++k)
    if (strcmp(s->pool + s->symbols[k], name) == 0) return k;
  return -1;
}

/* ---- canonical text --------------------------------------------------------------- */

typedef struct out {
  char *buf;
  size_t len, n;
} out;

static void put(out *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *dst = o->n < o->len ? o->buf + o->n : NULL;
  size_t room = o->n < o->len ? o->len - o->n : 0;
  int k = vsnprintf(dst, room, fmt, ap);
  va_end(ap);
  if (k > 0) o->n += (size_t)k;
}

static void finish(out *o) {
  if (o->len) o->buf[o->n < o->len ? o->n : o->len - 1] = 0;
}

void dlx_sig_shortest_float(double f, char out[40]) {
  for (int prec = 1; prec <= 17; ++prec) {
    snprintf(out, 40, "%.*g", prec, f);
    if (strtod(out, NULL) == f) break;
  }
}

/* The shortest %g text that reads back as the same double, always with '.' or 'e'. */
static void put_float(out *o, double f) {
  char tmp[40];
  dlx_sig_shortest_float(f, tmp);
  if (!strpbrk(tmp, ".eEn")) strcat(tmp, ".0"); /* "n": inf/nan, which parsing refuses */
  put(o, "%s", tmp);
}

static void put_type(const dlx_sig *s, const dlx_sig_type *t, out *o) {
  static const char *const scalar[] = {"", "", "int", "float", "bool", "str", "ints", "floats"};
  if (t->kind != DLX_SIG_TENSOR) {
    put(o, "%s", scalar[t->kind]);
  } else {
    if (t->dtypes == DLX_SIG_DT_ANY) {
      put(o, "tensor");
    } else {
      int first = 1;
      for (int k = 0; k < DLX_SIG_NUM_DTYPES; ++k)
        if (t->dtypes & (1u << k)) put(o, "%s%s", first ? "" : "|", dtype_names[k]), first = 0;
    }
    if (t->ndims >= 0) {
      put(o, "[");
      for (int32_t k = 0; k < t->ndims; ++k) {
        const dlx_sig_dim *d = &s->dims[t->dim0 + k];
        if (k) put(o, ", ");
        if (d->kind == DLX_DIM_FIXED) put(o, "%lld", (long long)d->extent);
        else if (d->kind == DLX_DIM_SYMBOL)
          put(o, "%s%s", s->pool + s->symbols[d->sym],
              s->independent & (1u << d->sym) ? "*" : "");
        else if (d->kind == DLX_DIM_ANY) put(o, "_");
        else put(o, "...");
      }
      put(o, "]");
    }
    for (size_t k = 0; k < N_OF(flag_words); ++k)
      if (t->flags & flag_words[k].flag) put(o, " %s", flag_words[k].word);
  }
  if (t->optional) put(o, "?");
}

static void put_default(const dlx_sig *s, const dlx_sig_param *p, out *o) {
  switch (p->def_kind) {
    case DLX_DEF_NONE: put(o, "None"); break;
    case DLX_DEF_INT: put(o, "%lld", (long long)p->def.i); break;
    case DLX_DEF_FLOAT: put_float(o, p->def.f); break;
    case DLX_DEF_BOOL: put(o, p->def.i ? "True" : "False"); break;
    case DLX_DEF_STR:
      /* no escapes exist: pick the quote the text does not contain */
      put(o, strchr(s->pool + p->def_off, '\'') ? "\"%s\"" : "'%s'", s->pool + p->def_off);
      break;
    case DLX_DEF_INTS:
    case DLX_DEF_FLOATS:
      put(o, "(");
      for (int32_t k = 0; k < p->def_len; ++k) {
        if (k) put(o, ", ");
        if (p->def_kind == DLX_DEF_INTS) put(o, "%lld", (long long)s->nums[p->def_off + k].i);
        else put_float(o, s->nums[p->def_off + k].f);
      }
      put(o, p->def_len == 1 ? ",)" : ")");
      break;
    default: break;
  }
}

size_t dlx_sig_format_type(const dlx_sig *s, const dlx_sig_type *t, char *buf, size_t len) {
  out o = {buf, len, 0};
  put_type(s, t, &o);
  finish(&o);
  return o.n;
}

size_t dlx_sig_format_default(const dlx_sig *s, const dlx_sig_param *p, char *buf, size_t len) {
  out o = {buf, len, 0};
  put_default(s, p, &o);
  finish(&o);
  return o.n;
}

size_t dlx_sig_format_parts(const dlx_sig *s, int parts, char *buf, size_t len) {
  out o = {buf, len, 0};
  if (parts & DLX_SIG_PART_PARAMS) {
    for (int32_t i = 0; i < s->nparams; ++i) {
      const dlx_sig_param *p = &s->params[i];
      put(&o, "%s%s: ", i ? ", " : "", s->pool + p->name);
      put_type(s, &p->type, &o);
      if (p->def_kind != DLX_DEF_REQUIRED) {
        put(&o, " = ");
        put_default(s, p, &o);
      }
    }
  }
  if ((parts & DLX_SIG_PART_RESULTS) && s->has_results) {
    if (parts & DLX_SIG_PART_PARAMS) put(&o, s->nparams ? " -> " : "-> ");
    if (s->nresults != 1) put(&o, "(");
    for (int32_t k = 0; k < s->nresults; ++k) {
      if (k) put(&o, ", ");
      put_type(s, &s->results[k], &o);
    }
    if (s->nresults != 1) put(&o, ")");
  }
  if ((parts & DLX_SIG_PART_OPTIONS) && s->options) {
    /* in a fixed order, whatever order the declaration gave them in */
    const char *sep = parts == DLX_SIG_PART_OPTIONS ? "" : "; ";
    if (s->options & DLX_SIG_NOGIL) {
      put(&o, "%s", sep);
      put(&o, "nogil");
      sep = ", ";
    }
    if (s->options & DLX_SIG_EFFECTS) {
      put(&o, "%s", sep);
      put(&o, "effects");
    }
  }
  finish(&o);
  return o.n;
}

size_t dlx_sig_format(const dlx_sig *s, char *buf, size_t len) {
  return dlx_sig_format_parts(
      s, DLX_SIG_PART_PARAMS | DLX_SIG_PART_RESULTS | DLX_SIG_PART_OPTIONS, buf, len);
}

void dlx_sig_dtype_name(DLDataType dt, char *buf, size_t len) {
  uint32_t bit = dlx_sig_dtype_bit(dt);
  if (bit != DLX_SIG_DT_OTHER) {
    int k = __builtin_ctz(bit);
    snprintf(buf, len, "%s", dtype_names[k]);
    return;
  }
  static const char *const prefix[] = {"i", "u", "f", "handle", "bf", "c", "bool"};
  if (dt.code <= kDLBool)
    snprintf(buf, len, "%s%u", prefix[dt.code], (unsigned)dt.bits);
  else
    snprintf(buf, len, "dtype(code=%u, bits=%u)", (unsigned)dt.code, (unsigned)dt.bits);
  if (dt.lanes != 1) {
    size_t n = strlen(buf);
    if (n < len) snprintf(buf + n, len - n, "x%u", (unsigned)dt.lanes);
  }
}

/* ---- fault messages --------------------------------------------------------------- */

static void put_shape(const DLTensor *t, out *o) {
  put(o, "[");
  for (int32_t d = 0; d < t->ndim; ++d) put(o, d ? ", %lld" : "%lld", (long long)t->shape[d]);
  put(o, "]");
}

static const char *device_name(DLDeviceType dev) {
  switch (dev) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return "cuda";
    case kDLROCM: return "rocm";
    case kDLExtDev: return "npu (kDLExtDev)";
    default: return NULL;
  }
}

void dlx_sig_fault_message(const dlx_sig *s, int32_t param, const DLTensor *t,
                           const dlx_sig_bindings *b, const dlx_sig_fault *fault, char *buf,
                           size_t len) {
  const dlx_sig_param *p = &s->params[param];
  const char *name = s->pool + p->name;
  char want[256], got[64];
  dlx_sig_format_type(s, &p->type, want, sizeof want);
  out o = {buf, len, 0};
  switch (fault->code) {
    case DLX_FAULT_DTYPE:
      dlx_sig_dtype_name(t->dtype, got, sizeof got);
      put(&o, "'%s' must be %s, got dtype %s", name, want, got);
      break;
    case DLX_FAULT_NDIM:
      put(&o, "'%s' must be %s, got %d dimension%s of shape ", name, want, (int)t->ndim,
          t->ndim == 1 ? "" : "s");
      put_shape(t, &o);
      break;
    case DLX_FAULT_EXTENT:
      put(&o, "'%s' must be %s, got shape ", name, want);
      put_shape(t, &o);
      put(&o, " (dimension %d is %lld)", (int)fault->dim, (long long)t->shape[fault->dim]);
      break;
    case DLX_FAULT_SYMBOL: {
      const char *sym = s->pool + s->symbols[fault->sym];
      int owner = b->owner[fault->sym];
      put(&o, "'%s' has %s=%lld where '%s' has %s=%lld", name, sym,
          (long long)t->shape[fault->dim], owner >= 0 ? s->pool + s->params[owner].name : "?",
          sym, (long long)b->value[fault->sym]);
      break;
    }
    case DLX_FAULT_DEVICE: {
      const char *dev = device_name(t->device.device_type);
      if (dev)
        put(&o, "'%s' must be %s, got a tensor on %s:%d", name, want, dev, (int)t->device.device_id);
      else
        put(&o, "'%s' must be %s, got a tensor on device type %d:%d", name, want,
            (int)t->device.device_type, (int)t->device.device_id);
      break;
    }
    case DLX_FAULT_CONTIG:
      put(&o, "'%s' must be C-contiguous (%s), got strides ", name, want);
      put(&o, "[");
      for (int32_t d = 0; d < t->ndim; ++d)
        put(&o, d ? ", %lld" : "%lld", (long long)(t->strides ? t->strides[d] : 0));
      put(&o, "] for shape ");
      put_shape(t, &o);
      break;
    case DLX_FAULT_READONLY:
      put(&o, "'%s' is read-only, but the kernel writes it (%s)", name, want);
      break;
    case DLX_FAULT_OVERLAP:
      put(&o, "'%s' has elements that share memory (a stride 0, as torch's expand or numpy's "
              "broadcast_to make), but the kernel writes it (%s): pass a copy (.clone(), "
              ".copy())", name, want);
      break;
    default:
      put(&o, "'%s': check failed", name);
  }
  finish(&o);
}

void dlx_sig_quick_plan(const dlx_sig *s, int32_t param, dlx_sig_quick *q) {
  const dlx_sig_type *ty = &s->params[param].type;
  memset(q, 0, sizeof *q);
  q->dtype = DLX_SIG_NO_EXACT;
  q->ndim = -1;
  q->kind = ty->kind;
  q->mut = ty->kind == DLX_SIG_TENSOR && (ty->flags & DLX_SIG_MUT) != 0; /* quick or not */
  if (ty->kind != DLX_SIG_TENSOR || ty->dtype_exact == DLX_SIG_NO_EXACT || ty->ndims < 0 ||
      ty->ellipsis >= 0 || ty->ndims > DLX_SIG_QUICK_DIMS || (ty->flags & ~DLX_SIG_MUT))
    return;
  for (int32_t d = 0; d < ty->ndims; ++d) {
    const dlx_sig_dim *dm = &s->dims[ty->dim0 + d];
    if (dm->kind == DLX_DIM_SYMBOL) {
      q->sym[d] = (int8_t)dm->sym;
    } else if (dm->kind == DLX_DIM_ANY) {
      q->sym[d] = -1;
    } else if (dm->kind == DLX_DIM_FIXED) {
      q->sym[d] = -2;
      q->extent[d] = dm->extent;
    } else {
      return;
    }
  }
  q->dtype = ty->dtype_exact;
  q->ndim = ty->ndims;
}
