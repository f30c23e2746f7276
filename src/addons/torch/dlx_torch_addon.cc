// dlx torch addon: the DLPack 1.3 C exchange table for torch.Tensor.
//
// Torch releases before the exchange table existed (1.13 here) have no
// `__dlpack_c_exchange_api__`; dlx builds this file once per installed torch
// and installs the table it returns. Everything works on ATen directly: no
// copies, no stream synchronisation, no Python objects held by exported tensors.
// The same library holds the operators of dlx.torch.register (dlx_torch_ops.cc).
//
// Build defines:
//   DLX_ADDON_IDENTITY    string the builder stamps in (required)
//   BUILD_WITH_CUDA       current_work_stream answers kDLCUDA natively
//   BUILD_WITH_ROCM       CUDA-typed tensors are HIP memory: export as kDLROCM,
//                         and current_work_stream answers kDLROCM natively
//   BUILD_WITH_TORCH_NPU  current_work_stream answers kDLExtDev from torch_npu
//                         (BUILD_WITH_ASCEND, the upstream name, is accepted too)
// Whatever a build does not answer natively goes to the runtime fallback that
// dlx registers through dlx_addon_set_stream_fallback.
#include "dlx_torch_addon.h"  // beside this file, as installed (dlx/addon/)

#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>

// Per-operator headers (torch >= 1.13) keep the cold compile short; older
// torch only has the all-operators header.
#if __has_include(<ATen/ops/empty.h>) && __has_include(<ATen/ops/from_blob.h>)
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#else
#include <ATen/ATen.h>
#endif

#if defined(BUILD_WITH_ROCM)
// A ROCm torch files HIP devices under "cuda"; its stream API for that is the
// one hipify maps c10::cuda::getCurrentCUDAStream to. (Needs the HIP platform
// defines torch's own extension builder passes: -D__HIP_PLATFORM_AMD__ -DUSE_ROCM.)
#include <ATen/hip/impl/HIPStreamMasqueradingAsCUDA.h>
#elif defined(BUILD_WITH_CUDA)
#include <c10/cuda/CUDAStream.h>
#endif

#ifdef BUILD_WITH_TORCH_NPU
#include "torch_npu/csrc/core/npu/NPUStream.h"
#endif

#if DLX_TORCH_AT_LEAST(2, 5)  // the parity hooks' modes (operators exist from 2.5 on)
#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/record_function.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#endif

#if __has_include(<c10/core/impl/COW.h>)  // copy-on-write storages (the plain layout's probe)
#include <c10/core/impl/COW.h>
#endif

#include <atomic>
#include <memory>
#include <vector>
#include <new>
#include <type_traits>
#include <typeinfo>

#ifndef DLX_ADDON_IDENTITY
#error "DLX_ADDON_IDENTITY is not defined: pass -DDLX_ADDON_IDENTITY='\"<identity>\"' (python -m dlx build-addon does)"
#endif

