/* dlx_backend.c - backend selection for the torch addon, and the device map. */
#include "dlx_backend.h"

#include <stdio.h>
#include <string.h>

static const char *const kNames[DLX_BACKEND_COUNT] = {"cpu", "cuda", "rocm", "torch_npu"};

const char *dlx_backend_name(dlx_backend b) {
  return ((unsigned)b < DLX_BACKEND_COUNT) ? kNames[b] : "unknown";
}

int dlx_backend_parse(const char *name, dlx_backend *out) {
  if (!name) return -1;
  for (int i = 0; i < DLX_BACKEND_COUNT; ++i) {
    if (strcmp(name, kNames[i]) == 0) {
      *out = (dlx_backend)i;
      return 0;
    }
  }
  /* Users say "ascend" or "npu" for the device; the backend is torch_npu. */
  if (strcmp(name, "ascend") == 0 || strcmp(name, "npu") == 0) {
    *out = DLX_BACKEND_TORCH_NPU;
    return 0;
  }
  return -1;
}

dlx_platform dlx_platform_from_name(const char *p) {
  if (!p) return DLX_PLATFORM_OTHER;
  /* Python 2 era and some builds report "linux2"; all are Linux. */
  if (strncmp(p, "linux", 5) == 0) return DLX_PLATFORM_LINUX;
  if (strcmp(p, "win32") == 0 || strcmp(p, "cygwin") == 0) return DLX_PLATFORM_WINDOWS;
  if (strcmp(p, "darwin") == 0) return DLX_PLATFORM_MACOS;
  return DLX_PLATFORM_OTHER;
}

const char *dlx_platform_name(dlx_platform p) {
  switch (p) {
    case DLX_PLATFORM_LINUX: return "linux";
    case DLX_PLATFORM_WINDOWS: return "windows";
    case DLX_PLATFORM_MACOS: return "macos";
    default: return "other";
  }
}

static int choose(dlx_backend_choice *out, dlx_backend b, const char *reason) {
  out->backend = b;
  snprintf(out->reason, sizeof out->reason, "%s", reason);
  return 0;
}

int dlx_backend_select(const dlx_backend_facts *f, dlx_backend_choice *out) {
  int linux_ = f->platform == DLX_PLATFORM_LINUX;
  out->backend = DLX_BACKEND_CPU;
  out->reason[0] = '\0';

  if (f->forced && f->forced[0]) {
    dlx_backend b;
    if (dlx_backend_parse(f->forced, &b) != 0) {
      snprintf(out->reason, sizeof out->reason,
               "DLX_BACKEND='%s' is not a backend; valid: cpu, cuda, rocm, torch_npu "
               "(aliases of torch_npu: ascend, npu)",
               f->forced);
      return -1;
    }
    if (b == DLX_BACKEND_TORCH_NPU && !linux_) {
      snprintf(out->reason, sizeof out->reason,
               "DLX_BACKEND='%s' asks for torch_npu, but torch_npu is only supported on "
               "Linux (this platform is %s)",
               f->forced, dlx_platform_name(f->platform));
      return -1;
    }
    out->backend = b;
    snprintf(out->reason, sizeof out->reason, "DLX_BACKEND='%s' forces %s", f->forced,
             dlx_backend_name(b));
    return 0;
  }

  int npu_usable = linux_ && f->npu_namespace && f->npu_available;
  /* CUDA/ROCm first: a machine with both GPUs and an NPU plugin keeps the GPU path
   * that torch itself uses for "cuda" tensors. */
  if (f->cuda_available) {
    const char *also = npu_usable ? " (torch.npu is available too; the GPU takes precedence)" : "";
    char buf[256];
    dlx_backend b;
    if (f->version_hip_set && !f->version_cuda_set) {
      b = DLX_BACKEND_ROCM;
      snprintf(buf, sizeof buf, "torch.cuda.is_available() and torch.version.hip is set%s",
               also);
    } else if (f->version_cuda_set) {
      b = DLX_BACKEND_CUDA;
      snprintf(buf, sizeof buf, "torch.cuda.is_available() and torch.version.cuda is set%s",
               also);
    } else {
      /* A stripped or unusual build without version attributes: CUDA is the
       * common case and the one torch.cuda names. */
      b = DLX_BACKEND_CUDA;
      snprintf(buf, sizeof buf,
               "torch.cuda.is_available() but neither torch.version.cuda nor "
               "torch.version.hip is set; assuming cuda%s",
               also);
    }
    return choose(out, b, buf);
  }
  if (npu_usable)
    return choose(out, DLX_BACKEND_TORCH_NPU,
                  "torch.npu is present and torch.npu.is_available() (Linux)");

  char buf[256];
  if (f->npu_namespace && !linux_)
    snprintf(buf, sizeof buf,
             "a torch.npu namespace was found, but torch_npu is only supported on Linux "
             "(this platform is %s); using cpu",
             dlx_platform_name(f->platform));
  else if (f->npu_namespace)
    snprintf(buf, sizeof buf,
             "torch.cuda.is_available() is false and torch.npu.is_available() is false; "
             "using cpu");
  else
    snprintf(buf, sizeof buf,
             "torch.cuda.is_available() is false and there is no torch.npu; using cpu");
  return choose(out, DLX_BACKEND_CPU, buf);
}

/* Data, not code: adding a device is one row. */
static const dlx_device_row kDeviceRows[] = {
    {kDLCUDA, DLX_BACKEND_CUDA, "CUDA device memory (torch device 'cuda')", 0},
    {kDLROCM, DLX_BACKEND_ROCM, "ROCm/HIP device memory (torch device 'cuda' on a ROCm build)",
     0},
    {kDLExtDev, DLX_BACKEND_TORCH_NPU,
     "extension device: torch PrivateUse1, Ascend NPU only when torch_npu is the backend", 1},
    /* kDLAscend goes here ({kDLAscend, DLX_BACKEND_TORCH_NPU, ..., 0}) once DLPack
     * assigns its number; until then Ascend arrives as kDLExtDev. */
};

const dlx_device_row *dlx_device_rows(size_t *n) {
  if (n) *n = sizeof kDeviceRows / sizeof kDeviceRows[0];
  return kDeviceRows;
}

static int lookup(int32_t device_type, int filter, dlx_backend active, dlx_backend *out) {
  for (size_t i = 0; i < sizeof kDeviceRows / sizeof kDeviceRows[0]; ++i) {
    const dlx_device_row *r = &kDeviceRows[i];
    if ((int32_t)r->device_type != device_type) continue;
    if (filter && r->only_when_active && r->backend != active) continue;
    *out = r->backend;
    return 0;
  }
  return -1;
}

int dlx_device_backend(int32_t device_type, dlx_backend *out) {
  return lookup(device_type, 0, DLX_BACKEND_CPU, out);
}

int dlx_device_stream_backend(int32_t device_type, dlx_backend active, dlx_backend *out) {
  return lookup(device_type, 1, active, out);
}
