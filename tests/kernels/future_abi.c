/* A kernel record claiming a newer minor ABI than any dlx has (1.99): it may read runtime
 * fields this dlx lacks, so dlx.load refuses it with an ImportError. Written by hand:
 * DLX_KERNEL always stamps the header's own version. */
#include <dlx/dlx.h>

DLX_EXTERN_C DLX_EXPORT int future(dlx_call *call);
DLX_EXTERN_C DLX_EXPORT const dlx_kernel_record dlx_kernel__future;
const dlx_kernel_record dlx_kernel__future = {DLX_KERNEL_MAGIC, (DLX_ABI_VERSION & 0xffff0000u) | 99u,
                                              0, "future", future, 0};
int future(dlx_call *call) {
  (void)call;
  return 0;
}
