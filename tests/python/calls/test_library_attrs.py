"""lib.NAME: the remembered lookups of dlx.Library give what the generic lookup gives,
also after attributes are set or deleted; each library's own type."""
import gc
import pydoc
import subprocess
import sys
import textwrap
import weakref

import pytest


@pytest.fixture()
def lib(build_dir):
    import dlx

    return dlx.load(build_dir / "kernels" / "test_kernels.so")  # a fresh object per test


def test_every_kernel_by_name_twice(lib):
    for _ in range(2):  # the second round is served by the remembered hits
        for name in lib.kernels:
            assert getattr(lib, name).__name__ == name
            assert getattr(lib, "".join(name)) is getattr(lib, name)  # not the same str object


def test_set_and_delete_are_seen(lib):
    kernel = lib.noop
    assert lib.noop is kernel
    lib.noop = 5
    assert lib.noop == 5
    with pytest.raises(AttributeError, match="cannot delete kernel 'noop'"):
        del lib.noop  # the kernels are the library's (issue 25)
    assert lib.noop == 5
    type(lib).__dict__["noop"].__delete__(lib)  # a slot emptied behind dlx's back is seen
    with pytest.raises(AttributeError, match="noop"):
        lib.noop
    lib.extra = "x"
    assert lib.extra == "x"
    lib.noop = kernel
    assert lib.noop is kernel and lib.noop() is None


def test_type_attributes_keep_precedence(lib, build_dir):
    assert lib.path.endswith("test_kernels.so")
    assert "noop" in lib.kernels
    with pytest.raises(AttributeError):
        lib.path = "elsewhere"
    assert lib.path.endswith("test_kernels.so")
    with pytest.raises(AttributeError, match="has no kernel 'missing'"):
        lib.missing


# ---- each library is an instance of a type of its own, with a slot per kernel -------------

def _compile(tmp_path, name, body):
    import dlx

    src = tmp_path / f"{name}.c"
    src.write_text("#include <dlx/dlx.h>\n" + textwrap.dedent(body))
    so = tmp_path / f"{name}.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-I", dlx.include_dir(), str(src), "-o", str(so)],
                   check=True)
    return so


def test_libraries_do_not_see_each_others_kernels(lib, build_dir):
    import dlx

    other = dlx.load(build_dir / "kernels" / "sig_kernels.so")
    assert isinstance(lib, dlx.Library) and isinstance(other, dlx.Library)
    assert type(lib) is not type(other) and type(lib).__name__ == "Library"
    assert repr(other).startswith(f"<dlx.Library {other.path!r} kernels=(")
    assert sorted(dir(other)) == sorted(other.kernels + ("kernels", "path"))
    name = sorted(set(other.kernels) - set(lib.kernels))[0]
    assert getattr(other, name).__name__ == name
    for _ in range(2):  # the second time from the remembered lookups, where there are any
        with pytest.raises(AttributeError, match=f"has no kernel '{name}'"):
            getattr(lib, name)
    assert "Library" in pydoc.render_doc(other)  # help(lib) works


def test_same_file_twice_two_independent_objects(build_dir):
    import dlx

    a = dlx.load(build_dir / "kernels" / "test_kernels.so")
    b = dlx.load(build_dir / "kernels" / "test_kernels.so")
    kernel = b.noop
    a.noop = 5
    assert a.noop == 5 and b.noop is kernel
    type(b).__dict__["noop"].__delete__(b)
    assert a.noop == 5
    with pytest.raises(AttributeError, match="noop"):
        b.noop


def test_the_library_type_cannot_be_changed(lib):
    with pytest.raises(TypeError):
        type(lib).noop = 1
    with pytest.raises(TypeError):
        del type(lib).noop
    assert lib.noop.__name__ == "noop"


def test_kernels_named_like_library_attributes(tmp_path):
    import dlx

    so = _compile(tmp_path, "clash", """
        DLX_KERNEL(path) { return dlx_return_int(call, 1); }
        DLX_KERNEL(kernels) { return dlx_return_int(call, 2); }
        DLX_KERNEL(__dir__) { return dlx_return_int(call, 3); }
        DLX_KERNEL(__hidden) { return dlx_return_int(call, 4); }
        DLX_KERNEL(plain) { return dlx_return_int(call, 5); }
    """)
    lib = dlx.load(so)
    assert lib.kernels == ("__dir__", "__hidden", "kernels", "path", "plain")
    for _ in range(2):
        # the type's data descriptors win over the instance attribute, as they always did
        assert lib.path == str(so) and lib.kernels[-1] == "plain"
        # an instance attribute wins over a method of the type
        assert lib.__dir__() == 3 and sorted(dir(lib)) == sorted(lib.kernels + ("kernels", "path"))
        assert lib.__hidden() == 4 and lib.plain() == 5
    with pytest.raises(AttributeError):
        lib.path = "elsewhere"


def test_kernels_outlive_their_library_and_types_are_freed(build_dir):
    # In a fresh interpreter: under free-threaded 3.13 a type's references from other
    # threads are merged only when those threads end, so what earlier tests' threads left
    # behind would keep these types alive in this process.
    script = textwrap.dedent(f"""
        import gc, weakref, dlx
        types = []
        for _ in range(20):
            lib = dlx.load({str(build_dir / "kernels" / "test_kernels.so")!r})
            noop = lib.noop
            assert lib.noop() is None
            types.append(weakref.ref(type(lib)))
        del lib
        gc.collect()
        assert noop() is None and noop.__name__ == "noop"
        alive = [t for t in types if t() is not None]
        assert alive == [], f"{{len(alive)}} library types outlived their libraries"
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


@pytest.mark.skipif(sys.version_info < (3, 12), reason="3.11 specializes no lookup on a type "
                    "with its own tp_getattro or __getattr__ (library.c's top comment)")
@pytest.mark.skipif(sys.version_info < (3, 14) and
                    bool(__import__("sysconfig").get_config_var("Py_GIL_DISABLED")),
                    reason="free-threaded 3.13 does not specialize bytecode at all")
def test_lib_k_call_is_specialized_to_a_slot_load(lib):
    import dis
    import io

    def loop(lib):
        for _ in range(100):
            lib.noop()

    for _ in range(5):
        loop(lib)
    out = io.StringIO()
    dis.dis(loop, adaptive=True, file=out)
    assert "LOAD_ATTR_SLOT" in out.getvalue(), out.getvalue()
