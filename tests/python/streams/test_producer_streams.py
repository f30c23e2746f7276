"""The call's stream for every producer (issue 13): producers without an exchange table are
exported with __dlpack__(stream=S) once the call's stream S is known; S is, in order, the
`dlx.stream` override, the stream of the first device tensor with a table, a stream
provider for the producer's type (built in: CuPy), the device's per-thread default.

No GPU here: dlx_fixture tensors claim CUDA/ROCm/ExtDev devices (host memory behind them);
tests/fixtures/dlpack_only wraps them as __dlpack__-only producers that record each export's
keywords; tests/fixtures/cupy_standin is a stand-in `cupy` package."""
import sys
import threading

import pytest

import dlx

from conftest import ROOT, run_python

FIXTURES = ROOT / "tests" / "fixtures"
sys.path.insert(0, str(FIXTURES / "dlpack_only"))
from dlpack_only import NoDevice, NoKeywords, PreVersioned, Recorder  # noqa: E402

CPU, CUDA, ROCM, EXTDEV = 1, 2, 10, 12
LEGACY, PER_THREAD = 1, 2  # DLPack's CUDA stream numbers


@pytest.fixture()
def report(examples):
    return examples.report.report_stream


@pytest.fixture()
def cupy():
    """The stand-in cupy, importable while the test runs, gone afterwards."""
    path = str(FIXTURES / "cupy_standin")
    sys.path.insert(0, path)
    import cupy

    yield cupy
    sys.path.remove(path)
    for name in [m for m in sys.modules if m == "cupy" or m.startswith("cupy.")]:
        del sys.modules[name]


@pytest.fixture(autouse=True)
def no_providers():
    """Every test starts and ends with no registered provider and no override."""
    assert dlx._core._stream_current() is None
    assert dlx._core._stats()["stream_pending"] == 0
    yield
    for tp in dlx._core._stream_providers():
        dlx.register_stream_provider(tp, None)
    assert dlx._core._stream_current() is None
    # every deferred producer was settled, also on error paths: table-only calls stay fast
    assert dlx._core._stats()["stream_pending"] == 0


def producer(fx, device, cls=Recorder):
    return cls(fx.tensor([1.0, 2.0], device=device))


# ---- the per-thread default -----------------------------------------------------------

def test_cuda_producer_alone_gets_the_per_thread_default(fx, report):
    p = producer(fx, (CUDA, 0))
    assert report(p) == PER_THREAD  # the kernel's stream: cudaStreamPerThread
    assert p.calls == [{"stream": PER_THREAD, "max_version": (1, 3)}]


def test_rocm_producer_alone_gets_the_default_stream(fx, report):
    p = producer(fx, (ROCM, 1))
    assert report(p) == 0
    assert p.streams == [0]  # ROCm's default stream is DLPack's 0


def test_other_device_without_a_stream_passes_none(fx, report):
    p = producer(fx, (EXTDEV, 0))
    assert report(p) == 0
    assert p.calls == [{"max_version": (1, 3)}]


def test_cpu_only_calls_pass_no_stream(fx, kernels, report):
    p, q = producer(fx, (CPU, 0)), producer(fx, (CPU, 0))
    assert kernels.sum(p) == 3.0 and kernels.noop(p, q) is None
    assert report(p) == 0
    with dlx.stream(0x4000):  # an override changes nothing on the CPU
        assert report(p, q) == 0
    assert all(c == {"max_version": (1, 3)} for c in p.calls + q.calls)
    assert len(p.calls) == 4


def test_cpu_producer_with_a_device_tensor_gets_no_stream(fx, report):
    cpu, dev = producer(fx, (CPU, 0)), producer(fx, (CUDA, 0))
    assert report(cpu, dev) == PER_THREAD
    assert cpu.streams == ["absent"] and dev.streams == [PER_THREAD]


# ---- the first device tensor with a table --------------------------------------------

@pytest.mark.parametrize("table_first", [True, False])
def test_table_stream_wins_and_the_producer_is_exported_with_it(fx, report, table_first):
    t = fx.tensor((2,), device=(CUDA, 0))
    p = producer(fx, (CUDA, 0))
    fx.set_stream(CUDA, 0, 0x9900)
    fx.reset_stats()
    assert report(*((t, p) if table_first else (p, t))) == 0x9900
    assert p.streams == [0x9900]
    assert fx.stats()["stream_queries"] == 1


