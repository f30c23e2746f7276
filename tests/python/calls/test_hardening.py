"""Issue 7: hostile and unusual inputs never crash, hang or fool dlx.

Each case that crashed the interpreter runs in a child process (run_python), so a
regression fails that one test, not the suite. The producers here are the fixture
framework's deliberately malformed tables and exports (tests/fixtures/dlx_fixture.c)."""
import ctypes
import mmap
import os
import subprocess
import textwrap

import numpy as np
import pytest

import dlx
from conftest import TESTS, run_python
from dlpack_ctypes import (SETERROR, DLDataType, DLDevice, DLManagedTensorVersioned, DLTensor,
                           table_of, take)

CPU, CUDA, ROCM, EXTDEV = 1, 2, 10, 12
PRELUDE = textwrap.dedent(f"""\
    import os, sys, ctypes
    sys.path.insert(0, {str(TESTS)!r})
    import numpy as np
    import dlx, dlx_fixture as fx
    k = dlx.load(os.environ['DLX_BUILD_DIR'] + '/kernels/test_kernels.so')
    def typed(variant):
        T = type('T_' + variant, (fx.Tensor,), {{}})
        T.__dlpack_c_exchange_api__ = fx.table_capsule(variant)
        return T
    def expect(exc, fn, *args):
        try:
            fn(*args)
        except exc as e:
            print('RAISED', type(e).__name__, e)
            return e
        print('NO ERROR')
    """)


def child(code, timeout=120):
    """Run PRELUDE + code in a fresh interpreter; the CompletedProcess (never raises)."""
    return run_python(PRELUDE + textwrap.dedent(code), check=False, timeout=timeout)


def assert_clean(r):
    assert r.returncode == 0, f"child died ({r.returncode}):\n{r.stdout}\n{r.stderr}"


def numpy_table():
    return table_of(dlx.exchange_api(np.ndarray))


def as_managed(address):
    return ctypes.cast(address, ctypes.POINTER(DLManagedTensorVersioned))


# ---- item 2: numpy's table and a NULL shape ---------------------------------------------

def test_numpy_import_refuses_a_null_shape(fx):
    r = child("""
        from dlpack_ctypes import table_of, DLManagedTensorVersioned
        api = table_of(dlx.exchange_api(np.ndarray))
        m = ctypes.cast(fx.raw_managed(2, null_shape=True), ctypes.POINTER(DLManagedTensorVersioned))
        out = ctypes.py_object()
        expect(BufferError, api.managed_tensor_to_py_object_no_sync, m, ctypes.byref(out))
        print('live', fx.stats()['live'])
        """)
    assert_clean(r)
    assert "RAISED BufferError" in r.stdout and "NULL shape" in r.stdout
    assert "live 0" in r.stdout  # the deleter ran, once


def test_numpy_allocator_refuses_a_null_shape():
    r = child("""
        from dlpack_ctypes import *
        api = table_of(dlx.exchange_api(np.ndarray))
        proto = DLTensor(None, DLDevice(1, 0), 3, DLDataType(2, 32, 1), None, None, 0)
        out = ctypes.POINTER(DLManagedTensorVersioned)()
        errors = []
        seterr = SETERROR(lambda ctx, kind, msg: errors.append((kind.decode(), msg.decode())))
        rc = api.managed_tensor_allocator(ctypes.byref(proto), ctypes.byref(out), None, seterr)
        print('rc', rc, errors)
        """)
    assert_clean(r)
    assert "rc -1" in r.stdout and "ValueError" in r.stdout and "NULL shape" in r.stdout


# ---- item 3: a producer's NULL shape (and strides) ---------------------------------------

@pytest.mark.parametrize("door", ["view", "managed", "dlpack"])
def test_producer_tensor_without_shape_is_refused(door):
    r = child(f"""
        door = {door!r}
        T = typed('managed_only') if door == 'managed' else fx.Tensor
        t = T((2, 3), device=(1, 0))
        class P:
            def __dlpack__(self, **kw):
                return t.__dlpack__(**kw)
        arg = P() if door == 'dlpack' else t
        fx.set_export_quirk('null_shape')
        expect(BufferError, k.sum, arg)
        fx.set_export_quirk('none')
        import gc; gc.collect()
        print('live', fx.stats()['live'])
        """)
    assert_clean(r)
    assert "RAISED BufferError sum(): argument 0" in r.stdout and "NULL shape" in r.stdout
    assert "live 0" in r.stdout


# ---- item 4: SetError(ctx, NULL, NULL) ----------------------------------------------------

