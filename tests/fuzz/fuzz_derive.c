/* libFuzzer target: schema and result rules derived from a kernel's declaration
 * (src/core/signatures/dlx_derive.c), whose text comes from a kernel library. An accepted signature
 * must derive or refuse with a reason, every derived position must name a tensor parameter
 * and a dimension it declares, and the schema must fit the buffer it reports. The real
 * results' check must agree with the derivation: given arguments that pass their check, a
 * result made by the derived rules passes, one with a derived extent changed fails, and
 * each fault's message fits its buffer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dlx_derive.h"

static void check_pos(const dlx_sig *s, dlx_derive_pos p) {
  if (p.param < 0 || p.param >= s->nparams) abort();
  const dlx_sig_type *t = &s->params[p.param].type;
  if (t->kind != DLX_SIG_TENSOR || t->ndims < 0 || p.dim < 0 || p.dim >= t->ndims) abort();
}


/* A dtype of the set `dtypes` (f32 for "tensor"), or -1 when the grammar names none of it. */
static int pick_dtype(uint32_t dtypes, DLDataType *out) {
  static const DLDataType all[] = {{kDLFloat, 32, 1}, {kDLFloat, 16, 1}, {kDLBfloat, 16, 1},
                                   {kDLFloat, 64, 1}, {kDLInt, 8, 1},    {kDLInt, 16, 1},
                                   {kDLInt, 32, 1},   {kDLInt, 64, 1},   {kDLUInt, 8, 1},
                                   {kDLUInt, 16, 1},  {kDLUInt, 32, 1},  {kDLUInt, 64, 1},
                                   {kDLBool, 8, 1},   {kDLComplex, 64, 1}, {kDLComplex, 128, 1}};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
    if (dtypes & dlx_sig_dtype_bit(all[i])) return *out = all[i], 0;
  return -1;
}

#define EXT 40 /* dims per tensor here: the grammar's 32, and one "..." dim */

/* Every tensor parameter given a CPU tensor that passes its check (symbols 2, fixed extents
 * as declared, one "..." dim of 3); results made as the derivation says must pass, with
 * one derived extent changed must fail. */
