/*
 * dlx_invoke.c - a kernel call without Python (see dlx_invoke.h). Everything lives on the
 * caller's stack: the call state, the size symbols' bindings, the floats made of ints.
 */
#include "dlx_invoke.h"
#include "dlx_derive.h"
#include "dlx_sig.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

_Static_assert(sizeof(((dlx_invoke_proof *)0)->value) / sizeof(int64_t) == DLX_SIG_MAX_SYMBOLS,
               "dlx_invoke_proof holds every size symbol");
_Static_assert(DLX_INVOKE_MAX_ARGS == DLX_SIG_MAX_PARAMS &&
                   DLX_INVOKE_MAX_RESULTS == DLX_SIG_MAX_RESULTS,
               "dlx_invoke.h's limits are the plan's");

#define FSCRATCH 512 /* doubles for dlx_arg_floats of ints arguments, all of one call */

typedef struct invoke_state {
  dlx_call pub; /* first: the kernel's dlx_call * is the state's address */
  dlx_invoke *inv;
  int failed;
  int32_t max_results;
  int32_t fused; /* doubles of fscratch in use */
  uint64_t results_proved; /* dlx_invoke_proof.results of the proof the call runs on */
  dlx_sig_bindings binds;
  /* the size symbols' values as the kernel reads them: binds.value, or on a proved call the
   * proof's own (not copied: most calls never ask) until a result is checked against the
   * declaration, which may bind one (own_sizes) */
  const int64_t *sizes;
  uint64_t made;  /* bit i: as_floats[i] is set (a mask, not a loop clearing pointers) */
  const double *as_floats[DLX_SIG_MAX_PARAMS];
  double fscratch[FSCRATCH];
} invoke_state;

/* The first error is the cause: later ones are dropped. */
static int vfail(invoke_state *st, const char *kind, const char *fmt, va_list ap) {
  if (st->failed) return -1;
  st->failed = 1;
  dlx_invoke *inv = st->inv;
  snprintf(inv->error_kind, sizeof inv->error_kind, "%s", kind ? kind : "RuntimeError");
  char msg[sizeof inv->error];
  vsnprintf(msg, sizeof msg, fmt ? fmt : "(no message)", ap);
  size_t n = strlen(inv->name);
  if (strncmp(msg, inv->name, n) == 0 && strncmp(msg + n, "(): ", 4) == 0)
    snprintf(inv->error, sizeof inv->error, "%s", msg); /* the kernel named itself */
  else { /* "name(): msg", cut at the end: the message's tail is lost, never the name */
    size_t cap = sizeof inv->error - 1, at = 0;
    const char *parts[3] = {inv->name, "(): ", msg};
    for (int i = 0; i < 3; ++i) {
      size_t len = strlen(parts[i]);
      if (len > cap - at) len = cap - at;
      memcpy(inv->error + at, parts[i], len);
      at += len;
    }
    inv->error[at] = '\0';
  }
  return -1;
}

__attribute__((format(printf, 3, 4))) static int fail(invoke_state *st, const char *kind,
                                                      const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(st, kind, fmt, ap);
  va_end(ap);
  return -1;
}

static int rt_verror(dlx_call *call, const char *kind, const char *fmt, va_list ap) {
  return vfail((invoke_state *)call, kind, fmt, ap);
}

static int scalar_result(dlx_call *call, const char *what) {
  return fail((invoke_state *)call, "TypeError",
              "%s: a traced or compiled call takes tensor results only", what);
}

static int rt_return_int(dlx_call *call, int64_t value) {
  (void)value;
  return scalar_result(call, "dlx_return_int");
}

static int rt_return_float(dlx_call *call, double value) {
  (void)value;
  return scalar_result(call, "dlx_return_float");
}

static int same_shape(const DLTensor *t, int32_t ndim, const int64_t *shape) {
  if (t->ndim != ndim) return 0;
  for (int32_t d = 0; d < ndim; ++d)
    if (t->shape[d] != shape[d]) return 0;
  return 1;
}

/* t is a result of this device, shape and dtype. DLDevice (two int32) and DLDataType
 * (u8, u8, u16) have no padding: each is compared whole, as one word, which spares the
 * fast path the registers (and their saves) of unpacking them field by field. */
