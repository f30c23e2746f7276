"""lib.NAME: the remembered lookups of dlx.Library give what the generic lookup gives,
also after attributes are set or deleted."""
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
    del lib.noop
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
