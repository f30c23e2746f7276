/*
 * addon.c - the CPython face of src/core's addon machinery: backend selection,
 * build arguments, identity, the cache folder, building and loading the torch
 * addon. Facts come in from python/dlx/torch.py; decisions are made in src/core.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dlx_py.h"

#include "dlx_locked_build.h"
#include "dlx_backend.h"
#include "dlx_addon_args.h"
#include "dlx_cache_dir.h"
#include "dlx_hint.h"
#include "dlx_identity.h"
#include "dlx_invoke.h"
#include "dlx_seal.h"

/* select_backend(platform, cuda_available, version_cuda_set, version_hip_set,
 *                npu_namespace, npu_available, forced) -> (name, reason) */
static PyObject *select_backend(PyObject *self, PyObject *args) {
  (void)self;
  const char *platform, *forced = NULL;
  dlx_backend_facts f = {0};
  if (!PyArg_ParseTuple(args, "sppppp|z", &platform, &f.cuda_available, &f.version_cuda_set,
                        &f.version_hip_set, &f.npu_namespace, &f.npu_available, &forced))
    return NULL;
  f.platform = dlx_platform_from_name(platform);
  f.forced = forced;
  dlx_backend_choice c;
  if (dlx_backend_select(&f, &c)) {
    PyErr_SetString(PyExc_ValueError, c.reason);
    return NULL;
  }
  return Py_BuildValue("(ss)", dlx_backend_name(c.backend), c.reason);
}

/* parse_build_args(list_of_str, platform) -> (backend or None, output_dir or None) */
static PyObject *parse_build_args(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *list;
  const char *platform;
  if (!PyArg_ParseTuple(args, "O!s", &PyList_Type, &list, &platform)) return NULL;
  Py_ssize_t n = PyList_GET_SIZE(list);
  const char **argv = PyMem_Calloc((size_t)n + 1, sizeof *argv);
  if (!argv) return PyErr_NoMemory();
  for (Py_ssize_t i = 0; i < n; ++i) {
    argv[i] = PyUnicode_AsUTF8(PyList_GET_ITEM(list, i));
    if (!argv[i]) {
      PyMem_Free(argv);
      return NULL;
    }
  }
  dlx_build_args out;
  char err[256];
  PyObject *r = NULL;
  if (dlx_build_args_parse((int)n, argv, dlx_platform_from_name(platform), &out, err,
                           sizeof err))
    PyErr_SetString(PyExc_ValueError, err);
  else
    r = Py_BuildValue("(zz)", out.backend_given ? dlx_backend_name(out.backend) : NULL,
                      out.output_dir);
  PyMem_Free(argv);
  return r;
}

/* addon_identity(torch_version, cxx11_abi, backend, python_abi_tag, source: bytes, flags)
 * -> (identity, file name) */
static PyObject *addon_identity(PyObject *self, PyObject *args) {
  (void)self;
  dlx_addon_facts f = {0};
  const char *backend;
  Py_buffer source;
  if (!PyArg_ParseTuple(args, "spssy*s", &f.torch_version, &f.cxx11_abi, &backend,
                        &f.python_abi_tag, &source, &f.flags))
    return NULL;
  char digest[65], identity[1024], name[512];
  dlx_digest_hex(source.buf, (size_t)source.len, digest);
  PyBuffer_Release(&source);
  if (dlx_backend_parse(backend, &f.backend)) {
    PyErr_Format(PyExc_ValueError, "unknown backend '%s'", backend);
    return NULL;
  }
  f.dlpack_major = DLPACK_MAJOR_VERSION;
  f.dlpack_minor = DLPACK_MINOR_VERSION;
  f.source_digest = digest;
  if (dlx_addon_identity(&f, identity, sizeof identity) ||
      dlx_addon_filename(&f, name, sizeof name)) {
    PyErr_SetString(PyExc_ValueError, "addon identity fields are invalid or too long");
    return NULL;
  }
  return Py_BuildValue("(ss)", identity, name);
}

static PyObject *cache_dir(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  char dir[4096], err[256];
  if (dlx_cache_dir_resolve(getenv("DLX_CACHE_DIR"), getenv("XDG_CACHE_HOME"), getenv("HOME"),
                            dir, sizeof dir, err, sizeof err)) {
    PyErr_SetString(PyExc_OSError, err);
    return NULL;
  }
  return PyUnicode_DecodeFSDefault(dir);
}

