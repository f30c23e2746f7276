// dlx torch addon: the DLPack 1.3 C exchange table for torch.Tensor.
//
// Torch releases before the exchange table existed (1.13 here) have no
// `__dlpack_c_exchange_api__`; dlx builds this file once per installed torch
// and installs the table it returns. Everything works on ATen directly: no
// copies, no stream synchronisation, no Python objects held by exported tensors.
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

// Ours first: torch 1.13 ships an old (0.x) ATen/dlpack.h under the same
// include guard. Nothing below includes it today; if a later torch header ever
// did, the guard makes it a no-op instead of a clash of two layouts.
#include "dlx/dlpack.h"
#include "dlx/dlx.h"
#include "dlx_invoke.h"  // beside this file, as installed (dlx/addon/)

#include <ATen/core/Tensor.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/version.h>

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

#if defined(BUILD_WITH_ASCEND) && !defined(BUILD_WITH_TORCH_NPU)
#define BUILD_WITH_TORCH_NPU 1
#endif
#ifdef BUILD_WITH_TORCH_NPU
#include "torch_npu/csrc/core/npu/NPUStream.h"
#endif

#include <atomic>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <typeinfo>

#ifndef DLX_ADDON_IDENTITY
#error "DLX_ADDON_IDENTITY is not defined: pass -DDLX_ADDON_IDENTITY='\"<identity>\"' (python -m dlx build-addon does)"
#endif

#define DLX_ADDON_EXPORT extern "C" __attribute__((visibility("default")))

#define DLX_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||      \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#if DLX_TORCH_AT_LEAST(2, 5)
#include <ATen/MemoryOverlap.h>
#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/record_function.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>  // the operators' registration (below)

#include <cstdio>
#include <memory>
#include <vector>
#endif

