"""What the stand-in backend tests run inside their subprocesses (a fresh interpreter per
scenario: dlx.torch.install() decides once per process).

Imported only there, with build/python, build/fixtures and tests/python on sys.path.
Everything returns plain data (ints, lists, dicts) the test process asserts on.
"""
import ctypes
import os
import threading

import dlx
import dlx.torch
from dlx import _core
from dlpack_ctypes import (DELETER, STREAM, DLDataType, DLDevice, DLManagedTensorVersioned,
                           DLTensor, ExchangeAPI, table_of, take)

BUILD = os.environ["DLX_BUILD_DIR"]
kDLCPU, kDLCUDA, kDLROCM, kDLExtDev = 1, 2, 10, 12


class _Counted:
    """A kernel library whose calls are counted (every call with a non-CPU tensor asks
    for the stream exactly once, so the count is what the stream sources must see)."""

    def __init__(self, lib):
        self._lib, self._lock, self.calls = lib, threading.Lock(), 0

    def __getattr__(self, name):
        kernel = getattr(self._lib, name)

        def call(*args):
            with self._lock:
                self.calls += 1
            return kernel(*args)

        return call


_report = None


def report():
    """The example kernels that hand back what dlx gave them (stream, device), counted."""
    global _report
    if _report is None:
        _report = _Counted(dlx.load(os.path.join(BUILD, "examples", "stream_report.so")))
    return _report


def kernels():
    return dlx.load(os.path.join(BUILD, "kernels", "test_kernels.so"))


def counters():
    """(getCurrentNPUStream calls in C++, dlx runtime-provider calls) so far."""
    import torch_npu

    return torch_npu.current_stream_calls(), _core.provider_info()["calls"]


def npu_stream_checks():
    """Which stream a kernel gets for a PrivateUse1 (kDLExtDev) torch tensor: outside any
    context, inside `with torch.npu.stream(s):`, nested, after leaving, on device 1,
    and on two threads at once. Assertions are the caller's."""
    import torch

    rep = report()
    start = rep.calls
    t = torch.ones(8, device="privateuseone")
    out = {"device_type": rep.report_device_type(t), "device_id": rep.report_device_id(t),
           "default": torch.npu.default_stream().npu_stream, "before": rep.report_stream(t)}
    s, s2 = torch.npu.Stream(), torch.npu.Stream()
    out["s"], out["s2"] = s.npu_stream, s2.npu_stream
    with torch.npu.stream(s):
        out["inside"] = rep.report_stream(t)
        out["inside_view"] = rep.report_stream(t.view(2, 4)[1:, ::2])
        out["inside_current"] = torch.npu.current_stream().npu_stream
        with torch.npu.stream(s2):
            out["nested"] = rep.report_stream(t)
        out["after_nested"] = rep.report_stream(t)
    out["after"] = rep.report_stream(t)

    # Device 1: its own current stream, and the device id reaches the query.
    t1 = torch.ones(2, device="privateuseone:1")
    s1 = torch.npu.Stream(1)
    out["s1"], out["default1"] = s1.npu_stream, torch.npu.default_stream(1).npu_stream
    with torch.npu.stream(s1):
        out["dev1_id"] = rep.report_device_id(t1)
        out["dev1_inside"] = rep.report_stream(t1)
        out["dev0_while_dev1_set"] = rep.report_stream(t)
    out["dev1_after"] = rep.report_stream(t1)

    # Two threads, each inside its own stream context at the same time.
    barrier = threading.Barrier(2, timeout=60)
    threads_out, errors = {}, []

    def worker(name):
        try:
            mine = torch.npu.Stream()
            seen = []
            with torch.npu.stream(mine):
                barrier.wait()  # both contexts are entered before either calls
                for _ in range(300):
                    seen.append(rep.report_stream(t))
                barrier.wait()  # and neither leaves before both are done
            threads_out[name] = {"own": mine.npu_stream, "seen": sorted(set(seen)),
                                 "after": rep.report_stream(t)}
        except Exception as e:  # reported, not lost in the thread
            errors.append(repr(e))

    with torch.npu.stream(s):  # the main thread's choice must not leak into the workers
        workers = [threading.Thread(target=worker, args=(n,)) for n in ("a", "b")]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        out["main_during_threads"] = rep.report_stream(t)
    out["threads"], out["thread_errors"] = threads_out, errors
    out["main_after_threads"] = rep.report_stream(t)
    out["kernel_calls"] = rep.calls - start
    return out


