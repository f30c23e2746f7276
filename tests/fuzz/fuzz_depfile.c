/* fuzz_depfile.c - dlx_depfile_parse over the dependency file a compiler (any program $CC
 * names) writes: every path it hands on is non-empty, a real C string, and given once. */
#include <string.h>

#include "dlx_depfile.h"
#include "fuzz_input.h"

typedef struct {
  char *seen[64];
  int n, refuse_at;
} state;

static int dep(void *ctx, const char *path) {
  state *s = ctx;
  FUZZ_CHECK(path[0] != '\0');
  for (int i = 0; i < s->n; ++i) FUZZ_CHECK(strcmp(s->seen[i], path) != 0);
  if (s->n == s->refuse_at) return -1;
  if (s->n < 64) {
    s->seen[s->n] = strdup(path);
    if (!s->seen[s->n]) abort();
    ++s->n;
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in in = {data, size};
  state s = {.n = 0, .refuse_at = fuzz_byte(&in) % 80};
  /* the rest as is (exact size: a read past it is caught), NULs included */
  char *text = malloc(in.n ? in.n : 1);
  if (!text) abort();
  if (in.n) memcpy(text, in.p, in.n);
  char err[256];
  int n = dlx_depfile_parse(text, in.n, dep, &s, err, sizeof err);
  FUZZ_CHECK(n >= -1);
  if (n >= 0 && n <= 64) FUZZ_CHECK(n == s.n);
  for (int i = 0; i < s.n; ++i) free(s.seen[i]);
  free(text);
  return 0;
}
