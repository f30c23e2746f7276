/*
 * dlx/dlpack.h - the DLPack 1.3 ABI, restated in dlx's own words.
 *
 * Every type here is layout-identical to upstream dlpack/dlpack.h v1.3; the
 * static assertions at the bottom hold that promise in both C and C++.
 *
 * ABI rule: if a translation unit includes upstream dlpack/dlpack.h first, its
 * definitions win (same include guard) and only the assertions below run, so
 * both headers can be mixed freely. An upstream header older than 1.2 lacks
 * the exchange table and is rejected with #error.
 */
#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_
#define DLX_DLPACK_OWN_DEFINITIONS 1

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define DLPACK_EXTERN_C extern "C"
#else
#define DLPACK_EXTERN_C
#endif

/* Major: changes the layout of DLManagedTensorVersioned. Minor: adds enum values. */
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 3

#define DLPACK_DLL

#ifdef __cplusplus
extern "C" {
#endif

/* A DLPack version; a consumer must check `major` before reading anything else. */
typedef struct {
  uint32_t major; /* layout version: a mismatch means only the deleter may be touched */
  uint32_t minor; /* additive version: new enum values, same layout */
} DLPackVersion;

/* Where memory lives. Values are fixed by the standard; never invent one. */
#ifdef __cplusplus
typedef enum : int32_t {
#else
typedef enum {
#endif
  kDLCPU = 1,          /* host memory */
  kDLCUDA = 2,         /* CUDA device memory */
  kDLCUDAHost = 3,     /* pinned host memory from cudaMallocHost */
  kDLOpenCL = 4,       /* OpenCL buffer */
  kDLVulkan = 7,       /* Vulkan buffer */
  kDLMetal = 8,        /* Apple Metal buffer */
  kDLVPI = 9,          /* Verilog simulator buffer */
  kDLROCM = 10,        /* ROCm (HIP) device memory */
  kDLROCMHost = 11,    /* pinned host memory from hipMallocHost */
  kDLExtDev = 12,      /* extension device; torch's PrivateUse1 (torch_npu) exports as this */
  kDLCUDAManaged = 13, /* CUDA unified memory */
  kDLOneAPI = 14,      /* oneAPI unified shared memory */
  kDLWebGPU = 15,      /* WebGPU buffer */
  kDLHexagon = 16,     /* Qualcomm Hexagon DSP */
  kDLMAIA = 17,        /* Microsoft MAIA */
  kDLTrn = 18,         /* AWS Trainium */
  kDLTPU = 19,         /* Google TPU */
  kDLTPUHost = 20,     /* TPU host memory */
} DLDeviceType;

/* One device: its type and its index among devices of that type (0 for host memory). */
typedef struct {
  DLDeviceType device_type; /* the kind of memory */
  int32_t device_id;        /* which device of that kind */
} DLDevice;

/* The family of an element type. */
typedef enum {
  kDLInt = 0U,             /* signed integer */
  kDLUInt = 1U,            /* unsigned integer */
  kDLFloat = 2U,           /* IEEE binary floating point */
  kDLOpaqueHandle = 3U,    /* opaque handle, for testing only */
  kDLBfloat = 4U,          /* bfloat16 */
  kDLComplex = 5U,         /* complex: two floats of bits/2 each, real first */
  kDLBool = 6U,            /* boolean, one byte per element */
  kDLFloat8_e3m4 = 7U,     /* 8-bit floats, by exponent/mantissa layout */
  kDLFloat8_e4m3 = 8U,
  kDLFloat8_e4m3b11fnuz = 9U,
  kDLFloat8_e4m3fn = 10U,
  kDLFloat8_e4m3fnuz = 11U,
  kDLFloat8_e5m2 = 12U,
  kDLFloat8_e5m2fnuz = 13U,
  kDLFloat8_e8m0fnu = 14U,
  kDLFloat6_e2m3fn = 15U,  /* 6-bit floats, packed unless the PADDED flag says otherwise */
  kDLFloat6_e3m2fn = 16U,
  kDLFloat4_e2m1fn = 17U,  /* 4-bit float, packed unless the PADDED flag says otherwise */
} DLDataTypeCode;

/* An element type in native byte order: float32 is {kDLFloat, 32, 1}. */
typedef struct {
  uint8_t code;   /* a DLDataTypeCode value */
  uint8_t bits;   /* bits per lane */
  uint16_t lanes; /* vector lanes, 1 for scalars */
} DLDataType;

/* A strided view of memory; it owns nothing. */
typedef struct {
  void *data;           /* base pointer (device pointer on accelerators); NULL when empty */
  DLDevice device;      /* where `data` lives */
  int32_t ndim;         /* number of dimensions, 0 for a scalar */
  DLDataType dtype;     /* element type */
  int64_t *shape;       /* ndim extents */
  int64_t *strides;     /* ndim strides in elements, not bytes; never NULL when ndim != 0 */
  uint64_t byte_offset; /* bytes from `data` to the first element */
} DLTensor;

/* Legacy (pre-1.0) owned tensor, still produced by `__dlpack__()` without max_version. */
typedef struct DLManagedTensor {
  DLTensor dl_tensor;                            /* the view */
  void *manager_ctx;                             /* producer's bookkeeping */
  void (*deleter)(struct DLManagedTensor *self); /* releases the view; may be NULL */
} DLManagedTensor;

/* Flag bits of DLManagedTensorVersioned.flags. */
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)              /* consumer must not write */
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)              /* producer made a private copy */
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL) /* sub-byte types are padded */

