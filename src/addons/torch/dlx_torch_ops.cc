// dlx torch addon, operators: dlx.torch.register's torch.ops.<ns>.<name> for a declared
// kernel, compiled into the same library as the exchange table (dlx_torch_addon.cc).
#include "dlx_torch_addon.h"  // beside this file, as installed (dlx/addon/)

#include <cctype>
#include <cstdio>

#ifdef DLX_TORCH_NO_PYTHON  // libdlx_torch_ops: dlx_torch_register, below
#include "dlx/dlx_torch.h"
#include "dlx_discover.h"  // beside this file (dlx/addon/), with the core's C it needs
#include "dlx_package_check.h"

#include <mutex>
#include <string>
#if defined(BUILD_WITH_CUDA)
#include <c10/cuda/CUDAStream.h>
#endif
#endif

#if DLX_TORCH_AT_LEAST(2, 5)
#include <c10/core/InferenceMode.h>
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>
#if __has_include(<ATen/ops/empty.h>)
#include <ATen/ops/empty.h>
#else
#include <ATen/ATen.h>
#endif

#include <atomic>
#include <memory>
#include <vector>
#endif

namespace {

using namespace dlx_torch;

// ---- operators: dlx.torch.register's implementation ----------------------------------
//
// torch.ops.<ns>.<name> for a declared kernel, on CPU, CUDA/ROCm and PrivateUse1: a boxed
// kernel that reads the dispatcher's stack (arguments in declared order, defaults filled),
// describes each at::Tensor as a DLTensor in place (no allocation, no Python), runs the
// kernel through dlx_invoke on torch's current stream for the device and allocates
// results with at::empty. The GIL is neither needed nor taken (except by a stream
// provider dlx registered for a device this build does not know).
//
// dlx_invoke.h ships beside this file (dlx/addon/); dlx passes its api with version and
// size, checked at registration.
#if DLX_TORCH_AT_LEAST(2, 5)

constexpr int kMaxArgs = DLX_INVOKE_MAX_ARGS;
constexpr int kMaxResults = DLX_INVOKE_MAX_RESULTS;

// The results, each at::Tensor constructed when the kernel allocates it: most operators
// have none or one, and 16 undefined tensors made and destroyed per call cost ~90 Ir.
struct Results {
  union {
    at::Tensor tensors[kMaxResults];
  };
  uint32_t made = 0;  // bit r: tensors[r] is constructed
  DLTensor views[kMaxResults];
  const char *error = nullptr;  // an allocation's failure, for the message
  std::string why;
  static_assert(kMaxResults <= 32, "Results::made has a bit per result");
  Results() {}
  ~Results() {
    for (uint32_t m = made; m; m &= m - 1) tensors[__builtin_ctz(m)].~Tensor();
  }
  at::Tensor Take(int32_t r) {
    return made >> r & 1 ? std::move(tensors[r]) : at::Tensor();
  }
};

void Describe(const at::Tensor &t, DLTensor *out) {
  if (t.layout() != c10::kStrided)
    TORCH_CHECK_TYPE(false, "only strided tensors reach a dlx kernel, not ", t.layout());
  out->data = t.data_ptr();
  out->device = ToDLDevice(t.device());
  out->ndim = static_cast<int32_t>(t.dim());
  out->dtype = ToDLDataType(t.scalar_type());
  out->shape = const_cast<int64_t *>(t.sizes().data());
  out->strides = const_cast<int64_t *>(t.strides().data());
  out->byte_offset = 0;
}

int AllocateResult(void *ctx, int32_t index, DLDevice dev, int32_t ndim, const int64_t *shape,
                   DLDataType dtype, DLTensor **out) {
  auto *r = static_cast<Results *>(ctx);
  if (index < 0 || index >= kMaxResults) return -1;
  try {
    at::Tensor t = at::empty(c10::IntArrayRef(shape, ndim),
                             at::TensorOptions().dtype(ToScalarType(dtype)).device(ToTorchDevice(dev)));
    if (r->made >> index & 1) {
      r->tensors[index] = std::move(t);
    } else {
      new (&r->tensors[index]) at::Tensor(std::move(t));
      r->made |= uint32_t{1} << index;
    }
    Describe(r->tensors[index], &r->views[index]);
    *out = &r->views[index];
    return 0;
  } catch (const std::exception &e) {
    r->why = e.what();
    return -1;
  }
}

#ifndef DLX_TORCH_NO_PYTHON
// The exception class a dlx_error kind names, found as dlx's eager call finds it: a builtin
// ("KeyError") or a dotted path ("asyncio.CancelledError", "pkg.mod.Outer.Inner": the longest
// importable module, then attributes). A new reference, or NULL with no error set. GIL held.
PyObject *ExceptionClassNamed(const char *kind) {
  const std::string path = std::strchr(kind, '.') ? kind : std::string("builtins.") + kind;
  for (size_t cut = path.rfind('.'); cut != std::string::npos && cut > 0;
       cut = path.rfind('.', cut - 1)) {
    PyObject *obj = PyImport_ImportModule(path.substr(0, cut).c_str());
    if (obj == nullptr) {
      PyErr_Clear();
      continue;
    }
    for (size_t at = cut + 1; obj != nullptr && at <= path.size();) {
      size_t end = path.find('.', at);
      if (end == std::string::npos) end = path.size();
      PyObject *next = PyObject_GetAttrString(obj, path.substr(at, end - at).c_str());
      Py_DECREF(obj);
      obj = next;
      at = end + 1;
    }
    if (obj != nullptr && PyExceptionClass_Check(obj)) return obj;
    Py_XDECREF(obj);
    PyErr_Clear();
    return nullptr;
  }
  return nullptr;
}
#endif

// The kernel's dlx_error, raised as the eager call raises it. Kinds torch's Python binding
// maps from c10 errors go as those; every other kind (KeyError, MemoryError, a user's
// dotted class) is built as a Python exception and thrown as torch's python_error, which
// torch's bindings restore when the operator was called from Python (eager, or the Python
// code torch.compile generates). A C++ caller without Python (AOTInductor) sees only
// python_error's what(), the exception's text. Error path only: the GIL is taken here.
[[noreturn]] void Raise(const char *kind, const std::string &text) {
#ifdef DLX_TORCH_NO_PYTHON  // a C++ caller sees only what(): it names the kind too
  const std::string message = std::string(kind) + ": " + text;
#else
  const std::string &message = text;
#endif
  if (std::strcmp(kind, "ValueError") == 0) TORCH_CHECK_VALUE(false, message);
  if (std::strcmp(kind, "TypeError") == 0) TORCH_CHECK_TYPE(false, message);
  if (std::strcmp(kind, "IndexError") == 0) TORCH_CHECK_INDEX(false, message);
  if (std::strcmp(kind, "NotImplementedError") == 0) TORCH_CHECK_NOT_IMPLEMENTED(false, message);
#ifndef DLX_TORCH_NO_PYTHON  // without Python: a c10::Error that names the kind (below)
  if (Py_IsInitialized()) {
    python_error err;
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *cls = ExceptionClassNamed(kind);
    PyObject *text = cls ? PyUnicode_DecodeUTF8(message.data(),
                                                static_cast<Py_ssize_t>(message.size()),
                                                "replace")
                         : nullptr;
    PyObject *exc = text ? PyObject_CallOneArg(cls, text) : nullptr;
    // a class that cannot be built from one message, or builds something else, falls back
    // to RuntimeError("kind: message"), as in the eager call
    bool raised = exc != nullptr && PyObject_TypeCheck(exc, reinterpret_cast<PyTypeObject *>(cls));
    if (raised) {
      PyErr_SetObject(cls, exc);
      err.persist();  // fetched into err, with the GIL: torch restores it on the caller's side
    } else {
      PyErr_Clear();
    }
    Py_XDECREF(exc);
    Py_XDECREF(text);
    Py_XDECREF(cls);
    PyGILState_Release(gil);
    if (raised) throw python_error(std::move(err));
  }
#endif
#ifdef DLX_TORCH_NO_PYTHON
  TORCH_CHECK(false, message);
#else
  if (std::strcmp(kind, "RuntimeError") == 0) TORCH_CHECK(false, message);
  TORCH_CHECK(false, kind, ": ", message);  // as dlx's eager call words an unknown kind
#endif
}

// A `mut` argument (Tensor(a!)) torch's own in-place operators would refuse to write.
// Not an inference tensor, exactly, in one mask: its key set holds ADInplaceOrView
// (is_inference() is "neither that nor an Autograd key", two out-of-line has_any calls).
inline bool SurelyNotInference(const at::Tensor &t) {
  c10::DispatchKeySet keys = t.key_set(), mask = c10::inplace_or_view_ks;
  return C10_LIKELY((keys.raw_repr() & mask.raw_repr()) != 0);
}

// (Before the tensor is described: an inference tensor is refused first.)
void CheckWritable(const at::Tensor &t, const c10::OperatorHandle &op, size_t i) {
  if (C10_LIKELY(SurelyNotInference(t)) || !t.is_inference() ||
      c10::InferenceMode::is_enabled())
    return;
  TORCH_CHECK(false, op.schema().name(), ": '", op.schema().arguments()[i].name(),
              "' is an inference tensor, which torch does not let an in-place operation "
              "update outside inference mode (make a clone, or call inside "
              "torch.inference_mode())");
}

// at::has_internal_overlap(t) == MemOverlap::Yes, on the strided view just described: a
// dimension of more than one element with stride 0 (its other answers, No for a dense
// tensor and TooHard, are not refused). The plan refuses the same tensor (ValueError);
// this says it first as torch's own in-place operators do (RuntimeError).
void CheckOverlap(const DLTensor &v, const c10::OperatorHandle &op, size_t i) {
  for (int32_t d = 0; d < v.ndim; ++d)
    if (C10_UNLIKELY(v.strides[d] == 0 && v.shape[d] > 1))
      TORCH_CHECK(false, op.schema().name(), ": '", op.schema().arguments()[i].name(),
                  "' has elements that share memory (an expanded or stride-0 tensor): an "
                  "in-place write would write them more than once; pass a .clone()");
}

class OpKernel final : public c10::OperatorKernel {
 public:
  OpKernel(const dlx_kernel_handle *kernel, const dlx_invoke_api *api, int32_t nresults)
      : kernel_(kernel), api_(api), nresults_(nresults) {}