namespace {

using namespace dlx_torch;

// ---- export ---------------------------------------------------------------

// One allocation per exported tensor: the managed tensor, a reference that
// keeps the storage alive, then shape[ndim] and strides[ndim]. Shape and
// strides are copies because in-place ops (t_(), resize_()) may rewrite the
// TensorImpl's own arrays while the consumer still holds the view.
struct ExportedTensor {
  DLManagedTensorVersioned managed;
  at::Tensor keep_alive;
  int64_t *dims() { return reinterpret_cast<int64_t *>(this + 1); }
};
static_assert(alignof(ExportedTensor) >= alignof(int64_t), "dims follow the header");

void DeleteExported(DLManagedTensorVersioned *self) {
  // No GIL needed: only an at::Tensor is released, and torch takes the GIL
  // itself for storages that wrap Python objects.
  auto *exported = static_cast<ExportedTensor *>(self->manager_ctx);
  exported->~ExportedTensor();
  ::operator delete(exported);
}

__attribute__((noinline, cold)) const at::Tensor &UnpackTensorSlow(PyObject *obj) {
  if (!THPVariable_Check(obj)) {
    Fail("TypeError", std::string("expected a torch.Tensor, got ") + Py_TYPE(obj)->tp_name);
  }
  return THPVariable_Unpack(obj);
}

__attribute__((always_inline)) inline const at::Tensor &UnpackTensor(void *py_object) {
  auto *obj = static_cast<PyObject *>(py_object);
  // Exact torch.Tensor first: a pointer compare, where THPVariable_Check is a
  // PyObject_IsInstance call (subclasses such as Parameter still take it).
  if (C10_LIKELY(Py_TYPE(obj) == reinterpret_cast<PyTypeObject *>(THPVariableClass))) {
    return THPVariable_Unpack(obj);
  }
  return UnpackTensorSlow(obj);
}

// Checks that the consumer would read the values torch means, and fills the
// parts of `out` that do not depend on who owns shape/strides.
void CheckExportable(const at::Tensor &tensor);

// Key sets already found exportable (strided, no conj/neg bit). layout() and the bit
// checks walk dispatch key sets; remembering the few sets a program uses makes them a
// compare on every later call. Atomic (relaxed: each holds a fact about a key set, nothing
// else is published with it), as every shared state below: under a free-threaded CPython
// and torch, calls run without a GIL.
constexpr int kOkKeySets = 8;
std::atomic<uint64_t> ok_key_sets[kOkKeySets];  // 0: free (no exportable tensor's set)
std::atomic<uint64_t> last_ok_key_set{~uint64_t{0}};  // the one found last: mostly the next

inline uint64_t LastOkKeySet() { return last_ok_key_set.load(std::memory_order_relaxed); }

inline bool KnownExportable(uint64_t keys) {
  if (C10_LIKELY(keys == LastOkKeySet())) return true;
  if (keys == 0) return false;  // would match a free slot
  for (auto &known : ok_key_sets)
    if (known.load(std::memory_order_relaxed) == keys) {
      last_ok_key_set.store(keys, std::memory_order_relaxed);
      return true;
    }
  return false;
}

__attribute__((noinline, cold)) void AddExportable(uint64_t keys) {
  for (auto &slot : ok_key_sets) {
    uint64_t free = 0;
    if (keys == 0 || slot.compare_exchange_strong(free, keys, std::memory_order_relaxed) ||
        free == keys)
      break;  // a 0 set is never kept (it would read as a free slot)
  }
  last_ok_key_set.store(keys, std::memory_order_relaxed);
}

// The DLPack device and dtype of a torch device and dtype, with what they were made from:
// tensors in a call mostly share both, and the conversions are switches through torch's
// accessors. Never written once published: a thread reads the one published when it looks,
// whole, whatever another publishes meanwhile. One per pair met (interned in `described`,
// kept for the process); the last one found is `last_described`.
struct LastDescribed {
  // The first is a real pair (float32 on the CPU), never an uninitialized dtype: a tensor
  // whose dtype is uninitialized must never match and reuse the description.
  c10::Device device{c10::DeviceType::CPU};
  caffe2::TypeMeta dtype = caffe2::TypeMeta::Make<float>();
  DLDevice dl_device{kDLCPU, 0};
  DLDataType dl_dtype{kDLFloat, 32, 1};
  int64_t itemsize = sizeof(float);  // of dtype: the fast path skips the TypeMeta lookup
};
const LastDescribed kFirstDescribed{};
constexpr int kDescribedMax = 256;  // pairs interned; past them, described per tensor
std::atomic<const LastDescribed *> described[kDescribedMax];
std::atomic<const LastDescribed *> last_described{&kFirstDescribed};

inline const LastDescribed &LastOne() {
  return *last_described.load(std::memory_order_acquire);
}

// A kind of plain tensor just checked, for dlx's loop to describe in line (the plain layout).
void PublishPlain(const c10::TensorImpl *impl) noexcept;

// The description of tensor's device and dtype: the interned one, made and added by a
// compare-exchange when new (no lock: nothing a fork could leave held), then published as
// the last one. Throws for a device or dtype DLPack cannot name, before publishing anything.
__attribute__((noinline, cold)) const LastDescribed *Described(const at::Tensor &tensor) {
  const c10::Device device = tensor.device();
  const caffe2::TypeMeta dtype = tensor.dtype();
  auto same = [&](const LastDescribed *d) { return d->device == device && d->dtype == dtype; };
  const LastDescribed *last = &LastOne();
  if (same(last)) return last;
  LastDescribed made;  // throws for a device or an (uninitialized) dtype DLPack lacks
  made.dl_device = ToDLDevice(device);
  made.dl_dtype = ToDLDataType(tensor.scalar_type());
  made.device = device;
  made.dtype = dtype;
  made.itemsize = static_cast<int64_t>(dtype.itemsize());
  for (auto &slot : described) {
    const LastDescribed *d = slot.load(std::memory_order_acquire);
    if (d == nullptr) {
      auto *fresh = new LastDescribed(made);
      if (slot.compare_exchange_strong(d, fresh, std::memory_order_acq_rel,
                                       std::memory_order_acquire)) {
        d = fresh;
      } else {
        delete fresh;  // another thread took the slot: d is its entry
      }
    }
    if (same(d)) {
      last_described.store(d, std::memory_order_release);
      return d;
    }
  }
  thread_local LastDescribed overflow;  // all slots taken: this thread's, not published
  overflow = made;
  return &overflow;
}

// The cold parts of DescribeTensor: a key set not seen yet, another device or dtype.
__attribute__((noinline, cold)) const LastDescribed *DescribeNew(const at::Tensor &tensor,
                                                                 uint64_t keys) {
  if (!KnownExportable(keys)) {
    CheckExportable(tensor);
    AddExportable(keys);
  }
  const LastDescribed *last = Described(tensor);
  PublishPlain(tensor.unsafeGetTensorImpl());
  return last;
}

// Everything but shape and strides (whose owner differs between the view and the
// managed export). In line: the view export runs it for every tensor of every call.
__attribute__((always_inline)) inline void DescribeTensor(const at::Tensor &tensor,
                                                          DLTensor *out) {
  const c10::TensorImpl *impl = tensor.unsafeGetTensorImpl();
  const uint64_t keys = impl->key_set().raw_repr();
  const LastDescribed *last = &LastOne();
  if (C10_UNLIKELY(keys != LastOkKeySet() || impl->device() != last->device ||
                   impl->dtype() != last->dtype)) {
    last = DescribeNew(tensor, keys);
  }
  out->device = last->dl_device;
  out->dtype = last->dl_dtype;
  out->ndim = static_cast<int32_t>(impl->dim());
  out->data = tensor.data_ptr();  // storage_offset is already applied
  out->byte_offset = 0;
}

// ---- the view fast path --------------------------------------------------------
//
// A call converts the same few kinds of tensor again and again: plain TensorImpls
// (no subclass), default size/stride/device policies, a key set, device and dtype
// already described. For those, DescribeFast reads what torch's own inline accessors
// would return, once: the accessors re-test the policies and storage on each read,
// and TensorBase::data_ptr() is a call. Anything else takes DescribeTensor.

// Names TensorImpl's protected policy test through a derived class; it is never
// instantiated, only its member pointer is used on real TensorImpls.
struct PolicyPeek : c10::TensorImpl {
  using c10::TensorImpl::matches_policy;
  using c10::TensorImpl::SizesStridesPolicy;
  // With the default policy, what sizes(), strides(), dim(), numel() and
  // storage_offset() return; read once instead of re-testing the policy per accessor.
  using c10::TensorImpl::numel_;
  using c10::TensorImpl::sizes_and_strides_;
  using c10::TensorImpl::storage_offset_;
  using c10::TensorImpl::device_opt_;  // device() without its throwing check
  // Where the plain layout finds dtype, key set and storage (LearnPlainLayout).
  using c10::TensorImpl::data_type_;
  using c10::TensorImpl::key_set_;
  using c10::TensorImpl::storage_;
  using c10::TensorImpl::version_counter_;
};

// The vtable of a plain c10::TensorImpl, learnt from the first tensor typeid proves is
// one: a subclass (nested, batched, functional, opaque...) may override what the
// fast path reads, so only exact TensorImpls take it.
// Written once (by any thread: all write the same value), read relaxed.
std::atomic<const void *> plain_impl_vtable_{nullptr};

inline const void *PlainVtable() { return plain_impl_vtable_.load(std::memory_order_relaxed); }

inline const void *VtableOf(const c10::TensorImpl *impl) {
  return *reinterpret_cast<const void *const *>(impl);
}

__attribute__((noinline, cold)) bool LearnPlainImpl(const c10::TensorImpl *impl) {
  if (PlainVtable() != nullptr || typeid(*impl) != typeid(c10::TensorImpl)) return false;
  plain_impl_vtable_.store(VtableOf(impl), std::memory_order_relaxed);
  return true;
}

// torch >= 2.1 separates mutable access (which materializes copy-on-write storage and
// honours "no mutable access" flags) from data(); a kernel may write, so it is used.
template <typename S>
inline auto StorageData(const S &storage, int) -> decltype(storage.mutable_data()) {
  return storage.mutable_data();
}
template <typename S>
inline void *StorageData(const S &storage, long) {
  return storage.data();
}

// All of a fast-path tensor's DLTensor but its data pointer (DescribeFast, ParityView):
// dims read, then written, so that no store makes the compiler read them again.
__attribute__((always_inline)) inline void WriteDescribed(const c10::TensorImpl *impl,
                                                          const LastDescribed &last,
                                                          DLTensor *out) {
  const auto &dims = impl->*(&PolicyPeek::sizes_and_strides_);
  const int64_t ndim = static_cast<int64_t>(dims.size());
  const int64_t *sizes = dims.sizes_data();
  const int64_t *strides = dims.strides_data();
  out->device = last.dl_device;
  out->ndim = static_cast<int32_t>(ndim);
  out->dtype = last.dl_dtype;
  out->shape = const_cast<int64_t *>(sizes);
  out->strides = const_cast<int64_t *>(strides);
  out->byte_offset = 0;
}

__attribute__((always_inline)) inline bool DescribeFast(const c10::TensorImpl *impl,
                                                        DLTensor *out) {
  const LastDescribed &last = LastOne();
  if (C10_UNLIKELY(VtableOf(impl) != PlainVtable()) && !LearnPlainImpl(impl)) return false;
  constexpr auto kCustomStrides = PolicyPeek::SizesStridesPolicy::CustomStrides;
  if (C10_UNLIKELY((impl->*(&PolicyPeek::matches_policy))(kCustomStrides) ||
                   impl->key_set().raw_repr() != LastOkKeySet() ||
                   impl->device() != last.device || impl->dtype() != last.dtype)) {
    return false;
  }
  const c10::Storage &storage = impl->unsafe_storage();
  if (C10_UNLIKELY(!storage)) return false;  // data_ptr() raises for these: let it
  // Reads first, writes to *out last: the stores could alias the policy bits and would
  // make the compiler test them again for every accessor.
  void *data = nullptr;  // as TensorImpl::data(): an empty tensor has no data pointer
  if (C10_LIKELY(impl->*(&PolicyPeek::numel_) != 0)) {
    data = static_cast<char *>(StorageData(storage, 0)) +
           last.itemsize * (impl->*(&PolicyPeek::storage_offset_));
  }
  out->data = data;
  WriteDescribed(impl, last, out);
  return true;
}

void CheckExportable(const at::Tensor &tensor) {
  // A subclass with its own __torch_dispatch__ (DTensor, FakeTensor...) may own no memory
  // at all and its operations are its own: refused here (once per key set, so plain
  // tensors pay nothing), dlx's trace hook then hands the call to the kernel's operator.
  if (tensor.key_set().has(c10::DispatchKey::Python)) {
    Fail("BufferError",
         "a tensor subclass with its own __torch_dispatch__ (such as a DTensor), whose "
         "memory a kernel cannot read directly: register the kernel with "
         "dlx.torch.register(lib, namespace) and call it with such tensors, or pass a plain "
         "tensor (for a DTensor: .to_local() or .full_tensor())");
  }
  if (tensor.layout() != c10::kStrided) {
    Fail("BufferError", "only strided tensors can be exported, not " +
                            c10::str(tensor.layout()) + " ones");
  }
  if (tensor.is_conj() || tensor.is_neg()) {
    Fail("BufferError",
         "tensor has the conjugate/negative bit set; call .resolve_conj() / .resolve_neg() first");
  }
}

DLManagedTensorVersioned *ExportManaged(const at::Tensor &tensor) {
  DLTensor view;
  DescribeTensor(tensor, &view);
  const int64_t ndim = view.ndim;

  void *memory = ::operator new(sizeof(ExportedTensor) + 2 * ndim * sizeof(int64_t));
  auto *exported = new (memory) ExportedTensor{{}, tensor};  // noexcept from here on
  if (ndim > 0) {
    std::memcpy(exported->dims(), tensor.sizes().data(), ndim * sizeof(int64_t));
    std::memcpy(exported->dims() + ndim, tensor.strides().data(), ndim * sizeof(int64_t));
  }
  view.shape = exported->dims();
  view.strides = exported->dims() + ndim;  // never NULL, even for 0-d tensors

  DLManagedTensorVersioned &managed = exported->managed;
  managed.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  managed.manager_ctx = exported;
  managed.deleter = DeleteExported;
  managed.flags = 0;
  managed.dl_tensor = view;
  return &managed;
}

// ---- import ---------------------------------------------------------------

void CheckShape(const DLTensor &view) {
  if (view.ndim < 0 || (view.ndim > 0 && view.shape == nullptr)) {
    Fail("ValueError", "DLTensor has a negative ndim or a NULL shape");
  }
}

// torch 1.13 computes a blob's storage size in a noexcept function: a layout it
// would throw on there terminates the process. So the addon refuses, before torch
// sees them, every layout torch cannot hold: negative extents or strides (torch
// has no negative strides), and element counts or byte sizes beyond int64.
// `strides` NULL means compact.
void CheckLayout(int32_t ndim, const int64_t *shape, const int64_t *strides, int64_t itemsize) {
  int64_t numel = 1, last = 0;  // last: the largest element offset reached
  for (int32_t i = 0; i < ndim; ++i) {
    if (shape[i] < 0) {
      Fail("BufferError", "dimension " + std::to_string(i) + " has a negative extent (" +
                              std::to_string(shape[i]) + ")");
    }
    if (strides != nullptr && strides[i] < 0) {
      Fail("BufferError", "dimension " + std::to_string(i) + " has a negative stride (" +
                              std::to_string(strides[i]) + "); torch has no negative strides");
    }
    if (__builtin_mul_overflow(numel, shape[i], &numel)) {
      Fail("BufferError", "the tensor's element count overflows int64");
    }
  }
  if (numel == 0) return;  // nothing is ever addressed
  for (int32_t i = 0; strides != nullptr && i < ndim; ++i) {
    int64_t reach;
    if (__builtin_mul_overflow(shape[i] - 1, strides[i], &reach) ||
        __builtin_add_overflow(last, reach, &last)) {
      Fail("BufferError", "the tensor's storage size overflows int64 (strides too large)");
    }
  }
  if (strides == nullptr) last = numel - 1;
  int64_t bytes;
  if (__builtin_add_overflow(last, 1, &bytes) || __builtin_mul_overflow(bytes, itemsize, &bytes)) {
    Fail("BufferError", "the tensor's storage size in bytes overflows int64");
  }
}

void CallManagedDeleter(void *ctx) {
  auto *managed = static_cast<DLManagedTensorVersioned *>(ctx);
  if (managed->deleter != nullptr) managed->deleter(managed);
}

// Takes ownership of `managed` in every outcome, exceptions included.
at::Tensor ImportManaged(DLManagedTensorVersioned *managed) {
  if (managed->version.major != DLPACK_MAJOR_VERSION) {
    // Only the deleter may be touched in a tensor of another major version.
    const uint32_t major = managed->version.major;
    CallManagedDeleter(managed);
    Fail("BufferError", "cannot import a DLPack " + std::to_string(major) +
                            ".x tensor (this addon speaks " +
                            std::to_string(DLPACK_MAJOR_VERSION) + ".x)");
  }
  at::TensorOptions options;
  c10::Device device(c10::DeviceType::CPU);
  const DLTensor &view = managed->dl_tensor;
  try {
    device = ToTorchDevice(view.device);
    const c10::ScalarType dtype = ToScalarType(view.dtype);
    options = options.dtype(dtype).device(device);
    CheckShape(view);
    if (view.ndim > 0 && view.strides == nullptr) {
      Fail("BufferError", "DLTensor has NULL strides");  // forbidden since DLPack 1.2
    }
    CheckLayout(view.ndim, view.shape, view.strides,
                static_cast<int64_t>(c10::elementSize(dtype)));
  } catch (...) {
    CallManagedDeleter(managed);
    throw;
  }
  c10::IntArrayRef sizes(view.shape, view.ndim);
  c10::IntArrayRef strides(view.strides, view.ndim);
  // .context() hands `managed` to a unique_ptr inside the maker, so from this
  // line on torch calls the deleter exactly once: when the storage dies, or
  // when make_tensor() throws. target_device skips probing the pointer.
  return at::for_blob(static_cast<char *>(view.data) + view.byte_offset, sizes)
      .strides(strides)
      .context(managed, CallManagedDeleter)
      .target_device(device)
      .options(options)
      .make_tensor();
}

// ---- the table ------------------------------------------------------------

int ManagedTensorAllocator(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                           void (*SetError)(void *, const char *, const char *)) {
  auto report = [&](const char *kind, const char *message) {
    if (kind == nullptr) {  // cannot happen without Python calls; stay exact anyway
      PyErr_Clear();
      kind = "RuntimeError";
      message = "dlx torch addon: allocation failed with a Python error";
    }
    SetError(error_ctx, kind, message);
  };
  return Guarded(
      [&] {
        CheckShape(*prototype);
        const c10::Device device = ToTorchDevice(prototype->device);
        const c10::ScalarType dtype = ToScalarType(prototype->dtype);
        CheckLayout(prototype->ndim, prototype->shape, nullptr,
                    static_cast<int64_t>(c10::elementSize(dtype)));
        at::Tensor tensor = at::empty(c10::IntArrayRef(prototype->shape, prototype->ndim),
                                      at::TensorOptions().dtype(dtype).device(device));
        *out = ExportManaged(tensor);
      },
      report);
}

int ManagedTensorFromPyObject(void *py_object, DLManagedTensorVersioned **out) {
  return GuardedPy([&] { *out = ExportManaged(UnpackTensor(py_object)); });
}

// The general view export: every tensor DescribeFast leaves alone.
__attribute__((noinline)) void DescribeView(const at::Tensor &tensor, DLTensor *out) {
  DescribeTensor(tensor, out);
  out->shape = const_cast<int64_t *>(tensor.sizes().data());
  out->strides = const_cast<int64_t *>(tensor.strides().data());
}

int DLTensorFromPyObject(void *py_object, DLTensor *out) {
  return GuardedPy([&] {
    // A view into the TensorImpl's own arrays: no allocation, and valid while
    // the Python object lives, which the caller guarantees until it returns.
    const at::Tensor &tensor = UnpackTensor(py_object);
    // Inside the guard: torch's accessors may throw on the fast path too.
    if (C10_LIKELY(DescribeFast(tensor.unsafeGetTensorImpl(), out))) return;
    DescribeView(tensor, out);
  });
}

int ManagedTensorToPyObject(DLManagedTensorVersioned *managed, void **out_py_object) {
  return GuardedPy([&] {
    PyObject *wrapped = THPVariable_Wrap(ImportManaged(managed));
    // On failure the temporary at::Tensor has already run the deleter.
    if (wrapped == nullptr) throw PythonErrorSet{};
    *out_py_object = wrapped;
  });
}

std::atomic<int (*)(DLDeviceType, int32_t, void **)> g_stream_fallback{nullptr};

}  // namespace