static PyObject *ensure_dir(PyObject *self, PyObject *arg) {
  (void)self;
  PyObject *b;
  if (!PyUnicode_FSConverter(arg, &b)) return NULL;
  char err[512];
  int rc = dlx_cache_dir_ensure(PyBytes_AS_STRING(b), err, sizeof err);
  Py_DECREF(b);
  if (rc) {
    PyErr_SetString(PyExc_PermissionError, err);
    return NULL;
  }
  Py_RETURN_NONE;
}

/* file_trusted(path) -> (1 trusted | 0 missing | -1 refused, reason) */
static PyObject *file_trusted(PyObject *self, PyObject *arg) {
  (void)self;
  PyObject *b;
  if (!PyUnicode_FSConverter(arg, &b)) return NULL;
  char why[512] = "";
  int rc = dlx_cache_file_trusted(PyBytes_AS_STRING(b), why, sizeof why);
  Py_DECREF(b);
  return Py_BuildValue("(is)", rc, why);
}

/* A tuple of str as a C array of borrowed UTF-8, valid while the tuple lives. */
static const char **str_array(PyObject *list, size_t *n) {
  PyObject *seq = list; /* a tuple: immutable while the GIL is released */
  *n = (size_t)PySequence_Fast_GET_SIZE(seq);
  const char **a = PyMem_Calloc(*n + 1, sizeof *a);
  for (size_t i = 0; a && i < *n; ++i) {
    a[i] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i));
    if (!a[i]) {
      PyMem_Free(a);
      a = NULL;
    }
  }
  if (!a && !PyErr_Occurred()) PyErr_NoMemory();
  return a;
}

/* Called without the GIL, from inside the build lock: plain stdio. */
void dlx_say_stderr(void *ctx, const char *line) {
  (void)ctx;
  fprintf(stderr, "%s\n", line);
  fflush(stderr);
}

/* " (missing header X: install the Debian package P)" when the compiler output says a
 * header was not found, else "": a fresh machine's usual failure, made actionable. */
static void header_hint(const char *output, char *hint, size_t len) {
  char header[256];
  hint[0] = '\0';
  if (!dlx_missing_header(output, header, sizeof header)) return;
  const char *pkg = dlx_header_package(header);
  if (pkg && !strchr(pkg, ' ')) /* a package name; longer entries are advice */
    snprintf(hint, len, " (missing header %s: install the Debian package %s)", header, pkg);
  else if (pkg)
    snprintf(hint, len, " (missing header %s: %s)", header, pkg);
  else
    snprintf(hint, len, " (missing header %s)", header);
}

/* missing_header(compiler_output) -> (header, package or None), or None */
static PyObject *missing_header(PyObject *self, PyObject *arg) {
  (void)self;
  const char *text = PyUnicode_AsUTF8(arg);
  if (!text) return NULL;
  char header[256];
  if (!dlx_missing_header(text, header, sizeof header)) Py_RETURN_NONE;
  const char *pkg = dlx_header_package(header);
  return Py_BuildValue("(sz)", header, pkg);
}

/* build_addon(final, cxx, sources, includes, defines, lib_dirs, libs, cxxflags, ldflags,
 *             known_bad_ino) -> True when this call compiled it; sources: a tuple of
 * str, compiled into one library */
static PyObject *build_addon(PyObject *self, PyObject *args) {
  (void)self;
  const char *final;
  PyObject *src, *inc, *def, *ldir, *lib;
  dlx_compile_spec s = {0};
  unsigned long long bad_ino = 0;
  if (!PyArg_ParseTuple(args, "ssO!O!O!O!O!zzK", &final, &s.cxx, &PyTuple_Type, &src,
                        &PyTuple_Type, &inc, &PyTuple_Type, &def, &PyTuple_Type, &ldir,
                        &PyTuple_Type, &lib, &s.extra_cxxflags, &s.extra_ldflags, &bad_ino))
    return NULL;
  size_t nsrc = 0;
  const char **e = str_array(src, &nsrc);
  if (!e || nsrc == 0) {
    if (e) PyErr_SetString(PyExc_ValueError, "build_addon: no source file");
    PyMem_Free(e);
    return NULL;
  }
  s.source = e[0];
  s.more_sources = e + 1;
  s.n_more_sources = nsrc - 1;
  const char **a = str_array(inc, &s.n_include_dirs), **b = str_array(def, &s.n_defines),
             **c = str_array(ldir, &s.n_lib_dirs), **d = str_array(lib, &s.n_libs);
  PyObject *r = NULL;
  char err[1024];
  if (dlx_build_timeout_parse(getenv("DLX_BUILD_TIMEOUT"), &s.timeout_s, err, sizeof err)) {
    PyErr_SetString(PyExc_ValueError, err);
  } else if (a && b && c && d) {
    s.include_dirs = a;
    s.defines = b;
    s.lib_dirs = c;
    s.libs = d;
    dlx_build_result res;
    int rc;
    Py_BEGIN_ALLOW_THREADS /* compiling takes a while; other threads may run */
    rc = dlx_addon_build(final, &s, bad_ino, dlx_say_stderr, NULL, &res, err, sizeof err);
    Py_END_ALLOW_THREADS
    if (rc) {
      char hint[512];
      header_hint(res.output, hint, sizeof hint);
      PyErr_Format(PyExc_RuntimeError, "building the torch addon %s failed: %s%s\n%s", final, err,
                   hint, res.output ? res.output : "");
    }
    else
      r = PyBool_FromLong(res.built);
    free(res.output);
  }
  PyMem_Free(a);
  PyMem_Free(b);
  PyMem_Free(c);
  PyMem_Free(d);
  PyMem_Free(e);
  return r;
}

