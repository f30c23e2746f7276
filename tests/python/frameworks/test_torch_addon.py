"""dlx's torch tables against a real torch: the addon (compiled against torch; the only
table torch 1.13 can have) and torch's own native table (torch >= 2.10 ships one; the venv
has torch 2.13). Selection, building, the identity-keyed cache, the installed table, the
CLI; every kernel, stream and allocation test runs over each table this torch can have."""
import ctypes
import json
import os
import re
import shutil
import stat
import subprocess
import sys

import pytest

import dlx
from conftest import BUILD, PYPATH, TESTS, run_python
from dlpack_ctypes import (DLDataType, DLDevice, DLManagedTensorVersioned, DLTensor, SETERROR,
                           table_of, take)

torch = pytest.importorskip("torch")
import dlx.torch as dt  # noqa: E402

TORCH_MM = ".".join(torch.__version__.split(".")[:2])  # "1.13", "2.13"
NAME = re.compile(rf"libdlx_torch_{re.escape(TORCH_MM)}_cpu_[0-9a-f]{{12}}\.so$")
# torch's own table, as torch shipped it (None for torch < 2.10); read before dlx installs.
NATIVE = torch.Tensor.__dict__.get("__dlpack_c_exchange_api__")
# What a fresh process runs to get the addon: install() where it is the table torch gets,
# ensure_addon() (what build-addon does) where torch keeps its native table.
ADDON = ("dt.install()" if NATIVE is None
         else "dt.Record('addon', 'cpu', *dt.ensure_addon('cpu')[:2])")
needs_native = pytest.mark.skipif(
    NATIVE is None, reason=f"torch {torch.__version__} has no native exchange table "
                           "(torch >= 2.10 ships one)")


@pytest.fixture(scope="module")
def record():
    """The addon for this torch, built once into the session cache. Where torch has a
    native table, install() keeps that one, so the addon is built on request (as
    `build-addon` does) and not put in force here."""
    if NATIVE is None:
        return dt.install()
    path, ident, _ = dt.ensure_addon("cpu")
    return dt.Record("addon", "cpu", path, ident)


def _in_force(kind, record):
    """Put `kind` ('addon' or 'native') in force on torch.Tensor for the test, whichever
    table this process chose (by default the addon once the session cache holds it, else
    torch's own); yields its Record and puts the process's table back after."""
    if kind == "native" and NATIVE is None:
        pytest.skip(f"torch {torch.__version__} has no native exchange table "
                    "(torch >= 2.10 ships one)")
    if NATIVE is None:
        yield record
        return
    dt.install()  # the process's own choice first, so that it is what comes back
    before = torch.Tensor.__dict__["__dlpack_c_exchange_api__"]
    torch.Tensor.__dlpack_c_exchange_api__ = (
        NATIVE if kind == "native" else dt.ensure_addon("cpu")[2])  # cached: no build
    try:
        yield record if kind == "addon" else dt.Record("native", "cpu", None, None)
    finally:
        torch.Tensor.__dlpack_c_exchange_api__ = before


@pytest.fixture(params=["addon", "native"])
def table(request, record):
    """The table in force on torch.Tensor for the test: the addon, or torch's native one."""
    yield from _in_force(request.param, record)


@pytest.fixture
def addon(record):
    """The addon in force on torch.Tensor, on any torch (its own refusals are tested)."""
    yield from _in_force("addon", record)


def cli(*args, env=None, check=False):
    full = dict(os.environ, PYTHONPATH=PYPATH)
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "dlx", *args], env=full, capture_output=True,
                          text=True, check=check)


def test_selection_here_is_cpu():
    name, reason = dt.selection()
    assert name == "cpu" and "cpu" in reason
    assert dt.backend() == "cpu"


def test_dlx_backend_forces_a_choice(monkeypatch):
    monkeypatch.setenv("DLX_BACKEND", "rocm")
    assert dt.backend() == "rocm"
    monkeypatch.setenv("DLX_BACKEND", "tpu")
    with pytest.raises(ValueError, match="tpu"):
        dt.backend()


def test_addon_is_built_into_the_cache(record, kernels):
    assert record.source == "addon" and record.backend == "cpu"
    assert NAME.search(record.path) and os.path.dirname(record.path) == dt.cache_dir()
    assert f"torch={TORCH_MM}" in record.identity and "backend=cpu" in record.identity
    if NATIVE is None:
        assert dt.install() is record  # once per process
        assert dlx.exchange_api(torch.Tensor) is not None
        assert torch.Tensor.__dlpack_c_exchange_api__ is not None
    mode = os.stat(record.path).st_mode
    assert stat.S_IMODE(mode) & 0o022 == 0
    assert stat.S_IMODE(os.stat(dt.cache_dir()).st_mode) == 0o700


@needs_native
def test_native_table_is_kept_and_nothing_compiled(tmp_path):
    out = run_python(
        "import dlx, dlx.torch as dt, torch, ctypes\n"
        "native = torch.Tensor.__dlpack_c_exchange_api__\n"
        "r = dt.install()\n"
        "get = ctypes.pythonapi.PyCapsule_GetPointer\n"
        "get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]\n"
        "ptr = lambda c: get(c, b'dlpack_exchange_api')\n"
        "print(r.source, r.backend, r.path, r.identity,\n"
        "      torch.Tensor.__dlpack_c_exchange_api__ is native,\n"
        "      ptr(dlx.exchange_api(torch.Tensor)) == ptr(torch._C._dlpack_exchange_api()))\n",
        env={"DLX_CACHE_DIR": str(tmp_path / "c")})
    assert out.stdout.split() == ["native", "cpu", "None", "None", "True", "True"]
    assert "building" not in out.stderr
    assert not (tmp_path / "c").exists() or os.listdir(tmp_path / "c") == []  # nothing built


