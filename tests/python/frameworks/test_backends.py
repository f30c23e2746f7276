"""CUDA and ROCm without GPUs: backend selection and the runtime stream provider, with
stand-in `torch.cuda.is_available`, `torch.version.cuda|hip` and
`torch._C._cuda_getCurrentRawStream` patched onto Debian's CPU torch in a fresh
interpreter (the provider looks its callable up once per process)."""
import json
import os
import textwrap

import pytest

from conftest import BUILD, PYPATH, ROOT, run_python

pytest.importorskip("torch")

SCENARIO_PATH = os.pathsep.join([PYPATH, str(ROOT / "tests" / "python" / "frameworks"),
                                 str(ROOT / "tests" / "python")])
HAVE_NPU_STANDIN = (BUILD / "fixtures" / "torch_npu" / "lib" / "libtorch_npu.so").exists()


def scenario(code):
    prelude = ("import json\n"
               "def result(obj):\n"
               "    print('RESULT ' + json.dumps(obj))\n")
    r = run_python(prelude + textwrap.dedent(code), env={"PYTHONPATH": SCENARIO_PATH})
    lines = [line for line in r.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, f"no result:\n{r.stdout}\n{r.stderr}"
    return json.loads(lines[0][len("RESULT "):])


SELECTION = """
    import torch, dlx.torch as dt

    def pick(available, cuda, hip):
        if isinstance(available, Exception):
            def probe(): raise available
        else:
            probe = lambda: available
        torch.cuda.is_available = probe
        torch.version.cuda, torch.version.hip = cuda, hip
        return list(dt.selection())

    cases = [(True, "12.1", None), (True, None, "6.0.32830"), (True, None, None),
             (True, "12.1", "6.0"), (False, "12.1", None), (False, None, "6.0"),
             (RuntimeError("driver too old"), "12.1", None)]
    out = {"plain": [pick(*c) for c in cases]}
    if WITH_NPU:
        import torch_npu
        out["with_npu"] = [pick(*c) for c in cases]
    out["probe_errors"] = dict(dt.probe_errors)
    result(out)
"""


def test_selection_cuda_rocm_and_npu_precedence():
    out = scenario(f"WITH_NPU = {HAVE_NPU_STANDIN}\n" + textwrap.dedent(SELECTION))
    names = [name for name, _ in out["plain"]]
    assert names == ["cuda", "rocm", "cuda", "cuda", "cpu", "cpu", "cpu"]
    reasons = [reason for _, reason in out["plain"]]
    assert "torch.version.cuda is set" in reasons[0]
    assert "torch.version.hip is set" in reasons[1]
    assert "assuming cuda" in reasons[2]
    assert "no torch.npu" in reasons[4]
    assert out["probe_errors"]["torch.cuda.is_available()"] == "RuntimeError: driver too old"
    if HAVE_NPU_STANDIN:
        # A GPU wins over torch.npu; without one, torch.npu is chosen.
        names = [name for name, _ in out["with_npu"]]
        assert names == ["cuda", "rocm", "cuda", "cuda", "torch_npu", "torch_npu", "torch_npu"]
        assert all("torch.npu is available too" in r for _, r in out["with_npu"][:4])


PROVIDER = """
    import threading, torch, dlx, npu_scenarios as S
    from dlx import _core

    out = {}
    _core.set_active_backend("cuda")
    try:  # CPU torch has no raw-stream entry point: a clear error, not a NULL stream
        _core.provider_stream(S.kDLCUDA, 0)
    except RuntimeError as e:
        out["missing"] = str(e)

    # The stand-in: a per-thread current stream per device, like torch.cuda.stream(s).
    local, calls = threading.local(), []
    def raw_stream(index):
        calls.append(index)
        if index == 7:
            raise RuntimeError("CUDA error: invalid device ordinal")
        return getattr(local, "streams", {}).get(index, 0xDEF0 + index)
    torch._C._cuda_getCurrentRawStream = raw_stream

    out["cuda"] = _core.provider_stream(S.kDLCUDA, 1)
    out["cuda_calls"] = list(calls)
    del calls[:]
    out["ext_dev"] = _core.provider_stream(S.kDLExtDev, 0)  # not an NPU: backend is cuda
    out["cpu"] = _core.provider_stream(S.kDLCPU, 0)
    out["ignored_calls"] = list(calls)
    try:
        _core.provider_stream(S.kDLCUDA, 7)
    except RuntimeError as e:
        out["raised"] = str(e)

    # A kernel call with a torch tensor on cuda:1 (host memory behind it) through the cpu
    # addon, whose fallback for kDLCUDA is this provider.
    _, _, cap = dlx.torch.ensure_addon("cpu")
    S.set_table(cap)
    t, deleted = S.foreign_torch_tensor(cap, S.kDLCUDA, 1, [1, 2, 3, 4])
    rep, k = S.report(), S.kernels()
    out["device"] = [str(t.device), rep.report_device_type(t), rep.report_device_id(t)]
    out["sum"] = k.sum(t)
    out["call_default"] = rep.report_stream(t)
    local.streams = {1: 0x5EA1}
    out["call_set"] = rep.report_stream(t)
    seen = []
    def other_thread():
        seen.append(rep.report_stream(t))  # its own (default) stream, not 0x5EA1
        local.streams = {1: 0xB0B}
        seen.append(rep.report_stream(t))
    th = threading.Thread(target=other_thread)
    th.start(); th.join()
    out["thread"] = seen
    out["main_again"] = rep.report_stream(t)
    t7, _ = S.foreign_torch_tensor(cap, S.kDLCUDA, 7, [1])
    try:
        rep.report_stream(t7)
    except RuntimeError as e:
        out["kernel_raised"] = str(e)

    # ROCm masquerades as CUDA: the same entry point answers kDLROCM.
    _core.set_active_backend("rocm")
    del calls[:]
    out["rocm"] = _core.provider_stream(S.kDLROCM, 2)
    out["rocm_calls"] = list(calls)
    out["info"] = _core.provider_info()
    del t, t7
    import gc; gc.collect()
    out["deleted"] = deleted
    result(out)
"""


def test_cuda_and_rocm_runtime_provider():
    out = scenario(PROVIDER)
    assert "torch._C._cuda_getCurrentRawStream is not available" in out["missing"]
    assert out["cuda"] == 0xDEF0 + 1 and out["cuda_calls"] == [1]
    assert out["ext_dev"] == 0 and out["cpu"] == 0 and out["ignored_calls"] == []
    assert "invalid device ordinal" in out["raised"]
    assert out["device"] == ["cuda:1", 2, 1]
    assert out["sum"] == 10
    assert out["call_default"] == 0xDEF0 + 1
    assert out["call_set"] == 0x5EA1  # asked at call time, never cached
    assert out["thread"] == [0xDEF0 + 1, 0xB0B]
    assert out["main_again"] == 0x5EA1
    assert "invalid device ordinal" in out["kernel_raised"]
    assert out["rocm"] == 0xDEF0 + 2 and out["rocm_calls"] == [2]
    assert out["info"]["active"] == "rocm"
    assert out["info"]["providers"]["rocm"] == "torch._C._cuda_getCurrentRawStream"
    assert out["deleted"] == [1]  # the imported tensor's deleter ran once
