/* A kernel library whose signature is malformed: dlx.load refuses it with an ImportError
 * naming the kernel and the column (tests/python/calls/test_signatures.py). */
#include <dlx/dlx.h>

DLX_KERNEL(fine, "x: f32[n]") {
  (void)call;
  return 0;
}

DLX_KERNEL(broken, "x: f32[n], y: f33[n]") {
  (void)call;
  return 0;
}
