/* libFuzzer target: schema and result rules derived from a kernel's declaration
 * (src/core/dlx_derive.c), whose text comes from a kernel library. An accepted signature
 * must derive or refuse with a reason, every derived position must name a tensor parameter
 * and a dimension it declares, and the schema must fit the buffer it reports. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dlx_derive.h"

static void check_pos(const dlx_sig *s, dlx_derive_pos p) {
  if (p.param < 0 || p.param >= s->nparams) abort();
  const dlx_sig_type *t = &s->params[p.param].type;
  if (t->kind != DLX_SIG_TENSOR || t->ndims < 0 || p.dim < 0 || p.dim >= t->ndims) abort();
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
  }
  dlx_sig_free(s);
  return 0;
}
