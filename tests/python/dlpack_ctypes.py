"""ctypes mirrors of the DLPack 1.3 structs, for tests that call exchange tables directly.

Table functions are declared with PYFUNCTYPE: the contract says they run with the GIL held.
A PyObject* a table writes into a py_object out-parameter is a new reference that ctypes
never releases: take it with `take()`.
"""
import ctypes


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER),
    ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]
SETERROR = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)
ALLOC = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.POINTER(DLTensor),
                          ctypes.POINTER(ctypes.POINTER(DLManagedTensorVersioned)),
                          ctypes.c_void_p, SETERROR)
FROM_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object,
                            ctypes.POINTER(ctypes.POINTER(DLManagedTensorVersioned)))
TO_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.POINTER(DLManagedTensorVersioned),
                          ctypes.POINTER(ctypes.py_object))
STREAM = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32,
                           ctypes.POINTER(ctypes.c_void_p))


class ExchangeAPI(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("prev_api", ctypes.c_void_p),
                ("managed_tensor_allocator", ALLOC), ("managed_tensor_from_py_object_no_sync", FROM_PY),
                ("managed_tensor_to_py_object_no_sync", TO_PY),
                ("dltensor_from_py_object_no_sync", ctypes.c_void_p),
                ("current_work_stream", STREAM)]



def table_of(capsule):
    """The ExchangeAPI a "dlpack_exchange_api" capsule points to."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return ctypes.cast(get(capsule, b"dlpack_exchange_api"), ctypes.POINTER(ExchangeAPI)).contents


def take(obj):
    """The object of a py_object out-parameter, dropping the reference ctypes leaked."""
    value = obj.value
    ctypes.pythonapi.Py_DecRef.argtypes = [ctypes.py_object]
    ctypes.pythonapi.Py_DecRef(value)
    return value