  void operator()(const c10::OperatorHandle &op, c10::DispatchKeySet, torch::jit::Stack *stack) {
    const size_t nargs = op.schema().arguments().size();
    TORCH_CHECK(nargs <= static_cast<size_t>(kMaxArgs), kernel_->name, "(): too many arguments");
    const uint64_t writes = Writes(op, nargs);
    dlx_arg args[kMaxArgs];
    dlx_arg_seq seqs[kMaxArgs];
    std::vector<std::vector<int64_t>> int_lists;
    std::vector<std::vector<double>> float_lists;
    DLTensor views[kMaxArgs];
    auto values = torch::jit::last(*stack, nargs);
    DLDevice device{kDLCPU, 0};
    bool have_device = false;
    for (size_t i = 0; i < nargs; ++i) {
      const c10::IValue &v = values[i];
      dlx_arg &a = args[i];
      a.readonly = 0;
      if (v.isTensor()) {
        // torch hands None for a required Tensor as an undefined tensor: say so, named
        TORCH_CHECK_TYPE(v.toTensor().defined(), kernel_->name, "(): '",
                         op.schema().arguments()[i].name(), "' must be a tensor, got None");
        const bool written = writes >> i & 1;
        if (written) CheckWritable(v.toTensor(), op, i);
        Describe(v.toTensor(), &views[i]);
        if (written) CheckOverlap(views[i], op, i);
        a.kind = DLX_ARG_TENSOR;
        a.value.tensor = &views[i];
        if (!have_device && views[i].device.device_type != kDLCPU) {
          device = views[i].device;
          have_device = true;
        }
      } else if (v.isNone()) {
        a.kind = DLX_ARG_NONE;
      } else if (v.isBool()) {
        a.kind = DLX_ARG_BOOL;
        a.value.i = v.toBool();
      } else if (v.isInt()) {
        a.kind = DLX_ARG_INT;
        a.value.i = v.toInt();
      } else if (v.isSymInt()) {
        a.kind = DLX_ARG_INT;
        a.value.i = v.toSymInt().guard_int(__FILE__, __LINE__);
      } else if (v.isDouble()) {
        a.kind = DLX_ARG_FLOAT;
        a.value.f = v.toDouble();
      } else if (v.isString()) {
        const auto &text = v.toStringRef();
        seqs[i] = {text.c_str(), static_cast<int64_t>(text.size())};
        a.kind = DLX_ARG_STR;
        a.value.seq = &seqs[i];
      } else if (v.isIntList() || v.isSymIntList()) {
        int_lists.emplace_back();
        for (const c10::IValue &e : v.toListRef())
          int_lists.back().push_back(e.isSymInt() ? e.toSymInt().guard_int(__FILE__, __LINE__)
                                                  : e.toInt());
        seqs[i] = {int_lists.back().data(), static_cast<int64_t>(int_lists.back().size())};
        a.kind = DLX_ARG_INTS;
        a.value.seq = &seqs[i];
      } else if (v.isDoubleList()) {
        float_lists.emplace_back(v.toDoubleVector());
        seqs[i] = {float_lists.back().data(), static_cast<int64_t>(float_lists.back().size())};
        a.kind = DLX_ARG_FLOATS;
        a.value.seq = &seqs[i];
      } else {
        TORCH_CHECK_TYPE(false, kernel_->name, "(): argument ", i, " is a ", v.tagKind(),
                         ", which no dlx parameter takes");
      }
    }
    // (a list vector that grew moved its elements, whose heap buffers stay put: seqs hold)
    void *stream = nullptr;
    if (have_device && CurrentWorkStream(static_cast<DLDeviceType>(device.device_type),
                                         device.device_id, &stream) != 0) {
#ifdef DLX_TORCH_NO_PYTHON
      TORCH_CHECK(false, kernel_->name, "(): cannot get the current stream");
#else
      // only the provider fallback sets a Python error; take it (the GIL is held there)
      PyObject *type, *value, *tb;
      PyErr_Fetch(&type, &value, &tb);
      PyObject *text = value ? PyObject_Str(value) : nullptr;
      std::string message = text ? PyUnicode_AsUTF8(text) : "no current stream";
      Py_XDECREF(text);
      Py_XDECREF(type);
      Py_XDECREF(value);
      Py_XDECREF(tb);
      TORCH_CHECK(false, kernel_->name, "(): cannot get the current stream: ", message);
#endif
    }
    Results results;
    dlx_invoke inv;  // not value-initialised: its 1 KB of message buffers are written on failure
    inv.out = nullptr;
    inv.nout = 0;
    inv.produced = 0;
    inv.error_kind[0] = inv.error[0] = '\0';
    inv.fn = kernel_->fn;
    inv.plan = kernel_->plan;
    inv.name = kernel_->name;
    inv.args = args;
    inv.nargs = static_cast<int32_t>(nargs);
    inv.device = device;
    inv.stream = stream;
    inv.allocate = AllocateResult;
    inv.allocate_ctx = &results;
    if (api_->run(&inv) != 0) {
      std::string message = inv.error;
      if (!results.why.empty()) message += " (" + results.why + ")";
      Raise(inv.error_kind, message);
    }
    if (inv.produced != nresults_)
      TORCH_CHECK(false, kernel_->name, "(): the kernel returned ", inv.produced, " result",
                  inv.produced == 1 ? "" : "s", "; its declaration, and so the operator, has ",
                  nresults_);
    // Written: each mutable argument's version counter, once, as torch's in-place ops do.
    for (uint64_t m = writes; m; m &= m - 1) {
      const size_t i = static_cast<size_t>(__builtin_ctzll(m));
      if (!values[i].isTensor()) continue;
      const at::Tensor &t = values[i].toTensor();
      if (SurelyNotInference(t) || !t.is_inference()) t.unsafeGetTensorImpl()->bump_version();
    }
    torch::jit::drop(*stack, nargs);
    for (int32_t r = 0; r < nresults_; ++r) stack->emplace_back(results.Take(r));
  }

