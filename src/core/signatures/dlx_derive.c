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

/* The parameter whose dtype an open result dtype is: the first required tensor parameter
 * declared with the same set; -1: none (the result is any dtype of its set). The one rule
 * of the fake results (dlx_derive_results) and the real ones (dlx_derive_check_result). */
static int32_t dtype_param(const dlx_sig *s, uint32_t dtypes) {
  for (int32_t i = 0; i < s->nparams; ++i) {
    const dlx_sig_type *pt = &s->params[i].type;
    if (pt->kind == DLX_SIG_TENSOR && pt->dtypes == dtypes && !pt->optional) return i;
  }
  return -1;
}

/* The first tensor parameter that declares "...": its dims stand for a result's "...". */
static int32_t batch_param(const dlx_sig *s) {
  for (int32_t i = 0; i < s->nparams; ++i) {
    const dlx_sig_type *t = &s->params[i].type;
    if (t->kind == DLX_SIG_TENSOR && t->ellipsis >= 0) return i;
  }
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
  int32_t batch = batch_param(s);
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
      res->dtype_param = dtype_param(s, t->dtypes);
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
          if (batch < 0)
            return dlx_set_err(why, whylen,
                        "result %d has \"...\" and no tensor parameter declares \"...\"", (int)r);
          o->kind = DLX_DERIVE_BATCH;
          o->at.param = (int16_t)batch;
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

/* ---- the real results' check ----------------------------------------------------------- */

/* The tensor a present parameter `i` was given, or NULL (None, or not a tensor). */
static const DLTensor *given(const dlx_arg *args, int32_t i) {
  return i >= 0 && args && args[i].kind == DLX_ARG_TENSOR ? args[i].value.tensor : NULL;
}

/* The dims the "..." of the first "..." parameter matched in this call: 0 with where they
 * start in `*bt`'s shape and how many, or -1 when no such parameter was given a tensor (a
 * result's "..." then takes any dims, as the fake's fresh ones would). */
static int batch_dims(const dlx_sig *s, const dlx_arg *args, const DLTensor **bt, int32_t *at,
                      int32_t *count) {
  int32_t p = batch_param(s);
  const DLTensor *x = given(args, p);
  if (!x) return -1;
  const dlx_sig_type *pt = &s->params[p].type;
  *bt = x;
  *at = pt->ellipsis;
  *count = x->ndim - (pt->ndims - 1); /* >= 0: the argument passed its check */
  return *count < 0 ? -1 : 0;
}

/* One declared result dimension against extent n (dimension d of result r). */
static inline int result_dim(const dlx_sig_dim *dm, int64_t n, int32_t d, int32_t r,
                             dlx_sig_bindings *b, dlx_sig_fault *fault) {
  if (dm->kind == DLX_DIM_SYMBOL) {
    int64_t *v = &b->value[dm->sym];
    if (*v != n) {
      if (*v >= 0) return fault->code = DLX_FAULT_SYMBOL, fault->sym = dm->sym, fault->dim = d, -1;
      *v = n; /* data-dependent: the first result that has it says what it is */
      b->owner[dm->sym] = (int8_t)(-1 - r);
    }
  } else if (dm->kind == DLX_DIM_FIXED && n != dm->extent) {
    return fault->code = DLX_FAULT_EXTENT, fault->dim = d, -1;
  }
  return 0;
}

static inline int same_device(DLDevice a, DLDevice b) {
  return a.device_type == b.device_type && a.device_id == b.device_id;
}

static __attribute__((noinline)) int check_result(const dlx_sig *s, int32_t r,
                                                  const DLTensor *t, const dlx_arg *args,
                                                  DLDevice device, dlx_sig_bindings *b,
                                                  dlx_sig_fault *fault);

int dlx_derive_check_result(const dlx_sig *s, int32_t r, const DLTensor *t, const dlx_arg *args,
                            DLDevice device, dlx_sig_bindings *b, dlx_sig_fault *fault) {
  /* The usual result first, in a few compares: one dtype, no "...", no device flag, each
   * dimension a fixed extent, "_" or a symbol already bound. Anything else, and any
   * mismatch, takes the full check, which binds, decides and finds the fault. */
  const dlx_sig_type *ty = &s->results[r];
  if (dlx_sig_dtype_packed(t->dtype) == ty->dtype_exact && t->ndim == ty->ndims &&
      ty->ellipsis < 0 && !(ty->flags & DLX_SIG_DEVICES) && same_device(t->device, device)) {
    const dlx_sig_dim *dims = s->dims + ty->dim0;
    const int64_t *shape = t->shape;
    int32_t d = 0, nd = t->ndim;
    for (; d < nd; ++d) {
      const dlx_sig_dim *dm = &dims[d];
      if (dm->kind == DLX_DIM_SYMBOL ? b->value[dm->sym] != shape[d]
                                     : dm->kind == DLX_DIM_FIXED && dm->extent != shape[d])
        break;
    }
    if (d == nd) return 0;
  }
  return check_result(s, r, t, args, device, b, fault);
}

static int check_result(const dlx_sig *s, int32_t r, const DLTensor *t, const dlx_arg *args,
                        DLDevice device, dlx_sig_bindings *b, dlx_sig_fault *fault) {
  const dlx_sig_type *ty = &s->results[r];
  fault->dim = fault->sym = -1;
  if (ty->kind != DLX_SIG_TENSOR) return fault->code = DLX_FAULT_RESULT_KIND, -1;
  uint32_t dt = dlx_sig_dtype_packed(t->dtype);
  if (dt != ty->dtype_exact) { /* one compare for the usual one-dtype result */
    if (ty->dtype_exact != DLX_SIG_NO_EXACT) return fault->code = DLX_FAULT_DTYPE, -1;
    const DLTensor *like = given(args, dtype_param(s, ty->dtypes));
    if (like ? dt != dlx_sig_dtype_packed(like->dtype)
             : !(ty->dtypes & dlx_sig_dtype_bit(t->dtype)))
      return fault->code = DLX_FAULT_DTYPE, -1;
  }
  if (ty->ndims >= 0) {
    const dlx_sig_dim *dims = s->dims + ty->dim0;
    int32_t nd = ty->ndims;
    if (t->ndim < 0 || (t->ndim && !t->shape)) return fault->code = DLX_FAULT_NDIM, -1;
    if (ty->ellipsis < 0) {
      if (t->ndim != nd) return fault->code = DLX_FAULT_NDIM, -1;
      for (int32_t d = 0; d < nd; ++d)
        if (result_dim(&dims[d], t->shape[d], d, r, b, fault)) return -1;
    } else {
      int32_t lead = ty->ellipsis, skip = t->ndim - (nd - 1);
      if (skip < 0) return fault->code = DLX_FAULT_NDIM, -1;
      const DLTensor *bt;
      int32_t at, count;
      if (batch_dims(s, args, &bt, &at, &count) == 0) {
        if (skip != count) return fault->code = DLX_FAULT_NDIM, -1;
        for (int32_t k = 0; k < count; ++k)
          if (t->shape[lead + k] != bt->shape[at + k])
            return fault->code = DLX_FAULT_EXTENT, fault->dim = lead + k, -1;
      }
      for (int32_t k = 0; k < lead; ++k)
        if (result_dim(&dims[k], t->shape[k], k, r, b, fault)) return -1;
      for (int32_t k = lead + 1; k < nd; ++k)
        if (result_dim(&dims[k], t->shape[k - 1 + skip], k - 1 + skip, r, b, fault)) return -1;
    }
  }
  if ((ty->flags & DLX_SIG_DEVICES) ? !dlx_sig_device_ok(ty->flags, t->device.device_type)
                                    : !same_device(t->device, device))
    return fault->code = DLX_FAULT_DEVICE, -1;
  return 0;
}

static void put_device(sink *o, DLDevice d) {
  const char *name = dlx_device_type_name(d.device_type);
  if (name)
    put(o, "%s:%d", name, (int)d.device_id);
  else
    put(o, "device type %d:%d", (int)d.device_type, (int)d.device_id);
}

/* Where a bound symbol's extent came from: "'x'" (the first given parameter declaring it)
 * or "result 1" (a data-dependent size); 0 when it was bound by result r itself. */
static int symbol_origin(const dlx_sig *s, int32_t sym, int32_t r, const dlx_arg *args,
                         const dlx_sig_bindings *b, sink *o) {
  for (int32_t i = 0; i < s->nparams; ++i) {
    const dlx_sig_type *t = &s->params[i].type;
    if (t->kind != DLX_SIG_TENSOR || t->ndims < 0 || !given(args, i)) continue;
    for (int32_t d = 0; d < t->ndims; ++d) {
      const dlx_sig_dim *dm = &s->dims[t->dim0 + d];
      if (dm->kind == DLX_DIM_SYMBOL && dm->sym == sym) {
        put(o, " (from '%s')", dlx_sig_param_name(s, i));
        return 1;
      }
    }
  }
  int owner = -1 - b->owner[sym];
  if (owner < 0 || owner >= r) return 0;
  put(o, " (from result %d)", owner);
  return 1;
}

void dlx_derive_result_message(const dlx_sig *s, int32_t r, const DLTensor *t,
                               const char *got_scalar, const dlx_arg *args, DLDevice device,
                               const dlx_sig_bindings *b, const dlx_sig_fault *fault, char *buf,
                               size_t len) {
  sink o = {buf, len, 0};
  const dlx_sig_type *ty = &s->results[r];
  char want[256], name[64];
  dlx_sig_format_type(s, ty, want, sizeof want);
  put(&o, "result %d must be %s", (int)r, want);
  /* what the declaration stands for in this call: "with n=4 (from 'x'), dtype f64 (...)" */
  const char *sep = " with ";
  if (ty->kind == DLX_SIG_TENSOR && ty->dtype_exact == DLX_SIG_NO_EXACT) {
    int32_t p = dtype_param(s, ty->dtypes);
    const DLTensor *like = given(args, p);
    if (like) {
      dlx_sig_dtype_name(like->dtype, name, sizeof name);
      put(&o, "%sdtype %s (from '%s')", sep, name, dlx_sig_param_name(s, p));
      sep = ", ";
    }
  }
  if (ty->kind == DLX_SIG_TENSOR && ty->ndims >= 0) {
    uint32_t seen = 0; /* symbols already said */
    for (int32_t d = 0; d < ty->ndims; ++d) {
      const dlx_sig_dim *dm = &s->dims[ty->dim0 + d];
      if (dm->kind == DLX_DIM_ELLIPSIS) {
        const DLTensor *bt;
        int32_t at, count;
        if (batch_dims(s, args, &bt, &at, &count)) continue;
        put(&o, "%s...=[", sep);
        for (int32_t k = 0; k < count; ++k)
          put(&o, k ? ", %lld" : "%lld", (long long)bt->shape[at + k]);
        put(&o, "] (from '%s')", dlx_sig_param_name(s, batch_param(s)));
        sep = ", ";
        continue;
      }
      if (dm->kind != DLX_DIM_SYMBOL || (seen >> dm->sym & 1) || b->value[dm->sym] < 0) continue;
      seen |= 1u << dm->sym;
      size_t mark = o.n;
      put(&o, "%s%s=%lld", sep, dlx_sig_str(s, s->symbols[dm->sym]),
          (long long)b->value[dm->sym]);
      if (symbol_origin(s, dm->sym, r, args, b, &o))
        sep = ", ";
      else if (mark < o.len) /* bound by this very result: nothing to say */
        o.n = mark, o.buf[mark] = '\0';
      else
        o.n = mark;
    }
  }
  int on_device = fault->code == DLX_FAULT_DEVICE;
  if (on_device && !(ty->flags & DLX_SIG_DEVICES)) {
    put(&o, " on ");
    put_device(&o, device);
    put(&o, " (the call's device)");
  }
  if (got_scalar) {
    put(&o, ", got %s", got_scalar);
  } else {
    dlx_sig_dtype_name(t->dtype, name, sizeof name);
    put(&o, ", got %s%s[", ty->kind == DLX_SIG_TENSOR ? "" : "a tensor ", name);
    for (int32_t d = 0; d < t->ndim && t->shape; ++d)
      put(&o, d ? ", %lld" : "%lld", (long long)t->shape[d]);
    put(&o, "]");
    if (on_device) {
      put(&o, " on ");
      put_device(&o, t->device);
    }
  }
  if (len && o.n >= len) buf[len - 1] = '\0';
}

/* ---- sharding ------------------------------------------------------------------------ */

static int is_bracketed_tensor(const dlx_sig_type *t) {
  return t->kind == DLX_SIG_TENSOR && t->ndims >= 0;
}

void dlx_derive_shard(const dlx_sig *s, dlx_shard_rule *out) {
  out->independent = s->independent;
  int any = 0, kept = 1;
  for (int32_t i = 0; i < s->nparams; ++i) {
    const dlx_sig_type *t = &s->params[i].type;
    if (t->kind != DLX_SIG_TENSOR) continue;
    int has = is_bracketed_tensor(t) && t->ellipsis >= 0;
    any |= has;
    if ((t->flags & DLX_SIG_MUT) && !has) kept = 0;
  }
  for (int32_t r = 0; r < s->nresults; ++r)
    if (!is_bracketed_tensor(&s->results[r]) || s->results[r].ellipsis < 0) kept = 0;
  out->batch = any && kept;
}

int32_t dlx_derive_shard_label(const dlx_sig *s, const dlx_sig_type *t, int32_t d) {
  if (!is_bracketed_tensor(t) || d < 0 || d >= t->ndims) return DLX_SHARD_NONE;
  const dlx_sig_dim *dm = &s->dims[t->dim0 + d];
  if (dm->kind == DLX_DIM_SYMBOL) return dm->sym;
  return dm->kind == DLX_DIM_ELLIPSIS ? DLX_SHARD_BATCH : DLX_SHARD_NONE;
}