# ---- which table: DLX_TORCH_TABLE and install(prefer=) (issue 11) ----

# Run in a fresh process: install() with PREFER; prints the record, the choice,
# which table torch.Tensor holds (the addon's, torch's own, or another) and kernel results.
_INSTALL_AND_CALL = """
import ctypes, json, os
import dlx, dlx.torch as dt, torch
get = ctypes.pythonapi.PyCapsule_GetPointer
get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
ptr = lambda c: get(c, b"dlpack_exchange_api")
shipped = torch.Tensor.__dict__.get("__dlpack_c_exchange_api__")
rec = dt.install(prefer=PREFER) if PREFER else dt.install()
in_force = ptr(dlx.exchange_api(torch.Tensor))
assert in_force == ptr(torch.Tensor.__dlpack_c_exchange_api__)
holds = ("addon" if in_force == ptr(dt.ensure_addon("cpu")[2])  # cached: loads, no build
         else "shipped" if shipped is not None and in_force == ptr(shipped) else "other")
k = dlx.load(os.environ["DLX_BUILD_DIR"] + "/kernels/test_kernels.so")
base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
k.fill(base.t()[1], 9.0)  # a strided view: column 1
made = k.arange(5, torch.ones(2))
print("RESULT " + json.dumps({
    "record": rec._asdict(), "choice": dt.choice()._asdict(), "holds": holds,
    "sums": [k.sum(base), k.sum(base[1:, 2:5]), k.sum(torch.tensor(3.5))],
    "column": base[:, 1].tolist(), "made": [type(made).__name__, made.tolist()]}))
"""


def install_in_child(prefer=None, table=None, cache=None):
    env = {"DLX_TORCH_TABLE": table or ""}
    if cache:
        env["DLX_CACHE_DIR"] = str(cache)
    r = run_python(f"PREFER = {prefer!r}\n" + _INSTALL_AND_CALL, env=env)
    [line] = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    out = json.loads(line[len("RESULT "):])
    out["stderr"] = r.stderr
    return out


def assert_kernels_ran(out):
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    base[:, 1] = 9.0
    assert out["sums"] == [float(base.sum()), float(base[1:, 2:5].sum()), 3.5]
    assert out["column"] == [9.0] * 4
    assert out["made"] == ["Tensor", [0.0, 1.0, 2.0, 3.0, 4.0]]


@needs_native
def test_dlx_torch_table_addon_puts_the_addon_in_force(record):
    out = install_in_child(table="addon")
    assert out["record"] == {"source": "addon", "backend": "cpu", "path": record.path,
                             "identity": record.identity}
    assert os.path.dirname(out["record"]["path"]) == dt.cache_dir()  # the session cache
    assert out["choice"] == {"prefer": "addon", "origin": "DLX_TORCH_TABLE=addon",
                             "had_table": True}
    assert out["holds"] == "addon"  # torch's shipped table was replaced
    assert_kernels_ran(out)


@needs_native
def test_dlx_torch_table_addon_builds_into_a_cold_cache(tmp_path):
    out = install_in_child(table="addon", cache=tmp_path / "c")
    assert out["record"]["source"] == "addon" and out["holds"] == "addon"
    assert NAME.search(out["record"]["path"])
    assert os.path.dirname(out["record"]["path"]) == str(tmp_path / "c")
    assert out["stderr"].count("dlx: building") == 1
    assert_kernels_ran(out)


def test_native_when_asked(record):
    out = install_in_child(table="native")
    assert out["choice"] == {"prefer": "native", "origin": "DLX_TORCH_TABLE=native",
                             "had_table": NATIVE is not None}
    if NATIVE is None:  # torch 1.13 has nothing to prefer: the addon whatever was asked
        assert out["record"]["source"] == "addon" and out["holds"] == "addon"
        assert out["record"]["path"] == record.path
    else:  # the addon in the cache (record) is not taken
        assert out["record"] == {"source": "native", "backend": "cpu", "path": None,
                                 "identity": None}
        assert out["holds"] == "shipped"
    assert_kernels_ran(out)


@pytest.mark.parametrize("table", [None, "auto"])
def test_the_default_takes_the_cached_addon(record, table):
    """Issue 33: unset (or auto), the addon goes in force whenever the cache holds it for
    this torch (record built it into the session cache): loaded, nothing compiled."""
    out = install_in_child(table=table)
    origin = "DLX_TORCH_TABLE=auto" if table else "default"
    assert out["choice"] == {"prefer": "auto", "origin": origin,
                             "had_table": NATIVE is not None}
    assert out["record"] == {"source": "addon", "backend": "cpu", "path": record.path,
                             "identity": record.identity}
    assert out["holds"] == "addon" and "building" not in out["stderr"]
    assert_kernels_ran(out)


@needs_native
def test_the_default_without_a_cached_addon_is_torchs_own(tmp_path, record):
    """A cold cache: the default keeps torch's table and compiles nothing (the first call
    never waits for a compiler); once the cache holds the addon (build-addon's file, copied
    here), the next process takes it."""
    cache = tmp_path / "c"
    code = ("import dlx, dlx.torch as dt, torch, os\n"
            "k = dlx.load(os.environ['DLX_BUILD_DIR'] + '/kernels/test_kernels.so')\n"
            "print(k.sum(torch.ones(3)), dt.installed().source, dt.installed().path,\n"
            "      dt.choice().prefer, dt.choice().origin)\n")
    env = {"DLX_CACHE_DIR": str(cache), "DLX_TORCH_TABLE": ""}
    out = run_python(code, env=env)
    assert out.stdout.split() == ["3.0", "native", "None", "auto", "default"]
    assert "building" not in out.stderr
    assert not cache.exists() or os.listdir(cache) == []  # nothing built, nothing made
    cache.mkdir(mode=0o700)
    shutil.copy2(record.path, cache / os.path.basename(record.path))
    again = run_python(code, env=env)
    assert again.stdout.split() == ["3.0", "addon", str(cache / os.path.basename(record.path)),
                                    "auto", "default"]
    assert "building" not in again.stderr