static void check_results(const dlx_sig *s, const dlx_derived *d) {
  static int64_t shapes[DLX_SIG_MAX_PARAMS][EXT], rshape[DLX_SIG_MAX_RESULTS][EXT];
  static DLTensor ts[DLX_SIG_MAX_PARAMS];
  dlx_arg args[DLX_SIG_MAX_PARAMS];
  dlx_sig_bindings b;
  dlx_sig_bindings_init(&b, s);
  for (int32_t i = 0; i < s->nparams; ++i) {
    const dlx_sig_type *t = &s->params[i].type;
    args[i].kind = DLX_ARG_NONE;
    args[i].readonly = 0;
    args[i].value.tensor = NULL;
    if (t->kind != DLX_SIG_TENSOR) continue; /* the check reads only tensors */
    DLTensor *x = &ts[i];
    memset(x, 0, sizeof *x);
    x->device = (DLDevice){kDLCPU, 0};
    x->shape = shapes[i];
    if (pick_dtype(t->dtypes, &x->dtype)) return;
    if (t->ndims >= 0) {
      for (int32_t k = 0; k < t->ndims; ++k) {
        const dlx_sig_dim *dm = &s->dims[t->dim0 + k];
        shapes[i][x->ndim++] = dm->kind == DLX_DIM_FIXED ? dm->extent
                               : dm->kind == DLX_DIM_ELLIPSIS ? 3 : 2;
      }
    }
    args[i].kind = DLX_ARG_TENSOR;
    args[i].value.tensor = x;
    dlx_sig_fault f;
    if (dlx_sig_check_tensor(s, i, x, 0, &b, &f)) return; /* e.g. a device flag */
  }
  DLTensor rs[DLX_SIG_MAX_RESULTS];
  int64_t fresh[DLX_SIG_MAX_SYMBOLS];
  for (int32_t k = 0; k < DLX_SIG_MAX_SYMBOLS; ++k) fresh[k] = -1;
  for (int32_t r = 0; r < d->nresults; ++r) {
    const dlx_derived_result *res = &d->results[r];
    DLTensor *t = &rs[r];
    memset(t, 0, sizeof *t);
    t->device = (DLDevice){kDLCPU, 0};
    t->shape = rshape[r];
    t->dtype = res->dtype_param >= 0 ? ts[res->dtype_param].dtype : res->dtype;
    for (int32_t k = 0; k < res->ndims; ++k) {
      const dlx_derived_dim *x = &d->dims[res->dim0 + k];
      int64_t n = x->kind == DLX_DERIVE_FIXED ? x->extent : x->kind == DLX_DERIVE_BATCH ? 3 : 2;
      if (x->kind == DLX_DERIVE_FRESH) {
        n = 5 + r; /* any: a data-dependent size, the same wherever its symbol is */
        if (x->sym >= 0) {
          if (b.value[x->sym] >= 0) n = b.value[x->sym];
          else if (fresh[x->sym] >= 0) n = fresh[x->sym];
          else fresh[x->sym] = n;
        }
      }
      rshape[r][t->ndim++] = n;
    }
  }
  dlx_sig_bindings keep = b;
  char msg[1024], tiny[24];
  for (int32_t r = 0; r < d->nresults; ++r) {
    dlx_sig_fault f;
    if (s->results[r].flags & DLX_SIG_DEVICES) return; /* may not be the CPU */
    if (dlx_derive_check_result(s, r, &rs[r], args, (DLDevice){kDLCPU, 0}, &b, &f)) abort();
  }
  /* each derived fixed or parameter-bound extent changed: refused, and said */
  for (int32_t r = 0; r < d->nresults; ++r) {
    const dlx_derived_result *res = &d->results[r];
    for (int32_t k = 0; k < res->ndims; ++k) {
      const dlx_derived_dim *x = &d->dims[res->dim0 + k];
      if (x->kind != DLX_DERIVE_FIXED && x->kind != DLX_DERIVE_DIM) continue;
      if (rshape[r][k] == INT64_MAX) continue;
      b = keep;
      dlx_sig_fault f;
      int ok = 1;
      for (int32_t q = 0; q < r && ok; ++q) /* the earlier results bind what they bind */
        ok = dlx_derive_check_result(s, q, &rs[q], args, (DLDevice){kDLCPU, 0}, &b, &f) == 0;
      if (!ok) abort();
      rshape[r][k] += 1;
      if (dlx_derive_check_result(s, r, &rs[r], args, (DLDevice){kDLCPU, 0}, &b, &f) == 0)
        abort();
      dlx_derive_result_message(s, r, &rs[r], NULL, args, (DLDevice){kDLCPU, 0}, &b, &f, msg,
                                sizeof msg);
      dlx_derive_result_message(s, r, &rs[r], NULL, args, (DLDevice){kDLCPU, 0}, &b, &f, tiny,
                                sizeof tiny);
      if (strlen(msg) >= sizeof msg || strlen(tiny) >= sizeof tiny ||
          strncmp(msg, "result ", 7) != 0)
        abort();
      rshape[r][k] -= 1;
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > DLX_SIG_MAX_LEN + 16) return 0;
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = 0;
  char err[256];
  int32_t column = 0;
  dlx_sig *s = dlx_sig_parse(text, err, sizeof err, &column);
  free(text);
  if (!s) return 0;
  static char buf[3 * DLX_SIG_MAX_LEN];
  char why[256];
  why[0] = 0;
  if (dlx_derive_schema(s, "k", buf, sizeof buf, why, sizeof why)) {
    if (!why[0]) abort();
  } else if (strlen(buf) >= sizeof buf || strncmp(buf, "k(", 2) != 0) {
    abort();
  }
  static dlx_derived d;
  why[0] = 0;
  if (dlx_derive_results(s, &d, why, sizeof why)) {
    if (!why[0]) abort();
  } else {
    if (d.nresults != s->nresults || d.ndims > DLX_DERIVE_MAX_DIMS || d.neqs > DLX_DERIVE_MAX_EQS)
      abort();
    for (int32_t r = 0; r < d.nresults; ++r) {
      const dlx_derived_result *res = &d.results[r];
      if (res->dtype_param >= s->nparams) abort();
      for (int32_t k = 0; k < res->ndims; ++k) {
        const dlx_derived_dim *x = &d.dims[res->dim0 + k];
        if (x->kind == DLX_DERIVE_DIM) check_pos(s, x->at);
        if (x->kind == DLX_DERIVE_BATCH && s->params[x->at.param].type.ellipsis < 0) abort();
        if (x->sym >= s->nsymbols) abort();
      }
    }
    for (int32_t e = 0; e < d.neqs; ++e) check_pos(s, d.eqs[e].first), check_pos(s, d.eqs[e].other);
    check_results(s, &d);
  }
  /* The sharding rule: only marked symbols, every label in range, and what may be split is
   * in every output (the parser's promise; "..." by the rule's own definition). */
  dlx_shard_rule rule;
  dlx_derive_shard(s, &rule);
  if (rule.independent != s->independent || (s->nsymbols < 32 && rule.independent >> s->nsymbols))
    abort();
  for (int32_t r = 0; r < s->nresults; ++r) {
    const dlx_sig_type *t = &s->results[r];
    uint32_t seen = 0;
    int batch = 0;
    for (int32_t k = 0; k < (t->kind == DLX_SIG_TENSOR ? t->ndims : 0); ++k) {
      int32_t l = dlx_derive_shard_label(s, t, k);
      if (l >= s->nsymbols || l < DLX_SHARD_BATCH) abort();
      if (l >= 0) seen |= 1u << l;
      batch |= l == DLX_SHARD_BATCH;
    }
    if ((rule.independent & ~seen) || (rule.batch && !batch)) abort();
  }
  dlx_sig_free(s);
  return 0;
}
