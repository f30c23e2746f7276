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

/* A rule's ':' at text[i]: followed by a blank, a newline or the end (so "C:x.h" and an
 * escaped "a:\ b" are paths). */
static int rule_colon(const char *text, size_t len, size_t i) {
  return text[i] == ':' && (i + 1 >= len || is_blank(text[i + 1]) || text[i + 1] == '\n');
}

/* Backslash-newline (or backslash-CR-LF) at text[i]: its length, else 0. */
static size_t continuation(const char *text, size_t len, size_t i) {
  if (text[i] != '\\' || i + 1 >= len) return 0;
  if (text[i + 1] == '\n') return 2;
  return text[i + 1] == '\r' && i + 2 < len && text[i + 2] == '\n' ? 3 : 0;
}

/* The line starting at text[i] holds something, and no rule's ':'. Compilers write a
 * newline inside a path as it is (Make cannot quote it): such a line continues the path
 * the newline interrupted, where a new rule would have its target and ':'. */
static int continues_path(const char *text, size_t len, size_t i) {
  int something = 0;
  for (; i < len && text[i] != '\n'; ++i) {
    if (rule_colon(text, len, i)) return 0;
    if (!is_blank(text[i])) something = 1;
  }
  return something;
}

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
  /* at the start of a rule: skipping its target up to ':' (a target may hold a newline
   * too: the first line of a rule ends only at its ':'); target_text: not only blanks */
  int in_target = 1, target_text = 0;
  size_t wlen = 0;
  int have_word = 0;
  while (rc == 0) {
    int end = i >= len;
    size_t cont = end ? 0 : continuation(text, len, i);
    char c = end ? '\n' : cont ? ' ' : text[i];
    size_t step = cont ? cont : 1;
    if (in_target) {
      if (end) {
        if (target_text) rc = dlx_set_err(err, errlen, "dependency file: a line without ':'");
        break;
      }
      if (rule_colon(text, len, i)) {
        in_target = 0;
        target_text = 0;
      } else if (c == '\\' && i + 1 < len &&
                 (text[i + 1] == ' ' || text[i + 1] == '\t' || text[i + 1] == '#')) {
        target_text = 1;
        ++i; /* an escaped blank inside the target name */
      } else if (!is_blank(c) && c != '\n') {
        target_text = 1;
      }
      i += step;
      continue;
    }
    if (c == '\n' && !end && have_word && continues_path(text, len, i + 1)) {
      word[wlen++] = '\n'; /* a path with a newline in it */
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
      i += step;
      continue;
    }
    if (c == '\\') {
      /* Make's quoting of blanks: 2N+1 backslashes and a blank are N backslashes and the
       * blank, inside the path; 2N and a blank are N backslashes ending the path. "\#" is
       * '#'. Any other backslash is itself. */
      size_t n = 0;
      while (i + n < len && text[i + n] == '\\' && !continuation(text, len, i + n)) ++n;
      char next = i + n < len ? text[i + n] : '\0';
      if (next == ' ' || next == '\t') {
        for (size_t k = 0; k < n / 2; ++k) word[wlen++] = '\\';
        have_word = 1;
        if (n % 2) {
          word[wlen++] = next;
          i += n + 1;
        } else {
          i += n; /* the blank ends the path */
        }
        continue;
      }
      if (next == '#') {
        for (size_t k = 0; k + 1 < n; ++k) word[wlen++] = '\\';
        word[wlen++] = '#';
        i += n + 1;
      } else {
        for (size_t k = 0; k < n; ++k) word[wlen++] = '\\';
        i += n;
      }
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