int dlx_torch::CurrentWorkStream(DLDeviceType device_type, int32_t device_id, void **out) {
  // Always asked afresh: the caller may switch streams between two calls.
  return GuardedPy([&] {
    *out = nullptr;
    switch (device_type) {
      case kDLCPU:
        return;  // host work has no stream
#if defined(BUILD_WITH_ROCM)
      case kDLROCM:
        *out =
            c10::hip::getCurrentHIPStreamMasqueradingAsCUDA(ToDeviceIndex(device_id)).stream();
        return;
#elif defined(BUILD_WITH_CUDA)
      case kDLCUDA:
        *out = c10::cuda::getCurrentCUDAStream(ToDeviceIndex(device_id)).stream();
        return;
#endif
#ifdef BUILD_WITH_TORCH_NPU
      case kDLExtDev:
        *out = c10_npu::getCurrentNPUStream(ToDeviceIndex(device_id)).stream();
        return;
#endif
      default:
        break;
    }
    // Not built in: ask the provider dlx registered (it sets a Python error
    // itself when it fails); with none, NULL means "the default stream".
    auto fallback = g_stream_fallback.load(std::memory_order_acquire);
    if (fallback != nullptr && fallback(device_type, device_id, out) != 0) {
      throw PythonErrorSet{};
    }
  });
}