 private:
  // The arguments the schema writes (Tensor(a!)), one bit each: read from the schema once,
  // not per argument per call (the schema of a registered operator does not change).
  uint64_t Writes(const c10::OperatorHandle &op, size_t nargs) {
    if (C10_LIKELY(writes_known_.load(std::memory_order_acquire)))
      return writes_.load(std::memory_order_relaxed);
    uint64_t w = 0;
    for (size_t i = 0; i < nargs; ++i) {
      const c10::AliasInfo *alias = op.schema().arguments()[i].alias_info();
      if (alias != nullptr && alias->isWrite()) w |= uint64_t{1} << i;
    }
    writes_.store(w, std::memory_order_relaxed);
    writes_known_.store(true, std::memory_order_release);
    return w;
  }

  std::atomic<uint64_t> writes_{0};
  std::atomic<bool> writes_known_{false};
  const dlx_kernel_handle *kernel_;
  const dlx_invoke_api *api_;
  int32_t nresults_;
};

// ---- Autograd: torch's autogradNotImplementedFallback, whole where it has work ----------
//
// torch::CppFunction keeps its KernelFunction private (torch::Library, a friend, reads it);
// an explicit instantiation may name a private member ([temp.spec]): KernelOf reads it, so
// the fallback torch builds is called as torch built it.
c10::KernelFunction &KernelOf(torch::CppFunction &f);
template <c10::KernelFunction torch::CppFunction::*Member>
struct KernelOfAccess {
  friend c10::KernelFunction &KernelOf(torch::CppFunction &f) { return f.*Member; }
};
template struct KernelOfAccess<&torch::CppFunction::func_>;

const c10::KernelFunction &NotImplementedFallback() {
  static const c10::KernelFunction *kernel = [] {
    torch::CppFunction f = torch::autograd::autogradNotImplementedFallback();
    return new c10::KernelFunction(std::move(KernelOf(f)));  // for the process, as operators
  }();
  return *kernel;
}

// The fallback (torch/csrc/autograd/autograd_not_implemented_fallback.cpp) reads autograd
// metadata only: requires_grad and a forward grad per tensor, then check_inplace per
// mutable one (a no-op when none requires grad); it redispatches below ADInplaceOrView
// under AutoDispatchBelowADInplaceOrView when no argument is a view's input (Tensor(a))
// and no result aliases one; results get a node only when an argument requires grad. A
// call where no tensor has autograd metadata at all (the usual plain tensor) is that
// redispatch and nothing else, ~870 Ir less than the fallback's vectors and schema
// queries (torch 2.13). Anything else goes to the fallback, whole.
class AutogradKernel final : public c10::OperatorKernel {
 public:
  void operator()(const c10::OperatorHandle &op, c10::DispatchKeySet keys,
                  torch::jit::Stack *stack) {
    const size_t nargs = op.schema().arguments().size();
    if (C10_LIKELY(Plain(op)) && stack->size() >= nargs) {
      bool bare = true;
      for (const c10::IValue &v : torch::jit::last(*stack, nargs)) {
        if (v.isTensor() ? v.toTensor().unsafeGetTensorImpl()->autograd_meta() != nullptr
                         : v.isTensorList()) {
          bare = false;
          break;
        }
      }
      if (C10_LIKELY(bare)) {
        at::AutoDispatchBelowADInplaceOrView guard;
        op.redispatchBoxed(keys & c10::after_ADInplaceOrView_keyset, stack);
        return;
      }
    }
    NotImplementedFallback().callBoxed(op, keys, stack);
  }

