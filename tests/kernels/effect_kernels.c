/* Kernels for the native-operator parity tests (tests/python/compilers/operators/:
 * test_jax_parity.py, test_jax_ffi_suite.py, test_torch_effects.py): kernels with effects
 * (`; effects`), their pure twins, and one that echoes its scalars as the kernel received
 * them. */
#include <stdint.h>

#include <dlx/dlx.h>

/* Counters, one per slot (a test each): state a compiler must not fold away. */
#define SLOTS 64
static int64_t counts[SLOTS];

static int slot_of(dlx_call *call, int32_t i, int64_t *slot) {
  if (dlx_arg_int(call, i, slot)) return -1;
  if (*slot < 0 || *slot >= SLOTS) return dlx_error(call, "ValueError", "slot out of range");
  return 0;
}

static int return_i64(dlx_call *call, int64_t v) {
  DLTensor *out;
  if (dlx_return_new_tensor(call, (DLDevice){kDLCPU, 0}, 0, NULL, (DLDataType){kDLInt, 64, 1},
                            &out))
    return -1;
  *(int64_t *)out->data = v;
  return 0;
}

/* The slot's count before this call, then one more: 0, 1, 2, ... */
DLX_KERNEL(counter, "slot: int -> i64[]; effects") {
  int64_t slot;
  if (slot_of(call, 0, &slot)) return -1;
  return return_i64(call, counts[slot]++);
}

/* The same, declared pure: a compiler may run it once and keep the value. */
DLX_KERNEL(pure_counter, "slot: int -> i64[]") {
  int64_t slot;
  if (slot_of(call, 0, &slot)) return -1;
  return return_i64(call, counts[slot]++);
}

/* The slot's count, without counting (pure reads of the state, for the tests). */
DLX_KERNEL(peek, "slot: int -> i64[]") {
  int64_t slot;
  if (slot_of(call, 0, &slot)) return -1;
  return return_i64(call, counts[slot]);
}

/* A tensor in, its first element plus the slot's count out, counted: an effect whose
 * result a program may drop. */
DLX_KERNEL(tick, "x: f32[n], slot: int -> f32[n]; effects") {
  DLTensor *x, *out;
  int64_t slot, n;
  if (dlx_arg_tensor(call, 0, &x) || slot_of(call, 1, &slot) || dlx_size(call, "n", &n) ||
      dlx_return_new_tensor(call, x->device, 1, &n, x->dtype, &out))
    return -1;
  int64_t c = counts[slot]++;
  for (int64_t i = 0; i < n; ++i)
    ((float *)out->data)[i] =
        ((float *)((char *)x->data + x->byte_offset))[i * x->strides[0]] + (float)c;
  return 0;
}

/* Only writes: x += the slot's count, counted (an effect with a `mut` output, no result). */
DLX_KERNEL(tick_into, "x: f32[n] mut, slot: int; effects") {
  DLTensor *x;
  int64_t slot;
  if (dlx_arg_tensor(call, 0, &x) || slot_of(call, 1, &slot)) return -1;
  int64_t c = counts[slot]++;
  for (int64_t i = 0; i < x->shape[0]; ++i)
    ((float *)((char *)x->data + x->byte_offset))[i * x->strides[0]] += (float)c;
  return 0;
}

/* Its scalars as it received them: (i, f, b, len(s), s[0] or -1, ints[0], floats[0],
 * len(ints), len(floats)) as f64[9]; x only makes the call traced. */
DLX_KERNEL(scalars, "x: f32[n], i: int = 0, f: float = 0.0, b: bool = False, s: str = '', "
                    "ints: ints = (0,), floats: floats = (0.0,) -> f64[9]") {
  DLTensor *x, *out;
  int64_t i, b, slen;
  int32_t nints = 0, nfloats = 0;
  double f;
  const char *s;
  const int64_t *ints;
  const double *floats;
  int64_t nine = 9;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_int(call, 1, &i) || dlx_arg_float(call, 2, &f) ||
      dlx_arg_int(call, 3, &b) || dlx_arg_str(call, 4, &s, &slen) ||
      dlx_arg_ints(call, 5, &ints, &nints) || dlx_arg_floats(call, 6, &floats, &nfloats) ||
      dlx_return_new_tensor(call, x->device, 1, &nine, (DLDataType){kDLFloat, 64, 1}, &out))
    return -1;
  double *o = out->data;
  o[0] = (double)i;
  o[1] = f;
  o[2] = (double)b;
  o[3] = (double)slen;
  o[4] = s[0] ? (double)(unsigned char)s[0] : -1.0;
  o[5] = nints ? (double)ints[0] : -1.0;
  o[6] = nfloats ? floats[0] : -1.0;
  o[7] = (double)nints;
  o[8] = (double)nfloats;
  return 0;
}
