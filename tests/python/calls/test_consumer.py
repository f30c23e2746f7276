"""The consumer: loading kernels, converting arguments, errors, results."""
import array
import enum
import gc
import subprocess
import sys

import numpy as np
import pytest

import dlx

NONE, INT, BOOL, FLOAT, TENSOR = range(5)


def test_load_lists_only_dlx_kernels(kernels):
    assert "noop" in kernels.kernels and "sum" in kernels.kernels
    assert "not_a_kernel" not in kernels.kernels
    assert list(kernels.kernels) == sorted(kernels.kernels)
    assert all(callable(getattr(kernels, k)) for k in kernels.kernels)


def test_symbol_without_dlx_kernel_is_refused(kernels):
    with pytest.raises(AttributeError, match="not a dlx kernel.*DLX_KERNEL"):
        kernels.not_a_kernel
    with pytest.raises(AttributeError, match="has no kernel 'nope'"):
        kernels.nope


def test_load_errors(tmp_path):
    with pytest.raises(OSError):
        dlx.load(tmp_path / "missing.so")
    bad = tmp_path / "bad.so"
    bad.write_bytes(b"not an elf")
    with pytest.raises(OSError):
        dlx.load(bad)


@pytest.mark.parametrize("value, kind", [
    (None, NONE), (3, INT), (True, BOOL), (2.5, FLOAT), (np.ones(2), TENSOR),
    (np.float64(1.5), FLOAT), (np.int16(2), INT), (b"xy", TENSOR)])
def test_argument_kinds(kernels, value, kind):
    assert kernels.kind_of(value) == kind


def test_scalars_round_trip(kernels):
    assert kernels.echo_int(-(2**63)) == -(2**63)
    assert kernels.echo_int(True) == 1
    assert kernels.echo_float(3) == 3.0  # an int is accepted where a float is asked
    assert kernels.echo_float(0.25) == 0.25

    class Color(enum.IntEnum):
        RED = 7

    assert kernels.echo_int(Color.RED) == 7
    assert kernels.num_args(*range(10)) == 10


def test_int_overflow_names_the_argument(kernels):
    with pytest.raises(OverflowError, match="argument 1 .*64 bits"):
        kernels.noop(1, 2**64)


def test_unsupported_type_names_index_and_type(kernels):
    with pytest.raises(TypeError, match=r"^noop\(\): argument 2 \(dict\): unsupported type"):
        kernels.noop(1, 2, {})
    with pytest.raises(TypeError, match=r"^noop\(\): argument 0 \(object\): unsupported type"):
        kernels.noop(object())


def test_accessor_kind_mismatch_is_type_error(kernels):
    with pytest.raises(TypeError, match="argument 0: expected a tensor, got int"):
        kernels.want_tensor(1)
    with pytest.raises(TypeError, match="argument 0: expected an int, got float"):
        kernels.echo_int(1.5)
    with pytest.raises(TypeError, match="argument 0: expected a float, got None"):
        kernels.echo_float(None)
    with pytest.raises(IndexError, match="argument 2: out of range"):
        kernels.arg_out_of_range(1, 2)


def test_kernel_errors_become_named_exceptions(kernels):
    with pytest.raises(ValueError, match=r"^fail_value\(\): bad value 42$"):
        kernels.fail_value()
    with pytest.raises(RuntimeError, match="NoSuchError: custom failure"):
        kernels.fail_unknown_kind()
    with pytest.raises(RuntimeError, match=r"^fail_silently\(\): the kernel failed \(returned -1\)"):
        kernels.fail_silently()
    assert kernels.return_twice() == (1, 2)  # several results: a tuple in call order


def test_too_many_args_and_keywords(kernels):
    with pytest.raises(TypeError, match="at most 64"):
        kernels.noop(*range(65))
    with pytest.raises(TypeError, match=r"^noop\(\) takes no keyword arguments"):
        kernels.noop(x=1)