static inline int same_result(const DLTensor *t, DLDevice device, int32_t ndim,
                              const int64_t *shape, DLDataType dtype) {
  _Static_assert(sizeof(DLDeviceType) == 4 && offsetof(DLDevice, device_id) == 4 &&
                     sizeof(DLDevice) == 8 && offsetof(DLDataType, lanes) == 2 &&
                     sizeof(DLDataType) == 4,
                 "DLDevice and DLDataType without padding (no -fshort-enums)");
  uint64_t d0, d1;
  uint32_t t0, t1;
  memcpy(&d0, &t->device, 8);
  memcpy(&d1, &device, 8);
  memcpy(&t0, &t->dtype, 4);
  memcpy(&t1, &dtype, 4);
  return d0 == d1 && t0 == t1 && same_shape(t, ndim, shape);
}

static void shape_text(int32_t ndim, const int64_t *shape, char *buf, size_t len) {
  size_t n = (size_t)snprintf(buf, len, "(");
  for (int32_t d = 0; d < ndim && n < len; ++d)
    n += (size_t)snprintf(buf + n, len - n, d ? ", %lld" : "%lld", (long long)shape[d]);
  if (n < len) snprintf(buf + n, len - n, ndim == 1 ? ",)" : ")");
}

/* st->binds holds the call's symbols from here on (a proved call's were the proof's). */
static void own_sizes(invoke_state *st) {
  if (st->sizes == st->binds.value) return;
  memcpy(st->binds.value, st->sizes, sizeof(int64_t) * (size_t)st->inv->plan->nsymbols);
  st->sizes = st->binds.value;
}

/* The declaration's check of result i as the kernel asks for it: 0, or -1 with the error.
 * Out of line (its message buffer): a proved result never comes here. */
static __attribute__((noinline)) int result_refused(invoke_state *st, int32_t i,
                                                    DLDevice device, int32_t ndim,
                                                    const int64_t *shape, DLDataType dtype) {
  dlx_invoke *inv = st->inv;
  DLTensor asked = {.data = NULL, .device = device, .ndim = ndim, .dtype = dtype,
                    .shape = (int64_t *)shape, .strides = NULL, .byte_offset = 0};
  dlx_sig_fault fault;
  /* a caller that left the device zero (no DLPack device type is 0) calls on the CPU */
  DLDevice dev = inv->device.device_type ? inv->device : (DLDevice){kDLCPU, 0};
  own_sizes(st);
  if (!dlx_derive_check_result(inv->plan, i, &asked, inv->args, dev, &st->binds, &fault))
    return 0;
  char msg[768];
  dlx_derive_result_message(inv->plan, i, &asked, NULL, inv->args, dev, &st->binds, &fault, msg,
                            sizeof msg);
  return fail(st, fault.code == DLX_FAULT_DTYPE || fault.code == DLX_FAULT_RESULT_KIND
                      ? "TypeError" : "ValueError", "%s", msg);
}

/* Result i is not the caller's out buffer `t` (cold). */
static __attribute__((noinline, cold)) int result_differs(invoke_state *st, int32_t i,
                                                          const DLTensor *t, DLDevice device,
                                                          int32_t ndim, const int64_t *shape,
                                                          DLDataType dtype) {
  char want[256], got[256], wd[32], gd[32];
  shape_text(t->ndim, t->shape, want, sizeof want);
  shape_text(ndim, shape, got, sizeof got);
  dlx_sig_dtype_name(t->dtype, wd, sizeof wd);
  dlx_sig_dtype_name(dtype, gd, sizeof gd);
  return fail(st, "ValueError",
              "result %d: the kernel made %s %s on device %d:%d where the declaration gives "
              "%s %s on device %d:%d",
              (int)i, gd, got, (int)device.device_type, (int)device.device_id, wd, want,
              (int)t->device.device_type, (int)t->device.device_id);
}

