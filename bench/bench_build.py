"""Cold and warm dlx.load_inline for a small C kernel (issue 12's target: warm < 5 ms).

    PYTHONPATH=build/python /usr/bin/python3 bench/bench_build.py

cold: compile + link + seal + publish, in a fresh cache folder. warm, new process: the first
load_inline of a process whose cache holds the library (stat-and-hash pass, checked open,
dlopen through the descriptor). warm, again: later calls in the same process (the same
pass, then the library already loaded). Also a CUDA + C library's warm pass when nvcc
exists (its headers are ~200 files, ~3.4 MB, all digested)."""
import os
import statistics
import subprocess
import sys
import tempfile
import time

SRC = r"""
#include <dlx/dlx.h>
DLX_KERNEL(add) {
  int64_t a, b;
  if (dlx_arg_int(call, 0, &a) || dlx_arg_int(call, 1, &b)) return -1;
  return dlx_return_int(call, a + b);
}
"""

CHILD = """
import time, dlx, sys
t0 = time.perf_counter()
lib = dlx.load_inline(sys.argv[1], name="bench")
t1 = time.perf_counter()
assert lib.add(1, 2) == 3
print(t1 - t0)
"""

CU = r"""
#include <dlx/dlx.h>
#include <cuda_runtime.h>
__global__ void k(float *x) { x[0] = 1; }
DLX_KERNEL(noop) { (void)call; return 0; }
"""


def main():
    with tempfile.TemporaryDirectory(prefix="dlx-bench-build-") as cache:
        os.environ["DLX_CACHE_DIR"] = cache
        import dlx

        t0 = time.perf_counter()
        dlx.load_inline(SRC, name="bench")
        cold = time.perf_counter() - t0
        fresh = [float(subprocess.run([sys.executable, "-c", CHILD, SRC], check=True,
                                      capture_output=True, text=True).stdout)
                 for _ in range(5)]
        again = []
        for _ in range(200):
            t0 = time.perf_counter()
            dlx.load_inline(SRC, name="bench")
            again.append(time.perf_counter() - t0)
        print(f"load_inline, small C kernel: cold {cold * 1e3:.0f} ms; "
              f"warm, new process {statistics.median(fresh) * 1e3:.2f} ms (median of 5); "
              f"warm, again {statistics.median(again) * 1e3:.3f} ms (median of 200)")
        if os.access("/usr/local/cuda/bin/nvcc", os.X_OK) or os.environ.get("CUDA_HOME"):
            t0 = time.perf_counter()
            dlx.load_inline(CU, language="cuda", name="bench_cu")
            cold = time.perf_counter() - t0
            warm = []
            for _ in range(20):
                t0 = time.perf_counter()
                dlx.load_inline(CU, language="cuda", name="bench_cu")
                warm.append(time.perf_counter() - t0)
            print(f"load_inline, CUDA kernel (cuda_runtime.h): cold {cold:.1f} s; "
                  f"warm, again {statistics.median(warm) * 1e3:.1f} ms (median of 20)")


if __name__ == "__main__":
    main()