/* Splits `path` into its folder (out, "." when none) and returns its last name. */
static const char *split_path(const char *path, char *folder, size_t n) {
  const char *slash = strrchr(path, '/');
  if (!slash) {
    snprintf(folder, n, ".");
    return path;
  }
  size_t len = slash == path ? 1 : (size_t)(slash - path);
  snprintf(folder, n, "%.*s", (int)(len < n ? len : n - 1), path);
  return slash + 1;
}

/* load_addon(path, identity) -> table capsule. The folder is checked (with the
 * folders above it), the file opened without following links and checked (owner,
 * mode, seal) on that descriptor, and the library loaded through the descriptor, so
 * what runs is what was checked. PermissionError: the folder is refused.
 * FileNotFoundError: no file there. ImportError: refused, corrupt, unloadable or
 * built for another identity: the caller rebuilds. */
typedef int (*register_op_fn)(const char *ns, const char *name, const void *kernel,
                              const void *invoke_api, int32_t nresults, char *why, size_t len);
static register_op_fn g_register_op; /* from the last addon loaded that has one */

/* addon_register_op(namespace, name, kernel handle capsule, nresults) -> None: the loaded
 * addon implements torch.ops.<namespace>.<name> (already defined) with the kernel. The
 * caller keeps the capsule alive as long as the process. RuntimeError when no addon with
 * operators is loaded or torch refuses. */
static PyObject *addon_register_op(PyObject *self, PyObject *args) {
  (void)self;
  const char *ns, *name;
  PyObject *cap;
  int nresults;
  if (!PyArg_ParseTuple(args, "ssOi", &ns, &name, &cap, &nresults)) return NULL;
  const void *kernel = PyCapsule_GetPointer(cap, DLX_KERNEL_HANDLE_CAPSULE);
  if (!kernel) return NULL;
  if (!g_register_op) {
    PyErr_SetString(PyExc_RuntimeError, "no loaded torch addon implements operators");
    return NULL;
  }
  char why[1024] = "";
  if (g_register_op(ns, name, kernel, &dlx_invoke_api_v1, nresults, why, sizeof why)) {
    PyErr_Format(PyExc_RuntimeError, "cannot implement %s::%s: %s", ns, name, why);
    return NULL;
  }
  Py_RETURN_NONE;
}