def test_buffer_protocol_arguments(kernels):
    assert kernels.sum(b"\x01\x02\x03") == 6.0
    assert kernels.is_readonly(b"abc") == 1
    ba = bytearray(b"\x00" * 4)
    assert kernels.is_readonly(ba) == 0
    kernels.fill(ba, 9)
    assert ba == bytearray(b"\x09" * 4)
    arr = array.array("d", [1.0, 2.0, 3.5])
    assert kernels.sum(arr) == 6.5
    assert kernels.info(arr, 1) == 2 and kernels.info(arr, 2) == 64
    mv = memoryview(np.arange(12, dtype=np.int32).reshape(3, 4)[:, 1:3])
    assert kernels.sum(mv) == np.arange(12).reshape(3, 4)[:, 1:3].sum()
    assert kernels.info(mv, 20) == 4 and kernels.info(mv, 21) == 1


def test_buffer_with_unsupported_format(kernels):
    with pytest.raises(BufferError, match="argument 0 .*format"):
        kernels.noop(memoryview(np.zeros(2, dtype=[("a", "i4"), ("b", "f4")])))


class DLPackOnly:
    """A producer that speaks only the __dlpack__ protocol."""

    def __init__(self, inner):
        self.inner = inner
        self.calls = []

    def __dlpack__(self, **kw):
        self.calls.append(kw)
        return self.inner.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.inner.__dlpack_device__()


def test_dlpack_protocol_falls_back_to_legacy_capsule(kernels):
    a = np.arange(6, dtype=np.float32)
    p = DLPackOnly(a)
    assert kernels.sum(p) == 15.0
    if int(np.__version__.split(".")[0]) >= 2:  # numpy 2 speaks versioned DLPack
        assert p.calls == [{"max_version": (1, 3)}]
    else:  # numpy 1.24 rejects max_version; dlx asked for (1, 3) first, then retried
        assert p.calls == [{"max_version": (1, 3)}, {}]
    kernels.fill(p, 2.0)
    assert a.tolist() == [2.0] * 6


def test_torch_tensors_through_the_dlpack_protocol(kernels):
    from conftest import run_python

    pytest.importorskip("torch")

    out = run_python(
        "import dlx, torch, os\n"
        "k = dlx.load(os.environ['DLX_BUILD_DIR'] + '/kernels/test_kernels.so')\n"
        "if torch.Tensor.__dict__.get('__dlpack_c_exchange_api__') is not None:\n"
        "    torch.Tensor.__dlpack_c_exchange_api__ = None  # torch 2.x: no table, dlx reads\n"
        "t = torch.arange(6, dtype=torch.float32).reshape(2, 3).t()\n"
        "print(k.sum(t), k.info(t, 20), k.info(t, 21), dlx.exchange_api(torch.Tensor))\n",
        env={"DLX_DISABLE_TORCH_ADDON": "1"})
    assert out.stdout.split() == ["15.0", "1", "3", "None"]


def test_type_cache_hits_without_lookups(kernels):
    a = np.ones(3)
    kernels.noop(a)
    before = dlx._core._stats()["type_lookups"]
    for _ in range(100):
        kernels.noop(a, a, 1, 2.0)
    assert dlx._core._stats()["type_lookups"] == before


def test_include_dir_and_cli():
    import os

    inc = dlx.include_dir()
    assert os.path.isfile(os.path.join(inc, "dlx", "dlx.h"))
    assert os.path.isfile(os.path.join(inc, "dlx", "dlpack.h"))
    out = subprocess.run([sys.executable, "-m", "dlx", "--include-dir"], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == inc


def test_build_addon_without_torch_says_so():
    from conftest import run_python

    # torch made unimportable in the child (None in sys.modules), whatever this one has
    r = run_python("import runpy, sys\n"
                   "sys.modules['torch'] = None\n"
                   "sys.argv = ['dlx', 'build-addon']\n"
                   "runpy.run_module('dlx', run_name='__main__')\n", check=False)
    assert r.returncode == 2, r.stderr
    assert "build-addon needs torch" in r.stderr and "Traceback" not in r.stderr


def test_kernel_built_with_headers_alone(tmp_path):
    src = tmp_path / "k.c"
    src.write_text(
        "#include <dlx/dlx.h>\n"
        "DLX_KERNEL(twice) { int64_t v; if (dlx_arg_int(call, 0, &v)) return -1;\n"
        "  return dlx_return_int(call, 2 * v); }\n")
    so = tmp_path / "k.so"
    subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
                    "-I", dlx.include_dir(), str(src), "-o", str(so)], check=True)
    nm = subprocess.run(["nm", "-D", "--undefined-only", str(so)], capture_output=True, text=True)
    assert "dlx" not in nm.stdout  # links nothing of dlx
    lib = dlx.load(so)
    assert lib.kernels == ("twice",) and lib.twice(21) == 42


