"""tvm-ffi beside dlx, both ways: dlx kernels take tvm_ffi.Tensor objects, and a tvm-ffi
function (built from C++ with tvm_ffi.cpp.load_inline) takes torch tensors through the
table dlx put in force, so on the stand-in Ascend device it sees the same NPU stream a
dlx kernel sees: inside `with torch.npu.stream(s):`, per thread."""
import os

import numpy as np
import pytest

tvm_ffi = pytest.importorskip("tvm_ffi", reason="apache-tvm-ffi is installed in the venv only "
                                                "(make venv)")
import tvm_ffi.cpp  # noqa: E402

from test_ascend import STANDIN, scenario  # noqa: E402

# Functions a tvm-ffi user would write: they read the stream tvm-ffi's call machinery
# set for the call's device (TVMFFIEnvGetStream), as a real launch would.
SOURCE = r"""
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>

void noop3(tvm::ffi::TensorView, tvm::ffi::TensorView, tvm::ffi::TensorView) {}

double sum_f32(tvm::ffi::TensorView x) {
  TVM_FFI_ICHECK(x.ndim() == 1 && x.dtype().code == kDLFloat && x.dtype().bits == 32);
  const float *p = static_cast<const float *>(x.data_ptr());
  double acc = 0;
  for (int64_t i = 0; i < x.size(0); ++i) acc += p[i * x.stride(0)];
  return acc;
}

int64_t device_type(tvm::ffi::TensorView x) { return x.device().device_type; }

int64_t stream_of(tvm::ffi::TensorView x) {
  return reinterpret_cast<int64_t>(TVMFFIEnvGetStream(x.device().device_type,
                                                      x.device().device_id));
}
"""
FUNCTIONS = ["noop3", "sum_f32", "device_type", "stream_of"]


def build_module(folder):
    """The tvm-ffi module, compiled into `folder`; returns the library's path."""
    mod = tvm_ffi.cpp.load_inline("dlx_peer", cpp_sources=SOURCE, functions=FUNCTIONS,
                                  build_directory=str(folder))
    del mod
    libs = [p for p in os.listdir(folder) if p.endswith(".so")]
    assert len(libs) == 1, libs
    return os.path.join(folder, libs[0])


@pytest.fixture(scope="module")
def peer_path(tmp_path_factory):
    return build_module(tmp_path_factory.mktemp("tvm-ffi"))


@pytest.fixture(scope="module")
def peer(peer_path):
    return tvm_ffi.load_module(peer_path)


def test_dlx_consumes_tvm_ffi_tensors(kernels):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = tvm_ffi.from_dlpack(a)
    assert isinstance(t, tvm_ffi.Tensor)
    assert kernels.sum(t) == 66.0
    assert [kernels.info(t, 10 + d) for d in range(2)] == [3, 4]
    assert [kernels.info(t, 20 + d) for d in range(2)] == [4, 1]
    assert kernels.info(t, 30) == a.ctypes.data  # the very memory: no copy
    kernels.fill(t, 2.0)
    assert a.sum() == 24.0
    assert kernels.is_readonly(t) == 0


def test_tvm_ffi_function_takes_numpy_and_dlx_results(peer, kernels):
    a = np.arange(5, dtype=np.float32)
    assert peer.sum_f32(a) == 10.0
    made = kernels.arange(4)  # a dlx kernel's new numpy array goes straight on
    assert peer.sum_f32(made) == 6.0


def test_tvm_ffi_function_takes_torch_tensors(peer, kernels):
    torch = pytest.importorskip("torch")
    t = torch.arange(6, dtype=torch.float32)[::2]
    assert peer.sum_f32(t) == 6.0 and peer.device_type(t) == 1
    assert peer.stream_of(t) == 0  # CPU: no stream
    assert kernels.sum(t) == 6.0


@pytest.mark.skipif(not (STANDIN / "lib" / "libtorch_npu.so").exists(),
                    reason="stand-in Ascend stack not built (torch C++ headers/libraries "
                           "missing)")
def test_tvm_ffi_sees_the_npu_stream_of_dlx_overlay(peer_path):
    """torch 2.x's native table knows no NPU stream; dlx's overlay answers it. tvm-ffi asks
    the table in force on torch.Tensor, so its function sees what dlx's kernel sees."""
    torch = pytest.importorskip("torch")
    if getattr(torch._C, "_dlpack_exchange_api", None) is None:
        pytest.skip(f"torch {torch.__version__} has no native table to lay the overlay on")
    out = scenario(f"""
        import threading, torch, torch_npu, tvm_ffi, dlx.torch as dt, npu_scenarios as S
        rec = dt.install()  # before tvm-ffi first meets a torch.Tensor: it caches the table
        peer = tvm_ffi.load_module({peer_path!r})
        rep = S.report()
        t = torch.ones(4, device=torch_npu.DEVICE_TYPE)
        s, s2 = torch.npu.Stream(), torch.npu.Stream()
        out = {{"record": rec.source, "device_type": peer.device_type(t),
               "default": torch.npu.default_stream().npu_stream,
               "before": [peer.stream_of(t), rep.report_stream(t)]}}
        with torch.npu.stream(s):
            out["inside"] = [peer.stream_of(t), rep.report_stream(t), s.npu_stream]
            with torch.npu.stream(s2):
                out["nested"] = [peer.stream_of(t), rep.report_stream(t), s2.npu_stream]
        out["after"] = [peer.stream_of(t), rep.report_stream(t)]
        seen, barrier = {{}}, threading.Barrier(2, timeout=60)

        def worker(name):
            mine = torch.npu.Stream()
            with torch.npu.stream(mine):
                barrier.wait()
                got = {{(peer.stream_of(t), rep.report_stream(t)) for _ in range(200)}}
                barrier.wait()
            seen[name] = [mine.npu_stream, sorted(got)]

        threads = [threading.Thread(target=worker, args=(n,)) for n in "ab"]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        out["threads"] = seen
        result(out)
    """)
    assert out["record"] == "native+stream" and out["device_type"] == 12  # kDLExtDev
    default = out["default"]
    assert default != 0 and out["before"] == [default, default]
    s = out["inside"][2]
    assert out["inside"] == [s, s, s] and s != default
    s2 = out["nested"][2]
    assert out["nested"] == [s2, s2, s2] and s2 != s
    assert out["after"] == [default, default]
    a, b = out["threads"]["a"], out["threads"]["b"]
    assert a[0] != b[0]
    assert a[1] == [[a[0], a[0]]] and b[1] == [[b[0], b[0]]]  # each thread its own, both agree

