#!/usr/bin/env bash
# The CUDA check of the streams issue, for a machine with a GPU, nvcc and a torch that has
# its own exchange table (not run in CI). Builds dlx with plain compiler calls (no apt,
# no cmake needed), compiles tests/gpu/stream_kernels.cu and examples/saxpy_cuda.cu with nvcc,
# runs check_cuda.py (through torch's table, then dlx's addon), then check_cupy.py (torch +
# CuPy streams, CUDA graph capture) when CuPy is importable, and check_jax.py (a jitted CUDA
# kernel on XLA's stream) when JAX has a GPU.
# Usage: bash tests/gpu/run.sh [python]   (default: python3)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${1:-python3}
OUT=${OUT:-$(mktemp -d)}
PKG=$OUT/python/dlx
mkdir -p "$PKG/include/dlx" "$PKG/addon" "$OUT/k"
NUMPY_INC=$("$PY" -c 'import numpy; print(numpy.get_include())')
PY_INC=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
SUFFIX=$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
DLX_INC=() DLX_SRC=()  # src/core, src/python and every folder under them (headers by bare name)
for d in $(find src/core src/python -type d | sort); do DLX_INC+=("-I$d"); done
# every .c under them (a folder may hold only folders)
for f in $(find src/core src/python -name '*.c' | sort); do DLX_SRC+=("$f"); done
cc -std=c11 -O2 -fPIC -shared -fvisibility=hidden -D_GNU_SOURCE \
  -DNPY_NO_DEPRECATED_API=NPY_1_7_API_VERSION -I"$PY_INC" -I"$NUMPY_INC" -Iinclude "${DLX_INC[@]}" \
  "${DLX_SRC[@]}" -o "$PKG/_core$SUFFIX" -ldl -lpthread
cp python/dlx/*.py "$PKG/"
cp include/dlx/*.h "$PKG/include/dlx/"
# the core's files the addons compile, flat beside them as CMakeLists.txt ships them
cp src/addons/torch/* src/addons/jax/* src/core/calls/dlx_invoke.h src/core/libraries/dlx_kernel_ref.[ch] \
  src/core/libraries/dlx_identifier.h "$PKG/addon/"
nvcc -O2 -shared -Xcompiler -fPIC -Iinclude tests/gpu/stream_kernels.cu -o "$OUT/k/stream_kernels.so"
nvcc -O2 -shared -Xcompiler -fPIC,-fvisibility=hidden -Iinclude examples/saxpy_cuda.cu \
  -o "$OUT/k/saxpy_cuda.so"
nvcc -O2 -shared -Xcompiler -fPIC,-fvisibility=hidden -Iinclude tests/gpu/jax_kernels.cu \
  -o "$OUT/k/jax_kernels.so"
DLX_CACHE_DIR=$OUT/cache PYTHONPATH=$OUT/python "$PY" tests/gpu/check_cuda.py \
  "$OUT/k/stream_kernels.so" "$OUT/k/saxpy_cuda.so"
# again through dlx's addon (built here for this torch): the default once it is cached, whose
# plain tensors the call loop describes in line, on CUDA tensors and torch's current stream
if "$PY" -c 'import sys, torch; sys.exit(not hasattr(torch._C, "_dlpack_exchange_api"))'; then
  DLX_TORCH_TABLE=addon DLX_CACHE_DIR=$OUT/cache PYTHONPATH=$OUT/python "$PY" \
    tests/gpu/check_cuda.py "$OUT/k/stream_kernels.so" "$OUT/k/saxpy_cuda.so"
fi
if "$PY" -c 'import cupy' 2>/dev/null; then
  DLX_CACHE_DIR=$OUT/cache PYTHONPATH=$OUT/python "$PY" tests/gpu/check_cupy.py \
    "$OUT/k/stream_kernels.so"
else
  echo "cupy is not importable for $PY: the CuPy stream check is skipped (pip install cupy-cuda12x)"
fi
if "$PY" -c 'import jax, sys; sys.exit(not jax.devices("gpu"))' 2>/dev/null; then
  DLX_CACHE_DIR=$OUT/cache PYTHONPATH=$OUT/python "$PY" tests/gpu/check_jax.py "$OUT/k/jax_kernels.so"
else
  echo "jax has no GPU for $PY: the jax.jit stream check is skipped (pip install jax[cuda12])"
fi