namespace {

// ---- parity: a direct call keeps torch's rules (src/python/tables/torch_parity.c) -------
//
// dlx's call path uses the table through a checked copy whose exports are these: the
// table's own, then a tensor that requires grad while grad mode is on is refused with
// dlx's OperatorPath (the call then takes the operator's path, where autograd sees it).
// A plain tensor has no autograd metadata: the test is one load.

PyObject *g_operator_path = nullptr;  // dlx._core.OperatorPath, set once before any call

__attribute__((noinline, cold)) int GradRefused() {
  if (!c10::GradMode::is_enabled()) return 0;
  PyErr_SetString(g_operator_path,
                  "requires grad while grad mode is on: a direct call would drop its gradient");
  return -1;
}

// TensorImpl keeps autograd_meta_ private behind an out-of-line getter: a call per tensor,
// which also made the view export save six registers. An explicit instantiation may name a
// private member ([temp.spec]), as dlx_torch_ops.cc's KernelOf does; the getter returns
// the pointer as it is.
using AutogradMetaPtr = std::unique_ptr<c10::AutogradMetaInterface>;
const AutogradMetaPtr &AutogradMetaOf(const c10::TensorImpl &impl);
template <AutogradMetaPtr c10::TensorImpl::*Member>
struct AutogradMetaAccess {
  friend const AutogradMetaPtr &AutogradMetaOf(const c10::TensorImpl &impl) {
    return impl.*Member;
  }
};
template struct AutogradMetaAccess<&c10::TensorImpl::autograd_meta_>;

// requires_grad(), short for the usual tensor: no autograd metadata at all.
inline bool RequiresGrad(const c10::TensorImpl *impl) {
  const c10::AutogradMetaInterface *meta = AutogradMetaOf(*impl).get();
  return C10_UNLIKELY(meta != nullptr) && meta->requires_grad();
}

// DLTensorFromPyObject's body, with the grad test on the TensorImpl it already holds
// (*impl_out: that TensorImpl). Inside the caller's own GuardedPy: each caller's lambda is
// then a Guarded of its own, inlined whole.
__attribute__((always_inline)) inline void ParityViewBody(void *py_object, DLTensor *out,
                                                          bool *grad,
                                                          const c10::TensorImpl **impl_out) {
  const at::Tensor &tensor = UnpackTensor(py_object);
  const c10::TensorImpl *impl = tensor.unsafeGetTensorImpl();
  *impl_out = impl;
  *grad = RequiresGrad(impl);
  if (C10_LIKELY(DescribeFast(impl, out))) return;
  DescribeView(tensor, out);
}

// Everything ParityView does, under the guard: what its fast path leaves alone.
__attribute__((noinline)) int ParityViewGuarded(void *py_object, DLTensor *out) {
  bool grad = false;
  const c10::TensorImpl *impl;
  int rc = GuardedPy([&] { ParityViewBody(py_object, out, &grad, &impl); });
  return C10_UNLIKELY(grad) && rc == 0 ? GradRefused() : rc;
}

// The last step of ParityView's fast path: the data pointer a kernel may write through.
// StorageImpl's mutable access may throw (no mutable access, copy-on-write to materialize);
// out of line, so that ParityView itself makes tail calls only and saves no register.
__attribute__((noinline)) int ParityViewData(const c10::Storage &storage, int64_t offset,
                                             void *py_object, DLTensor *out) {
  bool ok = true;
  try {
    out->data = static_cast<char *>(StorageData(storage, 0)) + offset;
  } catch (...) {
    ok = false;  // the guarded path asks again, and reports it as torch words it
  }
  return C10_LIKELY(ok) ? 0 : ParityViewGuarded(py_object, out);
}

// ParityView past its grad test: a tensor DescribeFast would take, read without anything
// that throws (each test as DescribeFast's; LearnPlainImpl is the guarded path's), ending
// in tail calls only; anything else goes to ParityViewGuarded.
__attribute__((always_inline)) inline int ViewUsual(const c10::TensorImpl *impl,
                                                    void *py_object, DLTensor *out) {
  const LastDescribed &last = LastOne();
  constexpr auto kCustomStrides = PolicyPeek::SizesStridesPolicy::CustomStrides;
  const auto &device = impl->*(&PolicyPeek::device_opt_);
  if (C10_UNLIKELY(VtableOf(impl) != PlainVtable() ||
                   (impl->*(&PolicyPeek::matches_policy))(kCustomStrides) ||
                   impl->key_set().raw_repr() != LastOkKeySet() || !device.has_value() ||
                   *device != last.device || impl->dtype() != last.dtype ||
                   !impl->unsafe_storage()))
    return ParityViewGuarded(py_object, out);
  WriteDescribed(impl, last, out);
  if (C10_UNLIKELY(impl->*(&PolicyPeek::numel_) == 0)) {
    out->data = nullptr;  // as TensorImpl::data(): an empty tensor has no data pointer
    return 0;
  }
  return ParityViewData(impl->unsafe_storage(),
                        last.itemsize * (impl->*(&PolicyPeek::storage_offset_)), py_object, out);
}

// A tensor with autograd metadata (every view has some: a slice, a transpose) that does not
// require grad takes the same path; one that does, the guarded one (which refuses it under
// grad mode). Out of line: ParityView itself keeps making tail calls only.
__attribute__((noinline)) int ParityViewMeta(const c10::TensorImpl *impl, void *py_object,
                                             DLTensor *out) {
  bool grad = true;
  try {
    grad = AutogradMetaOf(*impl)->requires_grad();
  } catch (...) {  // torch's own implementation throws nothing; another one: ask again there
  }
  return C10_UNLIKELY(grad) ? ParityViewGuarded(py_object, out) : ViewUsual(impl, py_object, out);
}

// DLTensorFromPyObject with the grad test (an exact torch.Tensor without autograd metadata
// cannot require grad), for dlx's checked copy of the table.
int ParityView(void *py_object, DLTensor *out) {
  auto *obj = static_cast<PyObject *>(py_object);
  if (C10_UNLIKELY(Py_TYPE(obj) != reinterpret_cast<PyTypeObject *>(THPVariableClass)))
    return ParityViewGuarded(py_object, out);
  const c10::TensorImpl *impl = THPVariable_Unpack(obj).unsafeGetTensorImpl();
  if (C10_UNLIKELY(AutogradMetaOf(*impl) != nullptr)) return ParityViewMeta(impl, py_object, out);
  return ViewUsual(impl, py_object, out);
}

int ParityManaged(void *py_object, DLManagedTensorVersioned **out) {
  bool grad = false;
  int rc = GuardedPy([&] {
    const at::Tensor &tensor = UnpackTensor(py_object);
    grad = RequiresGrad(tensor.unsafeGetTensorImpl());
    *out = ExportManaged(tensor);
  });
  if (C10_LIKELY(!grad) || rc != 0 || GradRefused() == 0) return rc;
  CallManagedDeleter(*out);  // only an at::Tensor is released: the error stays
  *out = nullptr;
  return -1;
}

// A TorchFunctionMode, a TorchDispatchMode or the profiler (RecordFunction callbacks) would
// see an operator call: a kernel registered as one takes the operator's path. Operators
// exist from torch 2.5 on; before, nothing is registered and nothing is asked.
int ParityModes() {
#if DLX_TORCH_AT_LEAST(2, 5)
  return c10::impl::TorchDispatchModeTLS::stack_len() > 0 ||
         at::impl::torch_function_mode_enabled() || at::hasCallbacks();
#else
  return 0;
#endif
}

// Not an inference tensor, in one load and a mask: the key set holds ADInplaceOrView.
// TensorImpl::is_inference() is "neither ADInplaceOrView nor an Autograd key", through two
// out-of-line DispatchKeySet::has_any calls (torch 1.13: 12 Ir a call); a key set with the
// functionality bit is not an inference tensor, exactly. Without it, torch's own test.
inline bool SurelyNotInference(const c10::TensorImpl *impl) {
  c10::DispatchKeySet keys = impl->key_set(), mask = c10::inplace_or_view_ks;  // (torch 1.13's
  return C10_LIKELY((keys.raw_repr() & mask.raw_repr()) != 0);  // raw_repr is not const)
}

// As torch's in-place operators: an inference tensor is written only in inference mode.
int ParityWritable(void *py_object) {
  auto *obj = static_cast<PyObject *>(py_object);
  // the usual mut tensor, exact torch.Tensor and not inference: nothing can throw
  if (C10_LIKELY(Py_TYPE(obj) == reinterpret_cast<PyTypeObject *>(THPVariableClass)) &&
      SurelyNotInference(THPVariable_Unpack(obj).unsafeGetTensorImpl()))
    return 0;
  return GuardedPy([&] {
    const at::Tensor &t = UnpackTensor(py_object);
    if (t.is_inference() && !c10::InferenceMode::is_enabled()) {
      PyErr_SetString(PyExc_RuntimeError,
                      "is an inference tensor, which torch does not let an in-place operation "
                      "update outside inference mode (make a clone, or call inside "
                      "torch.inference_mode())");
      throw PythonErrorSet{};
    }
  });
}

// The version counter after a write, as torch's in-place operators bump it. Inference
// tensors have none (torch's increment_version skips them too).
int ParityBump(void *py_object) {
  auto *obj = static_cast<PyObject *>(py_object);
  if (C10_LIKELY(Py_TYPE(obj) == reinterpret_cast<PyTypeObject *>(THPVariableClass))) {
    c10::TensorImpl *impl = THPVariable_Unpack(obj).unsafeGetTensorImpl();
    if (SurelyNotInference(impl)) {  // a version counter, so bump() cannot throw
      impl->bump_version();
      return 0;
    }
  }
  return GuardedPy([&] {
    const at::Tensor &t = UnpackTensor(py_object);
    if (!t.is_inference()) t.unsafeGetTensorImpl()->bump_version();
  });
}

// The address of a tensor's version counter, as VariableVersion::bump increments it; the
// counter is private (read through the explicit-instantiation access, as AutogradMetaOf).
// A TensorImpl keeps its counter for life (shallow_copy_from and set_data keep it).
template <typename Counter>
uint32_t *CounterAddress(Counter *counter) {
  static_assert(std::is_same<decltype(counter->version_), std::atomic<uint32_t>>::value &&
                    std::atomic<uint32_t>::is_always_lock_free,
                "the caller increments it as a plain lock-free uint32_t");
  return counter ? reinterpret_cast<uint32_t *>(&counter->version_) : nullptr;
}
uint32_t *VersionAddress(const c10::VariableVersion &v);
const void *CounterOf(const c10::VariableVersion &v);  // the counter itself (plain layout)
template <typename M, M Member>
struct VersionAccess {
  friend uint32_t *VersionAddress(const c10::VariableVersion &v) {
    return CounterAddress((v.*Member).get());
  }
  friend const void *CounterOf(const c10::VariableVersion &v) { return (v.*Member).get(); }
};
template struct VersionAccess<decltype(&c10::VariableVersion::version_counter_),
                              &c10::VariableVersion::version_counter_>;

// A `mut` tensor's view in one call: ParityView, then the counter the caller bumps after
// the kernel when ParityWritable would pass it without a word (exact torch.Tensor, not an
// inference tensor); otherwise NULL, and the caller asks the two hooks. Saves both hooks'
// calls and unpacks.
int ParityViewMut(void *py_object, DLTensor *out, uint32_t **version) {
  bool grad = false;
  const c10::TensorImpl *impl = nullptr;
  *version = nullptr;
  int rc = GuardedPy([&] { ParityViewBody(py_object, out, &grad, &impl); });
  if (C10_UNLIKELY(rc != 0)) return rc;
  if (C10_UNLIKELY(grad) && GradRefused() != 0) return -1;
  if (C10_LIKELY(SurelyNotInference(impl))) *version = VersionAddress(impl->version_counter());
  return 0;
}

// ---- the plain layout: dlx's loop describes a plain tensor itself ----------------------
//
// ParityView costs a call per tensor, and tests again what dlx's loop already knows. The
// plain layout (dlx_torch_plain, read by dlx_plain_view.h) says where the loop finds what
// ViewUsual reads, so that it reads it in line. Each offset is taken from this torch's own
// accessors on probe tensors when the hooks are handed over, and checked there against
// what the accessors return; if one does not check out, no layout is offered and every
// tensor takes ParityView. The policy and storage checks are bits no accessor addresses:
// they are found as the bits torch's own setters flip on a probe, and the storage's are
// checked to catch every way torch arms them (a refusal, a warning, copy-on-write).

dlx_torch_plain plain_layout{};      // offsets and masks, once offered; kinds unused
uint64_t plain_policy_mask = 0;      // the size/device/layout policy bits of the word
uint64_t plain_policy_bits = 0;      // their value on a plain tensor
bool plain_offered = false;          // set once, before the hooks are handed over
std::atomic<const dlx_torch_plain *> plain_current{nullptr};
static_assert(std::atomic<const dlx_torch_plain *>::is_always_lock_free &&
                  sizeof(std::atomic<const dlx_torch_plain *>) == sizeof(void *),
              "dlx reads the published pointer as a plain pointer, with acquire order");
std::atomic<int> plain_published{0};  // layouts published; each is kept for the process
constexpr int kPlainMaxPublished = 1024;  // past this, the last stays (a program cycling
                                          // through more kinds takes ParityView for some)

inline uint64_t Load64(const void *base, int32_t at) {
  uint64_t v;
  std::memcpy(&v, static_cast<const char *>(base) + at, sizeof v);
  return v;
}
inline const void *LoadPtr(const void *base, int32_t at) {
  const void *p;
  std::memcpy(&p, static_cast<const char *>(base) + at, sizeof p);
  return p;
}
inline int32_t OffsetIn(const void *base, const void *field) {
  return static_cast<int32_t>(static_cast<const char *>(field) -
                              static_cast<const char *>(base));
}

// The bits `change` flips in the `size` bytes at `object`, added to the mask over the 8
// bytes at *at (-1: from the first flipped byte on); false if one lies outside them.
template <typename F>
bool FlippedBits(const void *object, size_t size, int32_t *at, unsigned char mask[8],
                 F &&change) {
  const auto *bytes = static_cast<const unsigned char *>(object);
  std::vector<unsigned char> before(bytes, bytes + size);
  change();
  for (size_t i = 0; i < size; ++i) {
    const unsigned flipped = before[i] ^ bytes[i];
    if (flipped == 0) continue;
    if (*at < 0) *at = static_cast<int32_t>(i);
    const int64_t k = static_cast<int64_t>(i) - *at;
    if (k < 0 || k >= 8) return false;
    mask[k] |= static_cast<unsigned char>(flipped);
  }
  return true;
}

inline uint64_t MaskOf(const unsigned char bytes[8]) {
  uint64_t m;
  std::memcpy(&m, bytes, sizeof m);  // in the byte order dlx's load sees
  return m;
}

// Setters a torch may lack (detected: each is public where it exists).
template <typename T, typename = void>
struct HasCustomDevice : std::false_type {};
template <typename T>
struct HasCustomDevice<T, decltype(std::declval<T &>().set_custom_device(true))>
    : std::true_type {};
template <typename T, typename = void>
struct HasCustomLayout : std::false_type {};
template <typename T>
struct HasCustomLayout<T, decltype(std::declval<T &>().set_custom_layout(true))>
    : std::true_type {};
template <typename T, typename = void>
struct HasPythonCustomLayout : std::false_type {};
template <typename T>
struct HasPythonCustomLayout<T, decltype(std::declval<T &>().set_python_custom_layout(true))>
    : std::true_type {};
template <typename S, typename = void>
struct HasMutableData : std::false_type {};
template <typename S>
struct HasMutableData<S, decltype(void(std::declval<const S &>().mutable_data()))>
    : std::true_type {};
template <typename S, typename = void>
struct HasMutableChecks : std::false_type {};
template <typename S>
struct HasMutableChecks<S, decltype(std::declval<S &>().set_throw_on_mutable_data_ptr())>
    : std::true_type {};

// Each setter that moves a TensorImpl off ViewUsual's policies, on a fresh probe.
template <typename Impl = c10::TensorImpl>
bool PolicyBits(int32_t word_at, unsigned char mask[8]) {
  using Policy = PolicyPeek::SizesStridesPolicy;
  auto flips = [&](auto &&set) {
    at::Tensor probe = at::empty({1}, at::kFloat);
    Impl *impl = probe.unsafeGetTensorImpl();
    int32_t at = word_at;
    return FlippedBits(impl, sizeof(c10::TensorImpl), &at, mask, [&] { set(impl); });
  };
  bool ok = true;
  for (Policy policy : {Policy::CustomStrides, Policy::CustomSizes}) {
    ok = ok && flips([&](Impl *impl) { impl->set_custom_sizes_strides(policy); });
    ok = ok && flips([&](Impl *impl) { impl->set_python_custom_sizes_strides(policy); });
  }
  ok = ok && flips([](Impl *impl) { impl->set_python_custom_device(true); });
  if constexpr (HasCustomDevice<Impl>::value)
    ok = ok && flips([](Impl *impl) { impl->set_custom_device(true); });
  if constexpr (HasCustomLayout<Impl>::value)
    ok = ok && flips([](Impl *impl) { impl->set_custom_layout(true); });
  if constexpr (HasPythonCustomLayout<Impl>::value)
    ok = ok && flips([](Impl *impl) { impl->set_python_custom_layout(true); });
  return ok;
}

// The storage's checks on mutable access: the bits set_throw_on_mutable_data_ptr flips,
// which must also catch a warning and copy-on-write. False where they cannot be found.
template <typename S = c10::StorageImpl>
bool StorageChecks(dlx_torch_plain *L) {
  if constexpr (!HasMutableData<c10::Storage>::value) {
    L->at.checks_at = 0;  // data() is a plain read: nothing to test
    L->checks_mask = 0;
    return true;
  } else if constexpr (!HasMutableChecks<S>::value) {
    return false;  // mutable access checks something this torch gives no setter for
  } else {
    unsigned char mask[8] = {};
    int32_t at = -1;
    at::Tensor probe = at::empty({1}, at::kFloat);
    S *storage = probe.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
    auto refuse = [&] { storage->set_throw_on_mutable_data_ptr(); };
    if (!FlippedBits(storage, sizeof(S), &at, mask, refuse) || at < 0 ||
        at + 8 > int32_t(sizeof(S)))  // the 8 bytes read lie in the object
      return false;
    L->at.checks_at = at;
    L->checks_mask = MaskOf(mask);
    at::Tensor warned = at::empty({1}, at::kFloat);
    S *w = warned.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
    w->set_warn_deprecated_on_mutable_data_ptr();
    if ((Load64(w, at) & L->checks_mask) == 0) return false;
#if __has_include(<c10/core/impl/COW.h>)
    at::Tensor shared = at::empty({1}, at::kFloat);
    S *original = shared.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
    c10::intrusive_ptr<S> copy = c10::impl::cow::lazy_clone_storage(*original);
    if (!copy || (Load64(copy.get(), at) & L->checks_mask) == 0 ||
        (Load64(original, at) & L->checks_mask) == 0)
      return false;
#endif
    return true;
  }
}

// dlx_torch_plain.meta_no_grad: torch's own requires_grad() of a TensorImpl with autograd
// metadata, the test ParityViewMeta makes. A view's answer may be its base's (a base that
// came to require grad after the view was taken): only torch's virtual knows.
int PlainMetaNoGrad(const void *p) noexcept {
  const auto *impl = static_cast<const c10::TensorImpl *>(p);
  try {
    const c10::AutogradMetaInterface *meta = AutogradMetaOf(*impl).get();
    return meta == nullptr || !meta->requires_grad() ? 1 : 0;
  } catch (...) {  // torch's own implementation throws nothing; another one: the view asks
    return 0;
  }
}

// The offsets of the plain layout, each checked on probes; false: not offered. The probes
// are plain CPU tensors whatever the caller's state: no Python mode (a FakeTensorMode) sees
// them, and inference mode would make inference tensors of them.
bool LearnPlainLayout(dlx_torch_plain *L) {
  c10::impl::ExcludeDispatchKeyGuard no_python(
      c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot}));
  c10::InferenceMode not_inference(false);
  at::Tensor t = at::empty({2, 3, 4}, at::kFloat);
  const c10::TensorImpl *impl = t.unsafeGetTensorImpl();
  if (!LearnPlainImpl(impl) && VtableOf(impl) != PlainVtable()) return false;
  L->type = THPVariableClass;
  L->vtable = PlainVtable();

  PyObject *obj = THPVariable_Wrap(t);  // the Python object's TensorImpl pointer
  if (obj == nullptr) {
    PyErr_Clear();
    return false;
  }
  L->at.impl_at = OffsetIn(obj, &THPVariable_Unpack(obj));
  const bool wrapped = LoadPtr(obj, L->at.impl_at) == impl;
  Py_DECREF(obj);
  if (!wrapped) return false;

  static_assert(sizeof(AutogradMetaPtr) == sizeof(void *), "read as one pointer");
  L->at.meta_at = OffsetIn(impl, &AutogradMetaOf(*impl));
  at::Tensor grad = at::empty({1}, at::kFloat);
  grad.set_requires_grad(true);
  const c10::TensorImpl *gi = grad.unsafeGetTensorImpl();
  if (LoadPtr(impl, L->at.meta_at) != nullptr || LoadPtr(gi, L->at.meta_at) == nullptr ||
      LoadPtr(gi, L->at.meta_at) != AutogradMetaOf(*gi).get())
    return false;
  // Views in line too, once the hook answers as torch on a view of each, and on a view whose
  // base came to require grad after it was taken; else without (views take ParityView).
  at::Tensor later = at::empty({4}, at::kFloat), later_view = later.narrow(0, 1, 2);
  later.set_requires_grad(true);
  at::Tensor view = t.narrow(0, 0, 1), grad_view = grad.narrow(0, 0, 1);
  const bool views = PlainMetaNoGrad(view.unsafeGetTensorImpl()) == 1 &&
                     PlainMetaNoGrad(gi) == 0 &&
                     PlainMetaNoGrad(grad_view.unsafeGetTensorImpl()) == 0 &&
                     PlainMetaNoGrad(later_view.unsafeGetTensorImpl()) == 0;
  L->meta_no_grad = views ? PlainMetaNoGrad : nullptr;

  // The word: dtype and device, and the policy bits beside them.
  L->at.word_at = OffsetIn(impl, &(impl->*(&PolicyPeek::data_type_)));
  const int32_t device_at = OffsetIn(impl, &(impl->*(&PolicyPeek::device_opt_)));
  constexpr int32_t kDtype = sizeof(caffe2::TypeMeta), kDevice = sizeof(PolicyPeek::device_opt_);
  if (device_at < L->at.word_at + kDtype || device_at + kDevice > L->at.word_at + 8 ||
      L->at.word_at + 8 > int32_t(sizeof(c10::TensorImpl)))
    return false;
  unsigned char word[8] = {}, policy[8] = {};
  for (int32_t i = 0; i < kDtype; ++i) word[i] = 0xff;
  for (int32_t i = 0; i < kDevice; ++i) word[device_at - L->at.word_at + i] = 0xff;
  if (!PolicyBits(L->at.word_at, policy)) return false;
  for (int i = 0; i < 8; ++i) {
    if (word[i] & policy[i]) return false;  // a policy bit inside dtype or device
    word[i] |= policy[i];
  }
  L->word_mask = MaskOf(word);
  plain_policy_mask = MaskOf(policy);
  plain_policy_bits = Load64(impl, L->at.word_at) & plain_policy_mask;

  L->at.keys_at = OffsetIn(impl, &(impl->*(&PolicyPeek::key_set_)));
  if (Load64(impl, L->at.keys_at) != impl->key_set().raw_repr()) return false;
  L->at.storage_at = OffsetIn(impl, &(impl->*(&PolicyPeek::storage_)));
  const c10::StorageImpl *storage = impl->unsafe_storage().unsafeGetStorageImpl();
  if (LoadPtr(impl, L->at.storage_at) != storage) return false;
  L->at.numel_at = OffsetIn(impl, &(impl->*(&PolicyPeek::numel_)));
  L->at.offset_at = OffsetIn(impl, &(impl->*(&PolicyPeek::storage_offset_)));
  at::Tensor narrow = t.narrow(2, 1, 2);  // 12 elements from element 1
  const c10::TensorImpl *ni = narrow.unsafeGetTensorImpl();
  if (Load64(impl, L->at.numel_at) != 24 || Load64(impl, L->at.offset_at) != 0 ||
      Load64(ni, L->at.numel_at) != 12 || Load64(ni, L->at.offset_at) != 1)
    return false;

  // Dims: the count, and the two arrays a TensorImpl holds itself up to max_ndim.
  const auto &dims = impl->*(&PolicyPeek::sizes_and_strides_);
  const int32_t dims_at = OffsetIn(impl, &dims);
  L->at.sizes_at = OffsetIn(impl, dims.sizes_data());
  L->at.strides_at = OffsetIn(impl, dims.strides_data());
  L->at.ndim_at = -1;
  for (int32_t at = dims_at; at + 8 <= dims_at + int32_t(sizeof dims); at += 8) {
    bool counts = true;
    for (int64_t n = 0; n <= 8 && counts; ++n) {
      at::Tensor probe = at::empty(std::vector<int64_t>(n, 1), at::kFloat);
      counts = Load64(probe.unsafeGetTensorImpl(), at) == uint64_t(n);
    }
    if (counts) {
      L->at.ndim_at = at;
      break;
    }
  }
  if (L->at.ndim_at < 0) return false;
  L->at.max_ndim = -1;
  for (int64_t n = 0; n <= 8; ++n) {
    std::vector<int64_t> shape(n);
    for (int64_t i = 0; i < n; ++i) shape[i] = i + 2;
    at::Tensor probe = at::empty(shape, at::kFloat);
    const c10::TensorImpl *pi = probe.unsafeGetTensorImpl();
    const auto &pd = pi->*(&PolicyPeek::sizes_and_strides_);
    const bool inside = OffsetIn(pi, pd.sizes_data()) == L->at.sizes_at &&
                        OffsetIn(pi, pd.strides_data()) == L->at.strides_at;
    if (inside != (L->at.max_ndim == n - 1)) break;  // held inside up to some n, then never
    if (!inside) continue;
    for (int64_t i = 0; i < n; ++i)
      if (Load64(pi, L->at.sizes_at + 8 * int32_t(i)) != uint64_t(probe.size(i)) ||
          Load64(pi, L->at.strides_at + 8 * int32_t(i)) != uint64_t(probe.stride(i)))
        return false;
    L->at.max_ndim = int32_t(n);
  }
  if (L->at.max_ndim < 1) return false;

  // The version counter: its pointer in the TensorImpl, the count in it; a bump moves it.
  at::Tensor bumped = at::empty({1}, at::kFloat);
  c10::TensorImpl *bi = bumped.unsafeGetTensorImpl();
  const c10::VariableVersion &version = bi->*(&PolicyPeek::version_counter_);
  const void *counter = CounterOf(version);
  uint32_t *count = VersionAddress(version);
  L->at.version_at = OffsetIn(bi, &version);
  if (counter == nullptr || count == nullptr || LoadPtr(bi, L->at.version_at) != counter)
    return false;
  L->at.counter_at = OffsetIn(counter, count);
  const uint32_t before = *count;
  bi->bump_version();
  if (*count != before + 1 || version.current_version() != before + 1) return false;

  L->at.data_at = OffsetIn(storage, &storage->data_ptr());
  if (LoadPtr(storage, L->at.data_at) != StorageData(impl->unsafe_storage(), 0)) return false;
  return StorageChecks(L);
}

