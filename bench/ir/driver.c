/*
 * driver.c - the loop `make bench-ir` counts under callgrind.
 *
 * run(fn, args, n, label, attr=None, kwnames=None) calls fn(*args) n times through
 * PyObject_Vectorcall (with attr: getattr(fn, attr)(*args), as `lib.k(...)` does; with
 * kwnames, a tuple of names: the last len(kwnames) args are passed by keyword, as the
 * interpreter passes them) and counts only that loop:
 * callgrind starts with collection off; the loop toggles it on and off and dumps the
 * counts under `label`, so every row is its own dump and nothing else is counted.
 * noop(*args) is the bare METH_FASTCALL call every row is compared with.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <valgrind/callgrind.h>

static PyObject *noop(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
  (void)m;
  (void)args;
  (void)nargs;
  Py_RETURN_NONE;
}

/* Out of line so that its frame is what callgrind attributes the loop to. */
static __attribute__((noinline)) int loop(PyObject *fn, PyObject *attr, PyObject *const *argv,
                                          Py_ssize_t nargs, PyObject *kwnames, long n) {
  for (long i = 0; i < n; ++i) {
    PyObject *f = fn;
    if (attr && !(f = PyObject_GetAttr(fn, attr))) return -1;
    PyObject *r = PyObject_Vectorcall(f, argv, (size_t)nargs, kwnames);
    if (attr) Py_DECREF(f);
    if (!r) return -1;
    Py_DECREF(r);
  }
  return 0;
}

static PyObject *run(PyObject *m, PyObject *args) {
  (void)m;
  PyObject *fn, *tuple, *attr = Py_None, *kwnames = Py_None;
  long n;
  const char *label;
  if (!PyArg_ParseTuple(args, "OO!ls|OO", &fn, &PyTuple_Type, &tuple, &n, &label, &attr,
                        &kwnames))
    return NULL;
  if (attr == Py_None) attr = NULL;
  if (kwnames == Py_None) kwnames = NULL;
  PyObject *const *argv = &PyTuple_GET_ITEM(tuple, 0);
  Py_ssize_t nargs = PyTuple_GET_SIZE(tuple);
  if (kwnames && (!PyTuple_Check(kwnames) || PyTuple_GET_SIZE(kwnames) > nargs)) {
    PyErr_SetString(PyExc_TypeError, "kwnames: a tuple of at most len(args) names");
    return NULL;
  }
  if (kwnames) nargs -= PyTuple_GET_SIZE(kwnames);
  CALLGRIND_START_INSTRUMENTATION; /* off between rows: imports run at full speed */
  if (loop(fn, attr, argv, nargs, kwnames, 2)) { /* warm: caches filled, errors surface */
    CALLGRIND_STOP_INSTRUMENTATION;
    return NULL;
  }
  CALLGRIND_ZERO_STATS;
  CALLGRIND_TOGGLE_COLLECT;
  int rc = loop(fn, attr, argv, nargs, kwnames, n);
  CALLGRIND_TOGGLE_COLLECT;
  CALLGRIND_DUMP_STATS_AT(label);
  CALLGRIND_STOP_INSTRUMENTATION;
  if (rc) return NULL;
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"noop", (PyCFunction)(void (*)(void))noop, METH_FASTCALL, "noop(*args) -> None"},
    {"run", run, METH_VARARGS, "run(fn, args, n, label, attr=None, kwnames=None)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "dlx_irdriver", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_dlx_irdriver(void) { return PyModule_Create(&module); }
