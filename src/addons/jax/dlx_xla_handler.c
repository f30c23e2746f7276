/*
 * dlx_xla_handler.c - dlx's one XLA FFI handler: every declared kernel staged by jax.jit
 * runs through it (python/dlx/jax.py builds this file at first use, against jaxlib's
 * xla/ffi/api/c_api.h, into dlx's cache).
 *
 * Per call: the attributes to dlx_attr, the kernel from the registry by what it is (the
 * attributes dlx_lib, dlx_name and dlx_decl: its library's sha256, its name and its
 * declaration, decoded and matched by dlx_kernel_ref.c: a program, serialized or not, can
 * only pick a kernel dlx registered, never an address or another library's kernel of the
 * same name), the buffers to DLTensors (row-major, the
 * layout ffi_call asks for), the arguments bound by dlx_invoke_bind, the kernel run by
 * dlx_invoke_run on XLA's stream, a kernel error returned as an XLA FFI error with the
 * kernel's message. No allocation, no Python.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xla/ffi/api/c_api.h"

#include "dlx/dlx.h"
#include "dlx_invoke.h"
#include "dlx_kernel_ref.h"

#define MAX_KERNELS 4096
#define MAX_ATTRS 80
#define MAX_BUFFERS 96
#define MAX_DIMS 1024 /* strides of all buffers of one call */

typedef struct entry {
  dlx_kernel_handle h;
  size_t len; /* of name */
  char name[128];
} entry;

static const dlx_invoke_api *api;
static entry registry[MAX_KERNELS];
static dlx_kernel_key keys[MAX_KERNELS]; /* registry[i] by content, for dlx_kernel_ref_find */
static atomic_int registered; /* entries below it are complete (release/acquire) */
/* dlx.jax's finder: asked (with the GIL, by ctypes) for a library this process has not
 * registered, by digest; it loads and registers it from what this process loaded or from
 * dlx's cache, and returns 1 when it did. Set before any program runs, cleared at exit:
 * a ctypes callback on XLA's thread during interpreter shutdown would hang or end that
 * thread, so a late miss gets the plain "not loaded" error instead. */
typedef int (*dlx_finder)(const char *digest);
static _Atomic(dlx_finder) finder;

/* Called once by dlx.jax with _core's invoke API; -1 for an older or unknown one. */
DLX_EXPORT int dlx_xla_init(const dlx_invoke_api *a) {
  if (!a || a->version != DLX_INVOKE_API_VERSION || a->size < sizeof(dlx_invoke_api)) return -1;
  api = a;
  return 0;
}

DLX_EXPORT void dlx_xla_set_finder(dlx_finder find) {
  atomic_store_explicit(&finder, find, memory_order_release);
}

/* A kernel's registry index, or -1 when full, its name is too long, the digest is no
 * sha256 or out of memory. Called by dlx.jax under its lock; the handle's capsule is kept
 * alive by dlx.jax for good, the declaration and path copied (kept for good too). */
DLX_EXPORT int dlx_xla_register(const dlx_kernel_handle *h, const char *digest,
                                const char *decl, const char *path) {
  int n = atomic_load_explicit(&registered, memory_order_relaxed);
  if (!h || !h->fn || !h->name || !digest || !decl || !path || n >= MAX_KERNELS ||
      strlen(h->name) >= sizeof registry[0].name || strlen(digest) != 64 ||
      strlen(decl) > DLX_REF_DECL_MAX)
    return -1;
  char *copy = malloc(strlen(decl) + 1), *where = malloc(strlen(path) + 1);
  if (!copy || !where) {
    free(copy);
    free(where);
    return -1;
  }
  memcpy(copy, decl, strlen(decl) + 1);
  memcpy(where, path, strlen(path) + 1);
  registry[n].h = *h;
  registry[n].len = strlen(h->name);
  memcpy(registry[n].name, h->name, registry[n].len + 1);
  memcpy(keys[n].digest, digest, 65);
  keys[n].name = registry[n].name;
  keys[n].name_len = registry[n].len;
  keys[n].decl = copy;
  keys[n].decl_len = strlen(copy);
  keys[n].path = where;
  atomic_store_explicit(&registered, n + 1, memory_order_release);
  return n;
}

