/* dlx_build_plan.c - languages, compilers, command lines, CUDA architecture, cache keys. */
#include "dlx_build_plan.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dlx_compile_command.h"
#include "dlx_core.h"
#include "dlx_identity.h"

/* ---- languages -------------------------------------------------------------- */

static const struct {
  const char *name, *ext, *role, *package;
} kLang[DLX_LANG_COUNT] = {
    {"c", ".c", "C compiler", "gcc"},
    {"c++", ".cc", "C++ compiler", "g++"},
    {"cuda", ".cu", "CUDA compiler (nvcc)",
     "nvidia-cuda-toolkit (Debian non-free), or NVIDIA's CUDA toolkit with CUDA_HOME set"},
};

const char *dlx_lang_name(dlx_lang l) { return (unsigned)l < DLX_LANG_COUNT ? kLang[l].name : "?"; }
const char *dlx_lang_ext(dlx_lang l) { return (unsigned)l < DLX_LANG_COUNT ? kLang[l].ext : ""; }
const char *dlx_lang_role(dlx_lang l) { return (unsigned)l < DLX_LANG_COUNT ? kLang[l].role : "?"; }
const char *dlx_lang_package(dlx_lang l) {
  return (unsigned)l < DLX_LANG_COUNT ? kLang[l].package : "?";
}

int dlx_lang_of_path(const char *path, dlx_lang *out, char *err, size_t errlen) {
  const char *slash = path ? strrchr(path, '/') : NULL;
  const char *dot = path ? strrchr(slash ? slash : path, '.') : NULL;
  if (dot && dot[1]) {
    /* .C is C++ by gcc's rule; every other extension is case-sensitive too */
    static const char *const cxx[] = {".cc", ".cpp", ".cxx", ".c++", ".C"};
    if (!strcmp(dot, ".c")) return *out = DLX_LANG_C, 0;
    if (!strcmp(dot, ".cu")) return *out = DLX_LANG_CUDA, 0;
    for (size_t i = 0; i < sizeof cxx / sizeof cxx[0]; ++i)
      if (!strcmp(dot, cxx[i])) return *out = DLX_LANG_CXX, 0;
  }
  return dlx_set_err(err, errlen,
                     "cannot tell the language of '%s': dlx builds .c (C), .cc .cpp .cxx (C++) "
                     "and .cu (CUDA) files; pass language= to say",
                     path ? path : "");
}

int dlx_lang_parse(const char *name, dlx_lang *out, char *err, size_t errlen) {
  static const struct {
    const char *name;
    dlx_lang lang;
  } names[] = {{"c", DLX_LANG_C},     {"c++", DLX_LANG_CXX},   {"cxx", DLX_LANG_CXX},
               {"cpp", DLX_LANG_CXX}, {"cc", DLX_LANG_CXX},    {"cuda", DLX_LANG_CUDA},
               {"cu", DLX_LANG_CUDA}};
  for (size_t i = 0; name && i < sizeof names / sizeof names[0]; ++i)
    if (!strcasecmp(name, names[i].name)) return *out = names[i].lang, 0;
  return dlx_set_err(err, errlen, "unknown language '%s': use \"c\", \"c++\" or \"cuda\"",
                     name ? name : "");
}

dlx_lang dlx_link_lang(const dlx_lang *langs, size_t n) {
  dlx_lang best = DLX_LANG_C;
  for (size_t i = 0; i < n; ++i)
    if (langs[i] == DLX_LANG_CUDA) return DLX_LANG_CUDA;
    else if (langs[i] == DLX_LANG_CXX) best = DLX_LANG_CXX;
  return best;
}

static int blank(const char *s) {
  for (; s && *s; ++s)
    if (!isspace((unsigned char)*s)) return 0;
  return 1;
}

int dlx_compiler_candidates(dlx_lang lang, const dlx_compiler_env *env, char cand[3][4096]) {
  int n = 0;
  if (lang == DLX_LANG_C || lang == DLX_LANG_CXX) {
    const char *v = lang == DLX_LANG_C ? env->cc : env->cxx;
    snprintf(cand[n++], 4096, "%s", blank(v) ? (lang == DLX_LANG_C ? "cc" : "c++") : v);
    return n;
  }
  if (env->cuda_home && env->cuda_home[0]) {
    size_t len = strlen(env->cuda_home);
    while (len > 1 && env->cuda_home[len - 1] == '/') --len;
    if (snprintf(cand[n], 4096, "%.*s/bin/nvcc", (int)len, env->cuda_home) < 4096) ++n;
  }
  snprintf(cand[n++], 4096, "/usr/local/cuda/bin/nvcc");
  snprintf(cand[n++], 4096, "nvcc");
  return n;
}

/* ---- CUDA architecture -------------------------------------------------------- */

