/* dlx_build_record.c - write and read a build's record. */
#include "dlx_build_record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlx_core.h"

#define MAX_FILES 65536

int dlx_is_digest(const char *s) {
  if (!s) return 0;
  size_t n = 0;
  for (; s[n]; ++n)
    if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f'))) return 0;
  return n == 64;
}

/* ---- writing ----------------------------------------------------------------- */

typedef struct {
  char *buf;
  size_t len, cap;
  int bad;
  int escaped; /* version 2: '\\' and newline written as "\\\\" and "\\n" */
} text;

/* One line: the parts joined by single spaces. No part may hold a newline (unless the
 * record is escaped), and every part after the keyword must be non-empty, or the line
 * would not read back the same. */
static void put_parts(text *t, const char *const *parts, int n) {
  for (int i = 0; i < n; ++i) {
    const char *s = parts[i];
    if (!s || (!t->escaped && strchr(s, '\n')) || (i > 0 && !s[0])) {
      t->bad = 1;
      return;
    }
    size_t len = strlen(s);
    if (t->len + 2 * len + 3 > t->cap) {
      size_t cap = (t->cap + 2 * len + 3) * 2;
      char *nb = realloc(t->buf, cap);
      if (!nb) {
        t->bad = 1;
        return;
      }
      t->buf = nb;
      t->cap = cap;
    }
    if (i > 0) t->buf[t->len++] = ' ';
    for (size_t k = 0; k < len; ++k) {
      if (t->escaped && (s[k] == '\\' || s[k] == '\n')) {
        t->buf[t->len++] = '\\';
        t->buf[t->len++] = s[k] == '\n' ? 'n' : '\\';
      } else {
        t->buf[t->len++] = s[k];
      }
    }
  }
  t->buf[t->len++] = '\n';
  t->buf[t->len] = '\0';
}

static void put(text *t, const char *a, const char *b, const char *c, const char *d) {
  const char *parts[4] = {a, b, c, d};
  int n = 0;
  while (n < 4 && parts[n]) ++n;
  put_parts(t, parts, n);
}

static int has_newline(const char *s) { return s && strchr(s, '\n'); }

/* A path may hold a newline (any byte but NUL): then the record is version 2, escaped.
 * Version 1 otherwise, as every dlx writes and reads. */
static int needs_escapes(const dlx_manifest *m) {
  int nl = has_newline(m->arch);
  for (int l = 0; l < DLX_LANG_COUNT; ++l)
    nl |= has_newline(m->tools[l].path) || has_newline(m->tools[l].version);
  for (size_t i = 0; i < m->n_sources; ++i) nl |= has_newline(m->sources[i].path);
  for (size_t i = 0; i < m->n_deps; ++i) nl |= has_newline(m->deps[i].path);
  for (size_t i = 0; i < m->n_commands; ++i) nl |= has_newline(m->commands[i]);
  return nl;
}

char *dlx_manifest_format(const dlx_manifest *m) {
  text t = {0};
  if (!m->name || !m->key1 || !m->lib || strchr(m->name, ' ') || !dlx_is_digest(m->key1))
    return NULL;
  put(&t, "dlx-build", needs_escapes(m) ? "2" : "1", NULL, NULL);
  t.escaped = needs_escapes(m);
  put(&t, "name", m->name, NULL, NULL);
  put(&t, "key", m->key1, NULL, NULL);
  put(&t, "lib", m->lib, NULL, NULL);
  for (int l = 0; l < DLX_LANG_COUNT; ++l) {
    const dlx_manifest_tool *tl = &m->tools[l];
    if (!tl->path) continue;
    /* the fields before the path are read up to a space */
    if (!tl->sig || strchr(tl->sig, ' ') || !dlx_is_digest(tl->version_digest)) t.bad = 1;
    const char *parts[] = {"tool", dlx_lang_name((dlx_lang)l), tl->sig, tl->version_digest,
                           tl->path};
    put_parts(&t, parts, 5);
    put(&t, "version", dlx_lang_name((dlx_lang)l),
        tl->version && tl->version[0] ? tl->version : "(no --version output)", NULL);
  }
  for (size_t i = 0; i < m->n_sources; ++i) {
    if (!dlx_is_digest(m->sources[i].digest)) t.bad = 1;
    put(&t, "source", m->sources[i].digest, m->sources[i].path, NULL);
  }
  for (size_t i = 0; i < m->n_deps; ++i) {
    if (!dlx_is_digest(m->deps[i].digest)) t.bad = 1;
    put(&t, "dep", m->deps[i].digest, m->deps[i].path, NULL);
  }
  if (m->arch) put(&t, "arch", m->arch, NULL, NULL);
  for (size_t i = 0; i < m->n_commands; ++i) put(&t, "command", m->commands[i], NULL, NULL);
  if (t.bad) {
    free(t.buf);
    return NULL;
  }
  return t.buf;
}

/* ---- reading ----------------------------------------------------------------- */

void dlx_manifest_free(dlx_manifest *m) {
  if (!m) return;
  free(m->sources);
  free(m->deps);
  free(m->commands);
  free(m->text_);
  memset(m, 0, sizeof *m);
}

