"""Ascend without hardware: real torch.Tensors on a host-memory PrivateUse1 device
(tests/fixtures/privateuse1) and the stand-in torch_npu (tests/fixtures/torch_npu_standin),
through the three ways dlx gets an NPU stream:

  (a) the addon built with --build-with-torch-npu (c10_npu::getCurrentNPUStream, compiled in)
  (b) an addon built for cpu, whose fallback is dlx's runtime provider
      (torch_npu._C._npu_getCurrentRawStream)
  (c) the overlay over a native table (torch ships conversions, dlx adds the NPU stream)

Every scenario runs in a fresh interpreter: install() decides once per process. The two
addons are built once (in parallel) into the session's addon cache and loaded from there.
"""
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import BUILD, PYPATH, ROOT, run_python

STANDIN = BUILD / "fixtures" / "torch_npu"
try:
    import torch
except ImportError:  # the module's tests skip (the stand-in needs torch)
    torch = None
pytestmark = [
    pytest.mark.skipif(torch is None, reason="torch is not importable by this interpreter "
                       "(the stand-in is built from the system's libtorch for another one)"),
    pytest.mark.skipif(
        not ((STANDIN / "lib" / "libtorch_npu.so").exists()
             and any((BUILD / "fixtures").glob("dlx_privateuse1*.so"))),
        reason="stand-in Ascend stack not built (torch C++ headers/libraries missing)")]

# The scenarios import npu_scenarios (beside this file) and dlpack_ctypes (tests/python).
SCENARIO_PATH = os.pathsep.join([PYPATH, str(ROOT / "tests" / "python" / "frameworks"),
                                 str(ROOT / "tests" / "python")])
kDLExtDev = 12
TORCH_MM = ".".join(torch.__version__.split(".")[:2]) if torch else "?"
NPU_ADDON = re.compile(rf"libdlx_torch_{re.escape(TORCH_MM)}_torch_npu_[0-9a-f]{{12}}\.so$")
# torch >= 2.10 ships its own table: install() lays dlx's stream overlay over it, and the
# compiled torch_npu addon is what `build-addon` makes on request.
NATIVE = torch is not None and torch.Tensor.__dict__.get("__dlpack_c_exchange_api__") is not None
# On torch 2.x the stand-in renames PrivateUse1 "npu" (torch 1.13 cannot).
DEVICE = "npu" if torch is not None and hasattr(torch.utils, "rename_privateuse1_backend") \
    else "privateuseone"


