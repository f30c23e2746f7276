// dlx_torch_addon.h - what the torch addon's two translation units share: the
// dtype and device conversions between ATen and DLPack, and the error plumbing that
// keeps every C++ exception inside the addon. dlx_torch_addon.cc is the exchange table
// (and the parity hooks of dlx's checked copy of it); dlx_torch_ops.cc the operators of
// dlx.torch.register. dlx compiles both into one library, once per torch (their bytes,
// this header's and dlx_invoke.h's make its identity). Shipped beside them (dlx/addon/).
#ifndef DLX_TORCH_ADDON_H_
#define DLX_TORCH_ADDON_H_

// Ours first: torch 1.13 ships an old (0.x) ATen/dlpack.h under the same
// include guard. Nothing below includes it today; if a later torch header ever
// did, the guard makes it a no-op instead of a clash of two layouts.
#include "dlx/dlpack.h"
#include "dlx/dlx.h"
#include "dlx_invoke.h"  // beside this file, as installed (dlx/addon/)

#include <ATen/core/Tensor.h>
#ifndef DLX_TORCH_NO_PYTHON  // libdlx_torch_ops (dlx_torch_register): no Python at all
#include <torch/csrc/autograd/python_variable.h>
#endif
#include <torch/version.h>

#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#if defined(BUILD_WITH_ASCEND) && !defined(BUILD_WITH_TORCH_NPU)
#define BUILD_WITH_TORCH_NPU 1
#endif

#define DLX_ADDON_EXPORT extern "C" __attribute__((visibility("default")))

#define DLX_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||      \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace dlx_torch {
// An error on its way out of the table: `kind` names the Python exception.
struct AddonError : std::runtime_error {
  AddonError(const char *kind, const std::string &message)
      : std::runtime_error(message), kind(kind) {}
  const char *kind;
};

[[noreturn]] inline void Fail(const char *kind, const std::string &message) {
  throw AddonError(kind, "dlx torch addon: " + message);
}

// ---- dtypes ---------------------------------------------------------------

inline DLDataType ToDLDataType(c10::ScalarType type) {
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

inline c10::ScalarType ToScalarType(DLDataType dtype) {
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

inline DLDevice ToDLDevice(const c10::Device &device) {
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
inline c10::DeviceIndex ToDeviceIndex(int32_t device_id) {
  if (device_id < -1 || device_id > std::numeric_limits<c10::DeviceIndex>::max()) {
    Fail("ValueError",
         "device index " + std::to_string(device_id) + " is out of range for torch");
  }
  return static_cast<c10::DeviceIndex>(device_id);
}

inline c10::Device ToTorchDevice(DLDevice device) {
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

// ---- error plumbing -------------------------------------------------------

#ifndef DLX_TORCH_NO_PYTHON
// Thrown when a Python exception is already set and must reach the caller as is.
struct PythonErrorSet {};

inline PyObject *PyExceptionNamed(const char *kind) {
  if (std::strcmp(kind, "BufferError") == 0) return PyExc_BufferError;
  if (std::strcmp(kind, "TypeError") == 0) return PyExc_TypeError;
  if (std::strcmp(kind, "ValueError") == 0) return PyExc_ValueError;
  if (std::strcmp(kind, "MemoryError") == 0) return PyExc_MemoryError;
  return PyExc_RuntimeError;
}
#endif

// Runs `body`; whatever it throws becomes one report(kind, message) call, with
// kind == NULL when a Python exception is already set. Returns 0 or -1: no
// exception may leave the table's functions.
template <typename Body, typename Report>
int Guarded(Body &&body, Report &&report) noexcept {
  try {
    body();
    return 0;
#ifndef DLX_TORCH_NO_PYTHON
  } catch (const PythonErrorSet &) {
    report(nullptr, nullptr);
  } catch (python_error &e) {  // torch's "a Python error is pending"
    e.restore();
    report(nullptr, nullptr);
#endif
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

#ifndef DLX_TORCH_NO_PYTHON
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
#endif

// The table's current_work_stream (dlx_torch_addon.cc); the operators ask it too.
int CurrentWorkStream(DLDeviceType device_type, int32_t device_id, void **out);

}  // namespace dlx_torch

#endif  // DLX_TORCH_ADDON_H_
