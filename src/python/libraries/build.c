/*
 * build.c - the CPython face of dlx.build (src/core/toolchain/compile/dlx_kernel_build):
 * arguments in, the built library's path (and a checked descriptor to load it through)
 * out. Facts only Python knows (the visible GPU, the include folder) come from
 * python/dlx/_build.py.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlx_py.h"

#include "dlx_build_record.h"
#include "dlx_cache_dir.h"
#include "dlx_compile_command.h"
#include "dlx_kernel_build.h"
#include "dlx_build_plan.h"

/* A tuple of str as borrowed UTF-8 (PyMem_Free the array; the tuple keeps the text). */
static int strs_of(PyObject *tuple, dlx_strs *out, const char ***owned) {
  Py_ssize_t n = PyTuple_GET_SIZE(tuple);
  const char **v = PyMem_Calloc((size_t)n + 1, sizeof *v);
  if (!v) return PyErr_NoMemory(), -1;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject *item = PyTuple_GET_ITEM(tuple, i);
    Py_ssize_t len = 0;
    v[i] = PyUnicode_Check(item) ? PyUnicode_AsUTF8AndSize(item, &len) : NULL;
    if (!v[i] || strlen(v[i]) != (size_t)len) { /* a NUL would cut what the compiler sees */
      if (!PyErr_Occurred())
        PyErr_SetString(v[i] ? PyExc_ValueError : PyExc_TypeError,
                        v[i] ? "a word holds a NUL byte" : "expected a tuple of str");
      PyMem_Free(v);
      return -1;
    }
  }
  out->v = v;
  out->n = (size_t)n;
  *owned = v;
  return 0;
}

/* kernel_build(cache_dir, name, sources, inline, language, include_dirs, cflags, ldflags,
 *              libraries, cuda_arch, visible_arch, visible_from, dlx_include_dir, verbose)
 * -> ("ok", path, fd, built) | ("error", message, command or None, log or None) */
static PyObject *kernel_build(PyObject *self, PyObject *args) {
  (void)self;
  dlx_kernel_build_spec s = {0};
  PyObject *sources, *inc, *cfl, *ldf, *libs;
  Py_buffer text = {0};
  const char *language;
  int verbose;
  if (!PyArg_ParseTuple(args, "ssO!z*zO!O!O!O!zizsp", &s.cache_dir, &s.name, &PyTuple_Type,
                        &sources, &text, &language, &PyTuple_Type, &inc, &PyTuple_Type, &cfl,
                        &PyTuple_Type, &ldf, &PyTuple_Type, &libs, &s.cuda_arch,
                        &s.visible_arch, &s.visible_from, &s.dlx_include_dir, &verbose))
    return NULL;
  const char **owned[5] = {0};
  dlx_strs srcs = {0};
  PyObject *r = NULL;
  char err[8192];
  if (strs_of(sources, &srcs, &owned[0]) || strs_of(inc, &s.include_dirs, &owned[1]) ||
      strs_of(cfl, &s.cflags, &owned[2]) || strs_of(ldf, &s.ldflags, &owned[3]) ||
      strs_of(libs, &s.libraries, &owned[4]))
    goto out;
  if (language) {
    if (dlx_lang_parse(language, &s.lang, err, sizeof err)) {
      PyErr_SetString(PyExc_ValueError, err);
      goto out;
    }
    s.lang_given = 1;
  }
  /* the caller's mistakes are ValueErrors; BuildError is for what the build met */
  if (!dlx_build_name_ok(s.name)) {
    PyErr_Format(PyExc_ValueError,
                 "name '%s' is not usable in a file name: use letters, digits, '_', '-' and "
                 "'.' (at most 64, not starting with '.' or '-')",
                 s.name);
    goto out;
  }
  char flag[128], why[512];
  if (s.cuda_arch &&
      dlx_cuda_arch(s.cuda_arch, 0, NULL, flag, sizeof flag, why, sizeof why, err, sizeof err)) {
    PyErr_SetString(PyExc_ValueError, err);
    goto out;
  }
  for (size_t i = 0; !s.lang_given && i < srcs.n; ++i) {
    dlx_lang l;
    if (dlx_lang_of_path(srcs.v[i], &l, err, sizeof err)) {
      PyErr_SetString(PyExc_ValueError, err);
      goto out;
    }
  }
  if (dlx_build_timeout_parse(getenv("DLX_BUILD_TIMEOUT"), &s.timeout_s, err, sizeof err)) {
    PyErr_SetString(PyExc_ValueError, err);
    goto out;
  }
  s.n_sources = srcs.n;
  s.sources = srcs.v;
  if (text.buf) {
    s.inline_text = text.buf;
    s.inline_len = (size_t)text.len;
  }
  s.env.cc = getenv("CC");
  s.env.cxx = getenv("CXX");
  s.env.cuda_home = getenv("CUDA_HOME");
  s.path_env = getenv("PATH");
  s.verbose = verbose;
  s.say = dlx_say_stderr;
  dlx_kernel_build_result res;
  int rc;
  Py_BEGIN_ALLOW_THREADS /* compiling takes a while; other threads may run */
  rc = dlx_kernel_build(&s, &res, err, sizeof err);
  Py_END_ALLOW_THREADS
  if (rc == 0) {
    r = Py_BuildValue("(sO&ii)", "ok", PyUnicode_DecodeFSDefault, res.path, res.fd, res.built);
    if (r) res.fd = -1; /* the caller owns it now */
  } else {
    r = Py_BuildValue("(ssz" "z)", "error", err, res.command, res.log);
    if (!r && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) { /* a compiler's odd bytes */
      PyErr_Clear();
      r = Py_BuildValue("(sszy)", "error", err, res.command, res.log);
    }
  }
  dlx_kernel_build_result_free(&res);
out:
  for (int i = 0; i < 5; ++i) PyMem_Free(owned[i]);
  if (text.buf) PyBuffer_Release(&text);
  return r;
}

