/* fuzz_depfile.c - dlx_depfile_parse over the dependency file a compiler (any program $CC
 * names) writes: every path it hands on is non-empty, a real C string, and given once.
 * A first byte >= 0x80 instead makes NUL-separated paths and writes them as gcc does
 * (Make's quoting: backslashes before a blank doubled, "\ ", "\#", "$$", a newline as it
 * is, one path per continued line): every path a compiler can be given reads back
 * exactly, in order, once. */
#include <string.h>

#include "dlx_depfile.h"
#include "fuzz_input.h"

#define MAX_PATHS 64

typedef struct {
  char *seen[MAX_PATHS];
  int n, refuse_at;
} state;

static int dep(void *ctx, const char *path) {
  state *s = ctx;
  FUZZ_CHECK(path[0] != '\0');
  for (int i = 0; i < s->n; ++i) FUZZ_CHECK(strcmp(s->seen[i], path) != 0);
  if (s->n == s->refuse_at) return -1;
  if (s->n < MAX_PATHS) {
    s->seen[s->n] = strdup(path);
    if (!s->seen[s->n]) abort();
    ++s->n;
  }
  return 0;
}

/* What gcc cannot write so that Make (or anyone) reads it back: a path starting with a
 * blank or a newline, ending with a backslash or a newline, a backslash before a
 * newline, two newlines in a row, a CR (a CRLF file's), or, in a path that holds a
 * newline, a ':' before a newline or at the end (it reads as a rule's ':'). */
static int writable(const char *p) {
  size_t n = strlen(p);
  if (!n || p[0] == ' ' || p[0] == '\t' || p[0] == '\n' || p[n - 1] == '\\' ||
      p[n - 1] == '\n' || strchr(p, '\r'))
    return 0;
  for (size_t i = 0; i + 1 < n; ++i)
    if ((p[i] == '\\' || p[i] == '\n') && p[i + 1] == '\n') return 0;
  if (!strchr(p, '\n')) return 1;
  for (size_t i = 0; i < n; ++i)
    if (p[i] == ':' && (i + 1 == n || p[i + 1] == '\n')) return 0;
  return 1;
}

/* gcc's mkdeps quoting of one path into out (room for 2 * strlen + 1). */
static size_t quote(const char *p, char *out) {
  size_t o = 0;
  for (size_t i = 0; p[i]; ++i) {
    if (p[i] == ' ' || p[i] == '\t') {
      for (size_t k = i; k > 0 && p[k - 1] == '\\'; --k) out[o++] = '\\';
      out[o++] = '\\';
    } else if (p[i] == '#') {
      out[o++] = '\\';
    } else if (p[i] == '$') {
      out[o++] = '$';
    }
    out[o++] = p[i];
  }
  return o;
}

static void round_trip(fuzz_in *in) {
  char *paths[MAX_PATHS];
  int n = 0;
  size_t room = 16;
  for (char *p; n < MAX_PATHS && (p = fuzz_str(in));) {
    if (!writable(p)) {
      free(p);
      continue;
    }
    paths[n++] = p;
    room += 2 * strlen(p) + 4;
  }
  char *text = malloc(room);
  if (!text) abort();
  size_t len = 0;
  memcpy(text, "t.o:", 4);
  len = 4;
  for (int i = 0; i < n; ++i) {
    memcpy(text + len, " \\\n ", 4);
    len += 4;
    len += quote(paths[i], text + len);
  }
  text[len++] = '\n';
  state s = {.n = 0, .refuse_at = -1};
  char err[256];
  int got = dlx_depfile_parse(text, len, dep, &s, err, sizeof err);
  /* each distinct path, in order of first appearance */
  int want = 0;
  for (int i = 0; i < n; ++i) {
    int dup = 0;
    for (int j = 0; j < i && !dup; ++j) dup = !strcmp(paths[i], paths[j]);
    if (dup) continue;
    FUZZ_CHECK(want < s.n && strcmp(s.seen[want], paths[i]) == 0);
    ++want;
  }
  FUZZ_CHECK(got == want && s.n == want);
  for (int i = 0; i < s.n; ++i) free(s.seen[i]);
  for (int i = 0; i < n; ++i) free(paths[i]);
  free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in in = {data, size};
  uint8_t first = fuzz_byte(&in);
  if (first >= 0x80) {
    round_trip(&in);
    return 0;
  }
  state s = {.n = 0, .refuse_at = first % 80};
  /* the rest as is (exact size: a read past it is caught), NULs included */
  char *text = malloc(in.n ? in.n : 1);
  if (!text) abort();
  if (in.n) memcpy(text, in.p, in.n);
  char err[256];
  int n = dlx_depfile_parse(text, in.n, dep, &s, err, sizeof err);
  FUZZ_CHECK(n >= -1);
  if (n >= 0 && n <= MAX_PATHS) FUZZ_CHECK(n == s.n);
  for (int i = 0; i < s.n; ++i) free(s.seen[i]);
  free(text);
  return 0;
}