@needs_native
@pytest.mark.parametrize("damage", ["corrupt", "writable by others"])
def test_the_default_never_rebuilds_a_bad_cached_addon(tmp_path, record, damage):
    """A cached file the loader refuses (corrupt seal, writable by others) is left as it
    is and torch's own table serves: only build-addon / ensure_addon rebuilds it."""
    cache = tmp_path / "c"
    cache.mkdir(mode=0o700)
    bad = cache / os.path.basename(record.path)
    shutil.copyfile(record.path, bad)
    if damage == "corrupt":
        with open(bad, "r+b") as f:
            f.seek(100)
            f.write(b"\xff" * 16)
        os.chmod(bad, 0o600)
    else:
        os.chmod(bad, 0o666)
    before = bad.read_bytes()
    r = run_python("import dlx.torch as dt, torch\n"
                   "print(dt.install().source, dt.choice().prefer)\n",
                   env={"DLX_CACHE_DIR": str(cache), "DLX_TORCH_TABLE": ""})
    assert r.stdout.split() == ["native", "auto"]
    assert "building" not in r.stderr and bad.read_bytes() == before


@pytest.mark.parametrize("prefer, table", [("native", "addon"), ("addon", "native"),
                                           ("addon", None)])
def test_prefer_overrides_the_environment(record, prefer, table):
    out = install_in_child(prefer=prefer, table=table)
    assert out["choice"]["prefer"] == prefer and out["choice"]["origin"] == f"prefer={prefer!r}"
    gets_addon = prefer == "addon" or NATIVE is None
    assert out["record"]["source"] == ("addon" if gets_addon else "native")
    assert out["holds"] == ("addon" if gets_addon else "shipped")
    assert_kernels_ran(out)


@pytest.mark.skipif(NATIVE is not None, reason="torch ships a native table here")
def test_torch_without_a_table_gets_the_addon_whatever_the_preference(record):
    out = install_in_child(prefer="native")
    assert out["record"]["source"] == "addon" and out["record"]["path"] == record.path
    assert out["choice"]["had_table"] is False and out["holds"] == "addon"
    assert_kernels_ran(out)


@pytest.mark.parametrize("value", ["Addon", "fast", " native"])
def test_bad_dlx_torch_table_is_a_value_error(monkeypatch, value):
    monkeypatch.setenv("DLX_TORCH_TABLE", value)
    with pytest.raises(ValueError, match=rf"DLX_TORCH_TABLE={re.escape(repr(value))}: "
                                         r"expected one of native, addon"):
        dt.preference()
    assert dt.preference("addon") == ("addon", "prefer='addon'")  # the argument wins
    r = run_python("import dlx.torch as dt; dt.install()", env={"DLX_TORCH_TABLE": value},
                   check=False)
    assert r.returncode != 0 and "ValueError: DLX_TORCH_TABLE=" in r.stderr, r.stderr[-2000:]
    assert "dlx: building" not in r.stderr


def test_bad_prefer_is_refused_in_any_state(record):
    with pytest.raises(ValueError, match=r"prefer='Addon'.*'native', 'addon'"):
        dt.install(prefer="Addon")
    with pytest.raises(TypeError, match="prefer=.*str, got int"):
        dt.install(prefer=1)
    with pytest.raises(ValueError, match=r"prefer=''"):
        dt.preference("")


def test_unset_or_empty_dlx_torch_table_is_auto(monkeypatch):
    monkeypatch.delenv("DLX_TORCH_TABLE", raising=False)
    assert dt.preference() == ("auto", "default")
    monkeypatch.setenv("DLX_TORCH_TABLE", "")
    assert dt.preference() == ("auto", "default")
    monkeypatch.setenv("DLX_TORCH_TABLE", "auto")
    assert dt.preference() == ("auto", "DLX_TORCH_TABLE=auto")
    monkeypatch.setenv("DLX_TORCH_TABLE", "addon")
    assert dt.preference() == ("addon", "DLX_TORCH_TABLE=addon")


def test_a_second_install_keeps_the_first_choice(tmp_path):
    """The table is chosen once per process: a later install() returns the Record in force,
    and one whose prefer asks for the other table raises RuntimeError ('auto' accepts
    either). A cold cache: the default is torch's own table where torch has one."""
    out = run_python(
        "import dlx.torch as dt\n"
        "first = dt.install()\n"
        "same = [dt.install() is first, dt.install(prefer='native') is first,\n"
        "        dt.install(prefer='auto') is first]\n"
        "try:\n"
        "    print(dt.install(prefer='addon') is first)\n"
        "except RuntimeError as e:\n"
        "    print('RuntimeError', e)\n"
        "print(first.source, *same)\n", env={"DLX_CACHE_DIR": str(tmp_path / "c")})
    other, rest = out.stdout.splitlines()
    if NATIVE is None:  # the addon is the only table: asking for it again is no conflict
        assert other == "True" and rest.split() == ["addon", "True", "True", "True"]
    else:
        assert other.startswith("RuntimeError dlx.torch.install(prefer='addon'): the native "
                                "table is already in force (default)")
        assert "DLX_TORCH_TABLE" in other and rest.split() == ["native", "True", "True", "True"]


