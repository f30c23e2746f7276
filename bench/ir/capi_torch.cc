// capi_torch.cc - the physical limit for torch: THPVariable_Check + THPVariable_Unpack,
// then the data pointer, dim() and size(0) through ATen's own accessors.
#include <Python.h>
#include <ATen/core/Tensor.h>
#include <torch/csrc/autograd/python_variable.h>

static volatile intptr_t sink;

static PyObject *touch(PyObject *, PyObject *const *args, Py_ssize_t nargs) {
  intptr_t s = 0;
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    if (!THPVariable_Check(args[i])) {
      PyErr_SetString(PyExc_TypeError, "expected a torch.Tensor");
      return nullptr;
    }
    const at::Tensor &t = THPVariable_Unpack(args[i]);
    const int64_t nd = t.dim();
    s += reinterpret_cast<intptr_t>(t.data_ptr()) + nd + (nd ? t.size(0) : 0);
  }
  sink = s;
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"touch", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(touch)),
     METH_FASTCALL, nullptr},
    {nullptr, nullptr, 0, nullptr}};

static PyModuleDef module = {PyModuleDef_HEAD_INIT, "dlx_peer_capi_torch", nullptr, -1,
                             methods, nullptr, nullptr, nullptr, nullptr};

PyMODINIT_FUNC PyInit_dlx_peer_capi_torch(void) { return PyModule_Create(&module); }