def scenario(code, env=None):
    """Run `code` in a fresh interpreter; it ends with `result(obj)`; returns obj."""
    prelude = ("import json\n"
               "def result(obj):\n"
               "    print('RESULT ' + json.dumps(obj))\n")
    r = run_python(prelude + textwrap.dedent(code),
                   env={"PYTHONPATH": SCENARIO_PATH, **(env or {})})
    lines = [line for line in r.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, f"no result:\n{r.stdout}\n{r.stderr}"
    return json.loads(lines[0][len("RESULT "):])


@pytest.fixture(scope="module")
def addons():
    """The torch_npu addon and the cpu addon, built concurrently (a cold build is the
    slow part) into the session cache; later installs in the scenarios load them."""
    env = dict(os.environ, PYTHONPATH=PYPATH, DLX_BUILD_DIR=str(BUILD))
    jobs = {name: subprocess.Popen([sys.executable, "-m", "dlx", "build-addon", *args], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for name, args in (("torch_npu", ["--build-with-torch-npu"]),
                               ("cpu", ["--backend", "cpu"]))}
    paths = {}
    for name, job in jobs.items():
        out, err = job.communicate(timeout=600)
        assert job.returncode == 0, f"build-addon for {name} failed:\n{out}\n{err}"
        paths[name] = out.strip().splitlines()[-1]
    assert NPU_ADDON.search(paths["torch_npu"])
    assert os.path.dirname(paths["torch_npu"]) == os.environ["DLX_CACHE_DIR"]
    return paths


def assert_npu_streams(out):
    """What a kernel must see for a PrivateUse1 tensor, whoever answers the stream."""
    default, s, s2 = out["default"], out["s"], out["s2"]
    assert out["device_type"] == kDLExtDev and out["device_id"] == 0
    assert default != 0 and len({default, s, s2, out["s1"], out["default1"]}) == 5
    assert out["before"] == default
    assert out["inside"] == s  # the non-default stream set with torch.npu.stream(s)
    assert out["inside_view"] == s
    assert out["inside_current"] == s
    assert out["nested"] == s2 and out["after_nested"] == s
    assert out["after"] == default  # leaving the context restores the default
    assert out["dev1_id"] == 1 and out["dev1_inside"] == out["s1"]
    assert out["dev0_while_dev1_set"] == default
    assert out["dev1_after"] == out["default1"]
    assert out["thread_errors"] == []
    a, b = out["threads"]["a"], out["threads"]["b"]
    assert a["own"] != b["own"]
    assert a["seen"] == [a["own"]] and b["seen"] == [b["own"]]  # never the other's
    assert a["after"] == default and b["after"] == default
    assert out["main_during_threads"] == s  # the workers did not touch the main thread's
    assert out["main_after_threads"] == default


def test_selection_picks_torch_npu():
    out = scenario("""
        import torch, dlx.torch as dt
        before = dt.selection()
        import torch_npu
        result({"before": before, "after": dt.selection(), "backend": dt.backend(),
                "available": torch.npu.is_available(), "count": torch.npu.device_count(),
                "standin": torch_npu.STANDIN})
    """)
    assert out["before"][0] == "cpu" and "no torch.npu" in out["before"][1]
    assert out["after"][0] == "torch_npu" and "torch.npu.is_available()" in out["after"][1]
    assert out["backend"] == "torch_npu"
    assert out["available"] is True and out["count"] == 2 and out["standin"] is True


def test_dlx_backend_overrides_the_standin():
    out = scenario("""
        import torch, torch_npu, dlx.torch as dt
        result(dt.selection())
    """, env={"DLX_BACKEND": "cpu"})
    assert out[0] == "cpu" and "DLX_BACKEND" in out[1]


def test_doctor_shows_torch_npu_the_provider_and_the_table(addons, tmp_path):
    # torch 1.13 loads no device plugins: the stand-in is imported the way a user's
    # environment would, before `python -m dlx doctor` runs.
    (tmp_path / "sitecustomize.py").write_text("import torch_npu\n")
    env = dict(os.environ, DLX_BUILD_DIR=str(BUILD),
               PYTHONPATH=os.pathsep.join([str(tmp_path), PYPATH]))
    r = subprocess.run([sys.executable, "-m", "dlx", "doctor"], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert re.search(r"^backend: torch_npu — torch\.npu is present", out, re.M), out
    if NATIVE:  # torch's conversions, dlx's NPU stream: nothing compiled for it
        assert "table in force: native+stream (backend torch_npu)" in out, out
        assert "dlx lays its stream overlay over it" in out, out
        assert "torch_npu devices from the runtime provider (overlay)" in out, out
    else:
        assert "table in force: addon (backend torch_npu)" in out, out
        assert f"  addon: {addons['torch_npu']}\n" in out, out
        assert re.search(r"identity: .*backend=torch_npu", out), out
    assert re.search(r"^stream providers \(active backend torch_npu", out, re.M), out
    assert "  torch_npu: torch_npu._C._npu_getCurrentRawStream" in out, out
    assert re.search(r"^\s+12 -> torch_npu while that backend is active", out, re.M), out
    assert "building" not in r.stderr  # the cached addon was loaded, not rebuilt


def test_a_addon_built_with_torch_npu(addons):
    """torch 1.13: what install() puts in force. torch 2.x: built and put in force on
    request; its streams are its own compiled getter's, never the native table's."""
    out = scenario("""
        import torch, torch_npu, dlx.torch as dt, npu_scenarios as S
        from dlx import _core
        if torch.Tensor.__dict__.get("__dlpack_c_exchange_api__") is None:
            rec = dt.install()
        else:
            path, ident, cap = dt.ensure_addon("torch_npu")
            S.set_table(cap)
            _core.set_active_backend("torch_npu")
            rec = dt.Record("addon", "torch_npu", path, ident)
        c0 = S.counters()
        out = S.npu_stream_checks()
        c1 = S.counters()
        out.update(record=rec._asdict(), counters=[c0, c1], tensors=S.tensor_checks())
        result(out)
    """)
    assert out["record"]["source"] == "addon" and out["record"]["backend"] == "torch_npu"
    assert out["record"]["path"] == addons["torch_npu"]
    assert_npu_streams(out)
    (cxx0, provider0), (cxx1, provider1) = out["counters"]
    # Compiled in: c10_npu::getCurrentNPUStream answered every call, once per call.
    assert cxx1 - cxx0 == out["kernel_calls"]
    assert provider1 == provider0 == 0
    t = out["tensors"]
    assert_tensor_checks(out["tensors"])


def assert_tensor_checks(t):
    assert t["device"] == f"{DEVICE}:0" and t["made_device"] == f"{DEVICE}:0"
    assert t["after_fill"] == [[0, -1, -1, -1], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert t["sum"] == 57 and t["sum_view"] == 45
    assert t["made"] == [0, 1, 2, 3, 4]


def test_b_cpu_addon_with_the_runtime_provider(addons):
    out = scenario("""
        import torch, torch_npu, dlx.torch as dt, npu_scenarios as S
        from dlx import _core
        path, ident, cap = dt.ensure_addon("cpu")
        S.set_table(cap)
        t = torch.ones(2, device="privateuseone")
        # Active backend cpu: kDLExtDev is just some extension device, not an NPU.
        inactive = S.report().report_stream(t)
        _core.set_active_backend("torch_npu")
        c0 = S.counters()
        out = S.npu_stream_checks()
        c1 = S.counters()
        out.update(path=path, inactive=inactive, counters=[c0, c1],
                   installed=dt.installed(), info=_core.provider_info())
        result(out)
    """)
    assert out["path"] == addons["cpu"] and out["installed"] is None
    assert out["inactive"] == 0
    assert_npu_streams(out)
    (cxx0, provider0), (cxx1, provider1) = out["counters"]
    assert provider1 - provider0 == out["kernel_calls"]  # one provider call per kernel call
    assert cxx1 == cxx0 == 0  # no compiled-in getter in a cpu addon
    assert out["info"]["active"] == "torch_npu"
    assert out["info"]["providers"]["torch_npu"] == "torch_npu._C._npu_getCurrentRawStream"


def test_c_overlay_over_a_native_table(addons):
    out = scenario("""
        import dlx, torch, torch_npu, dlx.torch as dt, npu_scenarios as S
        log = S.simulate_native_table()
        native = torch.Tensor.__dlpack_c_exchange_api__
        rec = dt.install()
        cap = torch.Tensor.__dlpack_c_exchange_api__
        c0 = S.counters()
        out = S.npu_stream_checks()
        c1 = S.counters()
        npu_log = [e for e in log if e[0] == S.kDLExtDev]
        n = len(log)
        cuda_query = S.ask(cap, S.kDLCUDA, 3)  # not the backend's device: the native answers
        cuda_log = log[n:]
        cuda_t, _ = S.foreign_torch_tensor(cap, S.kDLCUDA, 1, [1, 2, 3])
        rep = S.report()
        cuda_call = [str(cuda_t.device), rep.report_device_type(cuda_t), rep.report_stream(cuda_t)]
        n = len(log)
        cpu_call = rep.report_stream(torch.ones(3))
        out.update(record=rec._asdict(), counters=[c0, c1], npu_log=npu_log,
                   cuda_query=cuda_query, cuda_log=cuda_log, cuda_call=cuda_call,
                   cuda_call_log=log[-1], cpu_call=cpu_call, cpu_call_log=log[n:],
                   replaced=S.address(cap) != S.address(native),
                   in_force=S.address(dlx.exchange_api(torch.Tensor)) == S.address(cap))
        result(out)
    """)
    assert out["record"] == {"source": "native+stream", "backend": "torch_npu", "path": None,
                             "identity": None}
    assert out["replaced"] and out["in_force"]
    assert_npu_streams(out)
    (cxx0, provider0), (cxx1, provider1) = out["counters"]
    assert provider1 - provider0 == out["kernel_calls"]
    assert cxx1 == cxx0 == 0
    assert out["npu_log"] == []  # NPU streams never asked of the native table
    assert out["cuda_query"] == [0, 0xC0DA0003] and out["cuda_log"] == [[2, 3]]
    assert out["cuda_call"] == ["cuda:1", 2, 0xC0DA0001] and out["cuda_call_log"] == [2, 1]
    assert out["cpu_call"] == 0 and out["cpu_call_log"] == []  # CPU asks nothing


def test_overlay_keeps_the_native_table_alive(addons):
    r = run_python(textwrap.dedent("""
        import ctypes, gc, torch, torch_npu, dlx.torch as dt, npu_scenarios as S
        from dlpack_ctypes import ExchangeAPI, STREAM, table_of
        _, _, cpu = dt.ensure_addon("cpu")
        owned = [ExchangeAPI.from_buffer_copy(
            ctypes.string_at(S.address(cpu), ctypes.sizeof(ExchangeAPI)))]

        @STREAM
        def native_stream(device_type, device_id, out):
            out[0] = 0xC0DA0000 + device_id
            return 0

        owned[0].current_work_stream = native_stream

        @ctypes.PYFUNCTYPE(None, ctypes.c_void_p)
        def release(_):  # the capsule owns its table: it dies with the capsule
            ctypes.memset(ctypes.addressof(owned[0]), 0, ctypes.sizeof(ExchangeAPI))
            owned.clear()

        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        torch.Tensor.__dlpack_c_exchange_api__ = new(
            ctypes.addressof(owned[0]), b"dlpack_exchange_api",
            ctypes.cast(release, ctypes.c_void_p))
        assert dt.install().source == "native+stream"
        gc.collect()
        assert S.ask(torch.Tensor.__dlpack_c_exchange_api__, S.kDLCUDA, 4) == (0, 0xC0DA0004)
    """), env={"PYTHONPATH": SCENARIO_PATH}, check=False)
    assert r.returncode == 0, f"rc {r.returncode}\n{r.stdout}\n{r.stderr}"


@pytest.mark.skipif(not NATIVE, reason=f"torch {TORCH_MM} has no native exchange table "
                                       "(torch >= 2.10 ships one)")
def test_d_overlay_over_torchs_own_table():
    """The real thing: torch 2.x's own table converts, dlx's overlay answers the NPU
    stream; per thread, inside torch.npu.stream(s); CPU asks nothing."""
    out = scenario("""
        import torch, torch_npu, npu_scenarios as S
        out, native, cap = S.install_and_check()
        out.update(functions=[S.functions(cap), S.functions(native)],
                   cpu_stream=S.ask(cap, S.kDLCPU, 0),
                   cpu_call=S.report().report_stream(torch.ones(3)))
        result(out)
    """)
    assert out["record"] == {"source": "native+stream", "backend": "torch_npu", "path": None,
                             "identity": None}
    assert out["replaced"] and out["in_force"]
    assert_npu_streams(out)
    (cxx0, provider0), (cxx1, provider1) = out["counters"]
    assert provider1 - provider0 == out["kernel_calls"]  # dlx's provider: once per call
    assert cxx1 == cxx0 == 0  # nothing compiled against torch_npu
    overlay, native = out["functions"]
    stream = overlay.pop("current_work_stream")
    assert stream != native.pop("current_work_stream")  # the stream is dlx's ...
    assert overlay == native and all(native.values())  # ... every conversion is torch's
    assert out["cpu_stream"] == [0, 0] and out["cpu_call"] == 0
    assert_tensor_checks(out["tensors"])


@pytest.mark.skipif(not NATIVE, reason=f"torch {TORCH_MM} has no native exchange table "
                                       "(torch >= 2.10 ships one)")
def test_e_first_npu_call_lays_the_overlay():
    """Nobody calls install(): the first torch tensor that reaches a kernel does, also when
    torch brings its own table, so NPU kernels never get the native table's no-stream."""
    out = scenario("""
        import dlx, torch, torch_npu, npu_scenarios as S
        t = torch.ones(4, device=torch_npu.DEVICE_TYPE)
        s = torch.npu.Stream()
        with torch.npu.stream(s):
            got = S.report().report_stream(t)
        result({"got": got, "s": s.npu_stream, "record": dlx.torch.installed()._asdict()})
    """)
    assert out["got"] == out["s"] != 0
    assert out["record"]["source"] == "native+stream"


def test_f_addon_on_request_replaces_the_overlay(addons):
    """DLX_TORCH_TABLE=addon with torch_npu: the addon built for torch_npu goes in force in
    place of the native+stream overlay; its compiled getter answers NPU streams. (torch
    1.13 ships no table: one is simulated, as a torch >= 2.10 would ship.)"""
    out = scenario("""
        import dlx, torch, torch_npu, dlx.torch as dt, npu_scenarios as S
        if torch.Tensor.__dict__.get("__dlpack_c_exchange_api__") is None:
            S.simulate_native_table()
        out, native, cap = S.install_and_check()
        out.update(addon=S.address(cap) == S.address(dt.ensure_addon("torch_npu")[2]))
        result(out)
    """, env={"DLX_TORCH_TABLE": "addon"})
    assert out["record"]["source"] == "addon" and out["record"]["backend"] == "torch_npu"
    assert out["record"]["path"] == addons["torch_npu"]
    assert out["replaced"] and out["addon"] and out["in_force"]
    assert_npu_streams(out)
    (cxx0, provider0), (cxx1, provider1) = out["counters"]
    assert cxx1 - cxx0 == out["kernel_calls"]  # c10_npu::getCurrentNPUStream, compiled in
    assert provider1 == provider0 == 0  # no overlay, no runtime provider
    assert_tensor_checks(out["tensors"])


@pytest.mark.skipif(torch is None or not hasattr(torch.library, "register_fake"),
                    reason="dlx.torch.register needs torch 2.5 or newer")
def test_registered_operator_gets_the_current_npu_stream(addons):
    """torch.ops.<ns>.NAME (dlx.torch.register) runs the kernel from C++ on the device's
    current stream, as a direct call does."""
    out = scenario("""
        import os, torch, torch_npu, dlx, dlx.torch
        lib = dlx.load(os.path.join(os.environ["DLX_BUILD_DIR"], "kernels",
                                    "compile_kernels.so"))
        reg = dlx.torch.register(lib, "npu_ops")
        x = torch.zeros(1, dtype=torch.int64, device="privateuseone")
        seen = {}
        torch.ops.npu_ops.stream_into(x, x)
        seen["before"] = int(x.cpu()[0])
        s = torch.npu.Stream()
        with torch.npu.stream(s):
            torch.ops.npu_ops.stream_into(x, x)
            seen["inside"] = int(x.cpu()[0])
        result(dict(seen, implementation=reg.implementation, s=s.npu_stream,
                    default=torch.npu.default_stream().npu_stream))
    """)
    assert out["implementation"] == "addon"
    assert out["before"] == out["default"] and out["inside"] == out["s"] != out["default"]