/* The current owned tensor. ABI: everything up to `flags` stays put across majors,
 * so a consumer can always call the deleter of a tensor it cannot read. */
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;                                  /* ABI of this struct */
  void *manager_ctx;                                      /* producer's bookkeeping */
  void (*deleter)(struct DLManagedTensorVersioned *self); /* releases it; may be NULL */
  uint64_t flags;                                         /* DLPACK_FLAG_BITMASK_* */
  DLTensor dl_tensor;                                     /* the view */
} DLManagedTensorVersioned;

/* ---- The C exchange table (`__dlpack_c_exchange_api__`) -------------------------
 * Every function below is called with the GIL held, never throws, and never
 * synchronises streams: the consumer launches on current_work_stream instead. */

/* Allocate a new owned tensor shaped like `prototype` (dtype, ndim, shape, device).
 * Returns 0, or -1 after calling SetError exactly once. */
typedef int (*DLPackManagedTensorAllocator)(
    DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
    void (*SetError)(void *error_ctx, const char *kind, const char *message));

/* Export a Python tensor of the table's type as an owned tensor.
 * Returns 0, or -1 with a Python exception set (BufferError when not expressible). */
typedef int (*DLPackManagedTensorFromPyObjectNoSync)(void *py_object,
                                                     DLManagedTensorVersioned **out);

/* Export a non-owning view into caller storage; valid until control returns.
 * Returns 0, or -1 with a Python exception set. */
typedef int (*DLPackDLTensorFromPyObjectNoSync)(void *py_object, DLTensor *out);

/* The caller's current work stream of a device on the calling thread (NULL on CPU).
 * Returns 0, or -1 with a Python exception set. */
typedef int (*DLPackCurrentWorkStream)(DLDeviceType device_type, int32_t device_id,
                                       void **out_current_stream);

/* Import an owned tensor as the framework's Python tensor; steals `tensor`.
 * Returns 0, or -1 with a Python exception set. */
typedef int (*DLPackManagedTensorToPyObjectNoSync)(DLManagedTensorVersioned *tensor,
                                                   void **out_py_object);

/* The part of a table that never changes: check `version.major` before using the rest. */
typedef struct DLPackExchangeAPIHeader {
  DLPackVersion version;                    /* the table's DLPack version */
  struct DLPackExchangeAPIHeader *prev_api; /* an older table to fall back on, or NULL */
} DLPackExchangeAPIHeader;

/* A framework's exchange table; it lives as long as the process. */
typedef struct DLPackExchangeAPI {
  DLPackExchangeAPIHeader header;                                      /* version chain */
  DLPackManagedTensorAllocator managed_tensor_allocator;               /* required */
  DLPackManagedTensorFromPyObjectNoSync managed_tensor_from_py_object_no_sync; /* required */
  DLPackManagedTensorToPyObjectNoSync managed_tensor_to_py_object_no_sync;     /* required */
  DLPackDLTensorFromPyObjectNoSync dltensor_from_py_object_no_sync;    /* optional (NULL) */
  DLPackCurrentWorkStream current_work_stream;                         /* required */
} DLPackExchangeAPI;

