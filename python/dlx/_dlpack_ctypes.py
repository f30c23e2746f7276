"""ctypes mirrors of the DLPack 1.3 structs, for calling exchange tables from Python
(the table checker, `python -m dlx check`, and dlx's own tests).

Table functions are declared with PYFUNCTYPE: the contract says they run with the GIL held,
and ctypes then raises the exception a failing function left set. A PyObject* a table
writes into a py_object out-parameter is a new reference that ctypes never releases: take
it with `take()`. The view function is a plain address (None when NULL): call it through
`VIEW(address)`.
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
VIEW = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(DLTensor))
STREAM = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32,
                           ctypes.POINTER(ctypes.c_void_p))

READ_ONLY, IS_COPIED, IS_SUBBYTE_TYPE_PADDED = 1 << 0, 1 << 1, 1 << 2
CAPSULE_NAME = b"dlpack_exchange_api"


class DLPackExchangeAPIHeader(ctypes.Structure):
    pass


DLPackExchangeAPIHeader._fields_ = [("version", DLPackVersion),
                                    ("prev_api", ctypes.c_void_p)]


class ExchangeAPI(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("prev_api", ctypes.c_void_p),
                ("managed_tensor_allocator", ALLOC), ("managed_tensor_from_py_object_no_sync", FROM_PY),
                ("managed_tensor_to_py_object_no_sync", TO_PY),
                ("dltensor_from_py_object_no_sync", ctypes.c_void_p),
                ("current_work_stream", STREAM)]


REQUIRED = ("managed_tensor_allocator", "managed_tensor_from_py_object_no_sync",
            "managed_tensor_to_py_object_no_sync", "current_work_stream")

_api = ctypes.pythonapi
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.Py_DecRef.argtypes = [ctypes.py_object]


def capsule_name(capsule):
    """The name of a PyCapsule (bytes or None); TypeError for anything else."""
    if type(capsule).__name__ != "PyCapsule":
        raise TypeError(f"expected a PyCapsule, got {type(capsule).__name__}")
    return _api.PyCapsule_GetName(capsule)


def capsule_address(capsule, name=CAPSULE_NAME):
    """The pointer a capsule holds under `name`."""
    return _api.PyCapsule_GetPointer(capsule, name)


def new_capsule(address, name=CAPSULE_NAME):
    """A capsule holding `address` with no destructor (the name must outlive it: a
    module-level bytes constant does)."""
    return _api.PyCapsule_New(address, name, None)


def table_at(address):
    """The ExchangeAPI at `address`."""
    return ctypes.cast(address, ctypes.POINTER(ExchangeAPI)).contents


def header_at(address):
    return ctypes.cast(address, ctypes.POINTER(DLPackExchangeAPIHeader)).contents


def table_of(capsule):
    """The ExchangeAPI a "dlpack_exchange_api" capsule points to."""
    return table_at(capsule_address(capsule))


def take(obj):
    """The object of a py_object out-parameter, dropping the reference ctypes leaked."""
    value = obj.value
    _api.Py_DecRef(value)
    return value


def implausible_address(address):
    """Why `address` cannot be a table (or a header in a prev_api chain), or None.
    Only what can be told without reading: NULL, the first page, misalignment, sign."""
    if not isinstance(address, int) or isinstance(address, bool):
        return f"not an int ({type(address).__name__})"
    if address < 0 or address >= 1 << 64:
        return f"{address:#x} is not a pointer value"
    if address < 4096:
        return f"{address:#x} lies in the first page"
    if address % ctypes.alignment(ctypes.c_void_p):
        return f"{address:#x} is not aligned for a struct of pointers"
    return None
