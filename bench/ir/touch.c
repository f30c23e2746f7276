/* touch.c - the kernel every bench-ir row runs: per tensor argument it reads the data
 * pointer, ndim and shape[0] (the work each peer binding does too); ints and floats
 * are read as values. */
#include <dlx/dlx.h>

volatile int64_t dlx_bench_sink;

DLX_KERNEL(touch) {
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