def test_table_on_the_legacy_default_stream(fx, report):
    t, p = fx.tensor((2,), device=(CUDA, 0)), producer(fx, (CUDA, 0))
    fx.set_stream(CUDA, 0, None)
    assert report(t, p) == 0  # NULL: the legacy default stream, which DLPack numbers 1
    assert p.streams == [LEGACY]
    r, q = fx.tensor((2,), device=(ROCM, 0)), producer(fx, (ROCM, 0))
    assert report(r, q) == 0 and q.streams == [0]


def test_table_stream_is_asked_on_the_calling_thread(fx, report):
    t, p = fx.tensor((2,), device=(ROCM, 2)), producer(fx, (ROCM, 2))
    seen = {}

    def worker(s):
        fx.set_stream(ROCM, 2, s)
        seen[s] = report(p, t)

    threads = [threading.Thread(target=worker, args=(s,)) for s in (0x1100, 0x2200)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert seen == {0x1100: 0x1100, 0x2200: 0x2200}
    assert sorted(p.streams) == [0x1100, 0x2200]


# ---- stream providers ------------------------------------------------------------------

def test_registered_provider_gives_the_stream(fx, report):
    asked = []

    def provider(device_type, device_id):
        asked.append((device_type, device_id))
        return 0x7700

    dlx.register_stream_provider(Recorder, provider)
    p = producer(fx, (CUDA, 3))
    assert report(p) == 0x7700
    assert p.streams == [0x7700] and asked == [(CUDA, 3)]
    dlx.register_stream_provider(Recorder, None)  # removed: the default again
    assert report(p) == PER_THREAD


def test_provider_of_a_base_class_serves_subclasses(fx, report):
    dlx.register_stream_provider(Recorder, lambda t, i: 0x3300)
    p = producer(fx, (CUDA, 0), PreVersioned)
    assert report(p) == 0x3300
    assert p.calls == [{"stream": 0x3300}]  # no max_version: it predates DLPack 1.0


def test_provider_is_not_asked_when_a_table_or_an_override_decides(fx, report):
    asked = []
    dlx.register_stream_provider(Recorder, lambda t, i: asked.append(1) or 0x3300)
    t, p = fx.tensor((2,), device=(CUDA, 0)), producer(fx, (CUDA, 0))
    fx.set_stream(CUDA, 0, 0x5500)
    assert report(p, t) == 0x5500
    with dlx.stream(0x6600):
        assert report(p) == 0x6600
    assert asked == [] and p.streams == [0x5500, 0x6600]


def test_provider_raising_releases_everything(fx, report):
    def broken(device_type, device_id):
        raise KeyError("no stream here")

    class Other(Recorder):
        pass

    dlx.register_stream_provider(Other, broken)
    cpu, p = producer(fx, (CPU, 0)), producer(fx, (CUDA, 0), Other)
    fx.reset_stats()
    with pytest.raises(KeyError, match=r"report_stream\(\): argument 1 \(Other\): stream "
                                       r"provider: .*no stream here"):
        report(cpu, p)
    assert p.calls == []  # never exported
    s = fx.stats()
    assert s["exported"] == 1 and s["deleted"] == 1  # the CPU producer's export, released once


@pytest.mark.parametrize("value, exc, match", [
    ("0x10", TypeError, "returned str, not an int"),
    (1.5, TypeError, "returned float, not an int"),
    (-1, ValueError, "0 <= handle < 2\\*\\*64"),
    (1 << 64, ValueError, "0 <= handle < 2\\*\\*64"),
])
def test_provider_returning_a_non_handle(fx, report, value, exc, match):
    dlx.register_stream_provider(Recorder, lambda t, i: value)
    t = fx.tensor((1,), device=(CPU, 0))
    p = producer(fx, (CUDA, 0))
    fx.reset_stats()
    with pytest.raises(exc, match=match):
        report(t, p)
    assert p.calls == [] and fx.stats()["live"] == 0


def test_register_stream_provider_checks_its_arguments():
    with pytest.raises(TypeError, match="expected a type"):
        dlx.register_stream_provider("Recorder", lambda t, i: 0)
    with pytest.raises(TypeError, match="must be callable"):
        dlx.register_stream_provider(Recorder, 5)
    dlx.register_stream_provider(Recorder, None)  # removing what is not there is fine


# ---- the built-in CuPy provider --------------------------------------------------------

def test_cupy_array_alone_runs_on_cupys_current_stream(report, cupy, fx):
    a = cupy.zeros(4)
    assert report(a) == 0  # CuPy's null stream: NULL for the kernel ...
    assert a.streams == [LEGACY]  # ... the legacy default (1) for DLPack
    s = cupy.cuda.Stream()
    with s:
        assert report(a) == s.ptr
    assert a.streams[-1] == s.ptr
    s.use()
    try:
        assert report(a, cupy.zeros(2)) == s.ptr
    finally:
        cupy.cuda.Stream.null.use()


def test_mixed_table_and_cupy_on_one_device(fx, report, cupy):
    """torch + CuPy in one call: the kernel runs on the table's stream, and the CuPy array
    is exported with that stream (not CuPy's own)."""
    t = fx.tensor((4,), device=(CUDA, 0))
    a = cupy.zeros(4)
    fx.set_stream(CUDA, 0, 0xAB00)
    with cupy.cuda.Stream():
        assert report(a, t) == 0xAB00
    assert a.streams == [0xAB00]


def test_override_counts_while_in_force(fx):
    assert dlx._core._stats()["stream_pending"] == 0
    with dlx.stream(0x10):
        with dlx.stream(0x20):
            assert dlx._core._stats()["stream_pending"] == 1  # one thread, however deep
    assert dlx._core._stats()["stream_pending"] == 0


def test_cupy_on_another_device_is_refused_before_export(fx, report, cupy):
    t, a = fx.tensor((4,), device=(CUDA, 0)), cupy.zeros(4, device_id=1)
    with pytest.raises(ValueError, match="argument 0 is on cuda:0 but argument 1 is on cuda:1"):
        report(t, a)
    assert a.streams == []


def test_cupy_array_on_another_device_gets_that_devices_stream(report, cupy):
    """CuPy's current stream is per device: an array on cuda:1 runs on cuda:1's current
    stream, not on that of the current device (0)."""
    s0, s1 = cupy.cuda.Stream(device_id=0).use(), cupy.cuda.Stream(device_id=1).use()
    a = cupy.zeros(2, device_id=1)
    assert report(a) == s1.ptr and a.streams == [s1.ptr]
    assert report(cupy.zeros(2)) == s0.ptr


def test_cupy_without_a_device_argument(report, cupy, monkeypatch):
    """CuPy before 13: get_current_stream() takes no arguments; the current device's
    stream then (asked once with the device, then remembered)."""
    s = cupy.cuda.Stream().use()
    asked = []

    def old_get_current_stream():
        asked.append(1)
        return s

    monkeypatch.setattr(cupy.cuda, "get_current_stream", old_get_current_stream)
    assert report(cupy.zeros(2)) == s.ptr and report(cupy.zeros(2)) == s.ptr
    assert asked == [1, 1]


def test_a_registered_provider_overrides_the_builtin_one(report, cupy):
    dlx.register_stream_provider(cupy.ndarray, lambda t, i: 0xC0C0)
    a = cupy.zeros(1)
    with cupy.cuda.Stream():
        assert report(a) == 0xC0C0
    assert a.streams == [0xC0C0]


def test_cupy_is_never_imported_by_dlx():
    """With the stand-in importable, calls with other producers (and a type that only
    looks like CuPy's) leave `cupy` unimported; CuPy's provider needs a CuPy array."""
    code = f"""
import os, sys
sys.path[:0] = [{str(FIXTURES / 'cupy_standin')!r}, {str(FIXTURES / 'dlpack_only')!r}]
import dlx, dlx_fixture as fx
from dlpack_only import Recorder
lib = dlx.load(os.path.join(os.environ['DLX_BUILD_DIR'], 'examples', 'stream_report.so'))
Fake = type('ndarray', (Recorder,), {{'__module__': 'cupy'}})
p = Fake(fx.tensor((2,), device=(2, 0)))
assert lib.report_stream(p) == 2, 'a CuPy-named type without cupy imported: the default'
assert lib.report_stream(Recorder(fx.tensor((2,), device=(2, 0)))) == 2
assert 'cupy' not in sys.modules, sorted(m for m in sys.modules if 'cupy' in m)
import cupy
s = cupy.cuda.Stream().use()
assert lib.report_stream(cupy.zeros(2)) == s.ptr
print('ok')
"""
    assert run_python(code).stdout.strip() == "ok"


# ---- the override ------------------------------------------------------------------------

class TorchLike:
    def __init__(self, h):
        self.cuda_stream = h


class NpuLike:
    def __init__(self, h):
        self.npu_stream = h


class CupyLike:
    def __init__(self, h):
        self.ptr = h


class Protocol:
    def __init__(self, h):
        self.h = h

    def __cuda_stream__(self):
        return (0, self.h)


@pytest.mark.parametrize("make", [int, TorchLike, NpuLike, CupyLike, Protocol])
def test_override_applies_to_table_and_dlpack_producers(fx, report, make):
    t, p = fx.tensor((2,), device=(CUDA, 0)), producer(fx, (CUDA, 0))
    fx.set_stream(CUDA, 0, 0x1000)
    fx.reset_stats()
    with dlx.stream(make(0xD000)):
        assert report(t) == 0xD000
        assert report(p) == 0xD000
        assert report(t, p) == 0xD000
    assert fx.stats()["stream_queries"] == 0  # the override decided: no table was asked
    assert p.streams == [0xD000, 0xD000]
    assert report(t, p) == 0x1000  # outside: the table's again


def test_override_nests_and_restores(fx, report):
    p = producer(fx, (CUDA, 0))
    outer, inner = dlx.stream(0xA000), dlx.stream(0xB000)
    with outer:
        assert report(p) == 0xA000
        with inner:
            assert report(p) == 0xB000
            with dlx.stream(None):  # None changes nothing
                assert report(p) == 0xB000
            with outer:  # the same object entered twice
                assert report(p) == 0xA000
            assert report(p) == 0xB000
        assert report(p) == 0xA000
        with pytest.raises(RuntimeError):
            with dlx.stream(0xC000):
                raise RuntimeError("restored on the way out")
        assert report(p) == 0xA000
    assert report(p) == PER_THREAD
    assert dlx._core._stream_current() is None


def test_override_left_out_of_order_leaves_nothing_stale(fx, report):
    """Coroutines interleaving on one thread leave their blocks out of order: what is in
    force is the latest block still entered, and once all are left, none."""
    p = producer(fx, (CUDA, 0))
    a, b = dlx.stream(0xA000), dlx.stream(0xB000)
    a.__enter__()
    b.__enter__()
    a.__exit__(None, None, None)  # task A leaves first
    assert report(p) == 0xB000
    b.__exit__(None, None, None)
    assert report(p) == PER_THREAD
    assert dlx._core._stream_current() is None


def test_override_left_on_another_thread_is_refused(fx):
    s = dlx.stream(0xA000)
    s.__enter__()
    seen = []
    th = threading.Thread(target=lambda: seen.append(pytest.raises(RuntimeError, s.__exit__,
                                                                   None, None, None)))
    th.start()
    th.join()
    assert len(seen) == 1 and "not entered" in str(seen[0].value)
    assert dlx._core._stream_current() == 0xA000  # still this thread's
    s.__exit__(None, None, None)


def test_override_is_thread_local(fx, report):
    p = producer(fx, (CUDA, 0))
    inside, checked = threading.Event(), threading.Event()
    seen = {}

    def other():
        inside.wait()
        seen["other"] = report(p)  # the main thread is inside its override now
        with dlx.stream(0xE000):
            seen["own"] = report(p)
        checked.set()

    th = threading.Thread(target=other)
    th.start()
    with dlx.stream(0xF000):
        inside.set()
        checked.wait()
        seen["main"] = report(p)
    th.join()
    assert seen == {"other": PER_THREAD, "own": 0xE000, "main": 0xF000}


@pytest.mark.parametrize("s, exc, match", [
    ("0x10", TypeError, "str is not a stream"),
    (True, TypeError, "bool is not a stream"),
    (-1, ValueError, "not a stream handle"),
    (1 << 64, ValueError, "not a stream handle"),
    (TorchLike(1.5), TypeError, "cuda_stream is float, not an int"),
])
def test_override_refuses_what_is_not_a_stream(s, exc, match):
    with pytest.raises(exc, match=match):
        with dlx.stream(s):
            pass
    assert dlx._core._stream_current() is None


def test_override_on_rocm_must_be_a_dlpack_stream_number(fx, report):
    p = producer(fx, (ROCM, 0))
    with dlx.stream(PER_THREAD):  # cudaStreamPerThread's number: DLPack has none on ROCm
        with pytest.raises(ValueError, match="argument 0 .* rocm:0, where DLPack has no stream "
                                             "number for the call's stream 0x2"):
            report(p)
    assert p.calls == []


# ---- producers of every age --------------------------------------------------------------

def test_producer_without_keywords_still_works_and_is_remembered(fx, report):
    Fresh = type("Fresh", (NoKeywords,), {})  # nothing remembered for it yet
    p = producer(fx, (CUDA, 0), Fresh)
    assert report(p) == PER_THREAD
    assert p.attempts == 3  # every keyword, the stream alone, none
    assert report(p) == PER_THREAD
    assert p.attempts == 4  # remembered for the type: asked without keywords at once
    q = producer(fx, (CPU, 0), Fresh)
    assert report(q) == 0 and q.attempts == 1


def test_pre_versioned_producer_gets_the_stream_without_max_version(fx, report):
    Fresh = type("Fresh", (PreVersioned,), {})  # nothing remembered for it yet
    p = producer(fx, (CUDA, 0), Fresh)
    with dlx.stream(0x8800):
        assert report(p) == 0x8800
        assert report(p) == 0x8800
    assert p.calls == [{"stream": 0x8800}] * 2
    assert p.attempts == 3  # the second call went straight to stream=


def test_a_producer_error_is_not_retried_without_the_stream_forever(fx, report):
    """A TypeError that does not mention a keyword is retried (as for any older producer),
    but not remembered: the next call asks with every keyword again."""
    class Picky(Recorder):
        def _export(self, **kw):
            if "max_version" in kw:
                raise TypeError("no versioned capsule today")
            return super()._export(**kw)

    p = producer(fx, (CUDA, 0), Picky)
    assert report(p) == PER_THREAD and p.calls == [{"stream": PER_THREAD}]
    report(p)
    assert p.attempts == 4  # asked with max_version again


def test_producer_without_dlpack_device_is_exported_at_once(fx, report):
    p = producer(fx, (CUDA, 0), NoDevice)
    assert report(p) == 0  # device unknown until exported: no stream to give it
    assert p.calls == [{"max_version": (1, 3)}]


def test_bad_dlpack_device_is_a_type_error(fx, report):
    class Liar(Recorder):
        def __dlpack_device__(self):
            return ("cuda", 0)

    fx.reset_stats()
    with pytest.raises(TypeError, match=r"argument 0 \(Liar\): __dlpack_device__\(\) returned "
                                        r"\('cuda', 0\)"):
        report(producer(fx, (CUDA, 0), Liar))


def test_export_on_another_device_than_announced(fx, report):
    class Moved(Recorder):
        def __dlpack_device__(self):
            return (CUDA, 1)

    p = producer(fx, (CUDA, 0), Moved)
    with pytest.raises(ValueError, match=r"argument 0 \(Moved\): __dlpack__ exported a tensor on "
                                         r"cuda:0, but the call's device is cuda:1"):
        report(p)
    assert len(p.calls) == 1  # exported, then released (the fx fixture checks the balance)


def test_producer_raising_in_export_releases_the_others(fx, report):
    class Failing(Recorder):
        def _export(self, **kw):
            raise BufferError("cannot export now")

    t, ok, bad = fx.tensor((1,), device=(CUDA, 0)), producer(fx, (CUDA, 0)), \
        producer(fx, (CUDA, 0), Failing)
    fx.reset_stats()
    with pytest.raises(BufferError, match=r"report_stream\(\): argument 2 \(Failing\): cannot"):
        report(t, ok, bad)
    s = fx.stats()
    assert s["exported"] == 1 and s["deleted"] == 1  # `ok` was exported and released once


def test_a_later_argument_refused_leaves_nothing_pending(fx, report, sig):
    """A call that ends while converting (an argument of no known kind, a declared scalar
    of the wrong type) after a deferred producer takes that producer off the pending
    count itself: else every later call on any thread would take the slow path."""
    p = producer(fx, (CUDA, 0))
    with pytest.raises(TypeError, match=r"report_stream\(\): argument 1 \(object\)"):
        report(p, object())
    assert dlx._core._stats()["stream_pending"] == 0
    with pytest.raises(TypeError, match="name"):
        sig.sizes(p, None, 5)
    assert dlx._core._stats()["stream_pending"] == 0
    assert p.calls == []  # never exported


# ---- declared signatures check what the deferred export brought ---------------------------

def test_a_refused_scalar_is_not_taken_for_a_deferred_producer(fx, sig):
    """A declared scalar refused while converting leaves its slot as the last call left it
    (here: a deferred producer whose export failed). Only the arguments before it may be
    taken off the pending count; counting it too wrapped the count below 0, and every call
    after took the slow path for good."""
    class Failing(Recorder):
        def _export(self, **kw):
            raise BufferError("cannot export now")

    x, y = producer(fx, (CUDA, 0)), producer(fx, (CUDA, 0))
    for _ in range(3):
        with pytest.raises(BufferError, match="cannot export now"):
            sig.fma3(x, y, producer(fx, (CUDA, 0), Failing))
        with pytest.raises(TypeError, match="'name' must be str"):
            sig.sizes(producer(fx, (CUDA, 0)), None, 5)
        assert dlx._core._stats()["stream_pending"] == 0


@pytest.fixture(scope="module")
def sig(build_dir):
    return dlx.load(build_dir / "kernels" / "sig_kernels.so")


def test_signed_kernel_checks_deferred_producers_after_export(fx, sig):
    x, y, z = (producer(fx, (CUDA, 0)) for _ in range(3))
    x.t.fill([1.0, 2.0])
    z.t.fill([3.0, 4.0])
    y.t.fill([0.5, 0.5])
    sig.fma3(x, y, z)
    assert y.t.tolist() == [3.5, 8.5]
    assert [p.streams for p in (x, y, z)] == [[PER_THREAD]] * 3
    short = Recorder(fx.tensor([1.0], device=(CUDA, 0)))
    with pytest.raises(ValueError, match="'y' has n=1 where 'x' has n=2"):
        sig.fma3(x, short, z)
    wrong = Recorder(fx.tensor([1.0, 2.0], dtype="float64", device=(CUDA, 0)))
    with pytest.raises(TypeError, match="fma3\\(\\): 'z' must be f32"):
        sig.fma3(x, y, wrong)


def test_placed_kernel_sees_the_exported_device(fx, sig):
    sig.placed(None, producer(fx, (CUDA, 0)))
    with pytest.raises(ValueError, match="cuda_t"):
        sig.placed(None, producer(fx, (ROCM, 0)))


# ---- doctor says it ----------------------------------------------------------------------

def test_doctor_names_the_default_stream_of_dlpack_producers():
    out = run_python("import sys; from dlx.__main__ import main; sys.exit(main(['doctor']))",
                     env={"DLX_DISABLE_TORCH_ADDON": "1"}).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("streams for __dlpack__"))
    assert "per-thread default" in line and "2" in line


