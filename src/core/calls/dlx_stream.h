/*
 * dlx_stream.h - which stream a call runs on, and how that stream is passed to a
 * producer's __dlpack__(stream=...). Pure functions over facts the CPython layer
 * gathers (src/python/calls/call.c, stream.c); unit-tested in tests/c/calls/test_stream.c.
 */
#ifndef DLX_STREAM_H_
#define DLX_STREAM_H_

#include <stdint.h>

#include "dlx/dlpack.h"

/* Where a call's stream comes from, best first. */
typedef enum {
  DLX_STREAM_NONE = 0,  /* no device tensor, or nothing to ask: the kernel gets NULL */
  DLX_STREAM_OVERRIDE,  /* `with dlx.stream(s):` on the calling thread */
  DLX_STREAM_TABLE,     /* the first device tensor that came with an exchange table */
  DLX_STREAM_PROVIDER,  /* a stream provider for a __dlpack__ producer's type */
  DLX_STREAM_DEFAULT,   /* the device type's per-thread default stream */
} dlx_stream_source;

/* What is known about one call once every argument's device is known. */
typedef struct dlx_stream_facts {
  int has_device;      /* some tensor argument is not on the CPU */
  int override_active; /* an override is in force on this thread */
  int table_device;    /* a device tensor came with an exchange table */
  int deferred;        /* a device producer without a table waits to be exported */
  int provider;        /* ... and one such producer has a stream provider */
} dlx_stream_facts;

/* NONE also when nothing names a stream and no producer waits for one (device tensors
 * that came without a table and were exported already: the kernel gets NULL, as ever). */

dlx_stream_source dlx_stream_choose(const dlx_stream_facts *f);

/* "none", "override", "table", "provider", "default". */
const char *dlx_stream_source_name(dlx_stream_source s);

/* The stream handle used when nothing else names one: CUDA's per-thread default stream
 * (cudaStreamPerThread, the handle 2), else the device's default stream (NULL). */
uintptr_t dlx_stream_default_handle(DLDeviceType t);

/* How a call on stream handle `handle` is passed to __dlpack__ of a tensor of device type
 * `t`, by DLPack's rules (the Python array API's `stream` argument):
 *   CUDA (and CUDA managed): 1 legacy default, 2 per-thread default, > 2 a stream; 0 is
 *     not allowed, so the NULL handle (the legacy default stream) is passed as 1.
 *   ROCm: 0 the default stream, > 2 a stream; 1 and 2 are not allowed.
 *   CPU and pinned host memory (CUDA host, ROCm host): no stream at all.
 *   Other devices: the handle as an integer, none for NULL.
 * Returns DLX_DLPACK_STREAM with *out set, DLX_DLPACK_NO_STREAM, or DLX_DLPACK_BAD_STREAM
 * when no DLPack integer means that handle on that device (ROCm 1 and 2). The integer is
 * unsigned: a handle >= 2**63 must not reach __dlpack__ negative (-1 there means "do not
 * synchronize"). */
enum { DLX_DLPACK_STREAM = 0, DLX_DLPACK_NO_STREAM = 1, DLX_DLPACK_BAD_STREAM = -1 };
int dlx_stream_dlpack_arg(DLDeviceType t, uintptr_t handle, uint64_t *out);

#endif /* DLX_STREAM_H_ */