static PyObject *load_addon(PyObject *self, PyObject *args) {
  (void)self;
  const char *path, *want;
  if (!PyArg_ParseTuple(args, "ss", &path, &want)) return NULL;
  char folder[4096], why[1024];
  const char *name = split_path(path, folder, sizeof folder);
  int dirfd = dlx_cache_dir_open(folder, 0, why, sizeof why);
  if (dirfd < 0) {
    PyErr_Format(PyExc_PermissionError, "cannot load %s: %s", path, why);
    return NULL;
  }
  int fd = -1;
  int trusted = dlx_cache_open_trusted(dirfd, name, &fd, why, sizeof why);
  close(dirfd);
  if (trusted == 0) {
    PyErr_Format(PyExc_FileNotFoundError, "no addon library at %s", path);
    return NULL;
  }
  if (trusted < 0) { /* never map a file that failed its checks */
    PyErr_Format(PyExc_ImportError, "cannot load %s: %s", path, why);
    return NULL;
  }
  void *h = dlx_cache_dlopen(&fd, RTLD_NOW | RTLD_LOCAL, why, sizeof why);
  if (!h) {
    PyErr_Format(PyExc_ImportError, "cannot load %s: %s", path, why);
    close(fd);
    return NULL;
  }
  const char *(*identity)(void) = (const char *(*)(void))dlsym(h, "dlx_addon_identity");
  const DLPackExchangeAPI *(*table)(void) =
      (const DLPackExchangeAPI *(*)(void))dlsym(h, "dlx_torch_exchange_api");
  const char *have = identity ? identity() : NULL;
  if (!identity || !table || !have || strcmp(have, want) != 0) {
    PyErr_Format(PyExc_ImportError, "%s is not the addon for this setup (identity %s, wanted %s)",
                 path, have ? have : "missing", want);
    dlclose(h); /* unused: unloading lets a rebuilt file at the same path load */
    close(fd);
    return NULL;
  }
  /* From here the library stays loaded, and `fd` stays open with it: the loader knows
   * it as /proc/self/fd/N, a name that must not come back for another file. */
  /* A table for a device it was not compiled for asks dlx's runtime providers. */
  void (*set_fallback)(int (*)(DLDeviceType, int32_t, void **)) =
      (void (*)(int (*)(DLDeviceType, int32_t, void **)))dlsym(h, "dlx_addon_set_stream_fallback");
  if (set_fallback) set_fallback(dlx_provider_current_stream);
  /* The operators' implementation (dlx.torch.register), where the addon has it. */
  register_op_fn reg = (register_op_fn)dlsym(h, "dlx_torch_register_op");
  if (reg) g_register_op = reg;
  const DLPackExchangeAPI *api = table();
  if (!dlx_table_validate(api ? &api->header : NULL, path)) return NULL; /* never dlclose'd past here */
  /* torch's rules on the direct call (torch_parity.c), where the addon has them */
  const dlx_torch_parity *(*parity)(PyObject *) =
      (const dlx_torch_parity *(*)(PyObject *))dlsym(h, "dlx_torch_parity_hooks");
  const dlx_torch_parity *hooks = parity ? parity(dlx_torch_operator_path) : NULL;
  if (hooks && hooks->size >= sizeof(dlx_torch_parity)) dlx_torch_parity_addon(api, hooks);
  return dlx_table_capsule(api);
}

/* file_inode(path) -> st_ino or 0 */
static PyObject *file_inode(PyObject *self, PyObject *arg) {
  (void)self;
  PyObject *b;
  if (!PyUnicode_FSConverter(arg, &b)) return NULL;
  struct stat st;
  int rc = lstat(PyBytes_AS_STRING(b), &st);
  Py_DECREF(b);
  return PyLong_FromUnsignedLongLong(rc == 0 ? (unsigned long long)st.st_ino : 0);
}

/* device_rows() -> ((device_type, backend, note, only_when_backend_active), ...) */
static PyObject *device_rows(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  size_t n;
  const dlx_device_row *rows = dlx_device_rows(&n);
  PyObject *t = PyTuple_New((Py_ssize_t)n);
  for (size_t i = 0; t && i < n; ++i) {
    PyObject *row = Py_BuildValue("(issi)", (int)rows[i].device_type,
                                  dlx_backend_name(rows[i].backend), rows[i].note,
                                  rows[i].only_when_active);
    if (!row) {
      Py_CLEAR(t);
      break;
    }
    PyTuple_SET_ITEM(t, (Py_ssize_t)i, row);
  }
  return t;
}

static PyMethodDef addon_methods[] = {
    {"select_backend", select_backend, METH_VARARGS, NULL},
    {"parse_build_args", parse_build_args, METH_VARARGS, NULL},
    {"addon_identity", addon_identity, METH_VARARGS, NULL},
    {"cache_dir", cache_dir, METH_NOARGS, NULL},
    {"ensure_dir", ensure_dir, METH_O, NULL},
    {"file_trusted", file_trusted, METH_O, NULL},
    {"file_inode", file_inode, METH_O, NULL},
    {"build_addon", build_addon, METH_VARARGS, NULL},
    {"addon_register_op", addon_register_op, METH_VARARGS, NULL},
    {"missing_header", missing_header, METH_O, NULL},
    {"load_addon", load_addon, METH_VARARGS, NULL},
    {"device_rows", device_rows, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

int dlx_addon_init(PyObject *module) {
  return PyModule_AddFunctions(module, addon_methods) || dlx_build_init(module) ? -1 : 0;
}