/* Splits off the first space-separated field of *rest (NULL when there is none). */
static char *take(char **rest) {
  char *s = *rest;
  if (!s || !*s) return NULL;
  char *sp = strchr(s, ' ');
  if (sp) {
    *sp = '\0';
    *rest = sp + 1;
  } else {
    *rest = NULL;
  }
  return s;
}

/* Version 2's escapes, undone in place: 0, or -1 for a backslash that starts none. */
static int unescape(char *s) {
  if (!s) return 0;
  char *o = s;
  for (const char *p = s; *p; ++p) {
    if (*p != '\\') {
      *o++ = *p;
      continue;
    }
    ++p;
    if (*p == 'n') *o++ = '\n';
    else if (*p == '\\') *o++ = '\\';
    else return -1;
  }
  *o = '\0';
  return 0;
}

static int lang_index(const char *s) {
  for (int l = 0; l < DLX_LANG_COUNT; ++l)
    if (s && !strcmp(s, dlx_lang_name((dlx_lang)l))) return l;
  return -1;
}

static int add_file(dlx_manifest_file **v, size_t *n, const char *digest, const char *path) {
  if (*n >= MAX_FILES) return -1;
  if ((*n & (*n - 1)) == 0) { /* grow at powers of two */
    dlx_manifest_file *nv = realloc(*v, (*n ? *n * 2 : 8) * sizeof **v);
    if (!nv) return -1;
    *v = nv;
  }
  (*v)[*n].digest = digest;
  (*v)[*n].path = path;
  ++*n;
  return 0;
}

int dlx_manifest_parse(const char *src, size_t len, dlx_manifest *m, char *err, size_t errlen) {
  memset(m, 0, sizeof *m);
  if (!src || (len && memchr(src, '\0', len)))
    return dlx_set_err(err, errlen, "build record: empty or holds a NUL byte");
  m->text_ = malloc(len + 1);
  if (!m->text_) return dlx_set_err(err, errlen, "build record: out of memory");
  memcpy(m->text_, src, len);
  m->text_[len] = '\0';
  char *line = m->text_;
  int lineno = 0, escaped = 0;
  const char *why = NULL;
  while (*line && !why) {
    ++lineno;
    char *eol = strchr(line, '\n');
    if (!eol) {
      why = "the last line is unfinished";
      break;
    }
    *eol = '\0';
    char *rest = line;
    char *kw = take(&rest);
    if (lineno == 1) {
      if (!kw || strcmp(kw, "dlx-build") || !rest || (strcmp(rest, "1") && strcmp(rest, "2")))
        why = "not a dlx build record";
      escaped = rest && !strcmp(rest, "2");
    } else if (escaped && unescape(rest)) {
      why = "a backslash that escapes nothing";
    } else if (!kw) {
      why = "an empty line";
    } else if (!strcmp(kw, "name") || !strcmp(kw, "key") || !strcmp(kw, "lib") ||
               !strcmp(kw, "arch")) {
      const char **slot = kw[0] == 'n' ? &m->name : kw[0] == 'k' ? &m->key1 : kw[0] == 'l' ? &m->lib : &m->arch;
      if (!rest || !rest[0] || *slot) why = "a repeated or empty name, key, lib or arch";
      else if (kw[0] == 'k' && !dlx_is_digest(rest)) why = "a key that is not a digest";
      else *slot = rest;
    } else if (!strcmp(kw, "tool")) {
      int l = lang_index(take(&rest));
      char *sig = take(&rest), *vd = take(&rest);
      if (l < 0 || !sig || !dlx_is_digest(vd) || !rest || !rest[0] || m->tools[l].path)
        why = "a malformed tool line";
      else
        m->tools[l].sig = sig, m->tools[l].version_digest = vd, m->tools[l].path = rest;
    } else if (!strcmp(kw, "version")) {
      int l = lang_index(take(&rest));
      if (l < 0 || !m->tools[l].path || m->tools[l].version) why = "a version line without its tool";
      else m->tools[l].version = rest ? rest : "";
    } else if (!strcmp(kw, "source") || !strcmp(kw, "dep")) {
      char *digest = take(&rest);
      if (!dlx_is_digest(digest) || !rest || !rest[0]) why = "a malformed source or dep line";
      else if (kw[0] == 's' ? add_file(&m->sources, &m->n_sources, digest, rest)
                            : add_file(&m->deps, &m->n_deps, digest, rest))
        why = "too many files, or out of memory";
    } else if (!strcmp(kw, "command")) {
      if (m->n_commands >= 64) {
        why = "too many commands";
      } else {
        const char **nc = realloc(m->commands, (m->n_commands + 1) * sizeof *nc);
        if (!nc) why = "out of memory";
        else (m->commands = nc)[m->n_commands++] = rest ? rest : "";
      }
    } /* else: a keyword of a newer dlx, skipped */
    line = eol + 1;
  }
  if (!why && lineno == 0) why = "empty";
  for (int l = 0; !why && l < DLX_LANG_COUNT; ++l)
    if (m->tools[l].path && !m->tools[l].version) why = "a tool without its version line";
  if (!why && (!m->name || !m->key1 || !m->lib)) why = "no name, key or lib";
  if (why) {
    dlx_set_err(err, errlen, "build record, line %d: %s", lineno, why);
    dlx_manifest_free(m);
    return -1;
  }
  return 0;
}