static __attribute__((noinline)) int return_checked(dlx_call *call, DLDevice device,
                                                    int32_t ndim, const int64_t *shape,
                                                    DLDataType dtype, DLTensor **out) {
  invoke_state *st = (invoke_state *)call;
  dlx_invoke *inv = st->inv;
  if (st->failed) return -1;
  if (ndim < 0 || ndim > DLX_SIG_MAX_TENSOR_DIMS || (ndim && !shape))
    return fail(st, "ValueError", "dlx_return_new_tensor: invalid ndim %d", (int)ndim);
  int32_t i = inv->produced;
  if (i >= st->max_results)
    return fail(st, "RuntimeError", "returned more than the %d result(s) %s", (int)st->max_results,
                inv->plan ? "its signature declares" : "the caller provides");
  /* the declared result, as on the direct call (dlx_derive.h), first; where the proof shows
   * out[i] meets it, a result that is out[i]'s dtype, shape and device meets it too (one
   * that is not is still checked here: the error names the declaration, as without it) */
  DLTensor *given = inv->out ? inv->out[i] : NULL;
  int proved = given && i < 64 && (st->results_proved >> i & 1) &&
               same_result(given, device, ndim, shape, dtype);
  if (inv->plan && !proved && result_refused(st, i, device, ndim, shape, dtype)) return -1;
  if (inv->out) {
    DLTensor *t = given;
    if (!t) return fail(st, "RuntimeError", "result %d: the caller's out buffer is NULL", (int)i);
    if (!proved && !same_result(t, device, ndim, shape, dtype))
      return result_differs(st, i, t, device, ndim, shape, dtype);
    *out = t;
  } else if (inv->allocate) {
    DLTensor *t = NULL;
    if (inv->allocate(inv->allocate_ctx, i, device, ndim, shape, dtype, &t) || !t)
      return fail(st, "MemoryError", "result %d: the caller's allocator failed", (int)i);
    *out = t;
  } else {
    return fail(st, "RuntimeError", "result %d: the caller takes no results", (int)i);
  }
  inv->produced = i + 1;
  return 0;
}

/* dlx_return_new_tensor. A proved call site's result (dlx_invoke_run_checked: out[i] meets
 * the declared result) that is out[i]'s dtype, shape and device is out[i], in a frame that
 * saves no register; anything else takes return_checked, which checks and words it. */
static int rt_return_new_tensor(dlx_call *call, DLDevice device, int32_t ndim,
                                const int64_t *shape, DLDataType dtype, DLTensor **out) {
  invoke_state *st = (invoke_state *)call;
  dlx_invoke *inv = st->inv;
  const int32_t i = inv->produced;
  DLTensor *given;
  if (__builtin_expect(!st->failed && i < st->max_results && i < 64 &&
                           (st->results_proved >> i & 1) && inv->out != NULL &&
                           (given = inv->out[i]) != NULL && ndim == given->ndim && ndim >= 0 &&
                           ndim <= DLX_SIG_MAX_TENSOR_DIMS && (ndim == 0 || shape != NULL) &&
                           same_result(given, device, ndim, shape, dtype),
                       1)) {
    *out = given;
    inv->produced = i + 1;
    return 0;
  }
  return return_checked(call, device, ndim, shape, dtype, out);
}

static int rt_size(dlx_call *call, const char *symbol, int64_t *out) {
  invoke_state *st = (invoke_state *)call;
  const dlx_sig *sig = st->inv->plan;
  int32_t k = sig && symbol ? dlx_sig_symbol_index(sig, symbol) : -1;
  if (k < 0)
    return fail(st, "ValueError", "dlx_size: '%s' is not a size symbol of its signature",
                symbol ? symbol : "(null)");
  if (st->sizes[k] < 0)
    return fail(st, "ValueError",
                "dlx_size: size symbol '%s' is not bound in this call (no tensor given has it)",
                symbol);
  *out = st->sizes[k];
  return 0;
}

static int rt_ints_as_floats(dlx_call *call, int32_t i, const double **v, int32_t *n) {
  invoke_state *st = (invoke_state *)call;
  if (i < 0 || i >= call->num_args || call->args[i].kind != DLX_ARG_INTS)
    return fail(st, "TypeError", "argument %d: expected a tuple or list of floats", (int)i);
  int64_t len = call->args[i].value.seq->len;
  if (!(st->made >> i & 1)) {
    if (len > FSCRATCH - st->fused)
      return fail(st, "ValueError", "argument %d: %lld ints are more than a traced call converts "
                  "to floats (%d in all)", (int)i, (long long)len, FSCRATCH);
    double *f = st->fscratch + st->fused;
    const int64_t *iv = call->args[i].value.seq->data;
    for (int64_t j = 0; j < len; ++j) f[j] = (double)iv[j];
    st->fused += (int32_t)len;
    st->as_floats[i] = f;
    st->made |= (uint64_t)1 << i;
  }
  *v = st->as_floats[i];
  *n = (int32_t)len;
  return 0;
}