def test_allocator_reporting_a_null_kind_and_message():
    r = child("""
        T = typed('null_seterror')
        expect(RuntimeError, k.arange, 3, T((1,), device=(2, 0)))
        """)
    assert_clean(r)
    assert "RAISED RuntimeError arange(): " in r.stdout and "no message" in r.stdout


# ---- item 5: legacy int addresses ---------------------------------------------------------

@pytest.mark.parametrize("value, why", [
    (0, "NULL"), (1, "first page"), (-1, "plausible"), (4088, "first page"),
    (0x7F0000001001, "aligned"), (2**64 + 8, "plausible"), ("unmapped", "not readable")])
def test_implausible_legacy_address_is_refused(value, why):
    r = child(f"""
        value = {value!r}
        if value == 'unmapped':
            import mmap, gc
            m = mmap.mmap(-1, mmap.PAGESIZE)
            value = ctypes.addressof(ctypes.c_char.from_buffer(m))
            gc.collect(); m.close()
        class Legacy(fx.Tensor):
            __dlpack_c_exchange_api__ = None
            __c_dlpack_exchange_api__ = value
        expect(TypeError, k.noop, Legacy((1,), device=(2, 0)))
        """)
    assert_clean(r)
    assert "RAISED TypeError noop(): argument 0 (Legacy): Legacy: " in r.stdout
    assert why in r.stdout


def test_plausible_legacy_address_still_works(fx, kernels):
    class Legacy(fx.Tensor):
        __dlpack_c_exchange_api__ = None

    Legacy.__c_dlpack_exchange_api__ = fx.table_address("full")
    assert kernels.sum(Legacy([1.0, 2.0], device=(CUDA, 0))) == 3.0


# ---- item 6: only data objects of a record's size are records ----------------------------

def test_load_reads_only_data_objects_of_a_records_size(tmp_path):
    src = tmp_path / "fake.c"
    src.write_text(textwrap.dedent("""\
        #include <dlx/dlx.h>
        static int body(dlx_call *call) { return dlx_return_int(call, 7); }
        DLX_KERNEL(real) { return dlx_return_int(call, 1); }
        /* Full, valid records, exported under symbols that lie about them: one typed as
         * a function, one sized 1 byte. dlx must read neither as a record. */
        __attribute__((used)) static const dlx_kernel_record as_func =
            {DLX_KERNEL_MAGIC, DLX_ABI_VERSION, 0, "as_func", body};
        __attribute__((used)) static const dlx_kernel_record tiny =
            {DLX_KERNEL_MAGIC, DLX_ABI_VERSION, 0, "tiny", body};
        __asm__(".globl dlx_kernel__as_func\\n.type dlx_kernel__as_func, @function\\n"
                ".size dlx_kernel__as_func, 32\\n.set dlx_kernel__as_func, as_func\\n"
                ".globl dlx_kernel__tiny\\n.type dlx_kernel__tiny, @object\\n"
                ".size dlx_kernel__tiny, 1\\n.set dlx_kernel__tiny, tiny\\n");
        """))
    so = tmp_path / "fake.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-I", dlx.include_dir(), str(src), "-o", str(so)],
                   check=True)
    lib = dlx.load(so)
    assert lib.kernels == ("real",)
    assert lib.real() == 1


# ---- item 8: the wrong major from an allocator --------------------------------------------

def test_allocator_of_the_wrong_major_is_refused_without_reading_it_after_release():
    r = child("""
        T = typed('alloc_major2')
        expect(BufferError, k.arange, 3, T((1,), device=(2, 0)))
        import gc; gc.collect()
        print('live', fx.stats()['live'])
        """)
    assert_clean(r)
    assert "RAISED BufferError arange(): the allocator returned DLPack major version 2" in r.stdout
    assert "live 0" in r.stdout


# ---- item 9: tables stay alive for the whole call -----------------------------------------

@pytest.mark.parametrize("uses", ["stream", "allocator"])
def test_table_replaced_and_freed_during_a_call_stays_usable(uses):
    r = child(f"""
        class A(fx.Tensor):
            pass
        A.__dlpack_c_exchange_api__ = fx.owned_table_capsule('full')
        a = A((4,), device=(2, 0))
        k.noop(a)  # cached: the cache now owns the only other reference
        class Evil:
            # Runs Python code in the middle of the call: replaces A's table (dropping
            # the type's reference) and makes the cache let go of the old one.
            def __dlpack__(self, **kw):
                A.__dlpack_c_exchange_api__ = fx.table_capsule('full')
                k.noop(A((1,), device=(2, 0)))
                return fx.tensor((1,), device=(2, 0)).__dlpack__(**kw)
        if {uses!r} == 'stream':  # current_work_stream of a's table, after conversion
            print('result', k.noop(a, Evil()))
        else:  # the allocator of a's table (the first tensor argument's)
            r = k.new_tensor(2, 32, 5, a, Evil())
            print('result', type(r).__name__, r.shape)
            del r
        import gc; gc.collect()
        print('freed', fx.stats()['tables_freed'], 'live', fx.stats()['live'])
        """)
    assert_clean(r)
    assert ("result None" if uses == "stream" else "result Tensor (5,)") in r.stdout
    assert "freed 1 live 0" in r.stdout  # released once the call was over, not during it


