"""The consumer against the fixture framework: tensors that claim CUDA, ROCm and
kDLExtDev devices (host memory behind them) with a per-thread current stream each."""
import threading

import numpy as np
import pytest

import dlx

CPU, CUDA, ROCM, EXTDEV = 1, 2, 10, 12


@pytest.mark.parametrize("dev", [CUDA, ROCM, EXTDEV])
def test_kernel_gets_the_stream_set_on_its_thread(fx, examples, dev):
    t = fx.tensor((4,), device=(dev, 1))
    fx.set_stream(dev, 1, 0xABC0 + dev)
    r = examples.report
    assert r.report_stream(t) == 0xABC0 + dev
    assert r.report_device_type(t) == dev and r.report_device_id(t) == 1
    fx.set_stream(dev, 1, 0x5150)  # streams are never cached: a change is seen at once
    assert r.report_stream(t) == 0x5150
    fx.set_stream(dev, 1, None)
    assert r.report_stream(t) == 0


def test_stream_is_queried_exactly_once_per_call(fx, kernels):
    a, b, c = (fx.tensor((2,), device=(CUDA, 0)) for _ in range(3))
    fx.reset_stats()
    kernels.noop(a, b, c, 1.0)
    assert fx.stats()["stream_queries"] == 1
    kernels.noop(a, b, c)
    assert fx.stats()["stream_queries"] == 2


def test_cpu_only_calls_query_nothing(fx, kernels, examples):
    cpu = fx.tensor((2,), device=(CPU, 0))
    fx.reset_stats()
    kernels.noop(cpu, np.ones(2), 3)
    assert examples.report.report_stream(cpu) == 0
    assert examples.report.report_device_type(cpu, np.ones(1)) == CPU
    assert fx.stats()["stream_queries"] == 0


def test_device_is_the_first_non_cpu_tensor(fx, examples):
    fx.set_stream(ROCM, 3, 0x10)
    args = (np.ones(1), fx.tensor((1,), device=(CPU, 0)), fx.tensor((1,), device=(ROCM, 3)),
            fx.tensor((1,), device=(ROCM, 3)))
    r = examples.report
    assert (r.report_device_type(*args), r.report_device_id(*args)) == (ROCM, 3)
    assert r.report_stream(*args) == 0x10


