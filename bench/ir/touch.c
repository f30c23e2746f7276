/* touch.c - the kernels every bench-ir row runs: per tensor argument they read the data
 * pointer, ndim and shape[0] (the work each peer binding does too); ints and floats
 * are read as values. `touch` declares no signature; touch3s and touch_ints3s are the
 * same work behind declared signatures (their checks, their binding). */
#include <dlx/dlx.h>

volatile int64_t dlx_bench_sink;

static inline __attribute__((always_inline)) int touch_all(dlx_call *call) {
  int64_t s = 0;
  for (int32_t i = 0; i < dlx_num_args(call); ++i) {
    const dlx_arg *a = &call->args[i];
    if (a->kind == DLX_ARG_TENSOR) {
      DLTensor *t = a->value.tensor;
      s += (int64_t)(intptr_t)t->data + t->ndim + (t->ndim ? t->shape[0] : 0);
    } else {
      s += a->value.i;
    }
  }
  dlx_bench_sink = s;
  return 0;
}

DLX_KERNEL(touch) { return touch_all(call); }
DLX_KERNEL(touch3s, "x: f32[n], y: f32[n] mut, z: f32[n]") { return touch_all(call); }
DLX_KERNEL(touch_ints3s, "a: int, b: int, c: int") { return touch_all(call); }
