/* fuzz_elf.c - dlx_elf_each_symbol over arbitrary file contents: `dlx.load` reads
 * the dynamic symbol table of any file a user names, before anything is mapped. */
#include <string.h>

#include "dlx_core.h"
#include "fuzz_input.h"

typedef struct {
  const char *prefix;
  int calls;
} seen;

static void note(void *ctx, const char *name) {
  seen *s = ctx;
  /* Every name handed out is a NUL-terminated string inside the table that starts
   * with the prefix (strlen runs off a bad one under ASan). */
  FUZZ_CHECK(strncmp(name, s->prefix, strlen(s->prefix)) == 0);
  (void)strlen(name);
  ++s->calls;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[64], err[256];
  if (fuzz_file(data, size, path) < 0) return 0;
  /* The kernel-record prefix, and the empty one (every defined symbol). */
  static const char *const prefixes[] = {"dlx_kernel__", ""};
  for (int i = 0; i < 2; ++i) {
    seen s = {prefixes[i], 0};
    err[0] = '\0';
    int n = dlx_elf_each_symbol(path, s.prefix, note, &s, err, sizeof err);
    if (n < 0) {
      FUZZ_CHECK(n == -1 && err[0] != '\0' && s.calls == 0);
    } else {
      FUZZ_CHECK(n == s.calls);
    }
  }
  return 0;
}
