/*
 * dlx_xla_handler.c - dlx's one XLA FFI handler: every declared kernel staged by jax.jit
 * runs through it (python/dlx/jax.py builds this file at first use, against jaxlib's
 * xla/ffi/api/c_api.h, into dlx's cache).
 *
 * Per call: the attributes to dlx_attr, the kernel from the registry (attribute dlx_id, an
 * index, checked against the registered name in dlx_name: a traced program can only pick
 * a kernel dlx registered, never an address), the buffers to DLTensors (row-major, the
 * layout ffi_call asks for), the arguments bound by dlx_invoke_bind, the kernel run by
 * dlx_invoke_run on XLA's stream, a kernel error returned as an XLA FFI error with the
 * kernel's message. No allocation, no Python.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "xla/ffi/api/c_api.h"

#include "dlx/dlx.h"
#include "dlx_invoke.h"

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
static atomic_int registered; /* entries below it are complete (release/acquire) */

/* Called once by dlx.jax with _core's invoke API; -1 for an older or unknown one. */
DLX_EXPORT int dlx_xla_init(const dlx_invoke_api *a) {
  if (!a || a->version != DLX_INVOKE_API_VERSION || a->size < sizeof(dlx_invoke_api)) return -1;
  api = a;
  return 0;
}

/* A kernel's id (its registry index), or -1 when full or its name is too long. Called by
 * dlx.jax under its lock; the handle's capsule is kept alive by dlx.jax for good. */
DLX_EXPORT int dlx_xla_register(const dlx_kernel_handle *h) {
  int n = atomic_load_explicit(&registered, memory_order_relaxed);
  if (!h || !h->fn || !h->name || n >= MAX_KERNELS || strlen(h->name) >= sizeof registry[0].name)
    return -1;
  registry[n].h = *h;
  registry[n].len = strlen(h->name);
  memcpy(registry[n].name, h->name, registry[n].len + 1);
  atomic_store_explicit(&registered, n + 1, memory_order_release);
  return n;
}

static XLA_FFI_Error *fail(const XLA_FFI_Api *x, XLA_FFI_Error_Code code, const char *msg) {
  XLA_FFI_Error_Create_Args a = {XLA_FFI_Error_Create_Args_STRUCT_SIZE, NULL, msg, code};
  return x->XLA_FFI_Error_Create(&a);
}

static XLA_FFI_Error *metadata(XLA_FFI_CallFrame *cf) {
  XLA_FFI_Metadata_Extension *m = (XLA_FFI_Metadata_Extension *)cf->extension_start;
  if (m->extension_base.struct_size < XLA_FFI_Metadata_Extension_STRUCT_SIZE ||
      m->metadata->struct_size < XLA_FFI_Metadata_STRUCT_SIZE)
    return fail(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "dlx: XLA's metadata is too old");
  m->metadata->api_version = (XLA_FFI_Api_Version){XLA_FFI_Api_Version_STRUCT_SIZE, NULL,
                                                   XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR};
  m->metadata->traits = 0;
  return NULL;
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

static XLA_FFI_Error *handle(XLA_FFI_CallFrame *cf, DLDeviceType device_type) {
  if (cf->extension_start && cf->extension_start->type == XLA_FFI_Extension_Metadata)
    return metadata(cf);
  const XLA_FFI_Api *x = cf->api;
  if (cf->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;
  char msg[1200];
  if (!api) return fail(x, XLA_FFI_Error_Code_FAILED_PRECONDITION, "dlx: handler not initialised");
  int64_t na = cf->attrs.size, nargs = cf->args.size, nrets = cf->rets.size;
  if (na < 0 || na > MAX_ATTRS || nargs < 0 || nrets < 0 || nargs + nrets > MAX_BUFFERS)
    return fail(x, XLA_FFI_Error_Code_INVALID_ARGUMENT, "dlx: too many attributes or buffers");
  dlx_attr attrs[MAX_ATTRS];
  const dlx_attr *id = NULL, *nm = NULL; /* found in the same pass */
  for (int64_t i = 0; i < na; ++i) {
    dlx_attr *a = &attrs[i];
    to_attr(&cf->attrs, i, a);
    if (a->name_len == 6 && memcmp(a->name, "dlx_id", 6) == 0) id = a;
    else if (a->name_len == 8 && memcmp(a->name, "dlx_name", 8) == 0) nm = a;
  }

  /* which kernel: an index into what dlx registered, and its name must agree */
  int64_t k = -1;
  if (id && id->type == DLX_ATTR_I64) memcpy(&k, id->data, sizeof k);
  int n = atomic_load_explicit(&registered, memory_order_acquire);
  if (k < 0 || k >= n || !nm || nm->type != DLX_ATTR_STR || (size_t)nm->len != registry[k].len ||
      memcmp(nm->data, registry[k].name, (size_t)nm->len) != 0) {
    snprintf(msg, sizeof msg, "dlx: the call's dlx_id/dlx_name attributes name no kernel dlx "
             "registered in this process (id %lld)", (long long)k);
    return fail(x, XLA_FFI_Error_Code_INVALID_ARGUMENT, msg);
  }
  const entry *e = &registry[k];

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

  /* inputs: the kernel's non-mut tensors, then the mut ones (XLA copies or aliases them to
   * the outputs after the declared results, which the kernel writes instead) */
  int32_t nres = api->nresults(e->h.plan), nmut = (int32_t)nrets - nres;
  if (nmut < 0 || nmut > nargs) {
    snprintf(msg, sizeof msg, "%s(): the call has %lld output(s), fewer than the %d result(s) "
             "declared", e->name, (long long)nrets, (int)nres);
    return fail(x, XLA_FFI_Error_Code_INVALID_ARGUMENT, msg);
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

  dlx_arg args[64];
  dlx_bind_store store;
  if (api->nparams(e->h.plan) > 64) return fail(x, XLA_FFI_Error_Code_INTERNAL, "dlx: too many parameters");
  char why[256];
  if (api->bind(e->h.plan, attrs, (int32_t)na, ins, (int32_t)(nargs - nmut), outs + nres, nmut,
                args, &store, why, sizeof why)) {
    snprintf(msg, sizeof msg, "%s(): %s", e->name, why);
    return fail(x, XLA_FFI_Error_Code_INVALID_ARGUMENT, msg);
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
  if (api->run(&inv)) {
    snprintf(msg, sizeof msg, "%s: %s", inv.error_kind, inv.error);
    int user = !strcmp(inv.error_kind, "TypeError") || !strcmp(inv.error_kind, "ValueError");
    return fail(x, user ? XLA_FFI_Error_Code_INVALID_ARGUMENT : XLA_FFI_Error_Code_UNKNOWN, msg);
  }
  return NULL;
bad_buffer:
  snprintf(msg, sizeof msg, "%s(): a buffer dlx cannot describe (not an array, rank > 32 or "
           "a dtype DLPack lacks)", e->name);
  return fail(x, XLA_FFI_Error_Code_INVALID_ARGUMENT, msg);
}

DLX_EXPORT XLA_FFI_Error *dlx_xla_handler_cpu(XLA_FFI_CallFrame *cf) { return handle(cf, kDLCPU); }
DLX_EXPORT XLA_FFI_Error *dlx_xla_handler_cuda(XLA_FFI_CallFrame *cf) { return handle(cf, kDLCUDA); }
DLX_EXPORT XLA_FFI_Error *dlx_xla_handler_rocm(XLA_FFI_CallFrame *cf) { return handle(cf, kDLROCM); }
