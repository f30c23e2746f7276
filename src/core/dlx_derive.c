/* dlx_derive.c - operator schema and result rules from a parsed declaration (dlx_derive.h).
 * Every loop is bounded by the plan's own limits (DLX_SIG_MAX_*); no allocation. */
#include "dlx_derive.h"
#include "dlx_core.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  char *buf;
  size_t len, n;
} sink;

static void put(sink *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(o->n < o->len ? o->buf + o->n : NULL, o->n < o->len ? o->len - o->n : 0,
                    fmt, ap);
  va_end(ap);
  if (k > 0) o->n += (size_t)k;
}

/* Shortest text that reads back as f, always with a '.' or exponent (torch's schema parser
 * reads "2" as an int). */
static void put_float(sink *o, double f) {
  char tmp[40];
  dlx_sig_shortest_float(f, tmp);
  if (!strpbrk(tmp, ".eE")) strcat(tmp, ".");
  put(o, "%s", tmp);
}

static const char *scalar_schema(int kind) {
  switch (kind) {
    case DLX_SIG_INT: return "SymInt";
    case DLX_SIG_FLOAT: return "float";
    case DLX_SIG_BOOL: return "bool";
    case DLX_SIG_STR: return "str";
    case DLX_SIG_INTS: return "SymInt[]";
    case DLX_SIG_FLOATS: return "float[]";
    default: return NULL;
  }
}

/* A string default torch's schema parser reads back unchanged: printable ASCII without
 * quotes or backslashes (it would unescape them). */
static int plain_string(const char *p) {
  for (; *p; ++p)
    if (*p < 0x20 || *p > 0x7e || *p == '"' || *p == '\'' || *p == '\\') return 0;
  return 1;
}

int dlx_derive_schema(const dlx_sig *s, const char *name, char *buf, size_t len, char *why,
                      size_t whylen) {
  sink o = {buf, len, 0};
  int has_optional_mut = -1;
  for (int32_t i = 0; i < s->nparams; ++i) {
    const dlx_sig_type *t = &s->params[i].type;
    if (t->kind == DLX_SIG_TENSOR && (t->flags & DLX_SIG_MUT) && t->optional) {
      has_optional_mut = i;
      break;
    }
  }
  for (int32_t i = 0; i < s->nresults; ++i)
    if (s->results[i].kind != DLX_SIG_TENSOR)
      return dlx_set_err(why, whylen,
                  "result %d is a scalar (%s): a torch operator's fake implementation cannot "
                  "know its value",
                  (int)i, s->results[i].kind == DLX_SIG_INT ? "int" : "not a tensor");
    else if (s->results[i].optional)
      return dlx_set_err(why, whylen, "result %d is optional: an operator returns the same results "
                               "on every call", (int)i);
  if (has_optional_mut >= 0 && s->nresults > 0)
    return dlx_set_err(why, whylen,
                "'%s' is an optional mut tensor and the kernel declares results: an operator "
                "returns the same results whether or not '%s' is given",
                dlx_sig_param_name(s, has_optional_mut), dlx_sig_param_name(s, has_optional_mut));
  put(&o, "%s(", name);
  int alias = 0;
  for (int32_t i = 0; i < s->nparams; ++i) {
    const dlx_sig_param *p = &s->params[i];
    const dlx_sig_type *t = &p->type;
    const char *pname = dlx_sig_param_name(s, i);
    if (i) put(&o, ", ");
    if (t->kind == DLX_SIG_TENSOR) {
      put(&o, "Tensor");
      if (t->flags & DLX_SIG_MUT) {
        if (alias >= 26) return dlx_set_err(why, whylen, "more than 26 mut tensors");
        put(&o, "(%c!)", 'a' + alias++);
      }
    } else {
      const char *k = scalar_schema(t->kind);
      if (!k) return dlx_set_err(why, whylen, "'%s' has a kind torch cannot express", pname);
      put(&o, "%s", k);
    }
    put(&o, "%s %s", t->optional ? "?" : "", pname);
    switch (p->def_kind) {
      case DLX_DEF_REQUIRED: break;
      case DLX_DEF_NONE: put(&o, "=None"); break;
      case DLX_DEF_INT: put(&o, "=%lld", (long long)p->def.i); break;
      case DLX_DEF_BOOL: put(&o, "=%s", p->def.i ? "True" : "False"); break;
      case DLX_DEF_FLOAT:
        if (!isfinite(p->def.f))
          return dlx_set_err(why, whylen, "'%s' has a default torch's schema cannot spell", pname);
        put(&o, "=");
        put_float(&o, p->def.f);
        break;
      case DLX_DEF_STR: {
        const char *text = dlx_sig_str(s, p->def_off);
        if (!plain_string(text))
          return dlx_set_err(why, whylen,
                      "'%s' has a string default with quotes, backslashes or non-ASCII "
                      "characters, which torch's schema cannot spell",
                      pname);
        put(&o, "=\"%s\"", text);
        break;
      }
      case DLX_DEF_INTS:
      case DLX_DEF_FLOATS:
        put(&o, "=[");
        for (int32_t k = 0; k < p->def_len; ++k) {
          if (k) put(&o, ", ");
          if (p->def_kind == DLX_DEF_INTS) {
            put(&o, "%lld", (long long)s->nums[p->def_off + k].i);
          } else {
            double f = s->nums[p->def_off + k].f;
            if (!isfinite(f))
              return dlx_set_err(why, whylen, "'%s' has a default torch's schema cannot spell",
                                 pname);
            put_float(&o, f);
          }
        }
        put(&o, "]");
        break;
      default: return dlx_set_err(why, whylen, "'%s' has an unknown default", pname);
    }
  }
  put(&o, ") -> ");
  if (s->nresults == 1) {
    put(&o, "Tensor");
  } else {
    put(&o, "(");
    for (int32_t i = 0; i < s->nresults; ++i) put(&o, i ? ", Tensor" : "Tensor");
    put(&o, ")");
  }
  if (o.n >= len) return dlx_set_err(why, whylen, "the schema is longer than %zu characters", len);
  return 0;
}

