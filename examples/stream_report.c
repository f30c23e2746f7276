/* stream_report: kernels that report what dlx handed them, so a caller can see
 * which device and which stream a launch would use. A real kernel would pass
 * dlx_call_stream(call) to its launch (cudaLaunchKernel, aclrtLaunch...). */
#include <stdint.h>

#include <dlx/dlx.h>

/* The caller's current work stream on the call's device, as an int (0 on CPU). */
DLX_KERNEL(report_stream) { return dlx_return_int(call, (int64_t)(intptr_t)dlx_call_stream(call)); }

/* The call's device type (1 = CPU, 2 = CUDA, 10 = ROCm, 12 = kDLExtDev/Ascend). */
DLX_KERNEL(report_device_type) { return dlx_return_int(call, dlx_call_device(call).device_type); }

/* The call's device index. */
DLX_KERNEL(report_device_id) { return dlx_return_int(call, dlx_call_device(call).device_id); }