 private:
  // No result aliases and no argument is a view's input (read from the schema once).
  bool Plain(const c10::OperatorHandle &op) {
    int known = plain_.load(std::memory_order_relaxed);
    if (C10_LIKELY(known != 0)) return known > 0;
    bool plain = true;
    for (const c10::Argument &r : op.schema().returns()) plain &= r.alias_info() == nullptr;
    for (const c10::Argument &a : op.schema().arguments())
      plain &= a.alias_info() == nullptr || a.alias_info()->isWrite();
    plain_.store(plain ? 1 : -1, std::memory_order_relaxed);
    return plain;
  }

  std::atomic<int> plain_{0};  // 0: not read yet, 1: plain, -1: not
};

// Registrations live as long as the process, as the operators they implement.
std::vector<std::unique_ptr<torch::Library>> &Libraries() {
  static auto *libraries = new std::vector<std::unique_ptr<torch::Library>>();
  return *libraries;
}

#endif  // DLX_TORCH_AT_LEAST(2, 5)

}  // namespace

// dlx.torch.register: implement torch.ops.<ns>.<name> (defined already, with its schema)
// for the CPU, CUDA and PrivateUse1 dispatch keys with `kernel` (a dlx_kernel_handle that
// the caller keeps alive for the process's life). 0, or -1 with the reason in `why`.
DLX_ADDON_EXPORT int dlx_torch_register_op(const char *ns, const char *name, const void *kernel,
                                           const void *invoke_api, int32_t nresults, char *why,
                                           size_t whylen) {
#if DLX_TORCH_AT_LEAST(2, 5)
  const auto *api = static_cast<const dlx_invoke_api *>(invoke_api);
  if (api == nullptr || api->version != DLX_INVOKE_API_VERSION ||
      api->size < sizeof(dlx_invoke_api)) {
    std::snprintf(why, whylen, "dlx's invoke api is not version %u", DLX_INVOKE_API_VERSION);
    return -1;
  }
  return Guarded(
      [&] {
        for (c10::DispatchKey key : {c10::DispatchKey::CPU, c10::DispatchKey::CUDA,
                                     c10::DispatchKey::PrivateUse1}) {
          auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, ns, key, __FILE__,
                                                      __LINE__);
          lib->impl(name, torch::CppFunction::makeFromBoxedFunctor(std::make_unique<OpKernel>(
                              static_cast<const dlx_kernel_handle *>(kernel), api, nresults)));
          Libraries().push_back(std::move(lib));
        }
        // Autograd as for an operator without a formula: a result that requires grad gets
        // a node whose backward raises, naming the operator (torch.library.register_autograd
        // replaces it); a mutable leaf that requires grad is refused, as torch's in-place
        // operators refuse it. (That fallback calls below ADInplaceOrView: OpKernel bumps
        // the version counters itself.)
        auto autograd = std::make_unique<torch::Library>(
            torch::Library::IMPL, ns, c10::DispatchKey::Autograd, __FILE__, __LINE__);
        NotImplementedFallback();  // made here, not on a call
        autograd->impl(name, torch::CppFunction::makeFromBoxedFunctor(
                                 std::make_unique<AutogradKernel>()));
        Libraries().push_back(std::move(autograd));

      },
      [&](const char *, const char *message) {
        std::snprintf(why, whylen, "%s", message ? message : "a Python error");
#ifndef DLX_TORCH_NO_PYTHON
        PyErr_Clear();
#endif
      });