def test_two_threads_never_see_each_others_streams(fx, examples):
    t = fx.tensor((2,), device=(EXTDEV, 0))
    barrier = threading.Barrier(2)
    seen = {}

    def worker(stream):
        fx.set_stream(EXTDEV, 0, stream)
        barrier.wait()  # both streams are set before either thread calls
        got = []
        for _ in range(2000):
            got.append(examples.report.report_stream(t))
        seen[stream] = set(got)

    threads = [threading.Thread(target=worker, args=(s,)) for s in (0x1111, 0x2222)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert seen == {0x1111: {0x1111}, 0x2222: {0x2222}}
    assert examples.report.report_stream(t) == 0  # this thread set nothing


def test_view_path_allocates_nothing_and_managed_path_balances(fx, kernels):
    t = fx.tensor([1.0, 2.0, 3.0], device=(CUDA, 0))
    fx.reset_stats()
    assert kernels.sum(t) == 6.0
    s = fx.stats()
    assert s["view_exports"] == 1 and s["managed_exports"] == 0

    class ManagedOnly(fx.Tensor):
        pass

    ManagedOnly.__dlpack_c_exchange_api__ = fx.table_capsule("managed_only")
    m = ManagedOnly([1.0, 2.0, 3.0, 4.0], device=(CUDA, 0))
    fx.reset_stats()
    assert kernels.sum(m) == 10.0
    s = fx.stats()
    assert s["managed_exports"] == 1 and s["deleted"] == 1 and s["view_exports"] == 0


def test_deleters_run_once_when_the_kernel_fails(fx, kernels):
    class ManagedOnly(fx.Tensor):
        pass

    ManagedOnly.__dlpack_c_exchange_api__ = fx.table_capsule("managed_only")
    ts = [ManagedOnly((2,), device=(CUDA, 0)) for _ in range(3)]
    fx.reset_stats()
    with pytest.raises(ValueError, match="bad value"):
        kernels.fail_value(*ts)
    with pytest.raises(TypeError, match="argument 3"):
        kernels.noop(*ts, object())  # conversion fails after three exports
    s = fx.stats()
    assert s["managed_exports"] == 6 and s["deleted"] == 6


def test_readonly_managed_tensor_is_reported(fx, kernels):
    class ManagedOnly(fx.Tensor):
        pass

    ManagedOnly.__dlpack_c_exchange_api__ = fx.table_capsule("managed_only")
    ro = ManagedOnly([1.0], device=(CUDA, 0), readonly=True)
    assert kernels.is_readonly(ro) == 1
    with pytest.raises(ValueError, match="read-only"):
        kernels.fill(ro, 2.0)
    assert kernels.is_readonly(ManagedOnly([1.0], device=(CUDA, 0))) == 0


def test_new_tensor_comes_back_as_the_frameworks_tensor(fx, kernels):
    like = fx.tensor((1,), device=(EXTDEV, 2))
    fx.reset_stats()
    r = kernels.arange(4, like)
    assert isinstance(r, fx.Tensor)
    assert r.device == (EXTDEV, 2) and r.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert fx.stats()["allocations"] == 1
    del r


def test_new_tensor_failure_inside_kernel_releases_it(fx, kernels):
    like = fx.tensor((1,), device=(CUDA, 0))
    fx.reset_stats()
    with pytest.raises(RuntimeError, match="failed after allocating"):
        kernels.alloc_then_fail(like)
    s = fx.stats()
    assert s["allocations"] == 1 and s["deleted"] == 1


def test_allocator_error_reaches_python_through_set_error(fx, kernels):
    like = fx.tensor((1,), device=(CUDA, 0))
    with pytest.raises(TypeError):
        kernels.new_tensor(4, 16, 2, like)  # the fixture has no bfloat16


def _typed(fx, variant):
    class T(fx.Tensor):
        pass

    T.__name__ = T.__qualname__ = f"Fixture_{variant}"
    T.__dlpack_c_exchange_api__ = fx.table_capsule(variant)
    return T


def test_newer_major_walks_prev_api_to_a_major_1_table(fx, kernels, examples):
    T = _typed(fx, "v2_with_prev")
    t = T([5.0, 6.0], device=(CUDA, 0))
    fx.set_stream(CUDA, 0, 0x77)
    fx.reset_stats()
    assert kernels.sum(t) == 11.0
    assert examples.report.report_stream(t) == 0x77
    assert fx.stats()["v2_calls"] == 0


def test_newer_major_without_prev_api_is_a_clear_error_calling_nothing(fx, kernels):
    T = _typed(fx, "v2_only")
    fx.reset_stats()
    with pytest.raises(TypeError, match=r"argument 0 \(Fixture_v2_only\).*major version 2.*"
                                        r"no major-1 table"):
        kernels.noop(T((1,), device=(CUDA, 0)))
    assert fx.stats()["v2_calls"] == 0


@pytest.mark.parametrize("variant, missing", [
    ("null_allocator", "managed_tensor_allocator"),
    ("null_from_py", "managed_tensor_from_py_object_no_sync"),
    ("null_to_py", "managed_tensor_to_py_object_no_sync"),
    ("null_stream", "current_work_stream")])
def test_null_required_pointer_makes_the_table_unusable(fx, kernels, variant, missing):
    T = _typed(fx, variant)
    with pytest.raises(TypeError, match=f"unusable: required function {missing} is NULL"):
        kernels.noop(T((1,), device=(CUDA, 0)))


def test_attribute_that_is_not_a_capsule(fx, kernels):
    class T(fx.Tensor):
        __dlpack_c_exchange_api__ = 12345

    with pytest.raises(TypeError, match="must be a PyCapsule named 'dlpack_exchange_api'"):
        kernels.noop(T((1,), device=(CUDA, 0)))


def test_legacy_int_attribute(fx, kernels, examples):
    class Legacy(fx.Tensor):
        __dlpack_c_exchange_api__ = None  # hide the capsule of the base type

    Legacy.__c_dlpack_exchange_api__ = fx.table_address("full")
    t = Legacy([1.0, 2.0], device=(ROCM, 0))
    fx.set_stream(ROCM, 0, 0x99)
    fx.reset_stats()
    assert kernels.sum(t) == 3.0
    assert examples.report.report_stream(t) == 0x99
    assert fx.stats()["view_exports"] == 2

    class BadLegacy(fx.Tensor):
        __dlpack_c_exchange_api__ = None
        __c_dlpack_exchange_api__ = "0x1234"

    with pytest.raises(TypeError, match="must be an int address"):
        kernels.noop(BadLegacy((1,)))


def test_producer_errors_name_the_argument(fx, kernels):
    T = _typed(fx, "failing_export")
    with pytest.raises(BufferError, match=r"argument 1 \(Fixture_failing_export\): fixture "
                                          r"export refused"):
        kernels.noop(1, T((1,), device=(CUDA, 0)))
    S = _typed(fx, "failing_stream")
    with pytest.raises(RuntimeError, match="fixture stream query failed"):
        kernels.noop(S((1,), device=(CUDA, 0)))


def test_type_cache_follows_a_replaced_attribute(fx, kernels):
    class T(fx.Tensor):
        pass

    t = T((1,), device=(CUDA, 0))
    kernels.noop(t)  # cached: the full table
    T.__dlpack_c_exchange_api__ = fx.table_capsule("v2_only")
    with pytest.raises(TypeError, match="major version 2"):
        kernels.noop(t)
    T.__dlpack_c_exchange_api__ = fx.table_capsule("managed_only")
    fx.reset_stats()
    kernels.noop(t)
    assert fx.stats()["managed_exports"] == 1
    del T.__dlpack_c_exchange_api__  # back to the base class's table
    fx.reset_stats()
    kernels.noop(t)
    assert fx.stats()["view_exports"] == 1


def test_exchange_api_reports_the_table_in_force(fx):
    assert dlx.exchange_api(fx.Tensor) is not None
    assert dlx.exchange_api(fx.tensor((1,))) is not None
    T = _typed(fx, "v2_only")
    with pytest.raises(TypeError, match="major version 2"):
        dlx.exchange_api(T)


def test_dlpack_protocol_versioned_capsule_is_consumed(fx, kernels):
    class DLPackOnly:
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, **kw):
            return self.t.__dlpack__(**kw)

    t = fx.tensor([1.0, 2.0, 3.0], device=(CPU, 0))
    fx.reset_stats()
    assert kernels.sum(DLPackOnly(t)) == 6.0
    assert fx.last_dlpack_kwargs()["max_version"] == (1, 3)
    s = fx.stats()
    assert s["exported"] == 1 and s["deleted"] == 1
    ro = fx.tensor([1.0], device=(CPU, 0), readonly=True)
    assert kernels.is_readonly(DLPackOnly(ro)) == 1


