/* libFuzzer target: kernel signatures (src/core/signatures/dlx_sig.c), text from a kernel library.
 * Any input must parse or fail with a column inside the text; an accepted signature's
 * text (its str defaults) and canonical text must be strict UTF-8, as Python decodes them;
 * the canonical text must parse again to the same canonical text, and the per-call check
 * must run on it without fault. Picked up by the tests/fuzz harness (issue 7). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dlx_sig.h"

/* Strict UTF-8 (Python's decoder): decoded code point by code point, so it is checked
 * another way than the parser does it. */
static int valid_utf8(const unsigned char *p) {
  while (*p) {
    uint32_t c = *p, min;
    int more;
    if (c < 0x80) more = 0, min = 0;
    else if ((c & 0xe0) == 0xc0) more = 1, c &= 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0) more = 2, c &= 0x0f, min = 0x800;
    else if ((c & 0xf8) == 0xf0) more = 3, c &= 0x07, min = 0x10000;
    else return 0;
    ++p;
    for (int i = 0; i < more; ++i, ++p) {
      if ((*p & 0xc0) != 0x80) return 0;
      c = c << 6 | (*p & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
  }
  return 1;
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
  if (!s) {
    if (column < 1 || (size_t)column > strlen(text) + 1) abort();
    free(text);
    return 0;
  }
  if (!valid_utf8((const unsigned char *)text)) abort();
  for (int32_t i = 0; i < s->nparams; ++i)
    if (s->params[i].def_kind == DLX_DEF_STR &&
        (!valid_utf8((const unsigned char *)dlx_sig_str(s, s->params[i].def_off)) ||
         strlen(dlx_sig_str(s, s->params[i].def_off)) != s->params[i].def_len))
      abort();
  static char canon[3 * DLX_SIG_MAX_LEN], again[3 * DLX_SIG_MAX_LEN];
  size_t n = dlx_sig_format(s, canon, sizeof canon);
  if (n >= sizeof canon) abort();
  if (!valid_utf8((const unsigned char *)canon)) abort();
  dlx_sig *t = dlx_sig_parse(canon, err, sizeof err, &column);
  if (!t) abort();
  dlx_sig_format(t, again, sizeof again);
  if (strcmp(canon, again) != 0 || s->independent != t->independent) abort();
  /* A 2-d f32 tensor checked against every tensor parameter: no crash, no overrun. */
  int64_t shape[2] = {3, 4}, strides[2] = {4, 1};
  DLTensor x = {.data = NULL, .device = {kDLCPU, 0}, .ndim = 2, .dtype = {kDLFloat, 32, 1},
                .shape = shape, .strides = strides, .byte_offset = 0};
  dlx_sig_bindings b;
  dlx_sig_bindings_init(&b, s);
  for (int32_t i = 0; i < s->nparams; ++i) {
    if (s->params[i].type.kind != DLX_SIG_TENSOR) continue;
    dlx_sig_fault f;
    if (dlx_sig_check_tensor(s, i, &x, 0, &b, &f)) {
      char msg[512];
      dlx_sig_fault_message(s, i, &x, &b, &f, msg, sizeof msg);
    }
  }
  dlx_sig_free(t);
  dlx_sig_free(s);
  free(text);
  return 0;
}