#else
  (void)ns, (void)name, (void)kernel, (void)invoke_api, (void)nresults;
  std::snprintf(why, whylen, "torch operators need torch 2.5 or newer");
  return -1;
#endif
}

#ifdef DLX_TORCH_NO_PYTHON
// ---- dlx_torch_register: the same operators for a program without Python ------------
//
// The addon's table (dlx_torch_addon.cc) is not built here: the operators ask this for the
// stream, as the table answers it with no provider registered.
int dlx_torch::CurrentWorkStream(DLDeviceType device_type, int32_t device_id, void **out) {
  *out = nullptr;
#if defined(BUILD_WITH_CUDA)
  if (device_type == kDLCUDA)
    return Guarded([&] { *out = c10::cuda::getCurrentCUDAStream(ToDeviceIndex(device_id)).stream(); },
                   [](const char *, const char *) {});
#else
  (void)device_type, (void)device_id;
#endif
  return 0;  // NULL: the device's default stream
}

namespace {
// What dlx_torch_check_package compares a package's digests with: per namespace this
// process registered, the library's path and the sha256 of the file it loaded.
struct Registered {
  std::string ns, sha256, path;
};
std::mutex registered_mutex;
std::vector<Registered> &RegisteredNamespaces() {
  static auto *registered = new std::vector<Registered>();  // never destroyed, as Libraries()
  return *registered;
}

bool IsIdentifier(const char *s) {
  if (s == nullptr || !(std::isalpha(static_cast<unsigned char>(*s)) || *s == '_')) return false;
  for (; *s; ++s)
    if (!(std::isalnum(static_cast<unsigned char>(*s)) || *s == '_')) return false;
  return true;
}
}  // namespace