@needs_native
def test_a_second_install_cannot_go_back_to_native():
    out = run_python(
        "import dlx.torch as dt\n"
        "first = dt.install(prefer='addon')\n"
        "print(dt.install() is first, dt.install(prefer='addon') is first)\n"
        "try:\n"
        "    dt.install(prefer='native')\n"
        "except RuntimeError as e:\n"
        "    print('RuntimeError', e)\n")
    same, err = out.stdout.splitlines()
    assert same.split() == ["True", "True"]
    assert err.startswith("RuntimeError dlx.torch.install(prefer='native'): the addon table "
                          "is already in force (prefer='addon')")


def test_kernels_with_torch_tensors(table, kernels):
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    cases = {
        "contiguous": base,
        "transposed": base.t(),
        "sliced with offset": base[1:, 2:5],
        "0-d": torch.tensor(3.5),
        "empty": torch.zeros(0, 3),
    }
    for what, t in cases.items():
        assert kernels.sum(t) == pytest.approx(float(t.sum())), what
        assert kernels.info(t, 0) == t.dim(), what
        assert [kernels.info(t, 20 + d) for d in range(t.dim())] == list(t.stride()), what
    sliced = cases["sliced with offset"]
    assert kernels.info(sliced, 30) + kernels.info(sliced, 3) == sliced.data_ptr()
    kernels.fill(base.t()[1], 9.0)  # a strided row of the transpose: column 1
    assert base[:, 1].tolist() == [9.0] * 4 and float(base.sum()) == 276 - (1 + 7 + 13 + 19) + 36


# (DLPack dtype code, bits) of the torch dtypes below
DL_DTYPES = {torch.float32: (2, 32), torch.float64: (2, 64), torch.int32: (0, 32),
             torch.uint8: (1, 8), torch.bool: (6, 8), torch.complex64: (5, 64)}


def test_every_tensor_is_described_as_torch_sees_it(table, kernels):
    """Consecutive tensors differ in dtype (element size), offset, emptiness, rank and
    Python type, and each is read several times: the addon's remembered description of
    the last tensor (its fast path) must never leak into the next one."""
    base = torch.arange(24, dtype=torch.float64).reshape(4, 6)

    class Sub(torch.Tensor):
        pass

    cases = [
        torch.arange(6, dtype=torch.float32),
        base[1:, 2:5],                                    # float64, offset 8
        torch.arange(10, dtype=torch.int32)[3:],          # int32, offset 3
        torch.arange(10, dtype=torch.uint8)[5:].view(1, 5),
        torch.ones(3, dtype=torch.float32)[1:],           # float32 again, other offset
        torch.zeros(2, 2, dtype=torch.bool).t(),
        torch.tensor(2.5),                                # 0-d
        torch.arange(5.0)[5:],                            # empty, storage offset 5
        # a subclass, plain TensorImpl (not requiring grad: one that does takes the
        # operator's path under grad mode, test_torch_parity)
        torch.nn.Parameter(torch.ones(2, 3), requires_grad=False),
        torch.ones(4).as_subclass(Sub),                   # a Python subclass
        torch.ones(3, dtype=torch.complex64),
        base.t(),
    ]
    for _ in range(2):
        for t in cases:
            n = kernels.info(t, 0)
            seen = (n, kernels.info(t, 1), kernels.info(t, 2), kernels.info(t, 4),
                    [kernels.info(t, 10 + d) for d in range(n)],
                    [kernels.info(t, 20 + d) for d in range(n)],
                    kernels.info(t, 30) + kernels.info(t, 3))
            want = (t.dim(), *DL_DTYPES[t.dtype], 1, list(t.shape), list(t.stride()),
                    t.data_ptr())
            assert seen == want, (t.dtype, t.shape, t.storage_offset())


def test_conjugate_and_negative_views_are_refused_after_plain_ones(addon, kernels):
    """A conj or neg view differs from its base only in a key-set bit: the addon must not
    take it for the plain tensor it described a moment ago."""
    c = torch.ones(3, dtype=torch.complex64)
    assert kernels.info(c, 0) == 1 and kernels.info(c, 0) == 1
    for view, what in ((c.conj(), "conjugate"), (torch.ones(3, dtype=torch.complex64).conj().imag,
                                                 "negative")):
        with pytest.raises(BufferError, match=what):
            kernels.info(view, 0)
    assert kernels.info(c, 1) == 5  # and the plain tensor still converts


def test_new_tensor_comes_back_as_torch(table, kernels):
    like = torch.ones(2)
    r = kernels.arange(5, like)
    assert isinstance(r, torch.Tensor) and r.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    r2 = kernels.new_tensor(4, 16, 2, 3, like)  # bfloat16: torch has it, numpy does not
    assert r2.dtype == torch.bfloat16 and r2.shape == (2, 3)


def test_saxpy_example_with_torch(table, examples):
    x = torch.arange(4, dtype=torch.float32)
    y = torch.ones(8, dtype=torch.float32)[::2]
    examples.saxpy.saxpy(x, y, 2.0)
    assert y.tolist() == [1.0, 3.0, 5.0, 7.0]


# ---- the installed table: conformance is dlx.check's (test_check.py); interop here ----

def test_import_runs_the_producers_deleter_once(table):
    """numpy's export imported by torch's table: the numpy deleter runs when torch frees it."""
    import numpy as np

    api = table_of(dlx.exchange_api(torch.Tensor))
    np_api = table_of(dlx.exchange_api(np.ndarray))
    a = np.arange(6, dtype=np.float32).reshape(2, 3)[:, 1:]
    before = sys.getrefcount(a)
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    assert np_api.managed_tensor_from_py_object_no_sync(a, ctypes.byref(out)) == 0
    obj = ctypes.py_object()
    assert api.managed_tensor_to_py_object_no_sync(out, ctypes.byref(obj)) == 0
    t = take(obj)
    assert t.tolist() == [[1.0, 2.0], [4.0, 5.0]] and t.stride() == (3, 1)
    assert sys.getrefcount(a) == before + 1
    del t
    assert sys.getrefcount(a) == before