#ifdef __cplusplus
}
#endif
#endif /* DLPACK_DLPACK_H_ */

#ifndef DLX_DLPACK_H_
#define DLX_DLPACK_H_

#if !defined(DLPACK_MAJOR_VERSION) || DLPACK_MAJOR_VERSION != 1 || DLPACK_MINOR_VERSION < 2
#error "dlx needs DLPack 1.2 or newer (the exchange table); an older dlpack.h was included first"
#endif

/* Capsule name of an exchange table, and the type attributes that carry one. */
#define DLX_EXCHANGE_API_CAPSULE "dlpack_exchange_api"
#define DLX_EXCHANGE_API_ATTR "__dlpack_c_exchange_api__"
#define DLX_EXCHANGE_API_LEGACY_ATTR "__c_dlpack_exchange_api__" /* an int address */

#ifdef __cplusplus
#define DLX_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define DLX_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/* Layout of DLPack 1.3 on every LP64/LLP64 platform dlx supports. */
DLX_STATIC_ASSERT(sizeof(DLPackVersion) == 8, "DLPackVersion size");
DLX_STATIC_ASSERT(sizeof(DLDeviceType) == 4, "DLDeviceType is 32-bit");
DLX_STATIC_ASSERT(sizeof(DLDevice) == 8, "DLDevice size");
DLX_STATIC_ASSERT(sizeof(DLDataType) == 4, "DLDataType size");
DLX_STATIC_ASSERT(offsetof(DLTensor, device) == sizeof(void *), "DLTensor.device");
DLX_STATIC_ASSERT(offsetof(DLTensor, ndim) == sizeof(void *) + 8, "DLTensor.ndim");
DLX_STATIC_ASSERT(offsetof(DLTensor, dtype) == sizeof(void *) + 12, "DLTensor.dtype");
DLX_STATIC_ASSERT(offsetof(DLTensor, shape) == sizeof(void *) + 16, "DLTensor.shape");
DLX_STATIC_ASSERT(offsetof(DLTensor, byte_offset) == 3 * sizeof(void *) + 16,
                  "DLTensor.byte_offset");
DLX_STATIC_ASSERT(sizeof(DLTensor) == 3 * sizeof(void *) + 24, "DLTensor size");
DLX_STATIC_ASSERT(offsetof(DLManagedTensor, manager_ctx) == sizeof(DLTensor),
                  "DLManagedTensor.manager_ctx");
DLX_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, manager_ctx) == 8,
                  "DLManagedTensorVersioned.manager_ctx");
DLX_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, deleter) == 8 + sizeof(void *),
                  "DLManagedTensorVersioned.deleter");
DLX_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, flags) == 8 + 2 * sizeof(void *),
                  "DLManagedTensorVersioned.flags");
DLX_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, dl_tensor) == 16 + 2 * sizeof(void *),
                  "DLManagedTensorVersioned.dl_tensor");
DLX_STATIC_ASSERT(sizeof(DLPackExchangeAPIHeader) == 8 + sizeof(void *), "header size");
DLX_STATIC_ASSERT(offsetof(DLPackExchangeAPI, managed_tensor_allocator) ==
                      sizeof(DLPackExchangeAPIHeader),
                  "DLPackExchangeAPI.managed_tensor_allocator");
DLX_STATIC_ASSERT(offsetof(DLPackExchangeAPI, current_work_stream) ==
                      sizeof(DLPackExchangeAPIHeader) + 4 * sizeof(void *),
                  "DLPackExchangeAPI.current_work_stream");
DLX_STATIC_ASSERT(sizeof(DLPackExchangeAPI) == sizeof(DLPackExchangeAPIHeader) + 5 * sizeof(void *),
                  "DLPackExchangeAPI size");
DLX_STATIC_ASSERT(kDLExtDev == 12 && kDLROCM == 10 && kDLCUDA == 2 && kDLTPUHost == 20,
                  "device type values");

#endif /* DLX_DLPACK_H_ */