def _upstream_style_header(tmp_path, minor):
    """A dlpack/dlpack.h laid out like upstream's (same guard and names), made from the
    ABI part of dlx's own header, optionally claiming an older minor version."""
    import os

    text = open(os.path.join(dlx.include_dir(), "dlx", "dlpack.h")).read()
    abi = text[: text.index("#endif /* DLPACK_DLPACK_H_ */") + len("#endif /* DLPACK_DLPACK_H_ */")]
    abi = abi.replace("#define DLPACK_MINOR_VERSION 3", f"#define DLPACK_MINOR_VERSION {minor}")
    (tmp_path / "dlpack").mkdir()
    (tmp_path / "dlpack" / "dlpack.h").write_text(abi + "\n")


@pytest.mark.parametrize("compiler, std, ext", [("cc", "-std=c11", "c"), ("c++", "-std=c++17", "cc")])
def test_upstream_header_included_first(tmp_path, compiler, std, ext):
    _upstream_style_header(tmp_path, 3)
    src = tmp_path / f"k.{ext}"
    src.write_text("#include <dlpack/dlpack.h>\n#include <dlx/dlx.h>\n"
                   "DLX_KERNEL(one) { return dlx_return_int(call, 1); }\n")
    so = tmp_path / "k.so"
    subprocess.run([compiler, std, "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
                    "-I", str(tmp_path), "-I", dlx.include_dir(), str(src), "-o", str(so)],
                   check=True)
    assert dlx.load(so).one() == 1


def test_too_old_upstream_header_is_rejected_clearly(tmp_path):
    _upstream_style_header(tmp_path, 1)
    src = tmp_path / "k.c"
    src.write_text("#include <dlpack/dlpack.h>\n#include <dlx/dlx.h>\n")
    r = subprocess.run(["cc", "-c", "-I", str(tmp_path), "-I", dlx.include_dir(), str(src),
                        "-o", str(tmp_path / "k.o")], capture_output=True, text=True)
    assert r.returncode != 0 and "dlx needs DLPack 1.2 or newer" in r.stderr


def test_no_leaks_on_error_paths(kernels):
    a = np.ones(3)
    before = sys.getrefcount(a)
    for _ in range(50):
        with pytest.raises(TypeError):
            kernels.noop(a, a, object())
        with pytest.raises(ValueError):
            kernels.fail_value(a, a)
    gc.collect()
    assert sys.getrefcount(a) == before


def test_reloading_a_rebuilt_library_gets_the_new_code(tmp_path):
    src = tmp_path / "k.c"
    so = tmp_path / "k.so"

    def build(version, extra=""):
        src.write_text("#include <dlx/dlx.h>\n"
                       f"DLX_KERNEL(ver) {{ return dlx_return_int(call, {version}); }}\n" + extra)
        tmp = tmp_path / "k.tmp.so"
        subprocess.run(["cc", "-shared", "-fPIC", "-I", dlx.include_dir(), str(src), "-o",
                        str(tmp)], check=True)
        os.replace(tmp, so)

    import os

    build(1)
    assert dlx.load(so).ver() == 1
    build(2, "DLX_KERNEL(newk) { return dlx_return_int(call, 7); }\n")
    lib = dlx.load(so)
    assert lib.kernels == ("newk", "ver") and lib.ver() == 2 and lib.newk() == 7


def test_numpy_scalars_are_scalars(kernels):
    assert kernels.kind_of(np.int64(3)) == INT and kernels.echo_int(np.int32(-4)) == -4
    assert kernels.kind_of(np.float32(0.5)) == FLOAT and kernels.echo_float(np.float32(0.5)) == 0.5


def test_producer_exception_that_cannot_take_a_message_is_kept(kernels):
    class Picky(Exception):
        def __init__(self, a, b):
            super().__init__(a, b)

    class P:
        def __dlpack__(self, **kw):
            raise Picky(1, 2)

    with pytest.raises(Picky) as info:
        kernels.noop(P())
    assert any("argument 0" in n for n in getattr(info.value, "__notes__", []))