def tensor_checks():
    """Kernels on PrivateUse1 tensors read and write the very memory torch sees, and a new
    tensor made by a kernel comes back as a torch tensor on that device."""
    import torch

    k = kernels()
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4).to("privateuseone")
    view = base.t()[1:]  # strided, with an offset
    k.fill(view[:, 0], -1.0)  # writes column 0 of the transpose's rows 1.. = base[0, 1:]
    made = k.arange(5, base)
    return {"sum": k.sum(base), "sum_view": k.sum(view), "device": str(base.device),
            "after_fill": base.to("cpu").tolist(), "made_device": str(made.device),
            "made": made.to("cpu").tolist()}


def install_and_check():
    """dlx.torch.install() over the table torch.Tensor has now, then the NPU stream and
    tensor checks through what it put in force. Returns (checks, table before, table
    after); the checks' dict also holds the record, the counters before and after, whether
    the table was replaced and whether it is the one dlx uses."""
    import torch

    native = torch.Tensor.__dlpack_c_exchange_api__
    rec = dlx.torch.install()
    cap = torch.Tensor.__dlpack_c_exchange_api__
    c0 = counters()
    out = npu_stream_checks()
    c1 = counters()
    out.update(record=rec._asdict(), counters=[c0, c1], tensors=tensor_checks(),
               replaced=address(cap) != address(native),
               in_force=address(dlx.exchange_api(torch.Tensor)) == address(cap))
    return out, native, cap


def set_table(capsule):
    import torch

    torch.Tensor.__dlpack_c_exchange_api__ = capsule


def simulate_native_table():
    """Give torch.Tensor a 'native' exchange table as a torch that ships one would: the
    cpu addon's conversions, its own current_work_stream that knows nothing of NPUs
    (NULL for everything but kDLCUDA, where it answers 0xC0DA0000 + id). Returns the
    log of the (device_type, device_id) queries that reached the native function."""
    _, _, cpu = dlx.torch.ensure_addon("cpu")
    native = ExchangeAPI.from_buffer_copy(
        ctypes.string_at(ctypes.addressof(table_of(cpu)), ctypes.sizeof(ExchangeAPI)))
    log = []

    @STREAM
    def native_stream(device_type, device_id, out):
        log.append((device_type, device_id))
        out[0] = 0xC0DA0000 + device_id if device_type == kDLCUDA else None
        return 0

    native.current_work_stream = native_stream  # the struct keeps the callback alive
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p,
                                                   ctypes.c_void_p]
    capsule = new(ctypes.addressof(native), b"dlpack_exchange_api", None)
    _keep.append((native, native_stream, capsule))
    set_table(capsule)
    return log


_keep = []


def address(capsule):
    """The table a capsule points to, as an int (capsules are compared by it)."""
    return ctypes.addressof(table_of(capsule))


def functions(capsule):
    """The table's function pointers by name, as ints (0 for NULL)."""
    api = table_of(capsule)
    return {name: ctypes.cast(getattr(api, name), ctypes.c_void_p).value or 0
            for name, _ in ExchangeAPI._fields_ if name not in ("version", "prev_api")}


def ask(capsule, device_type, device_id):
    """current_work_stream of the table in `capsule`, called directly: (rc, stream)."""
    s = ctypes.c_void_p()
    rc = table_of(capsule).current_work_stream(device_type, device_id, ctypes.byref(s))
    return rc, s.value or 0


def foreign_torch_tensor(capsule, device_type, device_id, values):
    """A torch.Tensor that claims `device_type:device_id` (e.g. cuda:1 on a CPU-only torch),
    made by importing a DLPack tensor over host memory through the table's
    managed_tensor_to_py_object_no_sync. Only metadata and kernels touch it."""
    import numpy as np

    buf = np.asarray(values, dtype=np.float32)
    shape = (ctypes.c_int64 * 1)(buf.size)
    strides = (ctypes.c_int64 * 1)(1)
    deleted = []

    @DELETER
    def deleter(_):
        deleted.append(1)

    m = DLManagedTensorVersioned()
    m.version.major, m.version.minor = 1, 3
    m.deleter = deleter
    m.dl_tensor = DLTensor(buf.ctypes.data, DLDevice(device_type, device_id), 1,
                           DLDataType(2, 32, 1), shape, strides, 0)
    out = ctypes.py_object()
    rc = table_of(capsule).managed_tensor_to_py_object_no_sync(ctypes.pointer(m),
                                                               ctypes.byref(out))
    if rc != 0:
        raise RuntimeError("import failed")
    _keep.append((buf, shape, strides, deleter, m))
    return take(out), deleted
