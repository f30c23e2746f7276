/*
 * errors.c - prefixing a pending exception with
 * where it happened ("saxpy(): argument 1 (int): ...") while keeping its class.
 * Only error paths come here.
 */
#include "dlx_py.h"

/* Same class, message prefixed, the original as __cause__; classes that cannot be
 * built from one message (UnicodeDecodeError, a custom __init__) keep the original
 * exception and get the prefix as a note. */
static void prefix_pending(PyObject *prefix) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  if (!type) {
    PyErr_Format(PyExc_RuntimeError, "%Ufailed without setting an error", prefix);
    return;
  }
  PyErr_NormalizeException(&type, &value, &tb);
  if (tb && value) PyException_SetTraceback(value, tb);
  PyObject *msg = value ? PyObject_Str(value) : NULL;
  PyObject *renamed = NULL;
  if (msg) {
    PyObject *text = PyUnicode_Concat(prefix, msg);
    renamed = text ? PyObject_CallOneArg(type, text) : NULL;
    Py_XDECREF(text);
    Py_DECREF(msg);
  }
  if (renamed && PyExceptionInstance_Check(renamed)) {
    /* It stands in for the original, which stays reachable as its __cause__ (with its
     * own cause, context and traceback: frames of a producer's Python code included). */
    if (tb) PyException_SetTraceback(renamed, tb);
    PyException_SetCause(renamed, value); /* steals; sets __suppress_context__ */
    PyErr_Restore(type, renamed, tb);
    return;
  }
  Py_XDECREF(renamed);
  PyErr_Clear();
  PyObject *note = PyUnicode_FromFormat("dlx: %U", prefix);
  PyObject *r = note && value ? PyObject_CallMethod(value, "add_note", "O", note) : NULL;
  Py_XDECREF(r);
  Py_XDECREF(note);
  PyErr_Clear();
  PyErr_Restore(type, value, tb);
}

int dlx_prefix_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb); /* building the prefix must not see the pending error */
  PyObject *prefix = PyUnicode_FromFormatV(fmt, ap);
  va_end(ap);
  if (!prefix) { /* out of memory: the original error is the better one */
    PyErr_Clear();
    PyErr_Restore(et, ev, tb);
    return -1;
  }
  PyErr_Restore(et, ev, tb);
  prefix_pending(prefix);
  Py_DECREF(prefix);
  return -1;
}