def test_transposed_and_offset_fixture_views(fx, kernels):
    t = fx.tensor([float(i) for i in range(6)], device=(CUDA, 0))
    s = t.slice(2, 5)
    assert kernels.info(s, 3) == 8  # byte_offset of float32 element 2
    assert kernels.sum(s) == 2.0 + 3.0 + 4.0


def test_one_stream_overlay_per_process(fx):
    full = fx.table_capsule("full")
    overlay = dlx._core.stream_overlay(full)
    assert dlx._core.stream_overlay(full) is not None  # same native: fine
    assert dlx._core.stream_overlay(overlay) is overlay  # already an overlay
    with pytest.raises(RuntimeError, match="already in force over another native table"):
        dlx._core.stream_overlay(fx.table_capsule("managed_only"))


def test_type_cache_follows_a_table_set_on_the_metaclass(fx, kernels):
    class Meta(type):
        pass

    class W(metaclass=Meta):
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, **kw):
            return self.t.__dlpack__(**kw)

    w = W(fx.tensor([1.0], device=(CPU, 0)))
    assert kernels.sum(w) == 1.0  # cached: the __dlpack__ path
    Meta.__dlpack_c_exchange_api__ = fx.table_capsule("full")
    with pytest.raises(TypeError, match="argument 0"):  # now the table (which wants a fixture Tensor)
        kernels.sum(w)


def test_a_lazy_setup_that_does_not_apply_breaks_nothing(kernels):
    import json  # noqa: F401  (imported, but has no such type)

    dlx._core.register_lazy_setup("json", "NoSuchType", lambda: None)
    assert kernels.sum(bytearray(b"\x01\x02")) == 3.0