static XLA_FFI_Error *fail(const XLA_FFI_Api *x, XLA_FFI_Error_Code code, const char *msg) {
  XLA_FFI_Error_Create_Args a = {XLA_FFI_Error_Create_Args_STRUCT_SIZE, NULL, msg, code};
  return x->XLA_FFI_Error_Create(&a);
}

/* ---- per call site: what its first run proved, kept by XLA as the instance's state ----- */

/* XLA's type id of `instance`, one per XLA FFI API (jaxlib's CPU client and each GPU plugin
 * have their own registry). Registered on the first metadata query of that API. */
#define MAX_APIS 4
static struct {
  _Atomic(const XLA_FFI_Api *) api;
  XLA_FFI_TypeId id;
} type_ids[MAX_APIS];

typedef struct instance {
  atomic_int ready; /* 0: not proved yet, 1: being written by the first run, 2: proved,
                       3: not provable */
  const entry *e;
  int32_t nargs, nrets, nres, nmut, nparams;
  int8_t param_of[MAX_BUFFERS]; /* buffer i is tensor parameter param_of[i], else -1 */
  int8_t untensored[64];       /* the parameters no buffer is: nuntensored of them */
  int32_t nuntensored;
  dlx_arg args[64];            /* scalars and Nones as bound; tensors set per call */
  dlx_bind_store store;        /* the str arguments that args point into */
  dlx_invoke_proof proof;      /* the size symbols the check bound */
  int64_t seq[512];            /* copies of ints/floats attributes (8 bytes each): a later
                                  run's call frame may keep its attributes elsewhere */
  struct proved {           /* each buffer as checked: args, then rets */
    XLA_FFI_DataType xdtype;
    int32_t rank;
    DLDataType dtype;
    const int64_t *dims, *strides; /* into the arrays below */
  } buf[MAX_BUFFERS];
  int64_t dims[MAX_DIMS], strides[MAX_DIMS]; /* the checked shapes; their row-major strides */
} instance;

static void instance_free(void *p) { free(p); }

static const XLA_FFI_TypeId *type_id_of(const XLA_FFI_Api *x) {
  for (int i = 0; i < MAX_APIS; ++i)
    if (atomic_load_explicit(&type_ids[i].api, memory_order_acquire) == x) return &type_ids[i].id;
  return NULL;
}

/* Registration runs once per platform, from register_ffi_target (dlx.jax's lock held). */
static void register_type(const XLA_FFI_Api *x) {
  if (type_id_of(x) || x->struct_size < offsetof(XLA_FFI_Api, XLA_FFI_State_Get) + sizeof(void *))
    return;
  for (int i = 0; i < MAX_APIS; ++i) {
    if (atomic_load_explicit(&type_ids[i].api, memory_order_relaxed)) continue;
    static const XLA_FFI_TypeInfo info = {XLA_FFI_TypeInfo_STRUCT_SIZE, NULL, instance_free};
    XLA_FFI_TypeId id = {0};
    XLA_FFI_Type_Register_Args a = {XLA_FFI_Type_Register_Args_STRUCT_SIZE, NULL,
                                    {"dlx.xla_instance", 16}, &id, &info};
    XLA_FFI_Error *err = x->XLA_FFI_Type_Register(&a);
    if (err) { /* no state then: every call takes the full path */
      XLA_FFI_Error_Destroy_Args d = {XLA_FFI_Error_Destroy_Args_STRUCT_SIZE, NULL, err};
      x->XLA_FFI_Error_Destroy(&d);
      return;
    }
    type_ids[i].id = id;
    atomic_store_explicit(&type_ids[i].api, x, memory_order_release);
    return;
  }
}

