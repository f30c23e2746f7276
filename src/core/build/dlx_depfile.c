/* dlx_depfile.c - make-rule dependency files, as compilers write them. */
#include "dlx_depfile.h"

#include <stdlib.h>
#include <string.h>

#include "dlx_core.h"

typedef struct {
  char **v;
  size_t n, cap;
} seen_set;

/* Linear: a compile reads tens to a few hundred headers. */
static int seen_add(seen_set *s, const char *path) {
  for (size_t i = 0; i < s->n; ++i)
    if (!strcmp(s->v[i], path)) return 0;
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    char **v = realloc(s->v, cap * sizeof *v);
    if (!v) return -1;
    s->v = v;
    s->cap = cap;
  }
  size_t len = strlen(path);
  char *copy = malloc(len + 1);
  if (!copy) return -1;
  memcpy(copy, path, len + 1);
  s->v[s->n++] = copy;
  return 1;
}

static void seen_free(seen_set *s) {
  for (size_t i = 0; i < s->n; ++i) free(s->v[i]);
  free(s->v);
}

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

int dlx_depfile_parse(const char *text, size_t len, int (*dep)(void *ctx, const char *path),
                      void *ctx, char *err, size_t errlen) {
  if (!text && len) return dlx_set_err(err, errlen, "dependency file: no text");
  if (len && memchr(text, '\0', len))
    return dlx_set_err(err, errlen, "dependency file: holds a NUL byte");
  char *word = malloc(len + 1); /* no path is longer than the text */
  if (!word) return dlx_set_err(err, errlen, "dependency file: out of memory");
  seen_set seen = {0};
  int count = 0, rc = 0;
  size_t i = 0;
  int in_target = 1; /* at the start of a rule: skipping its target up to ':' */
  size_t wlen = 0;
  int have_word = 0;
  while (rc == 0) {
    int end = i >= len;
    char c = end ? '\n' : text[i];
    /* backslash-newline (or backslash-CR-LF): a continuation, i.e. a blank */
    if (!end && c == '\\' && i + 1 < len &&
        (text[i + 1] == '\n' || (text[i + 1] == '\r' && i + 2 < len && text[i + 2] == '\n'))) {
      i += text[i + 1] == '\n' ? 2 : 3;
      c = ' ';
      --i; /* handled as a blank at text[i] below */
    }
    if (in_target) {
      if (end) break;
      if (c == ':' && (i + 1 >= len || is_blank(text[i + 1]) || text[i + 1] == '\n')) {
        in_target = 0;
      } else if (c == '\n') {
        /* a line with no rule: blank lines are fine, anything else is not a dep file */
        for (size_t j = i; j > 0 && text[j - 1] != '\n'; --j)
          if (!is_blank(text[j - 1])) {
            rc = dlx_set_err(err, errlen, "dependency file: a line without ':'");
            break;
          }
      } else if (c == '\\' && i + 1 < len && (text[i + 1] == ' ' || text[i + 1] == '#')) {
        ++i; /* an escaped blank inside the target name */
      }
      ++i;
      continue;
    }
    if (end || c == '\n' || is_blank(c)) {
      if (have_word) {
        word[wlen] = '\0';
        int added = seen_add(&seen, word);
        if (added < 0) {
          rc = dlx_set_err(err, errlen, "dependency file: out of memory");
        } else if (added > 0) {
          if (dep(ctx, word) != 0) {
            rc = dlx_set_err(err, errlen, "dependency file: '%s' refused", word);
          } else {
            ++count;
          }
        }
        wlen = 0;
        have_word = 0;
      }
      if (end) break;
      if (c == '\n') in_target = 1;
      ++i;
      continue;
    }
    if (c == '\\' && i + 1 < len && (text[i + 1] == ' ' || text[i + 1] == '#')) {
      word[wlen++] = text[i + 1];
      i += 2;
    } else if (c == '$' && i + 1 < len && text[i + 1] == '$') {
      word[wlen++] = '$';
      i += 2;
    } else {
      word[wlen++] = c;
      ++i;
    }
    have_word = 1;
  }
  free(word);
  seen_free(&seen);
  return rc == 0 ? count : -1;
}
