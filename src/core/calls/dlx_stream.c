/*
 * dlx_stream.c - the call's stream: which source answers, and DLPack's integer rules.
 */
#include "dlx_stream.h"

dlx_stream_source dlx_stream_choose(const dlx_stream_facts *f) {
  if (!f->has_device) return DLX_STREAM_NONE; /* the CPU has no stream, override or not */
  if (f->override_active) return DLX_STREAM_OVERRIDE;
  if (f->table_device) return DLX_STREAM_TABLE;
  if (!f->deferred) return DLX_STREAM_NONE; /* no producer to give a stream to */
  if (f->provider) return DLX_STREAM_PROVIDER;
  return DLX_STREAM_DEFAULT;
}

const char *dlx_stream_source_name(dlx_stream_source s) {
  switch (s) {
    case DLX_STREAM_NONE: return "none";
    case DLX_STREAM_OVERRIDE: return "override";
    case DLX_STREAM_TABLE: return "table";
    case DLX_STREAM_PROVIDER: return "provider";
    case DLX_STREAM_DEFAULT: return "default";
  }
  return "unknown";
}

uintptr_t dlx_stream_default_handle(DLDeviceType t) {
  /* CUDA names its per-thread default stream by a handle of its own (cudaStreamPerThread,
   * 2, which DLPack also uses). DLPack gives ROCm no per-thread default: its default
   * stream (NULL, DLPack's 0) is the one every producer understands. */
  return t == kDLCUDA || t == kDLCUDAManaged ? 2 : 0;
}

int dlx_stream_dlpack_arg(DLDeviceType t, uintptr_t handle, uint64_t *out) {
  switch (t) {
    case kDLCPU:
    case kDLCUDAHost:
    case kDLROCMHost:
      return DLX_DLPACK_NO_STREAM;
    case kDLCUDA:
    case kDLCUDAManaged:
      *out = handle == 0 ? 1 : (uint64_t)handle; /* NULL is the legacy default: DLPack's 1 */
      return DLX_DLPACK_STREAM;
    case kDLROCM:
      if (handle == 1 || handle == 2) return DLX_DLPACK_BAD_STREAM;
      *out = (uint64_t)handle;
      return DLX_DLPACK_STREAM;
    default:
      if (!handle) return DLX_DLPACK_NO_STREAM;
      *out = (uint64_t)handle;
      return DLX_DLPACK_STREAM;
  }
}