/* "sm_80", "compute_80", "80", "8.0" -> 80; -1 otherwise. */
static int parse_arch(const char *s) {
  if (!strncmp(s, "sm_", 3)) s += 3;
  else if (!strncmp(s, "compute_", 8)) s += 8;
  int v = 0, digits = 0;
  const char *p = s;
  for (; isdigit((unsigned char)*p) && digits < 4; ++p, ++digits) v = v * 10 + (*p - '0');
  if (*p == '.' && digits >= 1 && digits <= 2 && isdigit((unsigned char)p[1]) && !p[2])
    return v * 10 + (p[1] - '0');
  /* a suffix letter (sm_90a, sm_100f) names a feature set of that very arch */
  if (digits >= 2 && (!*p || (isalpha((unsigned char)*p) && !p[1]))) return v;
  return -1;
}

int dlx_cuda_arch(const char *asked, int visible, const char *visible_from, char *flag,
                  size_t flaglen, char *why, size_t whylen, char *err, size_t errlen) {
  if (asked && asked[0]) {
    int a = parse_arch(asked);
    if (a < 10)
      return dlx_set_err(err, errlen,
                         "cuda_arch '%s' is not an architecture: use e.g. \"sm_80\", \"80\" or "
                         "\"8.0\"",
                         asked);
    /* keep a feature-set suffix (sm_90a) as given */
    const char *num = asked + (!strncmp(asked, "sm_", 3) ? 3 : !strncmp(asked, "compute_", 8) ? 8 : 0);
    char sfx[2] = {0, 0};
    size_t nl = strlen(num);
    if (nl && isalpha((unsigned char)num[nl - 1])) sfx[0] = num[nl - 1];
    snprintf(flag, flaglen, "-gencode=arch=compute_%d%s,code=sm_%d%s", a, sfx, a, sfx);
    snprintf(why, whylen, "CUDA architecture sm_%d%s (cuda_arch=%s)", a, sfx, asked);
    return 0;
  }
  if (visible >= 10) {
    snprintf(flag, flaglen, "-gencode=arch=compute_%d,code=sm_%d", visible, visible);
    snprintf(why, whylen, "CUDA architecture sm_%d: the visible GPU's (asked %s)", visible,
             visible_from && visible_from[0] ? visible_from : "the driver");
    return 0;
  }
  int d = DLX_CUDA_DEFAULT_ARCH;
  snprintf(flag, flaglen, "-gencode=arch=compute_%d,code=[sm_%d,compute_%d]", d, d, d);
  snprintf(why, whylen,
           "CUDA architecture sm_%d plus PTX for compute_%d (no GPU could be asked%s%s; the "
           "driver compiles the PTX for newer GPUs; pass cuda_arch= to choose)",
           d, d, visible_from && visible_from[0] ? ": " : "", visible_from ? visible_from : "");
  return 0;
}

/* ---- command lines ------------------------------------------------------------ */

static int push_all(dlx_words *w, const char *prefix, dlx_strs s) {
  int bad = 0;
  for (size_t i = 0; i < s.n; ++i)
    bad |= prefix ? dlx_words_push2(w, prefix, s.v[i]) : dlx_words_push(w, s.v[i], strlen(s.v[i]));
  return bad;
}

static int push_lit(dlx_words *w, const char *s) { return dlx_words_push(w, s, strlen(s)); }

static int finish(dlx_words *w, int bad, char ***argv_out, int *argc_out, char *err,
                  size_t errlen) {
  if (bad || dlx_words_finish(w)) {
    dlx_argv_free(w->v, w->n);
    return dlx_set_err(err, errlen, "out of memory");
  }
  *argv_out = w->v;
  *argc_out = w->n;
  return 0;
}

/* The compiler words: the command split like a shell would, and not empty. */
static int push_compiler(dlx_words *w, const char *cmd, const char *role, char *err,
                         size_t errlen) {
  int n = 0;
  if (dlx_words_split(w, cmd, role, err, errlen, &n)) return -1;
  if (n == 0) return dlx_set_err(err, errlen, "no %s: its command is empty", role);
  return 0;
}