static XLA_FFI_Error *metadata(XLA_FFI_CallFrame *cf) {
  XLA_FFI_Metadata_Extension *m = (XLA_FFI_Metadata_Extension *)cf->extension_start;
  if (m->extension_base.struct_size < XLA_FFI_Metadata_Extension_STRUCT_SIZE ||
      m->metadata->struct_size < XLA_FFI_Metadata_STRUCT_SIZE)
    return fail(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "dlx: XLA's metadata is too old");
  m->metadata->api_version = (XLA_FFI_Api_Version){XLA_FFI_Api_Version_STRUCT_SIZE, NULL,
                                                   XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR};
  m->metadata->traits = 0;
  register_type(cf->api);
  const XLA_FFI_TypeId *id = type_id_of(cf->api);
  if (id && m->metadata->struct_size >= offsetof(XLA_FFI_Metadata, state_type_id) +
                                            sizeof(XLA_FFI_TypeId))
    m->metadata->state_type_id = *id;
  return NULL;
}

/* The instantiate stage: an empty instance; the first execution fills it. */
static XLA_FFI_Error *instantiate(XLA_FFI_CallFrame *cf) {
  if (cf->extension_start && cf->extension_start->type == XLA_FFI_Extension_Metadata)
    return metadata(cf);
  const XLA_FFI_TypeId *id = type_id_of(cf->api);
  if (!id) return NULL;
  instance *in = calloc(1, sizeof *in);
  if (!in) return fail(cf->api, XLA_FFI_Error_Code_RESOURCE_EXHAUSTED, "dlx: out of memory");
  XLA_FFI_State_Set_Args a = {XLA_FFI_State_Set_Args_STRUCT_SIZE, NULL, cf->ctx,
                              XLA_FFI_ExecutionStage_INSTANTIATE, (XLA_FFI_TypeId *)id, in};
  XLA_FFI_Error *err = cf->api->XLA_FFI_State_Set(&a);
  if (err) free(in);
  return err;
}

/* This call site's instance, or NULL (no instantiate stage ran: the full path each time). */
static instance *instance_of(XLA_FFI_CallFrame *cf) {
  const XLA_FFI_TypeId *id = type_id_of(cf->api);
  if (!id) return NULL;
  XLA_FFI_State_Get_Args a = {XLA_FFI_State_Get_Args_STRUCT_SIZE, NULL, cf->ctx,
                              XLA_FFI_ExecutionStage_INSTANTIATE, (XLA_FFI_TypeId *)id, NULL};
  XLA_FFI_Error *err = cf->api->XLA_FFI_State_Get(&a);
  if (err) {
    XLA_FFI_Error_Destroy_Args d = {XLA_FFI_Error_Destroy_Args_STRUCT_SIZE, NULL, err};
    cf->api->XLA_FFI_Error_Destroy(&d);
    return NULL;
  }
  return a.state;
}

static int dtype_of(XLA_FFI_DataType t, DLDataType *out) {
  uint8_t code, bits; /* a switch: a jump table, not a search, on every buffer */
  switch (t) {
    case XLA_FFI_DataType_PRED: code = kDLBool, bits = 8; break;
    case XLA_FFI_DataType_S8: code = kDLInt, bits = 8; break;
    case XLA_FFI_DataType_S16: code = kDLInt, bits = 16; break;
    case XLA_FFI_DataType_S32: code = kDLInt, bits = 32; break;
    case XLA_FFI_DataType_S64: code = kDLInt, bits = 64; break;
    case XLA_FFI_DataType_U8: code = kDLUInt, bits = 8; break;
    case XLA_FFI_DataType_U16: code = kDLUInt, bits = 16; break;
    case XLA_FFI_DataType_U32: code = kDLUInt, bits = 32; break;
    case XLA_FFI_DataType_U64: code = kDLUInt, bits = 64; break;
    case XLA_FFI_DataType_F16: code = kDLFloat, bits = 16; break;
    case XLA_FFI_DataType_F32: code = kDLFloat, bits = 32; break;
    case XLA_FFI_DataType_F64: code = kDLFloat, bits = 64; break;
    case XLA_FFI_DataType_BF16: code = kDLBfloat, bits = 16; break;
    case XLA_FFI_DataType_C64: code = kDLComplex, bits = 64; break;
    case XLA_FFI_DataType_C128: code = kDLComplex, bits = 128; break;
    default: return -1;
  }
  *out = (DLDataType){code, bits, 1};
  return 0;
}