def test_exchange_api_capsule_keeps_its_table_alive(fx):
    import gc

    class Owned(fx.Tensor):
        pass

    own = fx.owned_table_capsule("full")
    Owned.__dlpack_c_exchange_api__ = own
    cap = dlx.exchange_api(Owned)
    assert cap is own  # the producer's own capsule, not a bare pointer to its table
    del own
    Owned.__dlpack_c_exchange_api__ = fx.table_capsule("full")
    dlx.exchange_api(Owned)  # the cache lets go of the old table
    gc.collect()
    assert fx.stats()["tables_freed"] == 0  # `cap` still owns it
    del cap
    gc.collect()
    assert fx.stats()["tables_freed"] == 1

    class V2(fx.Tensor):
        pass

    V2.__dlpack_c_exchange_api__ = fx.table_capsule("v2_with_prev")
    assert table_of(dlx.exchange_api(V2)).version.major == 1  # the table behind prev_api


# ---- item 11: a silent failure of to_py ---------------------------------------------------

def test_to_py_failing_without_an_error_raises(fx, kernels):
    T = type("Silent", (fx.Tensor,), {})
    T.__dlpack_c_exchange_api__ = fx.table_capsule("silent_to_py")
    with pytest.raises(RuntimeError, match=r"^arange\(\): .*to_py_object_no_sync failed"):
        kernels.arange(3, T((1,), device=(CUDA, 0)))


# ---- items 12 and 13: numpy's import ------------------------------------------------------

def test_numpy_import_keeps_its_error_when_the_deleter_clears_it(fx):
    api = numpy_table()
    out = ctypes.py_object()
    m = as_managed(fx.raw_managed(1, device=(CUDA, 0), clear_error=True))
    with pytest.raises(BufferError, match="host memory"):
        api.managed_tensor_to_py_object_no_sync(m, ctypes.byref(out))


def test_numpy_import_refuses_another_major_reading_nothing_else(fx):
    api = numpy_table()
    out = ctypes.py_object()
    before = fx.stats()["deleted"]
    m = as_managed(fx.raw_managed(1, major=2))
    with pytest.raises(BufferError, match="major version 2"):
        api.managed_tensor_to_py_object_no_sync(m, ctypes.byref(out))
    assert fx.stats()["deleted"] == before + 1


def test_numpy_import_of_a_null_strides_tensor_still_works(fx):
    api = numpy_table()
    out = ctypes.py_object()
    assert api.managed_tensor_to_py_object_no_sync(as_managed(fx.raw_managed(3)),
                                                   ctypes.byref(out)) == 0
    arr = take(out)
    assert arr.shape == (2, 2, 2) and arr.strides == (16, 8, 4)
    del arr


# ---- item 14: NULL strides with any ndim --------------------------------------------------

@pytest.mark.parametrize("ndim", [1, 10, 16, 17, 32])
@pytest.mark.parametrize("door", ["view", "managed", "dlpack"])
def test_null_strides_are_made_compact_for_any_ndim(fx, kernels, ndim, door):
    T = type("M", (fx.Tensor,), {"__dlpack_c_exchange_api__": fx.table_capsule("managed_only")}) \
        if door == "managed" else fx.Tensor
    stepped = min(ndim, 10)  # dimensions of extent 2; the rest are 1
    shape = (1,) * (ndim - stepped) + (2,) * stepped
    t = T(shape, device=(CPU, 0))
    t.fill(list(range(2**stepped)))

    class P:
        def __dlpack__(self, **kw):
            return t.__dlpack__(**kw)

    arg = P() if door == "dlpack" else t
    fx.set_export_quirk("null_strides")
    try:
        assert kernels.info(arg, 0) == ndim
        if ndim <= 10:  # info() reads strides as queries 20.. only below 10 dimensions
            assert [kernels.info(arg, 20 + d) for d in range(ndim)] == \
                [2 ** (ndim - d - 1) for d in range(ndim)]
        assert kernels.sum(arg) == sum(range(2**stepped))
        kernels.fill(arg, 1.5)
    finally:
        fx.set_export_quirk("none")
    assert t.tolist() == [1.5] * 2**stepped  # every element reached, nothing else