/* load_fd(fd, path) -> Library: the library open as fd (checked by kernel_build), loaded
 * through it. The descriptor is the library's from now on, also on failure. */
static PyObject *load_fd(PyObject *self, PyObject *args) {
  (void)self;
  int fd;
  PyObject *shown;
  if (!PyArg_ParseTuple(args, "iU", &fd, &shown)) return NULL;
  PyObject *lib = dlx_load_fd(&fd, shown);
  if (!lib) close(fd); /* not loaded: nothing needs it */
  return lib;
}

/* The library `path` in a cache folder, opened checked as the loader would (its folder and
 * those above it, then owner, mode and seal on the descriptor): 1 with *fd, 0 missing, -1
 * refused (why says why). */
static int open_checked(const char *path, int *fd, char *why, size_t whylen) {
  const char *slash = strrchr(path, '/');
  char folder[4096];
  snprintf(folder, sizeof folder, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
  int dirfd = dlx_cache_dir_open(folder[0] ? folder : "/", 0, why, whylen);
  int trusted = dirfd < 0 ? -1
                          : dlx_cache_open_trusted(dirfd, slash ? slash + 1 : path, fd, why, whylen);
  if (dirfd >= 0) close(dirfd);
  return trusted;
}

/* load_cached(path) -> Library: a library in dlx's cache, checked as the addon is and
 * loaded through the descriptor the checks were made on. ImportError when refused. */
static PyObject *load_cached(PyObject *self, PyObject *arg) {
  (void)self;
  PyObject *b;
  if (!PyUnicode_FSConverter(arg, &b)) return NULL;
  const char *path = PyBytes_AS_STRING(b);
  char why[1024];
  PyObject *r = NULL;
  int fd = -1, trusted = open_checked(path, &fd, why, sizeof why);
  if (trusted == 0) {
    PyErr_Format(PyExc_FileNotFoundError, "no library at %s", path);
  } else if (trusted < 0) {
    PyErr_Format(PyExc_ImportError, "dlx.load: refusing %s: %s", path, why);
  } else {
    PyObject *shown = PyUnicode_DecodeFSDefault(path);
    if (shown) {
      r = dlx_load_fd(&fd, shown);
      Py_DECREF(shown);
    }
    if (!r) close(fd);
  }
  Py_DECREF(b);
  return r;
}

/* library_checked(path) -> (1 trusted | 0 missing | -1 refused, why): load_cached's checks,
 * seal included, without loading (python -m dlx cache list) */
static PyObject *library_checked(PyObject *self, PyObject *arg) {
  (void)self;
  PyObject *b;
  if (!PyUnicode_FSConverter(arg, &b)) return NULL;
  char why[1024] = "";
  int fd = -1, trusted = open_checked(PyBytes_AS_STRING(b), &fd, why, sizeof why);
  Py_DECREF(b);
  if (fd >= 0) close(fd);
  return Py_BuildValue("(is)", trusted, why);
}

/* first_errors(log, max_lines) -> str */
static PyObject *first_errors(PyObject *self, PyObject *args) {
  (void)self;
  const char *log;
  int max_lines;
  if (!PyArg_ParseTuple(args, "si", &log, &max_lines)) return NULL;
  char out[4096];
  dlx_first_errors(log, max_lines, out, sizeof out);
  return PyUnicode_DecodeUTF8(out, (Py_ssize_t)strlen(out), "replace");
}

static int append_str(PyObject *list, const char *s) {
  PyObject *o = PyUnicode_DecodeFSDefault(s);
  int rc = o ? PyList_Append(list, o) : -1;
  Py_XDECREF(o);
  return rc != 0;
}

/* read_build_record(path) -> dict, or None when unreadable or malformed */
static PyObject *read_build_record(PyObject *self, PyObject *arg) {
  (void)self;
  PyObject *b;
  if (!PyUnicode_FSConverter(arg, &b)) return NULL;
  int fd = open(PyBytes_AS_STRING(b), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  Py_DECREF(b);
  if (fd < 0) Py_RETURN_NONE;
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len == cap) {
      if (cap >= (16u << 20)) break;
      char *nb = realloc(buf, cap = cap ? cap * 2 : 8192);
      if (!nb) break;
      buf = nb;
    }
    ssize_t r = read(fd, buf + len, cap - len);
    if (r <= 0) break;
    len += (size_t)r;
  }
  close(fd);
  dlx_manifest m;
  char err[256];
  PyObject *d = NULL;
  if (!buf || dlx_manifest_parse(buf, len, &m, err, sizeof err)) {
    free(buf);
    Py_RETURN_NONE;
  }
  free(buf);
  PyObject *srcs = PyList_New(0), *deps = PyList_New(0), *tools = PyDict_New(),
           *cmds = PyList_New(0), *digests = PyDict_New();
  int bad = !srcs || !deps || !tools || !cmds || !digests;
  for (size_t i = 0; !bad && i < m.n_sources; ++i)
    bad = append_str(srcs, m.sources[i].path);
  for (size_t i = 0; !bad && i < m.n_deps; ++i)
    bad = append_str(deps, m.deps[i].path);
  /* path -> sha256 of every source and header read (pickling carries the user's own) */
  for (size_t i = 0; !bad && i < m.n_sources + m.n_deps; ++i) {
    const dlx_manifest_file *f = i < m.n_sources ? &m.sources[i] : &m.deps[i - m.n_sources];
    PyObject *k = PyUnicode_DecodeFSDefault(f->path), *v = PyUnicode_FromString(f->digest);
    bad = !k || !v || PyDict_SetItem(digests, k, v) != 0;
    Py_XDECREF(k);
    Py_XDECREF(v);
  }
  for (size_t i = 0; !bad && i < m.n_commands; ++i)
    bad = append_str(cmds, m.commands[i]);
  for (int l = 0; !bad && l < DLX_LANG_COUNT; ++l) {
    if (!m.tools[l].path) continue;
    PyObject *t = Py_BuildValue("(ss)", m.tools[l].path, m.tools[l].version);
    bad = !t || PyDict_SetItemString(tools, dlx_lang_name((dlx_lang)l), t) != 0;
    Py_XDECREF(t);
  }
  if (!bad)
    d = Py_BuildValue("{sssssssOsOsOsOszsO}", "name", m.name, "key", m.key1, "lib", m.lib,
                      "sources", srcs, "deps", deps, "tools", tools, "commands", cmds, "arch",
                      m.arch, "digests", digests);
  Py_XDECREF(srcs);
  Py_XDECREF(deps);
  Py_XDECREF(tools);
  Py_XDECREF(cmds);
  Py_XDECREF(digests);
  dlx_manifest_free(&m);
  return d;
}