namespace {

// An error on its way out of the table: `kind` names the Python exception.
struct AddonError : std::runtime_error {
  AddonError(const char *kind, const std::string &message)
      : std::runtime_error(message), kind(kind) {}
  const char *kind;
};

[[noreturn]] void Fail(const char *kind, const std::string &message) {
  throw AddonError(kind, "dlx torch addon: " + message);
}

// ---- dtypes ---------------------------------------------------------------

DLDataType ToDLDataType(c10::ScalarType type) {
  using T = c10::ScalarType;
  switch (type) {
    case T::Bool: return {kDLBool, 8, 1};
    case T::Byte: return {kDLUInt, 8, 1};
    case T::Char: return {kDLInt, 8, 1};
    case T::Short: return {kDLInt, 16, 1};
    case T::Int: return {kDLInt, 32, 1};
    case T::Long: return {kDLInt, 64, 1};
    case T::Half: return {kDLFloat, 16, 1};
    case T::BFloat16: return {kDLBfloat, 16, 1};
    case T::Float: return {kDLFloat, 32, 1};
    case T::Double: return {kDLFloat, 64, 1};
    case T::ComplexHalf: return {kDLComplex, 32, 1};  // as torch's own to_dlpack
    case T::ComplexFloat: return {kDLComplex, 64, 1};
    case T::ComplexDouble: return {kDLComplex, 128, 1};
#if DLX_TORCH_AT_LEAST(2, 3)  // wide unsigned integers arrived in torch 2.3
    case T::UInt16: return {kDLUInt, 16, 1};
    case T::UInt32: return {kDLUInt, 32, 1};
    case T::UInt64: return {kDLUInt, 64, 1};
#endif
    // Each float8 type came with its own c10 header; its presence is the test.
#if __has_include(<c10/util/Float8_e5m2.h>)
    case T::Float8_e5m2: return {kDLFloat8_e5m2, 8, 1};
#endif
#if __has_include(<c10/util/Float8_e4m3fn.h>)
    case T::Float8_e4m3fn: return {kDLFloat8_e4m3fn, 8, 1};
#endif
#if __has_include(<c10/util/Float8_e5m2fnuz.h>)
    case T::Float8_e5m2fnuz: return {kDLFloat8_e5m2fnuz, 8, 1};
#endif
#if __has_include(<c10/util/Float8_e4m3fnuz.h>)
    case T::Float8_e4m3fnuz: return {kDLFloat8_e4m3fnuz, 8, 1};
#endif
#if __has_include(<c10/util/Float8_e8m0fnu.h>)
    case T::Float8_e8m0fnu: return {kDLFloat8_e8m0fnu, 8, 1};
#endif
    default:
      Fail("BufferError", std::string("torch dtype ") + c10::toString(type) +
                              " has no DLPack equivalent");
  }
}

c10::ScalarType ToScalarType(DLDataType dtype) {
  using T = c10::ScalarType;
  if (dtype.lanes == 1) {
    switch (dtype.code) {
      case kDLBool:
        if (dtype.bits == 8) return T::Bool;
        break;
      case kDLUInt:
        if (dtype.bits == 8) return T::Byte;
#if DLX_TORCH_AT_LEAST(2, 3)
        if (dtype.bits == 16) return T::UInt16;
        if (dtype.bits == 32) return T::UInt32;
        if (dtype.bits == 64) return T::UInt64;
#endif
        break;
      case kDLInt:
        if (dtype.bits == 8) return T::Char;
        if (dtype.bits == 16) return T::Short;
        if (dtype.bits == 32) return T::Int;
        if (dtype.bits == 64) return T::Long;
        break;
      case kDLFloat:
        if (dtype.bits == 16) return T::Half;
        if (dtype.bits == 32) return T::Float;
        if (dtype.bits == 64) return T::Double;
        break;
      case kDLBfloat:
        if (dtype.bits == 16) return T::BFloat16;
        break;
      case kDLComplex:
        if (dtype.bits == 32) return T::ComplexHalf;
        if (dtype.bits == 64) return T::ComplexFloat;
        if (dtype.bits == 128) return T::ComplexDouble;
        break;
#if __has_include(<c10/util/Float8_e5m2.h>)
      case kDLFloat8_e5m2:
        if (dtype.bits == 8) return T::Float8_e5m2;
        break;
#endif
#if __has_include(<c10/util/Float8_e4m3fn.h>)
      case kDLFloat8_e4m3fn:
        if (dtype.bits == 8) return T::Float8_e4m3fn;
        break;
#endif
#if __has_include(<c10/util/Float8_e5m2fnuz.h>)
      case kDLFloat8_e5m2fnuz:
        if (dtype.bits == 8) return T::Float8_e5m2fnuz;
        break;
#endif
#if __has_include(<c10/util/Float8_e4m3fnuz.h>)
      case kDLFloat8_e4m3fnuz:
        if (dtype.bits == 8) return T::Float8_e4m3fnuz;
        break;
#endif
#if __has_include(<c10/util/Float8_e8m0fnu.h>)
      case kDLFloat8_e8m0fnu:
        if (dtype.bits == 8) return T::Float8_e8m0fnu;
        break;
#endif
      default:
        break;
    }
  }
  Fail("TypeError", "DLPack dtype (code " + std::to_string(dtype.code) + ", bits " +
                        std::to_string(dtype.bits) + ", lanes " +
                        std::to_string(dtype.lanes) +
                        ") has no torch " TORCH_VERSION " equivalent");
}

// ---- devices --------------------------------------------------------------

DLDevice ToDLDevice(const c10::Device &device) {
  // CPU tensors carry index -1 ("no index"); DLPack wants 0 for host memory.
  const int32_t index = device.has_index() ? device.index() : 0;
  switch (device.type()) {
    case c10::DeviceType::CPU:
      return {kDLCPU, 0};
    case c10::DeviceType::CUDA:
#if defined(BUILD_WITH_ROCM) || defined(USE_ROCM)  // USE_ROCM: torch's own HIP builds
      return {kDLROCM, index};  // a ROCm torch files HIP memory under CUDA
#else
      return {kDLCUDA, index};
#endif
    case c10::DeviceType::PrivateUse1:
      return {kDLExtDev, index};  // torch_npu (Ascend) and other out-of-tree devices
    default:
      Fail("BufferError", "cannot export a tensor on device '" + device.str() +
                              "': only cpu, cuda and privateuseone map to DLPack here");
  }
}

// c10::DeviceIndex is narrower than int32_t (int8_t in torch 1.13): refuse
// rather than wrap around to another device.
c10::DeviceIndex ToDeviceIndex(int32_t device_id) {
  if (device_id < -1 || device_id > std::numeric_limits<c10::DeviceIndex>::max()) {
    Fail("ValueError",
         "device index " + std::to_string(device_id) + " is out of range for torch");
  }
  return static_cast<c10::DeviceIndex>(device_id);
}

c10::Device ToTorchDevice(DLDevice device) {
  switch (device.device_type) {
    case kDLCPU:
      return c10::Device(c10::DeviceType::CPU);
    case kDLCUDA:
    case kDLROCM:  // a ROCm torch calls HIP devices "cuda"
      return c10::Device(c10::DeviceType::CUDA, ToDeviceIndex(device.device_id));
    case kDLExtDev:
      return c10::Device(c10::DeviceType::PrivateUse1, ToDeviceIndex(device.device_id));
    default:
      Fail("ValueError", "DLPack device type " + std::to_string(device.device_type) +
                             " has no torch device (supported: kDLCPU, kDLCUDA, kDLROCM, "
                             "kDLExtDev)");
  }
}

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
// compare on every later call. Touched with the GIL held only.
constexpr int kOkKeySets = 8;
uint64_t ok_key_sets[kOkKeySets];
int ok_key_set_count = 0;

uint64_t last_ok_key_set = ~uint64_t{0};  // the one found last: mostly the next one too

inline bool KnownExportable(uint64_t keys) {
  if (C10_LIKELY(keys == last_ok_key_set)) return true;
  for (int i = 0; i < ok_key_set_count; ++i)
    if (ok_key_sets[i] == keys) return last_ok_key_set = keys, true;
  return false;
}

// The DLPack device and dtype of the last tensor described, with what they were made
// from: tensors in a call mostly share both, and the conversions are switches through
// torch's accessors. Touched with the GIL held only.
struct LastDescribed {
  // Starts as a real pair (float32 on the CPU), never an uninitialized dtype: a tensor
  // whose dtype is uninitialized must never match and reuse the description.
  c10::Device device{c10::DeviceType::CPU};
  caffe2::TypeMeta dtype = caffe2::TypeMeta::Make<float>();
  DLDevice dl_device{kDLCPU, 0};
  DLDataType dl_dtype{kDLFloat, 32, 1};
  int64_t itemsize = sizeof(float);  // of dtype: the fast path skips the TypeMeta lookup
} last_described;

// The cold parts of DescribeTensor: a key set not seen yet, another device or dtype.
__attribute__((noinline, cold)) void DescribeNew(const at::Tensor &tensor, uint64_t keys) {
  if (!KnownExportable(keys)) {
    CheckExportable(tensor);
    if (ok_key_set_count < kOkKeySets) ok_key_sets[ok_key_set_count++] = keys;
    last_ok_key_set = keys;
  }
  LastDescribed &last = last_described;
  const c10::Device device = tensor.device();
  if (device != last.device) {
    last.dl_device = ToDLDevice(device);  // throws for devices DLPack cannot name
    last.device = device;
  }
  const caffe2::TypeMeta dtype = tensor.dtype();
  if (dtype != last.dtype) {
    last.dl_dtype = ToDLDataType(tensor.scalar_type());  // throws for an uninitialized dtype
    last.itemsize = static_cast<int64_t>(dtype.itemsize());
    last.dtype = dtype;
  }
}

// Everything but shape and strides (whose owner differs between the view and the
// managed export). In line: the view export runs it for every tensor of every call.
__attribute__((always_inline)) inline void DescribeTensor(const at::Tensor &tensor,
                                                          DLTensor *out) {
  const c10::TensorImpl *impl = tensor.unsafeGetTensorImpl();
  const uint64_t keys = impl->key_set().raw_repr();
  LastDescribed &last = last_described;
  if (C10_UNLIKELY(keys != last_ok_key_set || impl->device() != last.device ||
                   impl->dtype() != last.dtype)) {
    DescribeNew(tensor, keys);
  }
  out->device = last.dl_device;
  out->dtype = last.dl_dtype;
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
};

// The vtable of a plain c10::TensorImpl, learnt from the first tensor typeid proves is
// one: a subclass (nested, batched, functional, opaque...) may override what the
// fast path reads, so only exact TensorImpls take it.
const void *plain_impl_vtable = nullptr;

inline const void *VtableOf(const c10::TensorImpl *impl) {
  return *reinterpret_cast<const void *const *>(impl);
}

__attribute__((noinline, cold)) bool LearnPlainImpl(const c10::TensorImpl *impl) {
  if (plain_impl_vtable != nullptr || typeid(*impl) != typeid(c10::TensorImpl)) return false;
  plain_impl_vtable = VtableOf(impl);
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

__attribute__((always_inline)) inline bool DescribeFast(const c10::TensorImpl *impl,
                                                        DLTensor *out) {
  const LastDescribed &last = last_described;
  if (C10_UNLIKELY(VtableOf(impl) != plain_impl_vtable) && !LearnPlainImpl(impl)) return false;
  constexpr auto kCustomStrides = PolicyPeek::SizesStridesPolicy::CustomStrides;
  if (C10_UNLIKELY((impl->*(&PolicyPeek::matches_policy))(kCustomStrides) ||
                   impl->key_set().raw_repr() != last_ok_key_set ||
                   impl->device() != last.device || impl->dtype() != last.dtype)) {
    return false;
  }
  const c10::Storage &storage = impl->unsafe_storage();
  if (C10_UNLIKELY(!storage)) return false;  // data_ptr() raises for these: let it
  // Reads first, writes to *out last: the stores could alias the policy bits and would
  // make the compiler test them again for every accessor.
  const auto &dims = impl->*(&PolicyPeek::sizes_and_strides_);
  const int64_t ndim = static_cast<int64_t>(dims.size());
  const int64_t *sizes = dims.sizes_data();
  const int64_t *strides = dims.strides_data();
  void *data = nullptr;  // as TensorImpl::data(): an empty tensor has no data pointer
  if (C10_LIKELY(impl->*(&PolicyPeek::numel_) != 0)) {
    data = static_cast<char *>(StorageData(storage, 0)) +
           last.itemsize * (impl->*(&PolicyPeek::storage_offset_));
  }
  out->data = data;
  out->device = last.dl_device;
  out->ndim = static_cast<int32_t>(ndim);
  out->dtype = last.dl_dtype;
  out->shape = const_cast<int64_t *>(sizes);
  out->strides = const_cast<int64_t *>(strides);
  out->byte_offset = 0;
  return true;
}

void CheckExportable(const at::Tensor &tensor) {
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

// ---- error plumbing -------------------------------------------------------

// Thrown when a Python exception is already set and must reach the caller as is.
struct PythonErrorSet {};

PyObject *PyExceptionNamed(const char *kind) {
  if (std::strcmp(kind, "BufferError") == 0) return PyExc_BufferError;
  if (std::strcmp(kind, "TypeError") == 0) return PyExc_TypeError;
  if (std::strcmp(kind, "ValueError") == 0) return PyExc_ValueError;
  if (std::strcmp(kind, "MemoryError") == 0) return PyExc_MemoryError;
  return PyExc_RuntimeError;
}

// Runs `body`; whatever it throws becomes one report(kind, message) call, with
// kind == NULL when a Python exception is already set. Returns 0 or -1: no
// exception may leave the table's functions.
template <typename Body, typename Report>
int Guarded(Body &&body, Report &&report) noexcept {
  try {
    body();
    return 0;
  } catch (const PythonErrorSet &) {
    report(nullptr, nullptr);
  } catch (python_error &e) {  // torch's "a Python error is pending"
    e.restore();
    report(nullptr, nullptr);
  } catch (const AddonError &e) {
    report(e.kind, e.what());
  } catch (const c10::OutOfMemoryError &e) {
    report("MemoryError", e.what_without_backtrace());
  } catch (const c10::Error &e) {
    report("RuntimeError", e.what_without_backtrace());
  } catch (const std::bad_alloc &) {
    report("MemoryError", "dlx torch addon: out of memory");
  } catch (const std::exception &e) {
    report("RuntimeError", e.what());
  } catch (...) {
    report("RuntimeError", "dlx torch addon: unknown C++ exception");
  }
  return -1;
}

// The Python-facing functions report through the Python error indicator; the
// GIL is held by contract.
template <typename Body>
int GuardedPy(Body &&body) noexcept {
  return Guarded(body, [](const char *kind, const char *message) {
    if (kind != nullptr) {
      PyErr_SetString(PyExceptionNamed(kind), message);
    } else if (!PyErr_Occurred()) {
      PyErr_SetString(PyExc_RuntimeError, "dlx torch addon: failed without a Python error");
    }
  });
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

int CurrentWorkStream(DLDeviceType device_type, int32_t device_id, void **out) {
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

// ---- parity: a direct call keeps torch's rules (src/python/torch_parity.c) --------------
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

// DLTensorFromPyObject's body, with the grad test on the TensorImpl it already holds.
int ParityView(void *py_object, DLTensor *out) {
  bool grad = false;
  int rc = GuardedPy([&] {
    const at::Tensor &tensor = UnpackTensor(py_object);
    const c10::TensorImpl *impl = tensor.unsafeGetTensorImpl();
    grad = impl->requires_grad();
    if (C10_LIKELY(DescribeFast(impl, out))) return;
    DescribeView(tensor, out);
  });
  return C10_UNLIKELY(grad) && rc == 0 ? GradRefused() : rc;
}

int ParityManaged(void *py_object, DLManagedTensorVersioned **out) {
  bool grad = false;
  int rc = GuardedPy([&] {
    const at::Tensor &tensor = UnpackTensor(py_object);
    grad = tensor.unsafeGetTensorImpl()->requires_grad();
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

// As torch's in-place operators: an inference tensor is written only in inference mode.
int ParityWritable(void *py_object) {
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
  return GuardedPy([&] {
    const at::Tensor &t = UnpackTensor(py_object);
    if (!t.is_inference()) t.unsafeGetTensorImpl()->bump_version();
  });
}

const dlx_torch_parity kParity = {
    /*size=*/sizeof(dlx_torch_parity),
    /*view=*/ParityView,
    /*managed=*/ParityManaged,
    /*modes=*/ParityModes,
    /*writable=*/ParityWritable,
    /*bump=*/ParityBump,
};

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

struct Results {
  at::Tensor tensors[kMaxResults];
  DLTensor views[kMaxResults];
  const char *error = nullptr;  // an allocation's failure, for the message
  std::string why;
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
    r->tensors[index] = at::empty(c10::IntArrayRef(shape, ndim),
                                  at::TensorOptions().dtype(ToScalarType(dtype)).device(ToTorchDevice(dev)));
    Describe(r->tensors[index], &r->views[index]);
    *out = &r->views[index];
    return 0;
  } catch (const std::exception &e) {
    r->why = e.what();
    return -1;
  }
}

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

// The kernel's dlx_error, raised as the eager call raises it. Kinds torch's Python binding
// maps from c10 errors go as those; every other kind (KeyError, MemoryError, a user's
// dotted class) is built as a Python exception and thrown as torch's python_error, which
// torch's bindings restore when the operator was called from Python (eager, or the Python
// code torch.compile generates). A C++ caller without Python (AOTInductor) sees only
// python_error's what(), the exception's text. Error path only: the GIL is taken here.
[[noreturn]] void Raise(const char *kind, const std::string &message) {
  if (std::strcmp(kind, "ValueError") == 0) TORCH_CHECK_VALUE(false, message);
  if (std::strcmp(kind, "TypeError") == 0) TORCH_CHECK_TYPE(false, message);
  if (std::strcmp(kind, "IndexError") == 0) TORCH_CHECK_INDEX(false, message);
  if (std::strcmp(kind, "NotImplementedError") == 0) TORCH_CHECK_NOT_IMPLEMENTED(false, message);
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
  if (std::strcmp(kind, "RuntimeError") == 0) TORCH_CHECK(false, message);
  TORCH_CHECK(false, kind, ": ", message);  // as dlx's eager call words an unknown kind
}

// A `mut` argument (Tensor(a!)) torch's own in-place operators would refuse to write.
void CheckWritable(const at::Tensor &t, const c10::OperatorHandle &op, size_t i) {
  const std::string &arg = op.schema().arguments()[i].name();
  TORCH_CHECK(!t.is_inference() || c10::InferenceMode::is_enabled(), op.schema().name(), ": '",
              arg, "' is an inference tensor, which torch does not let an in-place operation "
              "update outside inference mode (make a clone, or call inside "
              "torch.inference_mode())");
  TORCH_CHECK(at::has_internal_overlap(t) != at::MemOverlap::Yes, op.schema().name(), ": '",
              arg, "' has elements that share memory (an expanded or stride-0 tensor): an "
              "in-place write would write them more than once; pass a .clone()");
}

class OpKernel final : public c10::OperatorKernel {
 public:
  OpKernel(const dlx_kernel_handle *kernel, const dlx_invoke_api *api, int32_t nresults)
      : kernel_(kernel), api_(api), nresults_(nresults) {}

  void operator()(const c10::OperatorHandle &op, c10::DispatchKeySet, torch::jit::Stack *stack) {
    const size_t nargs = op.schema().arguments().size();
    TORCH_CHECK(nargs <= static_cast<size_t>(kMaxArgs), kernel_->name, "(): too many arguments");
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
        const c10::AliasInfo *alias = op.schema().arguments()[i].alias_info();
        if (alias != nullptr && alias->isWrite()) CheckWritable(v.toTensor(), op, i);
        Describe(v.toTensor(), &views[i]);
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
    for (size_t i = 0; i < nargs; ++i) {
      const c10::AliasInfo *alias = op.schema().arguments()[i].alias_info();
      if (alias == nullptr || !alias->isWrite() || !values[i].isTensor()) continue;
      const at::Tensor &t = values[i].toTensor();
      if (!t.is_inference()) t.unsafeGetTensorImpl()->bump_version();
    }
    torch::jit::drop(*stack, nargs);
    for (int32_t r = 0; r < nresults_; ++r) stack->emplace_back(std::move(results.tensors[r]));
  }

 private:
  const dlx_kernel_handle *kernel_;
  const dlx_invoke_api *api_;
  int32_t nresults_;
};

// Registrations live as long as the process, as the operators they implement.
std::vector<std::unique_ptr<torch::Library>> &Libraries() {
  static auto *libraries = new std::vector<std::unique_ptr<torch::Library>>();
  return *libraries;
}

#endif  // DLX_TORCH_AT_LEAST(2, 5)

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
  return &kParity;
}

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
        autograd->impl(name, torch::autograd::autogradNotImplementedFallback());
        Libraries().push_back(std::move(autograd));

      },
      [&](const char *, const char *message) {
        std::snprintf(why, whylen, "%s", message ? message : "a Python error");
        PyErr_Clear();
      });
#else
  (void)ns, (void)name, (void)kernel, (void)invoke_api, (void)nresults;
  std::snprintf(why, whylen, "torch operators need torch 2.5 or newer");
  return -1;
#endif
}