/* Buffer `b` as a row-major DLTensor; its strides from `pool`. */
static int as_tensor(void *p, int is_buffer, DLDevice dev, DLTensor *t, int64_t *pool,
                     int32_t *used) {
  XLA_FFI_Buffer *b = p;
  if (!is_buffer || !b || b->rank < 0 || b->rank > 32 || *used + b->rank > MAX_DIMS ||
      dtype_of(b->dtype, &t->dtype))
    return -1;
  int64_t *strides = pool + *used, s = 1;
  for (int64_t d = b->rank - 1; d >= 0; --d) {
    strides[d] = s;
    s *= b->dims[d] > 0 ? b->dims[d] : 1;
  }
  *used += (int32_t)b->rank;
  t->data = b->data;
  t->device = dev;
  t->ndim = (int32_t)b->rank;
  t->shape = b->dims;
  t->strides = strides;
  t->byte_offset = 0;
  return 0;
}

static void to_attr(const XLA_FFI_Attrs *in, int64_t i, dlx_attr *a) {
  XLA_FFI_ByteSpan *name = in->names[i];
  *a = (dlx_attr){name->ptr, name->len, DLX_ATTR_OTHER, NULL, 0};
  void *v = in->attrs[i];
  switch (in->types[i]) {
    case XLA_FFI_AttrType_SCALAR: {
      XLA_FFI_Scalar *s = v;
      a->type = s->dtype == XLA_FFI_DataType_S64 ? DLX_ATTR_I64
                : s->dtype == XLA_FFI_DataType_F64 ? DLX_ATTR_F64 : DLX_ATTR_OTHER;
      a->data = s->value;
      a->len = 1;
      break;
    }
    case XLA_FFI_AttrType_ARRAY: {
      XLA_FFI_Array *r = v;
      a->type = r->dtype == XLA_FFI_DataType_S64 ? DLX_ATTR_I64S
                : r->dtype == XLA_FFI_DataType_F64 ? DLX_ATTR_F64S : DLX_ATTR_OTHER;
      a->data = r->data;
      a->len = (int64_t)r->size;
      break;
    }
    case XLA_FFI_AttrType_STRING: {
      XLA_FFI_ByteSpan *s = v;
      a->type = DLX_ATTR_STR;
      a->data = s->ptr;
      a->len = (int64_t)s->len;
      break;
    }
    default:
      break;
  }
}

static XLA_FFI_Error *run_error(const XLA_FFI_Api *x, const dlx_invoke *inv, char *msg,
                               size_t len) {
  snprintf(msg, len, "%s: %s", inv->error_kind, inv->error);
  int user = !strcmp(inv->error_kind, "TypeError") || !strcmp(inv->error_kind, "ValueError");
  return fail(x, user ? XLA_FFI_Error_Code_INVALID_ARGUMENT : XLA_FFI_Error_Code_UNKNOWN, msg);
}

/* A proved call site: its buffers (same dtypes and shapes as proved, compared) to
 * DLTensors, the arguments from the instance, the kernel run without the checks. */
static inline int fill(DLTensor *t, const XLA_FFI_Buffer *b, const struct proved *p,
                       DLDevice dev) {
  if (b->dtype != p->xdtype || b->rank != p->rank) return -1;
  for (int32_t d = 0; d < p->rank; ++d)
    if (b->dims[d] != p->dims[d]) return -1;
  t->data = b->data;
  t->device = dev;
  t->ndim = p->rank;
  t->dtype = p->dtype;
  t->shape = b->dims;
  t->strides = (int64_t *)p->strides;
  t->byte_offset = 0;
  return 0;
}