# ---- the cache ----

def test_warm_install_loads_without_building(record):
    out = run_python(f"import dlx.torch as dt; r = {ADDON}; print(r.source, r.path)")
    assert out.stdout.split() == ["addon", record.path]
    assert "building" not in out.stderr


def test_import_dlx_never_compiles(tmp_path):
    out = run_python("import dlx, dlx.torch, torch; print(dlx.torch.installed())",
                     env={"DLX_CACHE_DIR": str(tmp_path / "c")})
    assert out.stdout.strip() == "None"
    assert not (tmp_path / "c").exists() or not os.listdir(tmp_path / "c")


@pytest.mark.parametrize("table", [None, "native", "addon"])
def test_first_torch_call_sets_torch_up(record, table):
    out = run_python(
        "import dlx, torch, os\n"
        "k = dlx.load(os.environ['DLX_BUILD_DIR'] + '/kernels/test_kernels.so')\n"
        "native = torch.Tensor.__dict__.get('__dlpack_c_exchange_api__')\n"
        "print(k.sum(torch.ones(3)), dlx.torch.installed().source,\n"
        "      torch.Tensor.__dict__.get('__dlpack_c_exchange_api__') is native)\n",
        env={"DLX_TORCH_TABLE": table} if table else None)
    # torch 1.13: the first call builds and puts the addon in force (it replaced None);
    # a native table is kept as it is with DLX_TORCH_TABLE=native, and gives way to the
    # addon when asked or by default, the session cache holding it (record)
    if NATIVE is None or table != "native":
        assert out.stdout.split() == ["3.0", "addon", "False"]
    else:
        assert out.stdout.split() == ["3.0", "native", "True"]


def test_first_torch_call_with_a_bad_table_name_warns_and_still_works():
    out = run_python(
        "import dlx, torch, os, warnings\n"
        "k = dlx.load(os.environ['DLX_BUILD_DIR'] + '/kernels/test_kernels.so')\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    print(k.sum(torch.ones(3)), dlx.torch.installed())\n"
        "print([str(x.message) for x in w if x.category is RuntimeWarning])\n",
        env={"DLX_TORCH_TABLE": "fast"})
    first, warned = out.stdout.splitlines()
    assert first.split() == ["3.0", "None"]  # through torch's own table or __dlpack__
    assert "DLX_TORCH_TABLE='fast'" in warned and "native, addon" in warned


@pytest.mark.parametrize("table", [None, "addon"])
def test_disable_keeps_the_dlpack_path(table):
    out = run_python("import dlx.torch as dt, torch\n"
                     "print(dt.install(), dt.install(prefer='addon'), dt.choice(),\n"
                     "      hasattr(torch.Tensor, '__dlpack_c_exchange_api__'))",
                     env={"DLX_DISABLE_TORCH_ADDON": "1", "DLX_TORCH_TABLE": table or ""})
    # DLX_DISABLE_TORCH_ADDON wins over DLX_TORCH_TABLE and prefer: torch's own, untouched
    assert out.stdout.split() == ["None", "None", "None", str(NATIVE is not None)]


def test_native_table_is_reused(record):
    out = run_python(
        "import dlx, dlx.torch as dt, torch\n"
        "native = dlx._core.load_addon(%r, %r)\n"
        "torch.Tensor.__dlpack_c_exchange_api__ = native\n"
        "r = dt.install()\n"
        "print(r.source, r.backend, r.path, torch.Tensor.__dlpack_c_exchange_api__ is native)\n"
        % (record.path, record.identity))
    assert out.stdout.split() == ["native", "cpu", "None", "True"]


def test_wrong_identity_is_refused(record):
    with pytest.raises(ImportError, match="not the addon for this setup"):
        dlx._core.load_addon(record.path, record.identity + "x")