def test_numpy_legacy_capsule_without_strides_above_16_dims(kernels):
    a = np.arange(6, dtype=np.float64).reshape((1,) * 18 + (2, 3))

    class P:
        def __dlpack__(self, **kw):
            return a.__dlpack__(**kw)

    assert kernels.sum(P()) == 15.0
    assert kernels.info(P(), 0) == 20


# ---- item 16: one device per call ---------------------------------------------------------

@pytest.mark.parametrize("second, text", [((CUDA, 1), "cuda:1"), ((ROCM, 0), "rocm:0"),
                                          ((EXTDEV, 0), "ext_dev:0")])
def test_tensors_on_different_devices_are_refused(fx, kernels, second, text):
    a, b = fx.tensor((1,), device=(CUDA, 0)), fx.tensor((1,), device=second)
    fx.reset_stats()
    with pytest.raises(ValueError, match=rf"^noop\(\): argument 1 is on cuda:0 but argument 3 "
                                         rf"is on {text}"):
        kernels.noop(1, a, fx.tensor((1,), device=(CPU, 0)), b)
    assert fx.stats()["stream_queries"] == 0


def test_cpu_tensors_may_accompany_one_device(fx, examples):
    fx.set_stream(CUDA, 1, 0x42)
    args = (np.ones(1), fx.tensor((1,), device=(CUDA, 1)), fx.tensor((1,), device=(CPU, 0)),
            fx.tensor((1,), device=(CUDA, 1)))
    assert examples.report.report_stream(*args) == 0x42


# ---- item 17: every error of a call names the kernel --------------------------------------

def test_every_error_of_a_call_starts_with_the_kernel_name(fx, kernels):
    cases = [
        (TypeError, lambda: kernels.want_tensor(1), "want_tensor(): argument 0: expected a tensor"),
        (TypeError, lambda: kernels.echo_int(1.5), "echo_int(): argument 0: expected an int"),
        (IndexError, lambda: kernels.arg_out_of_range(1), "arg_out_of_range(): argument 1"),
        (TypeError, lambda: kernels.noop(1, {}), "noop(): argument 1 (dict): unsupported type"),
        (OverflowError, lambda: kernels.noop(2**70), "noop(): argument 0 (int): "),
        (ValueError, lambda: kernels.fail_value(), "fail_value(): bad value 42"),
        (RuntimeError, lambda: kernels.fail_unknown_kind(), "fail_unknown_kind(): NoSuchError"),
        (RuntimeError, lambda: kernels.fail_silently(), "fail_silently(): the kernel failed"),
        (TypeError, lambda: kernels.noop(*range(65)), "noop() takes at most 64 arguments"),
        (TypeError, lambda: kernels.noop(x=1), "noop() takes no keyword arguments"),
        (RuntimeError, lambda: kernels.noop(_typed(fx, "failing_stream")((1,), device=(CUDA, 0))),
         "noop(): fixture stream query failed"),
        (BufferError, lambda: kernels.noop(_typed(fx, "failing_export")((1,))),
         "noop(): argument 0 (T_failing_export): fixture export refused"),
        (TypeError, lambda: kernels.new_tensor(4, 16, 2), "new_tensor(): numpy has no dtype"),
    ]
    for exc, fn, start in cases:
        with pytest.raises(exc) as info:
            fn()
        assert str(info.value).startswith(start), (start, str(info.value))


def _typed(fx, variant):
    T = type("T_" + variant, (fx.Tensor,), {})
    T.__dlpack_c_exchange_api__ = fx.table_capsule(variant)
    return T


# ---- item 18: a consumed capsule ----------------------------------------------------------

def test_a_capsule_passed_a_second_time_says_it_was_consumed(fx, kernels):
    t = fx.tensor([1.0, 2.0], device=(CPU, 0))

    class Cached:
        cap = None

        def __dlpack__(self, **kw):
            if Cached.cap is None:
                Cached.cap = t.__dlpack__(**kw)
            return Cached.cap

    assert kernels.sum(Cached()) == 3.0
    with pytest.raises(BufferError, match=r"^sum\(\): argument 0 \(Cached\): .*already consumed "
                                          r"\('used_dltensor_versioned'\)"):
        kernels.sum(Cached())


# ---- item 19: dlx.load of what is not a regular file --------------------------------------

def test_load_of_a_fifo_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "k.so"
    os.mkfifo(fifo)
    r = child(f"""
        expect(OSError, dlx.load, {str(fifo)!r})
        """, timeout=30)
    assert_clean(r)
    assert "RAISED OSError" in r.stdout and "not a regular file (a FIFO)" in r.stdout


def test_load_of_a_folder_is_refused(tmp_path):
    with pytest.raises(OSError, match="not a regular file \\(a folder\\)"):
        dlx.load(tmp_path)
