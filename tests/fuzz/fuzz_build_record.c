/* fuzz_build_record.c - dlx_manifest_parse over a build record read back from the cache
 * (a file on disk: anyone who could write it could put anything there), and the record
 * formatted again from what was parsed. */
#include <string.h>

#include "dlx_build_record.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size ? size : 1); /* exact size: a read past it is caught */
  if (!text) abort();
  if (size) memcpy(text, data, size);
  dlx_manifest m;
  char err[256];
  if (dlx_manifest_parse(text, size, &m, err, sizeof err) == 0) {
    FUZZ_CHECK(m.name && m.key1 && m.lib && dlx_is_digest(m.key1));
    for (size_t i = 0; i < m.n_deps; ++i)
      FUZZ_CHECK(dlx_is_digest(m.deps[i].digest) && m.deps[i].path[0]);
    /* what parsed formats again, and that parses to the same */
    char *again = dlx_manifest_format(&m);
    if (again) {
      dlx_manifest r;
      FUZZ_CHECK(dlx_manifest_parse(again, strlen(again), &r, err, sizeof err) == 0);
      FUZZ_CHECK(r.n_deps == m.n_deps && r.n_sources == m.n_sources &&
                 !strcmp(r.lib, m.lib) && !strcmp(r.name, m.name));
      dlx_manifest_free(&r);
      free(again);
    }
  }
  dlx_manifest_free(&m);
  free(text);
  return 0;
}
