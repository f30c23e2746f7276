/* capi_numpy.c - the physical limit for numpy: what the framework's own C API costs
 * for the kernel work (PyArray_Check, then the data pointer, ndim and shape[0]). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

static volatile Py_intptr_t sink;

static PyObject *touch(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
  (void)m;
  Py_intptr_t s = 0;
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    if (!PyArray_Check(args[i])) {
      PyErr_SetString(PyExc_TypeError, "expected a numpy.ndarray");
      return NULL;
    }
    PyArrayObject *a = (PyArrayObject *)args[i];
    s += (Py_intptr_t)PyArray_DATA(a) + PyArray_NDIM(a) + (PyArray_NDIM(a) ? PyArray_DIM(a, 0) : 0);
  }
  sink = s;
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"touch", (PyCFunction)(void (*)(void))touch, METH_FASTCALL, NULL}, {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "dlx_peer_capi_numpy", NULL, -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_dlx_peer_capi_numpy(void) {
  import_array();
  return PyModule_Create(&module);
}