def test_a_refused_addon_leaves_its_descriptor_names_free(record, tmp_path, monkeypatch):
    """Refused here, the addon is still the loader's (install() loaded it, or it stays
    mapped): reached through a descriptor, the loader had added that descriptor's name to
    it, and the next library loaded under the same number came back as the addon (no
    kernels). Refused at several numbers, so the kernel library's number is among them."""
    spare = []
    try:
        for _ in range(8):
            with pytest.raises(ImportError, match="not the addon for this setup"):
                dlx._core.load_addon(record.path, record.identity + "x")
            spare.append(os.open(os.devnull, os.O_RDONLY))
    finally:
        for fd in spare:
            os.close(fd)
    monkeypatch.setenv("DLX_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "adder.c"
    src.write_text("#include <dlx/dlx.h>\n"
                   "DLX_KERNEL(add) {\n"
                   "  int64_t a, b;\n"
                   "  if (dlx_arg_int(call, 0, &a) || dlx_arg_int(call, 1, &b)) return -1;\n"
                   "  return dlx_return_int(call, a + b);\n"
                   "}\n")
    lib = dlx.load(dlx.build(src))
    assert lib.kernels == ("add",) and lib.add(1, 2) == 3


def _copy_into(record, folder):
    folder.mkdir(mode=0o700)
    dst = folder / os.path.basename(record.path)
    shutil.copy(record.path, dst)
    os.chmod(dst, 0o755)
    return dst


def _install_from(folder):
    return run_python(f"import dlx.torch as dt; r = {ADDON}; print(r.path)",
                      env={"DLX_CACHE_DIR": str(folder)})


def test_valid_copied_cache_is_used(record, tmp_path):
    dst = _copy_into(record, tmp_path / "c")
    out = _install_from(tmp_path / "c")
    assert out.stdout.strip() == str(dst) and "building" not in out.stderr


def test_truncated_cache_entry_is_rebuilt(record, tmp_path):
    dst = _copy_into(record, tmp_path / "c")
    size = dst.stat().st_size
    with open(dst, "r+b") as f:
        f.truncate(size // 2)
    out = _install_from(tmp_path / "c")
    assert out.stdout.strip() == str(dst)
    assert out.stderr.count("dlx: building") == 1
    assert dst.stat().st_size > size // 2


def test_group_writable_cache_entry_is_never_loaded(record, tmp_path):
    dst = _copy_into(record, tmp_path / "c")
    os.chmod(dst, 0o775)
    planted = tmp_path / "elsewhere.so"
    shutil.copy(record.path, planted)
    out = _install_from(tmp_path / "c")
    assert out.stderr.count("dlx: building") == 1  # rebuilt, not loaded
    assert stat.S_IMODE(dst.stat().st_mode) == 0o755


def test_planted_symlink_is_never_followed(record, tmp_path):
    (tmp_path / "c").mkdir(mode=0o700)
    planted = tmp_path / "planted.so"
    shutil.copy(record.path, planted)
    link = tmp_path / "c" / os.path.basename(record.path)
    link.symlink_to(planted)
    out = _install_from(tmp_path / "c")
    assert out.stderr.count("dlx: building") == 1
    assert not link.is_symlink() and link.is_file()


def test_group_writable_cache_folder_is_refused(tmp_path):
    folder = tmp_path / "c"
    folder.mkdir()
    os.chmod(folder, 0o777)
    r = run_python(f"import dlx.torch as dt; {ADDON}", env={"DLX_CACHE_DIR": str(folder)},
                   check=False)
    assert r.returncode != 0 and "PermissionError" in r.stderr and "writable" in r.stderr


def test_parallel_builds_end_with_one_library(tmp_path):
    out_dir = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=PYPATH)
    procs = [subprocess.Popen([sys.executable, "-m", "dlx", "build-addon", "--output-dir",
                               str(out_dir)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = [p.communicate(timeout=600) + (p.returncode,) for p in procs]
    assert [rc for _, _, rc in results] == [0, 0, 0, 0], results
    paths = {o.strip() for o, _, _ in results}
    assert len(paths) == 1
    assert sum(e.count("dlx: building") for _, e, _ in results) == 1
    libs = [p for p in os.listdir(out_dir) if p.endswith(".so")]
    assert libs == [os.path.basename(paths.pop())]  # no temp files left behind


def test_compiler_failure_surfaces_its_output(tmp_path):
    r = cli("build-addon", "--output-dir", str(tmp_path),
            env={"CXX": "sh -c 'echo boom-from-the-compiler >&2; exit 3' --"})
    assert r.returncode != 0
    assert "boom-from-the-compiler" in r.stderr and "status 3" in r.stderr


def test_cxxflags_are_honoured_and_change_the_identity(record, tmp_path):
    r = cli("build-addon", "--output-dir", str(tmp_path),
            env={"DLX_CXXFLAGS": "-DDLX_TEST_FLAG='two words' -O1"})
    assert r.returncode == 0, r.stderr
    path = r.stdout.strip()
    assert NAME.search(path) and os.path.basename(path) != os.path.basename(record.path)


def test_the_included_header_counts_in_the_identity(tmp_path, monkeypatch):
    """The addon includes dlx_invoke.h from beside it: a change there is another addon."""
    import dlx.torch

    spec = dlx.torch.build_spec("cpu")
    before = dlx.torch.identity(spec)
    assert os.path.isfile(dlx.torch.ADDON_HEADER)
    header = tmp_path / "dlx_invoke.h"
    header.write_bytes(open(dlx.torch.ADDON_HEADER, "rb").read() + b"/* changed */\n")
    monkeypatch.setattr(dlx.torch, "ADDON_HEADER", str(header))
    after = dlx.torch.identity(spec)
    assert after[0] != before[0] and after[1] != before[1]


# ---- command line ----

@pytest.mark.parametrize("args, message", [
    (["--build-with-cuda", "--build-with-rocm"], "--build-with-cuda and --build-with-rocm"),
    (["--backend", "cpu", "--build-with-ascend"], "--backend"),
    (["--build-with-torch-npu", "--build-with-cuda"], "--build-with-torch-npu"),
    (["--frobnicate"], "--frobnicate"),
    (["--output-dir"], "--output-dir")])
def test_build_addon_argument_errors(args, message):
    r = cli("build-addon", *args)
    assert r.returncode == 2 and message in r.stderr and "error" in r.stderr


@pytest.mark.parametrize("platform", ["win32", "darwin"])
@pytest.mark.parametrize("flag", ["--build-with-torch-npu", "--build-with-ascend"])
def test_torch_npu_build_is_refused_off_linux(platform, flag, capsys):
    from dlx.__main__ import main

    assert main(["build-addon", flag], platform=platform) == 2
    assert "only supported on Linux" in capsys.readouterr().err


def test_cache_list_and_clean(record, tmp_path):
    folder = tmp_path / "c"
    _copy_into(record, folder)
    env = {"DLX_CACHE_DIR": str(folder)}
    listed = cli("cache", "list", env=env, check=True).stdout
    assert os.path.basename(record.path) in listed and "ok" in listed
    assert "removed 1" in cli("cache", "clean", env=env, check=True).stdout
    assert os.listdir(folder) == []


@pytest.mark.parametrize("table", [None, "addon", "native"])
def test_doctor_reports_what_it_found(record, table):
    r = cli("doctor", env={"DLX_TORCH_TABLE": table} if table else None, check=True)
    out = r.stdout
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    if NATIVE is None:
        table = ["table in force: addon (backend cpu)", record.path,
                 f"why: torch {torch.__version__} has no __dlpack_c_exchange_api__"]
    elif table == "addon":
        table = ["table in force: addon (backend cpu)", f"addon: {record.path}",
                 f"why: torch {torch.__version__} ships its own __dlpack_c_exchange_api__; "
                 "dlx's addon replaces it because DLX_TORCH_TABLE=addon"]
    elif table == "native":
        table = ["table in force: native (backend cpu)",
                 f"why: torch {torch.__version__} ships its own __dlpack_c_exchange_api__; "
                 "nothing is compiled (DLX_TORCH_TABLE=native)"]
    else:  # the default, with the addon in the session cache (record)
        table = ["table in force: addon (backend cpu)", f"addon: {record.path}",
                 f"why: torch {torch.__version__} ships its own __dlpack_c_exchange_api__; "
                 "dlx's addon for it was in the cache, so it replaces it"]
    for expected in ("interpreter: ", f"torch {TORCH_MM}", f"C++11 ABI {abi}", "backend: cpu",
                     *table, "cache: ", "compiler: ", "stream providers", "device map"):
        assert expected in out, expected


def test_doctor_names_a_bad_dlx_torch_table():
    r = cli("doctor", env={"DLX_TORCH_TABLE": "fast"}, check=True)
    assert ("table: could not be installed — ValueError: DLX_TORCH_TABLE='fast': expected one "
            "of native, addon") in r.stdout, r.stdout


def test_torch_npu_build_against_the_stand_in(tmp_path):
    """The compiled Ascend path: headers and libtorch_npu from tests/fixtures."""
    standin = BUILD / "fixtures" / "torch_npu"
    if not (standin / "lib" / "libtorch_npu.so").exists():
        pytest.skip("stand-in torch_npu not built")
    r = cli("build-addon", "--build-with-ascend")  # the session cache: shared with test_ascend
    assert r.returncode == 0, r.stderr
    path = r.stdout.strip()
    assert re.search(rf"libdlx_torch_{re.escape(TORCH_MM)}_torch_npu_[0-9a-f]{{12}}\.so$", path)
    lib = ctypes.CDLL(str(standin / "lib" / "libtorch_npu.so"))
    lib.dlx_standin_npu_set_stream.argtypes = [ctypes.c_int, ctypes.c_void_p]
    lib.dlx_standin_npu_default_stream.restype = ctypes.c_void_p
    addon = ctypes.PyDLL(path)
    addon.dlx_torch_exchange_api.restype = ctypes.c_void_p
    from dlpack_ctypes import ExchangeAPI

    api = ctypes.cast(addon.dlx_torch_exchange_api(), ctypes.POINTER(ExchangeAPI)).contents
    s = ctypes.c_void_p()
    assert api.current_work_stream(12, 0, ctypes.byref(s)) == 0
    assert s.value == lib.dlx_standin_npu_default_stream(0)
    lib.dlx_standin_npu_set_stream(0, 0xFEED0)
    assert api.current_work_stream(12, 0, ctypes.byref(s)) == 0 and s.value == 0xFEED0
    lib.dlx_standin_npu_set_stream(0, None)


# ---- hostile layouts and dtypes (issue 7, items 1 and 15) ----

# Runs in a child: before the fix torch 1.13's noexcept storage-size computation aborted
# the interpreter (std::terminate) on these layouts.
_IMPORT_LAYOUT = """
import ctypes, sys
import numpy as np, torch, dlx, dlx.torch as dt
from dlpack_ctypes import DLManagedTensorVersioned, DELETER, table_of
torch.Tensor.__dlpack_c_exchange_api__ = dt.ensure_addon("cpu")[2]  # the addon, any torch
api = table_of(dlx.exchange_api(torch.Tensor))
np_api = table_of(dlx.exchange_api(np.ndarray))
deleted = []
keep = []
def managed(shape, strides, fmt=None):
    if shape is None:  # dlx's own numpy export of a reversed view
        out = ctypes.POINTER(DLManagedTensorVersioned)()
        a = np.arange(5.)[::-1]
        assert np_api.managed_tensor_from_py_object_no_sync(a, ctypes.byref(out)) == 0
        # a copy of the pointer: the field itself is about to be replaced
        real = DELETER(ctypes.cast(out.contents.deleter, ctypes.c_void_p).value)
        def counting(p, real=real):
            deleted.append(1)
            real(p)
        d = DELETER(counting)
        keep.append(d)
        out.contents.deleter = d
        return out, a
    m = DLManagedTensorVersioned()
    m.version.major, m.version.minor = 1, 3
    buf = (ctypes.c_double * 4)()
    sh = (ctypes.c_int64 * len(shape))(*shape)
    st = (ctypes.c_int64 * len(strides))(*strides)
    m.dl_tensor.data = ctypes.cast(buf, ctypes.c_void_p)
    m.dl_tensor.device.device_type = 1
    m.dl_tensor.ndim = len(shape)
    m.dl_tensor.dtype.code, m.dl_tensor.dtype.bits, m.dl_tensor.dtype.lanes = 2, 64, 1
    m.dl_tensor.shape, m.dl_tensor.strides = sh, st
    d = DELETER(lambda p: deleted.append(1))
    m.deleter = d
    keep.extend([m, buf, sh, st, d])
    return ctypes.pointer(m), None
case = sys.argv[1]
shape, strides = {
    "numpy reversed": (None, None),
    "negative stride": ([3, 2], [-2, 1]),
    "overflowing bytes": ([2, 2], [1, 2**61]),
    "overflowing extent": ([2**40, 2**40], [0, 0]),
    "negative extent": ([-3], [1]),
}[case]
ptr, a = managed(shape, strides)
obj = ctypes.py_object()
try:
    api.managed_tensor_to_py_object_no_sync(ptr, ctypes.byref(obj))
except BufferError as e:
    print("BufferError", len(deleted), e)
else:
    print("imported", len(deleted))
"""


@pytest.mark.parametrize("case", ["numpy reversed", "negative stride", "overflowing bytes",
                                  "overflowing extent", "negative extent"])
def test_import_refuses_layouts_torch_cannot_hold(record, case):
    r = subprocess.run([sys.executable, "-c", _IMPORT_LAYOUT, case],
                       env=dict(os.environ, PYTHONPATH=PYPATH + os.pathsep + str(TESTS)),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    words = r.stdout.split()
    assert words[:2] == ["BufferError", "1"], r.stdout  # refused, deleter run exactly once
    assert any(w in r.stdout for w in ("stride", "size", "extent", "count")), r.stdout


@pytest.mark.parametrize("shape", [(2**40, 2**40), (-1, 3), (2**62,)])
def test_allocator_refuses_shapes_torch_cannot_hold(addon, shape):
    api = table_of(dlx.exchange_api(torch.Tensor))
    dims = (ctypes.c_int64 * len(shape))(*shape)
    proto = DLTensor(None, DLDevice(1, 0), len(shape), DLDataType(2, 64, 1), dims, None, 0)
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    errors = []
    seterr = SETERROR(lambda ctx, kind, msg: errors.append((kind.decode(), msg.decode())))
    assert api.managed_tensor_allocator(ctypes.byref(proto), ctypes.byref(out), None, seterr) == -1
    assert len(errors) == 1 and errors[0][0] == "BufferError", errors


def test_complex32_maps_to_dlpack_complex32_both_ways(table, kernels):
    """torch.complex32 (ComplexHalf) is (kDLComplex, 32), as torch 1.13's own to_dlpack says."""
    api = table_of(dlx.exchange_api(torch.Tensor))
    t = torch.zeros(3, dtype=torch.complex32)
    assert (kernels.info(t, 1), kernels.info(t, 2)) == (5, 32)  # dltensor view path
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    assert api.managed_tensor_from_py_object_no_sync(t, ctypes.byref(out)) == 0
    dt_ = out.contents.dl_tensor.dtype
    assert (dt_.code, dt_.bits, dt_.lanes) == (5, 32, 1)
    obj = ctypes.py_object()
    assert api.managed_tensor_to_py_object_no_sync(out, ctypes.byref(obj)) == 0  # import
    back = take(obj)
    assert back.dtype == torch.complex32 and back.data_ptr() == t.data_ptr()
    r = kernels.new_tensor(5, 32, 2, 3, t)  # allocator
    assert isinstance(r, torch.Tensor) and r.dtype == torch.complex32 and r.shape == (2, 3)


# ---- the folders above the cache (issue 7, item 21) ----

def test_cache_under_a_folder_others_can_write_is_refused(record, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    _copy_into(record, shared / "c")
    os.chmod(shared, 0o777)  # anyone could rename c away and put their own in its place
    r = run_python(f"import dlx.torch as dt; {ADDON}", env={"DLX_CACHE_DIR": str(shared / "c")},
                   check=False)
    assert r.returncode != 0 and "PermissionError" in r.stderr, r.stderr[-2000:]
    assert f"'{shared}'" in r.stderr and "sticky" in r.stderr
    assert "dlx: building" not in r.stderr
    with pytest.raises(PermissionError, match="sticky"):
        dlx._core.load_addon(str(shared / "c" / os.path.basename(record.path)), record.identity)
    os.chmod(shared, 0o1777)  # as /tmp: the sticky bit keeps others from renaming c
    out = _install_from(shared / "c")
    assert out.stdout.strip() == str(shared / "c" / os.path.basename(record.path))
    assert "dlx: building" not in out.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can hand a folder to another uid")
def test_cache_under_another_users_folder_is_refused(record, tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    _copy_into(record, theirs / "c")
    os.chown(theirs, 65534, 65534)
    r = run_python(f"import dlx.torch as dt; {ADDON}", env={"DLX_CACHE_DIR": str(theirs / "c")},
                   check=False)
    assert r.returncode != 0 and "PermissionError" in r.stderr
    assert f"'{theirs}'" in r.stderr and "owned by uid 65534" in r.stderr


def test_loaded_addon_is_the_checked_file(record):
    """The addon is loaded through the descriptor that was checked (the dynamic loader
    knows it as /proc/self/fd/N), and that descriptor is the sealed file's inode."""
    out = run_python(
        "import ctypes, os, dlx.torch as dt\n"
        f"r = {ADDON}\n"
        "class Info(ctypes.Structure):\n"
        "    _fields_ = [('addr', ctypes.c_void_p), ('name', ctypes.c_char_p)]\n"
        "names = []\n"
        "CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(Info), ctypes.c_size_t, ctypes.c_void_p)\n"
        "cb = CB(lambda info, size, data: names.append(info.contents.name or b'') or 0)\n"
        "ctypes.CDLL(None).dl_iterate_phdr(cb, None)\n"
        "names = [n.decode() for n in names]\n"
        "via = [n for n in names if n.startswith('/proc/self/fd/')]\n"
        "same = [os.stat(n).st_ino == os.stat(r.path).st_ino for n in via]\n"
        "print(len(via), all(same), r.path in names)\n")
    assert out.stdout.split() == ["1", "True", "False"], out.stdout