static XLA_FFI_Error *run_proved(XLA_FFI_CallFrame *cf, const instance *in, DLDevice dev,
                                 void *stream) {
  const XLA_FFI_Api *x = cf->api;
  const int32_t na = in->nargs, nr = in->nrets;
  DLTensor t[MAX_BUFFERS], *outs[MAX_BUFFERS]; /* outs: the first nres are the results */
  dlx_arg args[64];
  if (cf->args.size != na || cf->rets.size != nr) goto changed;
  /* each buffer compared with its proof, described, and made its parameter's argument in
   * the same pass (the results' buffers are the first rets, the mut ones the rest); the
   * argument's block is written out in both loops: as one inline helper it cost 13 Ir a
   * call (docs/design.md, "Cost (issue 33)") */
  for (int32_t i = 0; i < na; ++i) {
    if (cf->args.types[i] != XLA_FFI_ArgType_BUFFER ||
        fill(&t[i], cf->args.args[i], &in->buf[i], dev))
      goto changed;
    const int p = in->param_of[i];
    if (p >= 0) {
      args[p].kind = DLX_ARG_TENSOR;
      args[p].readonly = in->args[p].readonly;
      args[p].value.tensor = &t[i];
    }
  }
  for (int32_t i = 0; i < nr; ++i) {
    if (cf->rets.types[i] != XLA_FFI_RetType_BUFFER ||
        fill(&t[na + i], cf->rets.rets[i], &in->buf[na + i], dev))
      goto changed;
    outs[i] = &t[na + i];
    const int p = in->param_of[na + i];
    if (p >= 0) {
      args[p].kind = DLX_ARG_TENSOR;
      args[p].readonly = in->args[p].readonly;
      args[p].value.tensor = &t[na + i];
    }
  }
  for (int32_t k = 0; k < in->nuntensored; ++k) { /* scalars and Nones as bound */
    const int p = in->untensored[k];
    args[p] = in->args[p];
  }
  dlx_invoke inv; /* field by field: an initializer would zero the 1 KB message */
  inv.fn = in->e->h.fn;
  inv.plan = in->e->h.plan;
  inv.name = in->e->name;
  inv.args = args;
  inv.nargs = in->nparams;
  inv.device = dev;
  inv.stream = stream;
  inv.out = outs;
  inv.nout = in->nres;
  inv.allocate = NULL;
  inv.allocate_ctx = NULL;
  if (api->run_checked(&inv, &in->proof)) {
    char msg[1200];
    return run_error(x, &inv, msg, sizeof msg);
  }
  return NULL;
changed: /* XLA's shapes are static per call site: this is not reached */
  return fail(x, XLA_FFI_Error_Code_INTERNAL, "dlx: a call site's buffers differ from its first "
              "run's");
}

/* Keep what this call proved in its instance (the caller won `ready` 0 -> 1); -1 when its
 * sequences do not fit or a buffer is not one parameter's (the call site then takes the
 * full path every time). */