static const dlx_runtime invoke_runtime = {
    .abi_version = DLX_ABI_VERSION,
    .size = sizeof(dlx_runtime),
    .verror = rt_verror,
    .return_int = rt_return_int,
    .return_float = rt_return_float,
    .return_new_tensor = rt_return_new_tensor,
    .symbol_size = rt_size,
    .ints_as_floats = rt_ints_as_floats,
};

static const char *const kind_names[] = {"None", "int", "bool", "float", "tensor",
                                         "str", "ints", "floats"};

/* The arguments against the plan: kinds, then each tensor's check (binding symbols). */
static int check_args(invoke_state *st) {
  dlx_invoke *inv = st->inv;
  const dlx_sig *s = inv->plan;
  if (inv->nargs != s->nparams)
    return fail(st, "TypeError", "takes %d argument(s), %d given", (int)s->nparams,
                (int)inv->nargs);
  dlx_sig_bindings_init(&st->binds, s);
  for (int32_t i = 0; i < s->nparams; ++i) {
    const dlx_sig_type *ty = &s->params[i].type;
    const dlx_arg *a = &inv->args[i];
    const char *pname = dlx_sig_param_name(s, i);
    if (a->kind == DLX_ARG_NONE) {
      if (!ty->optional) return fail(st, "TypeError", "'%s' must not be None", pname);
      continue;
    }
    int want = ty->kind == DLX_SIG_TENSOR ? DLX_ARG_TENSOR
               : ty->kind == DLX_SIG_INT  ? DLX_ARG_INT
               : ty->kind == DLX_SIG_FLOAT ? DLX_ARG_FLOAT
               : ty->kind == DLX_SIG_BOOL ? DLX_ARG_BOOL
               : ty->kind == DLX_SIG_STR  ? DLX_ARG_STR
               : ty->kind == DLX_SIG_INTS ? DLX_ARG_INTS
                                          : DLX_ARG_FLOATS;
    int ok = a->kind == want || (want == DLX_ARG_FLOAT && a->kind == DLX_ARG_INT) ||
             (want == DLX_ARG_FLOATS && a->kind == DLX_ARG_INTS);
    if (!ok) {
      int k = a->kind >= 0 && a->kind <= DLX_ARG_FLOATS ? a->kind : 0;
      return fail(st, "TypeError", "'%s' must be %s, got %s", pname,
                  kind_names[want], a->kind == k ? kind_names[k] : "an unknown kind");
    }
    if (want != DLX_ARG_TENSOR) continue;
    if (!a->value.tensor) return fail(st, "TypeError", "'%s': a NULL tensor", pname);
    dlx_sig_fault fault;
    if (dlx_sig_check_type(s, ty, i, a->value.tensor, a->readonly, &st->binds, &fault)) {
      char msg[512];
      dlx_sig_fault_message(s, i, a->value.tensor, &st->binds, &fault, msg, sizeof msg);
      return fail(st, fault.code == DLX_FAULT_DTYPE ? "TypeError" : "ValueError", "%s", msg);
    }
  }
  return 0;
}

/* dlx_invoke_proof.results: the out buffers that meet their declared result as they are,
 * in order (a later result may use a symbol an earlier one binds: the first that does not
 * meet it, or binds a symbol, ends the proof, so no symbol is bound early). */
static uint64_t prove_results(const dlx_invoke *inv, const dlx_sig_bindings *bound) {
  const dlx_sig *s = inv->plan;
  if (!inv->out || inv->nout != s->nresults) return 0;
  DLDevice dev = inv->device.device_type ? inv->device : (DLDevice){kDLCPU, 0};
  uint64_t proved = 0;
  for (int32_t i = 0; i < s->nresults && i < 64; ++i) {
    dlx_sig_bindings b = *bound;
    dlx_sig_fault fault;
    if (!inv->out[i] ||
        dlx_derive_check_result(s, i, inv->out[i], inv->args, dev, &b, &fault) ||
        memcmp(b.value, bound->value, sizeof(int64_t) * (size_t)s->nsymbols) != 0)
      break;
    proved |= (uint64_t)1 << i;
  }
  return proved;
}