/* The DLDataType of a one-dtype set's bit. */
static DLDataType bit_dtype(int k) {
  static const struct { uint8_t code, bits; } t[DLX_SIG_NUM_DTYPES] = {
      [DLX_SIG_F16] = {kDLFloat, 16},  [DLX_SIG_BF16] = {kDLBfloat, 16},
      [DLX_SIG_F32] = {kDLFloat, 32},  [DLX_SIG_F64] = {kDLFloat, 64},
      [DLX_SIG_I8] = {kDLInt, 8},      [DLX_SIG_I16] = {kDLInt, 16},
      [DLX_SIG_I32] = {kDLInt, 32},    [DLX_SIG_I64] = {kDLInt, 64},
      [DLX_SIG_U8] = {kDLUInt, 8},     [DLX_SIG_U16] = {kDLUInt, 16},
      [DLX_SIG_U32] = {kDLUInt, 32},   [DLX_SIG_U64] = {kDLUInt, 64},
      [DLX_SIG_BOOLT] = {kDLBool, 8},  [DLX_SIG_C64] = {kDLComplex, 64},
      [DLX_SIG_C128] = {kDLComplex, 128}};
  DLDataType dt = {t[k].code, t[k].bits, 1};
  return dt;
}

static int one_bit(uint32_t set) {
  if (set == 0 || (set & (set - 1)) || set == DLX_SIG_DT_OTHER) return -1;
  for (int k = 0; k < DLX_SIG_NUM_DTYPES; ++k)
    if (set == (1u << k)) return k;
  return -1;
}

/* Where symbol `sym` is first declared among the parameters, preferring a required tensor
 * (always present) over an optional one. 0, or -1 when no parameter declares it. */
static int first_pos(const dlx_sig *s, int32_t sym, int skip_optional, dlx_derive_pos *at) {
  for (int32_t i = 0; i < s->nparams; ++i) {
    const dlx_sig_type *t = &s->params[i].type;
    if (t->kind != DLX_SIG_TENSOR || t->ndims < 0 || (skip_optional && t->optional)) continue;
    for (int32_t d = 0; d < t->ndims; ++d) {
      const dlx_sig_dim *dm = &s->dims[t->dim0 + d];
      if (dm->kind != DLX_DIM_SYMBOL || dm->sym != sym) continue;
      at->param = (int16_t)i;
      if (t->ellipsis >= 0 && d > t->ellipsis) {
        at->from_back = 1;
        at->dim = (int16_t)(t->ndims - 1 - d);
      } else {
        at->from_back = 0;
        at->dim = (int16_t)d;
      }
      return 0;
    }
  }
  return -1;
}