void PublishPlain(const c10::TensorImpl *impl) noexcept {
  if (!plain_offered) return;
  try {
    if (VtableOf(impl) != PlainVtable()) return;
    const uint64_t word = Load64(impl, plain_layout.at.word_at);
    if ((word & plain_policy_mask) != plain_policy_bits) return;
    dlx_torch_plain_kind kind{};
    kind.word = word & plain_layout.word_mask;
    kind.keys = impl->key_set().raw_repr();
    kind.device = ToDLDevice(impl->device());
    kind.dtype = ToDLDataType(c10::typeMetaToScalarType(impl->dtype()));
    kind.itemsize = static_cast<int64_t>(impl->dtype().itemsize());
    kind.bumps = SurelyNotInference(impl);  // exact for the key set, which the kind pins
    auto same = [&](const dlx_torch_plain_kind &k) {
      return k.word == kind.word && k.keys == kind.keys;  // word and keys decide the rest
    };
    // Lock-free (a compare-exchange, retried when another thread published first): no lock
    // a fork could leave held, nothing to take without a GIL.
    const dlx_torch_plain *current = plain_current.load(std::memory_order_acquire);
    for (;;) {
      if (current != nullptr && current->nkinds > 0 && same(current->kinds[0])) return;
      if (plain_published.load(std::memory_order_relaxed) >= kPlainMaxPublished) return;
      auto *next = new dlx_torch_plain(plain_layout);
      next->kinds[0] = kind;
      next->nkinds = 1;
      for (int32_t k = 0; current != nullptr && k < current->nkinds &&
                          next->nkinds < DLX_TORCH_PLAIN_KINDS; ++k)
        if (!same(current->kinds[k])) next->kinds[next->nkinds++] = current->kinds[k];
      if (plain_current.compare_exchange_strong(current, next, std::memory_order_acq_rel,
                                                std::memory_order_acquire)) {
        plain_published.fetch_add(1, std::memory_order_relaxed);
        return;  // the one it replaced stays readable: calls may still hold it
      }
      delete next;  // never published: no call can hold it
    }
  } catch (...) {  // a device or dtype DLPack cannot name: that kind is not published
  }
}