/* run (checked NULL: check the arguments first; proof_out: keep what the check bound),
 * or only check (fn not called when check_only). */
static int invoke(dlx_invoke *inv, const dlx_invoke_proof *checked, dlx_invoke_proof *proof_out,
                  int check_only) {
  invoke_state st;
  st.pub = (dlx_call){.rt = &invoke_runtime, .args = inv->args, .num_args = inv->nargs,
                      .device = inv->device, .stream = inv->stream};
  st.inv = inv;
  st.failed = 0;
  st.fused = 0;
  st.results_proved = 0; /* invoke() checks every result against the declaration */
  st.sizes = st.binds.value;
  inv->produced = 0;
  inv->error_kind[0] = inv->error[0] = '\0';
  if (!inv->name) inv->name = "kernel";
  if (!inv->fn) return fail(&st, "RuntimeError", "no kernel function");
  if (inv->nargs < 0 || inv->nargs > DLX_SIG_MAX_PARAMS || (inv->nargs && !inv->args))
    return fail(&st, "TypeError", "%d arguments: out of range", (int)inv->nargs);
  if (inv->nout < 0 || inv->nout > DLX_SIG_MAX_RESULTS || (inv->nout && !inv->out && !inv->allocate))
    return fail(&st, "RuntimeError", "%d results without a place for them", (int)inv->nout);
  st.made = 0;
  if (inv->plan) {
    st.max_results = inv->plan->nresults;
    if (inv->out && inv->nout != inv->plan->nresults)
      return fail(&st, "RuntimeError", "the caller provides %d result(s) where the signature "
                  "declares %d", (int)inv->nout, (int)inv->plan->nresults);
    if (checked) { /* the caller's proof: same plan, same shapes as when it was checked */
      if (inv->nargs != inv->plan->nparams)
        return fail(&st, "TypeError", "takes %d argument(s), %d given", (int)inv->plan->nparams,
                    (int)inv->nargs);
      memcpy(st.binds.value, checked->value, sizeof(int64_t) * (size_t)inv->plan->nsymbols);
    } else {
      if (check_args(&st)) return -1;
      if (proof_out) {
        memcpy(proof_out->value, st.binds.value, sizeof(int64_t) * (size_t)inv->plan->nsymbols);
        proof_out->results = prove_results(inv, &st.binds);
      }
    }
  } else {
    if (checked || proof_out) return fail(&st, "RuntimeError", "no plan to check against");
    st.max_results = inv->out ? inv->nout : DLX_SIG_MAX_RESULTS;
  }
  if (check_only) return 0;
  int rc = inv->fn(&st.pub);
  if (rc != 0 || st.failed) {
    if (!st.failed)
      fail(&st, "RuntimeError", "the kernel failed (returned %d) without setting an error", rc);
    return -1;
  }
  int32_t want = inv->plan ? inv->plan->nresults : inv->nout;
  if ((inv->plan || inv->out) && inv->produced != want)
    return fail(&st, "RuntimeError", "returned %d of the %d result(s) %s", (int)inv->produced,
                (int)want, inv->plan ? "its signature declares" : "the caller provides");
  return 0;
}

int dlx_invoke_run(dlx_invoke *inv) { return invoke(inv, NULL, NULL, 0); }

int dlx_invoke_check(dlx_invoke *inv, dlx_invoke_proof *proof) {
  return invoke(inv, NULL, proof, 1);
}

int dlx_invoke_run_checked(dlx_invoke *inv, const dlx_invoke_proof *proof) {
  const dlx_sig *s = inv->plan;
  /* the invariants a caller cannot have changed unnoticed are still checked; anything
   * unusual takes invoke(), which words the error */
  if (!s || !proof || !inv->fn || inv->nargs != s->nparams || (inv->nargs && !inv->args) ||
      inv->nout != s->nresults || (inv->nout && !inv->out))
    return invoke(inv, proof, NULL, 0);
  invoke_state st;
  st.pub = (dlx_call){.rt = &invoke_runtime, .args = inv->args, .num_args = inv->nargs,
                      .device = inv->device, .stream = inv->stream};
  st.inv = inv;
  st.failed = 0;
  st.fused = 0;
  st.made = 0;
  st.max_results = s->nresults;
  st.results_proved = proof->results;
  inv->produced = 0;
  inv->error_kind[0] = inv->error[0] = '\0';
  if (!inv->name) inv->name = "kernel";
  st.sizes = proof->value;
  int rc = inv->fn(&st.pub);
  if (rc != 0 || st.failed) {
    if (!st.failed)
      fail(&st, "RuntimeError", "the kernel failed (returned %d) without setting an error", rc);
    return -1;
  }
  if (inv->produced != s->nresults)
    return fail(&st, "RuntimeError", "returned %d of the %d result(s) its signature declares",
                (int)inv->produced, (int)s->nresults);
  return 0;
}

