/* libFuzzer target: a compiled call's attributes to a kernel's arguments
 * (dlx_invoke_bind, src/core/calls/dlx_invoke.c). The attributes come from a traced program
 * (an XLA FFI call frame): a signature, then attributes of any type, length and name, and
 * counts of inputs and aliased outputs. Binding either fails with a reason or fills every
 * parameter with an argument of its declared kind. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dlx_invoke.h"
#include "dlx_sig.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* "signature\0" then per attribute: type byte, name length byte, name, length byte, data */
  const uint8_t *nul = memchr(data, 0, size);
  if (!nul || (size_t)(nul - data) > DLX_SIG_MAX_LEN) return 0;
  char err[256];
  int32_t column;
  dlx_sig *s = dlx_sig_parse((const char *)data, err, sizeof err, &column);
  if (!s) return 0;
  fuzz_in in = {nul + 1, size - (size_t)(nul + 1 - data)};
  int32_t nins = fuzz_byte(&in) % 8, nmuts = fuzz_byte(&in) % 8;
  static uint8_t bytes[8][256] __attribute__((aligned(8)));
  dlx_attr attrs[8];
  int32_t nattrs = 0;
  while (in.n && nattrs < 8) {
    dlx_attr *a = &attrs[nattrs];
    a->type = fuzz_byte(&in) % 7;
    size_t nl = fuzz_byte(&in) % 16;
    if (nl > in.n) nl = in.n;
    a->name = (const char *)in.p;
    a->name_len = nl;
    in.p += nl;
    in.n -= nl;
    size_t len = fuzz_byte(&in);
    size_t unit = a->type == DLX_ATTR_STR || a->type == DLX_ATTR_OTHER ? 1 : 8;
    if (len * unit > sizeof bytes[0]) len = sizeof bytes[0] / unit;
    size_t take = len * unit < in.n ? len * unit : in.n;
    memset(bytes[nattrs], 0, sizeof bytes[0]);
    memcpy(bytes[nattrs], in.p, take);
    in.p += take;
    in.n -= take;
    a->data = bytes[nattrs];
    a->len = (int64_t)len;
    ++nattrs;
  }
  float store_f[8];
  int64_t one = 1;
  DLTensor t[16], *ins[8], *muts[8];
  for (int k = 0; k < 16; ++k)
    t[k] = (DLTensor){store_f, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &one, NULL, 0};
  for (int k = 0; k < 8; ++k) ins[k] = &t[k], muts[k] = &t[8 + k];
  dlx_arg args[DLX_SIG_MAX_PARAMS];
  static dlx_bind_store st;
  if (dlx_invoke_bind(s, attrs, nattrs, ins, nins, muts, nmuts, args, &st, err, sizeof err) == 0) {
    for (int32_t i = 0; i < s->nparams; ++i) {
      int k = args[i].kind;
      FUZZ_CHECK(k >= DLX_ARG_NONE && k <= DLX_ARG_FLOATS);
      if (k == DLX_ARG_NONE) FUZZ_CHECK(s->params[i].type.optional);
      if (k == DLX_ARG_TENSOR) FUZZ_CHECK(s->params[i].type.kind == DLX_SIG_TENSOR);
      if (k == DLX_ARG_STR) FUZZ_CHECK(strlen(args[i].value.seq->data) == (size_t)args[i].value.seq->len);
    }
  } else {
    FUZZ_CHECK(strlen(err) > 0);
  }
  dlx_sig_free(s);
  return 0;
}