static int prove(instance *in, const entry *e, const XLA_FFI_CallFrame *cf, const DLTensor *t,
                  int32_t nres, int32_t nmut) {
  in->e = e;
  in->nargs = (int32_t)cf->args.size;
  in->nrets = (int32_t)cf->rets.size;
  in->nres = nres;
  in->nmut = nmut;
  in->nparams = api->nparams(e->h.plan);
  size_t nseq = 0;
  for (int32_t i = 0; i < in->nparams; ++i) {
    dlx_arg *a = &in->args[i];
    if (a->kind != DLX_ARG_INTS && a->kind != DLX_ARG_FLOATS) continue;
    dlx_arg_seq *q = (dlx_arg_seq *)a->value.seq; /* one of in->store.seqs */
    if ((size_t)q->len > sizeof in->seq / sizeof in->seq[0] - nseq) return -1;
    memcpy(in->seq + nseq, q->data, sizeof(int64_t) * (size_t)q->len);
    q->data = in->seq + nseq;
    nseq += (size_t)q->len;
  }
  memset(in->param_of, -1, sizeof in->param_of);
  in->nuntensored = 0;
  for (int32_t i = 0; i < in->nparams; ++i) {
    if (in->args[i].kind == DLX_ARG_TENSOR) {
      /* one parameter per buffer, as bound: anything else is never proved (every argument
       * of a proved call is set from exactly one buffer or the instance) */
      int32_t b = 0; /* found by address: a pointer outside t has no difference with it */
      while (b < in->nargs + in->nrets && &t[b] != in->args[i].value.tensor) ++b;
      if (b == in->nargs + in->nrets || in->param_of[b] >= 0) return -1;
      in->param_of[b] = (int8_t)i;
      in->args[i].value.tensor = NULL; /* set per call */
    } else {
      in->untensored[in->nuntensored++] = (int8_t)i;
    }
  }
  int32_t used = 0;
  for (int32_t i = 0; i < in->nargs + in->nrets; ++i) {
    const XLA_FFI_Buffer *b = i < in->nargs ? cf->args.args[i] : cf->rets.rets[i - in->nargs];
    in->buf[i] = (struct proved){b->dtype, t[i].ndim, t[i].dtype, in->dims + used,
                                 in->strides + used};
    memcpy(in->dims + used, t[i].shape, sizeof(int64_t) * (size_t)t[i].ndim);
    memcpy(in->strides + used, t[i].strides, sizeof(int64_t) * (size_t)t[i].ndim);
    used += t[i].ndim;
  }
  return 0;
}

/* The output bound to a `mut` parameter must be its input's buffer (ffi_call's
 * input_output_aliases): the kernel reads and writes it in place. Another buffer would hold
 * nothing the kernel can read and come back uninitialised where it writes nothing: -1 with
 * the message naming the kernel and the parameter. A zero-size buffer has no data to
 * share (its address means nothing); its type and shape are still compared. Checked on
 * the full path: a call site's buffer assignment is fixed once compiled. */
static int mut_not_aliased(const entry *e, const dlx_arg *args, int32_t nparams, const DLTensor *t,
                           int64_t nargs, int32_t nres, int32_t nmut, char *msg, size_t len) {
  const DLTensor *mut_outs = t + nargs + nres, *mut_ins = t + nargs - nmut;
  for (int32_t i = 0; i < nparams; ++i) {
    if (args[i].kind != DLX_ARG_TENSOR) continue;
    ptrdiff_t j = args[i].value.tensor - mut_outs;
    if (j < 0 || j >= nmut) continue;
    const DLTensor *in = &mut_ins[j], *out = &mut_outs[j];
    int same = in->ndim == out->ndim && in->dtype.code == out->dtype.code &&
               in->dtype.bits == out->dtype.bits;
    int empty = 0;
    for (int32_t d = 0; same && d < in->ndim; ++d) {
      same = in->shape[d] == out->shape[d];
      empty |= in->shape[d] == 0;
    }
    if (same && (empty || in->data == out->data)) continue;
    snprintf(msg, len, "%s(): '%s' is mut: output %lld must be input %lld's buffer (ffi_call's "
             "input_output_aliases={%lld: %lld}), not %s", e->name,
             api->param_name(e->h.plan, i), (long long)(nres + j),
             (long long)(nargs - nmut + j), (long long)(nargs - nmut + j),
             (long long)(nres + j), same ? "another buffer" : "one of another type or shape");
    return -1;
  }
  return 0;
}