/* compilers() -> ((language, command, resolved path or None, Debian package), ...): what
 * dlx.build would run for each language, for python -m dlx doctor */
static PyObject *compilers(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  dlx_compiler_env env = {getenv("CC"), getenv("CXX"), getenv("CUDA_HOME")};
  PyObject *t = PyTuple_New(DLX_LANG_COUNT);
  for (int l = 0; t && l < DLX_LANG_COUNT; ++l) {
    char cand[3][4096], path[4096] = "";
    int n = dlx_compiler_candidates((dlx_lang)l, &env, cand), at = 0;
    while (at < n && dlx_which(cand[at], getenv("PATH"), path, sizeof path)) ++at;
    PyObject *row = Py_BuildValue("(sszs)", dlx_lang_name((dlx_lang)l), cand[at < n ? at : 0],
                                  at < n ? path : NULL, dlx_lang_package((dlx_lang)l));
    if (!row) Py_CLEAR(t);
    else PyTuple_SET_ITEM(t, l, row);
  }
  return t;
}

static PyMethodDef build_methods[] = {
    {"compilers", compilers, METH_NOARGS, NULL},
    {"kernel_build", kernel_build, METH_VARARGS, NULL},
    {"load_fd", load_fd, METH_VARARGS, NULL},
    {"load_cached", load_cached, METH_O, NULL},
    {"library_checked", library_checked, METH_O, NULL},
    {"first_errors", first_errors, METH_VARARGS, NULL},
    {"read_build_record", read_build_record, METH_O, NULL},
    {NULL, NULL, 0, NULL}};

int dlx_build_init(PyObject *module) { return PyModule_AddFunctions(module, build_methods); }