int dlx_unit_argv(const dlx_unit_spec *s, char ***argv_out, int *argc_out, char *err,
                  size_t errlen) {
  *argv_out = NULL;
  *argc_out = 0;
  if ((unsigned)s->lang >= DLX_LANG_COUNT || !s->source || !s->source[0] || !s->object ||
      !s->object[0] || !s->depfile || !s->depfile[0])
    return dlx_set_err(err, errlen, "compile: a language, source, object and dependency file "
                                    "are required");
  if (s->lang == DLX_LANG_CUDA && (!s->cuda_arch_flag || !s->cuda_arch_flag[0]))
    return dlx_set_err(err, errlen, "compile: a CUDA source needs an architecture");
  dlx_words w = {0};
  if (push_compiler(&w, s->compiler, dlx_lang_role(s->lang), err, errlen)) {
    dlx_argv_free(w.v, w.n);
    return -1;
  }
  int bad = push_lit(&w, "-c") | push_lit(&w, "-O2");
  if (s->lang == DLX_LANG_CUDA) {
    /* nvcc hands host-compiler flags on only through -Xcompiler */
    bad |= push_lit(&w, "-Xcompiler") | push_lit(&w, "-fPIC") | push_lit(&w, "-Xcompiler") |
           push_lit(&w, "-fvisibility=hidden") | push_lit(&w, s->cuda_arch_flag);
  } else {
    bad |= push_lit(&w, "-fPIC") | push_lit(&w, "-fvisibility=hidden");
  }
  bad |= push_all(&w, "-I", s->include_dirs) | push_all(&w, NULL, s->cflags);
  bad |= push_lit(&w, "-MD") | push_lit(&w, "-MF") | push_lit(&w, s->depfile);
  bad |= push_lit(&w, s->source) | push_lit(&w, "-o") | push_lit(&w, s->object);
  return finish(&w, bad, argv_out, argc_out, err, errlen);
}

int dlx_link_argv(const dlx_link_spec *s, char ***argv_out, int *argc_out, char *err,
                  size_t errlen) {
  *argv_out = NULL;
  *argc_out = 0;
  if (!s->output || !s->output[0] || s->objects.n == 0)
    return dlx_set_err(err, errlen, "link: an output and at least one object are required");
  dlx_words w = {0};
  if (push_compiler(&w, s->linker, "linker", err, errlen)) {
    dlx_argv_free(w.v, w.n);
    return -1;
  }
  int bad = push_lit(&w, "-shared") | push_lit(&w, "-o") | push_lit(&w, s->output);
  bad |= push_all(&w, NULL, s->objects) | push_all(&w, NULL, s->ldflags) |
         push_all(&w, "-l", s->libraries);
  return finish(&w, bad, argv_out, argc_out, err, errlen);
}

/* A word needs quotes unless it is made of these. */
static int plain_word(const char *s) {
  if (!*s) return 0;
  for (; *s; ++s)
    if (!isalnum((unsigned char)*s) && !strchr("-_./=:,+@%", *s)) return 0;
  return 1;
}

char *dlx_argv_join(char *const *argv) {
  size_t len = 1;
  for (char *const *a = argv; a && *a; ++a) len += 4 * strlen(*a) + 3; /* '\'' per quote */
  char *out = malloc(len), *p = out;
  if (!out) return NULL;
  for (char *const *a = argv; a && *a; ++a) {
    if (a != argv) *p++ = ' ';
    if (plain_word(*a)) {
      p += sprintf(p, "%s", *a);
      continue;
    }
    *p++ = '\'';
    for (const char *c = *a; *c; ++c) {
      if (*c == '\'') {
        memcpy(p, "'\\''", 4);
        p += 4;
      } else {
        *p++ = *c;
      }
    }
    *p++ = '\'';
  }
  *p = '\0';
  return out;
}

/* ---- keys and names ------------------------------------------------------------ */

typedef struct {
  char *buf;
  size_t len, cap;
  int bad;
} keybuf;

/* One field as "<length>:<bytes>;", so fields can hold anything and never run together. */
static void field(keybuf *k, const char *tag, const char *s) {
  if (!s) {
    k->bad = 1;
    return;
  }
  size_t n = strlen(s), need = strlen(tag) + n + 32;
  if (k->len + need > k->cap) {
    size_t cap = (k->cap + need) * 2;
    char *b = realloc(k->buf, cap);
    if (!b) {
      k->bad = 1;
      return;
    }
    k->buf = b;
    k->cap = cap;
  }
  k->len += (size_t)sprintf(k->buf + k->len, "%s%zu:", tag, n);
  memcpy(k->buf + k->len, s, n);
  k->len += n;
  k->buf[k->len++] = ';';
}

static void fields(keybuf *k, const char *tag, dlx_strs s) {
  char count[32];
  snprintf(count, sizeof count, "%zu", s.n);
  field(k, tag, count);
  for (size_t i = 0; i < s.n; ++i) field(k, tag, s.v[i]);
}

static int key_done(keybuf *k, char out[65]) {
  int rc = -1;
  if (!k->bad && k->buf) {
    dlx_digest_hex(k->buf, k->len, out);
    rc = 0;
  }
  free(k->buf);
  return rc;
}