static XLA_FFI_Error *handle(XLA_FFI_CallFrame *cf, DLDeviceType device_type) {
  if (cf->extension_start && cf->extension_start->type == XLA_FFI_Extension_Metadata)
    return metadata(cf);
  const XLA_FFI_Api *x = cf->api;
  if (cf->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;
  if (!api) return fail(x, XLA_FFI_Error_Code_FAILED_PRECONDITION, "dlx: handler not initialised");

  DLDevice dev = {device_type, 0};
  void *stream = NULL;
  if (device_type != kDLCPU) {
    XLA_FFI_Stream_Get_Args sa = {XLA_FFI_Stream_Get_Args_STRUCT_SIZE, NULL, cf->ctx, NULL};
    XLA_FFI_Error *err = x->XLA_FFI_Stream_Get(&sa);
    if (err) return err;
    stream = sa.stream;
    /* an older XLA's API may end before DeviceOrdinal_Get: device 0 then */
    if (x->struct_size >= offsetof(XLA_FFI_Api, XLA_FFI_DeviceOrdinal_Get) + sizeof(void *)) {
      XLA_FFI_DeviceOrdinal_Get_Args oa = {XLA_FFI_DeviceOrdinal_Get_Args_STRUCT_SIZE, NULL,
                                           cf->ctx, 0};
      if ((err = x->XLA_FFI_DeviceOrdinal_Get(&oa))) return err;
      dev.device_id = oa.device_ordinal;
    }
  }

  /* A call site's attributes and shapes are static: its first successful run proves them
   * (the kernel, binding, the plan's checks) and later runs reuse the proof. */
  instance *inst = instance_of(cf);
  if (inst && atomic_load_explicit(&inst->ready, memory_order_acquire) == 2)
    return run_proved(cf, inst, dev, stream);
  int expected = 0;
  int proving = inst && atomic_compare_exchange_strong(&inst->ready, &expected, 1);

  char msg[1200];
  int64_t na = cf->attrs.size, nargs = cf->args.size, nrets = cf->rets.size;
  if (na < 0 || na > MAX_ATTRS || nargs < 0 || nrets < 0 || nargs + nrets > MAX_BUFFERS) {
    if (proving) atomic_store_explicit(&inst->ready, 0, memory_order_release);
    return fail(x, XLA_FFI_Error_Code_INVALID_ARGUMENT, "dlx: too many attributes or buffers");
  }
  dlx_attr attrs[MAX_ATTRS];
  for (int64_t i = 0; i < na; ++i) to_attr(&cf->attrs, i, &attrs[i]);

  /* which kernel: by its library's digest, its name and its declaration (looked up once
   * per call site: the proved path does not come here) */
  const entry *e = NULL;
  XLA_FFI_Error *ret = NULL;
  dlx_kernel_ref ref;
  if (dlx_kernel_ref_decode(attrs, (int32_t)na, &ref, msg, sizeof msg)) {
    ret = fail(x, XLA_FFI_Error_Code_INVALID_ARGUMENT, msg);
    goto out;
  }
  int64_t k = dlx_kernel_ref_find(&ref, keys, atomic_load_explicit(&registered,
                                  memory_order_acquire), msg, sizeof msg);
  dlx_finder find = atomic_load_explicit(&finder, memory_order_acquire);
  if (k == DLX_REF_NOT_LOADED && find) { /* loaded here but not registered, or cached */
    char digest[65];
    memcpy(digest, ref.digest, 64);
    digest[64] = 0;
    if (find(digest) == 1)
      k = dlx_kernel_ref_find(&ref, keys, atomic_load_explicit(&registered,
                              memory_order_acquire), msg, sizeof msg);
  }
  if (k < 0) {
    ret = fail(x, k == DLX_REF_NOT_LOADED ? XLA_FFI_Error_Code_NOT_FOUND
                                          : XLA_FFI_Error_Code_INVALID_ARGUMENT, msg);
    goto out;
  }
  e = &registry[k];

  /* inputs: the kernel's non-mut tensors, then the mut ones (XLA copies or aliases them to
   * the outputs after the declared results, which the kernel writes instead) */
  int32_t nres = api->nresults(e->h.plan), nmut = (int32_t)nrets - nres;
  if (nmut < 0 || nmut > nargs) {
    snprintf(msg, sizeof msg, "%s(): the call has %lld output(s), fewer than the %d result(s) "
             "declared", e->name, (long long)nrets, (int)nres);
    ret = fail(x, XLA_FFI_Error_Code_INVALID_ARGUMENT, msg);
    goto out;
  }
  DLTensor t[MAX_BUFFERS], *ins[MAX_BUFFERS], *outs[MAX_BUFFERS];
  int64_t pool[MAX_DIMS];
  int32_t used = 0;
  for (int64_t i = 0; i < nargs; ++i) {
    if (as_tensor(cf->args.args[i], cf->args.types[i] == XLA_FFI_ArgType_BUFFER, dev, &t[i],
                  pool, &used))
      goto bad_buffer;
    ins[i] = &t[i];
  }
  for (int64_t i = 0; i < nrets; ++i) {
    if (as_tensor(cf->rets.rets[i], cf->rets.types[i] == XLA_FFI_RetType_BUFFER, dev,
                  &t[nargs + i], pool, &used))
      goto bad_buffer;
    outs[i] = &t[nargs + i];
  }

  dlx_arg local_args[64], *args = proving ? inst->args : local_args;
  dlx_bind_store local_store, *store = proving ? &inst->store : &local_store;
  if (api->nparams(e->h.plan) > 64) {
    ret = fail(x, XLA_FFI_Error_Code_INTERNAL, "dlx: too many parameters");
    goto out;
  }
  char why[256];
  if (api->bind(e->h.plan, attrs, (int32_t)na, ins, (int32_t)(nargs - nmut), outs + nres, nmut,
                args, store, why, sizeof why)) {
    snprintf(msg, sizeof msg, "%s(): %s", e->name, why);
    ret = fail(x, XLA_FFI_Error_Code_INVALID_ARGUMENT, msg);
    goto out;
  }
  if (mut_not_aliased(e, args, api->nparams(e->h.plan), t, nargs, nres, nmut, msg, sizeof msg)) {
    ret = fail(x, XLA_FFI_Error_Code_INVALID_ARGUMENT, msg);
    goto out;
  }
  dlx_invoke inv; /* field by field: an initializer would zero the 1 KB message */
  inv.fn = e->h.fn;
  inv.plan = e->h.plan;
  inv.name = e->name;
  inv.args = args;
  inv.nargs = api->nparams(e->h.plan);
  inv.device = dev;
  inv.stream = stream;
  inv.out = outs;
  inv.nout = nres;
  inv.allocate = NULL;
  inv.allocate_ctx = NULL;
  if (proving) { /* check once, keep the proof, then run without the checks */
    if (api->check(&inv, &inst->proof)) {
      ret = run_error(x, &inv, msg, sizeof msg);
      goto out;
    }
    dlx_arg now[64]; /* the instance's copy loses its tensors: run with this call's */
    memcpy(now, args, sizeof now[0] * (size_t)inv.nargs);
    /* 3: never proved (sequences too long, or a buffer not one parameter's), the full
     * path each time */
    atomic_store_explicit(&inst->ready, prove(inst, e, cf, t, nres, nmut) ? 3 : 2,
                          memory_order_release);
    proving = 0;
    inv.args = now;
    if (api->run_checked(&inv, &inst->proof)) ret = run_error(x, &inv, msg, sizeof msg);
    return ret;
  }
  if (api->run(&inv)) ret = run_error(x, &inv, msg, sizeof msg);
  goto out;
bad_buffer:
  snprintf(msg, sizeof msg, "%s(): a buffer dlx cannot describe (not an array, rank > 32 or "
           "a dtype DLPack lacks)", e->name);
  ret = fail(x, XLA_FFI_Error_Code_INVALID_ARGUMENT, msg);
out:
  if (proving) atomic_store_explicit(&inst->ready, 0, memory_order_release);
  return ret;
}

DLX_EXPORT XLA_FFI_Error *dlx_xla_instantiate(XLA_FFI_CallFrame *cf) { return instantiate(cf); }
DLX_EXPORT XLA_FFI_Error *dlx_xla_handler_cpu(XLA_FFI_CallFrame *cf) { return handle(cf, kDLCPU); }
DLX_EXPORT XLA_FFI_Error *dlx_xla_handler_cuda(XLA_FFI_CallFrame *cf) { return handle(cf, kDLCUDA); }
DLX_EXPORT XLA_FFI_Error *dlx_xla_handler_rocm(XLA_FFI_CallFrame *cf) { return handle(cf, kDLROCM); }