const dlx_torch_parity kParity = {
    /*size=*/sizeof(dlx_torch_parity),
    /*view=*/ParityView,
    /*managed=*/ParityManaged,
    /*modes=*/ParityModes,
    /*writable=*/ParityWritable,
    /*bump=*/ParityBump,
    /*view_mut=*/ParityViewMut,
    /*plain=*/reinterpret_cast<const dlx_torch_plain *const *>(&plain_current),
};

const DLPackExchangeAPI kExchangeApi = {
    /*header=*/{/*version=*/{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}, /*prev_api=*/nullptr},
    /*managed_tensor_allocator=*/ManagedTensorAllocator,
    /*managed_tensor_from_py_object_no_sync=*/ManagedTensorFromPyObject,
    /*managed_tensor_to_py_object_no_sync=*/ManagedTensorToPyObject,
    /*dltensor_from_py_object_no_sync=*/DLTensorFromPyObject,
    /*current_work_stream=*/CurrentWorkStream,
};

}  // namespace

DLX_ADDON_EXPORT const DLPackExchangeAPI *dlx_torch_exchange_api(void) { return &kExchangeApi; }

DLX_ADDON_EXPORT void dlx_addon_set_stream_fallback(int (*fn)(DLDeviceType, int32_t, void **)) {
  g_stream_fallback.store(fn, std::memory_order_release);
}

DLX_ADDON_EXPORT const char *dlx_addon_identity(void) { return DLX_ADDON_IDENTITY; }

// The parity hooks for dlx's checked copy of the table; `operator_path` is the exception
// class a checked export raises (dlx keeps it alive for the process).
DLX_ADDON_EXPORT const dlx_torch_parity *dlx_torch_parity_hooks(PyObject *operator_path) {
  g_operator_path = operator_path;
  if (!plain_offered) {  // once: the hooks are asked for once per process, with the GIL
    try {
      dlx_torch_plain layout{};
      if (LearnPlainLayout(&layout)) {
        plain_layout = layout;
        auto *first = new dlx_torch_plain(layout);  // no kind yet: offsets, for dlx to read
        first->nkinds = 0;
        first->kinds[0].keys = ~uint64_t{0};  // a key set no tensor has
        plain_current.store(first, std::memory_order_release);
        plain_offered = true;
      }
    } catch (...) {  // a probe torch refused: not offered (and no Python error left)
      if (PyErr_Occurred()) PyErr_Clear();
    }
  }
  return &kParity;
}