int dlx_build_key1(const dlx_build_facts *f, char out[65]) {
  out[0] = '\0';
  if (!f || !f->name || f->n_units == 0 || !f->langs || !f->sources || !f->source_digests ||
      !f->tools || !f->commands)
    return -1;
  keybuf k = {0};
  char abi[16];
  snprintf(abi, sizeof abi, "%08x", (unsigned)f->abi_version);
  field(&k, "dlx-build-1 abi", abi);
  field(&k, "name", f->name);
  for (size_t i = 0; i < f->n_units; ++i) {
    if ((unsigned)f->langs[i] >= DLX_LANG_COUNT) k.bad = 1;
    field(&k, "lang", dlx_lang_name(f->langs[i]));
    field(&k, "source", f->sources[i]);
    field(&k, "digest", f->source_digests[i]);
  }
  for (int l = 0; l < DLX_LANG_COUNT; ++l) {
    field(&k, "tool", f->tools[l] ? f->tools[l] : "-");
    field(&k, "command", f->commands[l] ? f->commands[l] : "-");
  }
  fields(&k, "I", f->include_dirs);
  fields(&k, "cflags", f->cflags);
  fields(&k, "ldflags", f->ldflags);
  fields(&k, "l", f->libraries);
  field(&k, "arch", f->cuda_arch_flag ? f->cuda_arch_flag : "-");
  return key_done(&k, out);
}

int dlx_build_key2(const char *key1, const char *const *tool_versions, size_t n_deps,
                   const char *const *dep_paths, const char *const *dep_digests, char out[65]) {
  out[0] = '\0';
  if (!key1 || strlen(key1) != 64 || !tool_versions || (n_deps && (!dep_paths || !dep_digests)))
    return -1;
  keybuf k = {0};
  field(&k, "key1", key1);
  for (int l = 0; l < DLX_LANG_COUNT; ++l)
    field(&k, "version", tool_versions[l] ? tool_versions[l] : "-");
  char count[32];
  snprintf(count, sizeof count, "%zu", n_deps);
  field(&k, "deps", count);
  for (size_t i = 0; i < n_deps; ++i) {
    field(&k, "dep", dep_paths[i]);
    field(&k, "digest", dep_digests[i]);
  }
  return key_done(&k, out);
}

int dlx_build_name_ok(const char *name) {
  if (!name || !name[0] || name[0] == '.' || name[0] == '-' || strlen(name) > 64) return 0;
  for (const char *p = name; *p; ++p)
    if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-' && *p != '.') return 0;
  return 1;
}

static int named(const char *fmt, const char *name, const char *hex, const char *ext, char *out,
                 size_t outlen) {
  if (outlen) out[0] = '\0';
  if (!dlx_build_name_ok(name) || !hex || strlen(hex) < 20) return -1;
  int n = snprintf(out, outlen, fmt, name, hex, ext);
  if (n < 0 || (size_t)n >= outlen) {
    if (outlen) out[0] = '\0';
    return -1;
  }
  return 0;
}

int dlx_build_manifest_name(const char *name, const char *key1, char *out, size_t outlen) {
  return named("%s-%.20s%s", name, key1, ".build", out, outlen);
}

int dlx_build_lock_name(const char *name, const char *key1, char *out, size_t outlen) {
  return named("%s-%.20s%s", name, key1, ".lock", out, outlen);
}

int dlx_build_lib_name(const char *name, const char *key2, char *out, size_t outlen) {
  return named("lib%s-%.20s%s", name, key2, ".so", out, outlen);
}

int dlx_build_inline_name(const char *name, dlx_lang lang, const char *digest, char *out,
                          size_t outlen) {
  if ((unsigned)lang >= DLX_LANG_COUNT) return -1;
  return named("src-%s-%.20s%s", name, digest, dlx_lang_ext(lang), out, outlen);
}

/* ---- first errors ---------------------------------------------------------------- */

static int line_has(const char *line, size_t n, const char *what) {
  size_t m = strlen(what);
  for (size_t i = 0; i + m <= n; ++i)
    if (!memcmp(line + i, what, m)) return 1;
  return 0;
}

static int copy_lines(const char *output, int max_lines, int errors_only, char *out,
                      size_t outlen) {
  size_t used = 0;
  int lines = 0;
  out[0] = '\0';
  for (const char *line = output; *line && lines < max_lines;) {
    const char *eol = strchr(line, '\n');
    size_t n = eol ? (size_t)(eol - line) : strlen(line);
    int pick = n > 0 && (!errors_only || line_has(line, n, "error") ||
                         line_has(line, n, "undefined reference"));
    if (pick) {
      if (used + n + 2 > outlen) break; /* whole lines only */
      memcpy(out + used, line, n);
      used += n;
      out[used++] = '\n';
      out[used] = '\0';
      ++lines;
    }
    line += n + (eol ? 1 : 0);
  }
  return lines;
}

int dlx_first_errors(const char *output, int max_lines, char *out, size_t outlen) {
  if (!out || outlen == 0) return 0;
  out[0] = '\0';
  if (!output || max_lines <= 0) return 0;
  int n = copy_lines(output, max_lines, 1, out, outlen);
  return n ? n : copy_lines(output, max_lines, 0, out, outlen);
}