/* ---- a compiled call's inputs to arguments ------------------------------------------ */

#include "dlx_core.h"

const dlx_attr *dlx_attr_find(const dlx_attr *attrs, int32_t nattrs, const char *name) {
  size_t n = strlen(name);
  for (int32_t i = 0; i < nattrs; ++i)
    if (attrs[i].name_len == n && attrs[i].name && memcmp(attrs[i].name, name, n) == 0)
      return &attrs[i];
  return NULL;
}

/* Attribute "p_<name>" (no formatting on the call path). */
static const dlx_attr *param_attr(const dlx_attr *attrs, int32_t nattrs, const char *pname) {
  size_t n = strlen(pname);
  for (int32_t i = 0; i < nattrs; ++i)
    if (attrs[i].name_len == n + 2 && attrs[i].name && attrs[i].name[0] == 'p' &&
        attrs[i].name[1] == '_' && memcmp(attrs[i].name + 2, pname, n) == 0)
      return &attrs[i];
  return NULL;
}

static const char *const attr_type_names[] = {"another type", "an int64", "a float64",
                                              "a string", "an int64 array", "a float64 array"};

int dlx_invoke_bind(const dlx_sig *s, const dlx_attr *attrs, int32_t nattrs,
                    DLTensor *const *ins, int32_t nins, DLTensor *const *muts, int32_t nmuts,
                    dlx_arg *args, dlx_bind_store *store, char *err, size_t errlen) {
  if (!s) return dlx_set_err(err, errlen, "the kernel declares no signature");
  if (nattrs < 0 || nins < 0 || nmuts < 0 || (nattrs && !attrs) || (nins && !ins) ||
      (nmuts && !muts))
    return dlx_set_err(err, errlen, "invalid counts");
  uint64_t none = 0;
  const dlx_attr *na = NULL; /* "dlx_none", compared in line: this runs on every call */
  for (int32_t i = 0; i < nattrs && !na; ++i)
    if (attrs[i].name_len == 8 && attrs[i].name && memcmp(attrs[i].name, "dlx_none", 8) == 0)
      na = &attrs[i];
  if (na) {
    if (na->type != DLX_ATTR_I64 || !na->data)
      return dlx_set_err(err, errlen, "attribute dlx_none must be an int64");
    memcpy(&none, na->data, sizeof none);
  }
  if (s->nparams < 64 && (none >> s->nparams))
    return dlx_set_err(err, errlen, "attribute dlx_none names parameters the kernel lacks");
  int32_t in = 0, mu = 0, nseq = 0;
  size_t used = 0;
  for (int32_t i = 0; i < s->nparams; ++i) {
    const dlx_sig_type *ty = &s->params[i].type;
    const char *pname = dlx_sig_param_name(s, i);
    dlx_arg *a = &args[i];
    a->readonly = 0;
    if (none >> i & 1) {
      if (!ty->optional) return dlx_set_err(err, errlen, "'%s' must not be None", pname);
      a->kind = DLX_ARG_NONE;
      a->value.i = 0;
      continue;
    }
    if (ty->kind == DLX_SIG_TENSOR) {
      int mut = (ty->flags & DLX_SIG_MUT) != 0;
      if (mut ? mu >= nmuts : in >= nins)
        return dlx_set_err(err, errlen, "'%s': the call has too few %s", pname,
                           mut ? "aliased outputs" : "inputs");
      DLTensor *t = mut ? muts[mu++] : ins[in++];
      if (!t) return dlx_set_err(err, errlen, "'%s': a NULL buffer", pname);
      a->kind = DLX_ARG_TENSOR;
      a->readonly = !mut; /* a compiled program's inputs are immutable */
      a->value.tensor = t;
      continue;
    }
    const dlx_attr *v = param_attr(attrs, nattrs, pname);
    if (!v) return dlx_set_err(err, errlen, "'%s': attribute p_%s is missing", pname, pname);
    int want = ty->kind == DLX_SIG_INT || ty->kind == DLX_SIG_BOOL ? DLX_ATTR_I64
               : ty->kind == DLX_SIG_FLOAT                        ? DLX_ATTR_F64
               : ty->kind == DLX_SIG_STR                          ? DLX_ATTR_STR
               : ty->kind == DLX_SIG_INTS                         ? DLX_ATTR_I64S
                                                                  : DLX_ATTR_F64S;
    if (v->type != want || v->len < 0 || (v->len && !v->data) ||
        (want <= DLX_ATTR_F64 && v->len != 1)) {
      int got = v->type >= 0 && v->type <= DLX_ATTR_F64S ? v->type : 0;
      return dlx_set_err(err, errlen, "'%s': attribute p_%s must be %s, got %s", pname, pname,
                         attr_type_names[want], attr_type_names[got]);
    }
    switch (want) {
      case DLX_ATTR_I64:
        a->kind = ty->kind == DLX_SIG_BOOL ? DLX_ARG_BOOL : DLX_ARG_INT;
        memcpy(&a->value.i, v->data, sizeof(int64_t));
        if (ty->kind == DLX_SIG_BOOL && (a->value.i & ~(int64_t)1))
          return dlx_set_err(err, errlen, "'%s': a bool must be 0 or 1", pname);
        break;
      case DLX_ATTR_F64:
        a->kind = DLX_ARG_FLOAT;
        memcpy(&a->value.f, v->data, sizeof(double));
        break;
      default: {
        if (nseq >= (int32_t)(sizeof store->seqs / sizeof store->seqs[0]))
          return dlx_set_err(err, errlen, "too many sequence arguments");
        dlx_arg_seq *q = &store->seqs[nseq++];
        if (want == DLX_ATTR_STR) { /* a NUL-terminated copy: kernels read C strings */
          if ((size_t)v->len >= sizeof store->text - used)
            return dlx_set_err(err, errlen, "'%s': strings of a traced call exceed %d bytes",
                               pname, DLX_BIND_STR_MAX);
          char *t = store->text + used;
          if (v->len) memcpy(t, v->data, (size_t)v->len);
          t[v->len] = '\0';
          if (memchr(t, '\0', (size_t)v->len))
            return dlx_set_err(err, errlen, "'%s': a string with a NUL byte", pname);
          used += (size_t)v->len + 1;
          q->data = t;
        } else { /* int64 and double arrays are used in place (XLA keeps them alive) */
          static const int64_t empty[1] = {0};
          q->data = v->len ? v->data : (const void *)empty;
        }
        q->len = v->len;
        a->kind = want == DLX_ATTR_STR ? DLX_ARG_STR : want == DLX_ATTR_I64S ? DLX_ARG_INTS
                                                                             : DLX_ARG_FLOATS;
        a->value.seq = q;
      }
    }
  }
  if (in != nins || mu != nmuts)
    return dlx_set_err(err, errlen, "the call has %d input(s) and %d aliased output(s) where "
                       "the kernel takes %d and %d", (int)nins, (int)nmuts, (int)in, (int)mu);
  return 0;
}

static int32_t plan_nparams(const dlx_sig *s) { return s ? s->nparams : 0; }
static int32_t plan_nresults(const dlx_sig *s) { return s ? s->nresults : 0; }
static const char *plan_param_name(const dlx_sig *s, int32_t i) {
  return s && i >= 0 && i < s->nparams ? dlx_sig_param_name(s, i) : "?";
}

const dlx_invoke_api dlx_invoke_api_v1 = {
    .version = DLX_INVOKE_API_VERSION,
    .size = sizeof(dlx_invoke_api),
    .run = dlx_invoke_run,
    .bind = dlx_invoke_bind,
    .nparams = plan_nparams,
    .nresults = plan_nresults,
    .find = dlx_attr_find,
    .check = dlx_invoke_check,
    .run_checked = dlx_invoke_run_checked,
    .param_name = plan_param_name,
};
