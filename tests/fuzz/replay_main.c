/* replay_main.c - runs a fuzz target over files and folders without libFuzzer, so
 * the committed corpora (and every crash input added to them) are replayed by
 * ctest in the normal and the sanitizer builds, with any compiler. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_input.h"

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    return -1;
  }
  size_t cap = 4096, n = 0;
  uint8_t *buf = malloc(cap);
  size_t r;
  while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
    n += r;
    if (n == cap) {
      uint8_t *more = realloc(buf, cap *= 2);
      if (!more) free(buf);
      buf = more;
    }
  }
  fclose(f);
  if (!buf) return -1;
  /* An exact-size copy, so a read one past the input is caught as under libFuzzer. */
  uint8_t *exact = malloc(n ? n : 1);
  if (!exact) {
    free(buf);
    return -1;
  }
  memcpy(exact, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  return 0;
}

int main(int argc, char **argv) {
  int files = 0;
  for (int i = 1; i < argc; ++i) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "replay: no such file or folder: %s\n", argv[i]);
      return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (replay_file(argv[i])) return 1;
      ++files;
      continue;
    }
    struct dirent **names;
    int n = scandir(argv[i], &names, NULL, alphasort);
    if (n < 0) return 1;
    for (int k = 0; k < n; ++k) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[i], names[k]->d_name);
      struct stat fst;
      if (names[k]->d_name[0] != '.' && stat(path, &fst) == 0 && S_ISREG(fst.st_mode)) {
        if (replay_file(path)) return 1;
        ++files;
      }
      free(names[k]);
    }
    free(names);
  }
  printf("replayed %d inputs\n", files);
  return files ? 0 : 1; /* an empty corpus is a mistake, not a pass */
}