# ---- dlx's JAX table: a JAX array on a device is a producer like any other ------------

@pytest.fixture()
def jax_like():
    """A producer type carrying dlx's JAX table, as jax.Array does once dlx has seen one:
    the routing a JAX GPU array takes (its __dlpack_device__ decides), without JAX or a
    GPU. A fresh type per test, so the table stays registered for that type only."""
    class JaxLike(Recorder):
        pass

    dlx._core._install_jax(JaxLike)
    assert dlx.exchange_api(JaxLike) is not None
    return JaxLike


def test_jax_device_array_is_exported_with_the_calls_stream(fx, report, kernels, jax_like):
    p = producer(fx, (CUDA, 0), jax_like)
    assert report(p) == PER_THREAD  # it supplies no stream: the per-thread default
    assert p.calls == [{"stream": PER_THREAD, "max_version": (1, 3)}]
    assert kernels.is_readonly(p) == 1  # JAX arrays are immutable, also exported this way
    with pytest.raises(ValueError, match="read-only"):
        kernels.fill(p, 9.0)
    assert p.t.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("jax_first", [True, False])
def test_jax_device_array_takes_the_table_tensors_stream(fx, report, jax_like, jax_first):
    t = fx.tensor((2,), device=(CUDA, 0))
    p = producer(fx, (CUDA, 0), jax_like)
    fx.set_stream(CUDA, 0, 0x9900)
    assert report(*((p, t) if jax_first else (t, p))) == 0x9900  # torch's, not legacy
    assert p.streams == [0x9900]


def test_jax_device_array_uses_a_registered_provider(fx, report, jax_like):
    dlx.register_stream_provider(jax_like, lambda device_type, device_id: 0x5500)
    p = producer(fx, (CUDA, 1), jax_like)
    assert report(p) == 0x5500 and p.streams == [0x5500]


def test_jax_host_array_goes_through_the_table(fx, report, kernels, jax_like):
    p = producer(fx, (CPU, 0), jax_like)
    assert kernels.sum(p) == 3.0 and report(p) == 0
    assert kernels.is_readonly(p) == 1  # the table's flag (the tensor itself is writable)
    assert kernels.is_readonly(producer(fx, (CPU, 0))) == 0
    assert p.calls == [{"max_version": (1, 3)}] * 3