int dlx_derive_results(const dlx_sig *s, dlx_derived *out, char *why, size_t whylen) {
  memset(out, 0, offsetof(dlx_derived, dims));
  int32_t batch_param = -1;
  for (int32_t i = 0; i < s->nparams && batch_param < 0; ++i) {
    const dlx_sig_type *t = &s->params[i].type;
    if (t->kind == DLX_SIG_TENSOR && t->ellipsis >= 0) batch_param = i;
  }
  for (int32_t r = 0; r < s->nresults; ++r) {
    const dlx_sig_type *t = &s->results[r];
    dlx_derived_result *res = &out->results[r];
    if (t->kind != DLX_SIG_TENSOR)
      return dlx_set_err(why, whylen, "result %d is not a tensor", (int)r);
    if (t->ndims < 0)
      return dlx_set_err(why, whylen, "result %d declares no shape (no brackets)", (int)r);
    int bit = one_bit(t->dtypes);
    res->dtype_param = -1;
    if (bit >= 0) {
      res->dtype = bit_dtype(bit);
    } else {
      for (int32_t i = 0; i < s->nparams; ++i) {
        const dlx_sig_type *pt = &s->params[i].type;
        if (pt->kind == DLX_SIG_TENSOR && pt->dtypes == t->dtypes && !pt->optional) {
          res->dtype_param = i;
          break;
        }
      }
      if (res->dtype_param < 0)
        return dlx_set_err(why, whylen,
                    "result %d's dtype is open and no required tensor parameter is declared "
                    "with the same dtypes",
                    (int)r);
    }
    res->dim0 = out->ndims;
    res->ndims = t->ndims;
    for (int32_t d = 0; d < t->ndims; ++d) {
      const dlx_sig_dim *dm = &s->dims[t->dim0 + d];
      if (out->ndims == DLX_DERIVE_MAX_DIMS)
        return dlx_set_err(why, whylen, "too many result dimensions");
      dlx_derived_dim *o = &out->dims[out->ndims++];
      memset(o, 0, sizeof *o);
      o->sym = -1;
      switch (dm->kind) {
        case DLX_DIM_FIXED:
          o->kind = DLX_DERIVE_FIXED;
          o->extent = dm->extent;
          break;
        case DLX_DIM_ANY: o->kind = DLX_DERIVE_FRESH; break;
        case DLX_DIM_ELLIPSIS:
          if (batch_param < 0)
            return dlx_set_err(why, whylen,
                        "result %d has \"...\" and no tensor parameter declares \"...\"", (int)r);
          o->kind = DLX_DERIVE_BATCH;
          o->at.param = (int16_t)batch_param;
          break;
        default: /* a size symbol */
          o->sym = dm->sym;
          if (first_pos(s, dm->sym, 1, &o->at) == 0 || first_pos(s, dm->sym, 0, &o->at) == 0)
            o->kind = DLX_DERIVE_DIM;
          else
            o->kind = DLX_DERIVE_FRESH;
      }
    }
  }
  out->nresults = s->nresults;
  /* Equalities: each later declaration of a symbol against its first. */
  for (int32_t i = 0; i < s->nparams; ++i) {
    const dlx_sig_type *t = &s->params[i].type;
    if (t->kind != DLX_SIG_TENSOR || t->ndims < 0) continue;
    for (int32_t d = 0; d < t->ndims; ++d) {
      const dlx_sig_dim *dm = &s->dims[t->dim0 + d];
      if (dm->kind != DLX_DIM_SYMBOL) continue;
      dlx_derive_pos first, here = {(int16_t)i, (int16_t)d, 0};
      if (t->ellipsis >= 0 && d > t->ellipsis) here.from_back = 1, here.dim = (int16_t)(t->ndims - 1 - d);
      first_pos(s, dm->sym, 0, &first); /* found: it is declared here at the latest */
      if (first.param == here.param && first.dim == here.dim && first.from_back == here.from_back)
        continue;
      if (out->neqs == DLX_DERIVE_MAX_EQS)
        return dlx_set_err(why, whylen, "more than %d repeated size symbols", DLX_DERIVE_MAX_EQS);
      dlx_derived_eq *e = &out->eqs[out->neqs++];
      e->sym = dm->sym;
      e->first = first;
      e->other = here;
    }
  }
  return 0;
}