DLX_ADDON_EXPORT int dlx_torch_register(const char *library_path, const char *ns, char *err,
                                        size_t errlen) {
  char scratch[1];
  if (err == nullptr || errlen == 0) err = scratch, errlen = sizeof scratch;
  err[0] = '\0';
  if (library_path == nullptr) {
    std::snprintf(err, errlen, "dlx_torch_register: library_path is NULL");
    return -1;
  }
  if (!IsIdentifier(ns)) {
    std::snprintf(err, errlen,
                  "dlx_torch_register: namespace '%s' is not an identifier (letters, digits, "
                  "'_'; not starting with a digit)", ns ? ns : "(null)");
    return -1;
  }
#if DLX_TORCH_AT_LEAST(2, 5)
  // The library and its kernels (function, plan, name) stay for the process: the
  // operators hold them.
  auto *lib = new dlx_found_library;
  char why[512];
  if (dlx_discover(library_path, lib, why, sizeof why) != 0) {
    delete lib;
    std::snprintf(err, errlen, "dlx_torch_register: %s", why);
    return -1;
  }
  std::string skipped;
  int32_t usable = 0;
  for (int32_t i = 0; i < lib->n; ++i) {
    if (lib->kernels[i].schema != nullptr) {
      ++usable;
    } else {
      skipped += std::string(skipped.empty() ? "" : "; ") + lib->kernels[i].handle.name + ": " +
                 lib->kernels[i].why;
    }
  }
  if (usable == 0) {
    std::snprintf(err, errlen, "dlx_torch_register: %s has no dlx kernel torch can call%s%s",
                  library_path, skipped.empty() ? " (no DLX_KERNEL records)" : ": ",
                  skipped.c_str());
    dlx_discover_free(lib);
    delete lib;
    return -1;
  }
  // DEF, as dlx.torch.register: torch refuses a namespace another library defined.
  int rc = Guarded(
      [&] {
        auto def = std::make_unique<torch::Library>(torch::Library::DEF, ns, std::nullopt,
                                                    __FILE__, __LINE__);
        for (int32_t i = 0; i < lib->n; ++i)
          if (lib->kernels[i].schema != nullptr)
            def->def(lib->kernels[i].schema, {at::Tag::pt2_compliant_tag});
        Libraries().push_back(std::move(def));
      },
      [&](const char *, const char *message) {
        std::snprintf(err, errlen, "dlx_torch_register: torch refuses namespace '%s': %s", ns,
                      message);
      });
  if (rc != 0) {
    dlx_discover_free(lib);
    delete lib;
    return -1;
  }
  for (int32_t i = 0; i < lib->n; ++i) {
    const dlx_found_kernel &k = lib->kernels[i];
    if (k.schema == nullptr) continue;
    if (dlx_torch_register_op(ns, k.handle.name, &k.handle, &dlx_invoke_api_v1, k.nresults, why,
                              sizeof why) != 0) {
      std::snprintf(err, errlen, "dlx_torch_register: %s::%s: %s", ns, k.handle.name, why);
      return -1;  // the namespace is defined: its kernels stay referenced
    }
  }
  std::lock_guard<std::mutex> lock(registered_mutex);
  RegisteredNamespaces().push_back({ns, lib->sha256, library_path});
  return 0;
#else
  std::snprintf(err, errlen, "dlx_torch_register: torch operators need torch 2.5 or newer");
  return -1;
#endif
}

DLX_ADDON_EXPORT int dlx_torch_check_package(const char *const *keys,
                                             const char *const *values, size_t n, char *err,
                                             size_t errlen) {
  std::lock_guard<std::mutex> lock(registered_mutex);
  std::vector<dlx_registered_ns> regs;
  for (const Registered &r : RegisteredNamespaces())
    regs.push_back({r.ns.c_str(), r.sha256.c_str(), r.path.c_str()});
  return dlx_package_check(keys, nullptr, values, nullptr, n, regs.data(), regs.size(), err,
                           errlen);
}
#endif  // DLX_TORCH_NO_PYTHON
