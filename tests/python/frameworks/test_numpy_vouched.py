"""numpy.ndarray vouched for from the start of every call (issue 33, item 3): once the type
cache has found ndarray on dlx's numpy provider, a call's first array is viewed in line
without a cache lookup, as later arrays were already. Every check still fires on that
first array: dtype, shape, writability (`mut`), strides that are not whole elements; and
a provider registered for ndarray afterwards takes over at once."""
import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

from conftest import BUILD, run_python


@pytest.fixture(scope="module")
def lib():
    import dlx

    return dlx.load(BUILD / "kernels" / "compile_kernels.so")


@pytest.fixture(scope="module")
def plain():
    import dlx

    return dlx.load(BUILD / "kernels" / "test_kernels.so")


def _warm(lib):
    x, out = np.ones(4, np.float32), np.zeros(4, np.float32)
    lib.add3(x, x, out)  # ndarray now vouched for
    assert out.tolist() == [2.0] * 4
    return x, out


def test_first_array_dtype(lib):
    x, out = _warm(lib)
    with pytest.raises(TypeError, match=r"^add3\(\): 'x' must be f32\[n\], got dtype f64$"):
        lib.add3(x.astype(np.float64), x, out)


def test_first_array_shape(lib):
    x, out = _warm(lib)
    with pytest.raises(ValueError, match=r"^add3\(\): 'y' has n=4 where 'x' has n=5$"):
        lib.add3(np.ones(5, np.float32), x, out)


def test_read_only_mut(lib):
    x, _ = _warm(lib)
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match=r"'out' is read-only, but the kernel writes it"):
        lib.add3(x, x, ro)
    assert ro.tolist() == [0.0] * 4


@pytest.mark.parametrize("signed", [True, False])
def test_first_array_odd_stride(lib, plain, signed):
    x, out = _warm(lib)
    odd = as_strided(np.zeros(16, np.float32), shape=(4,), strides=(6,))
    with pytest.raises(BufferError, match="stride 6 of dimension 0 is not a multiple of the "
                                          "item size 4"):
        (lib.add3 if signed else plain.noop)(odd, x, out)


def test_unsigned_first_array_read_only_flag(lib, plain):
    _warm(lib)
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    assert plain.is_readonly(ro) == 1
    assert plain.is_readonly(np.zeros(4, np.float32)) == 0


def test_provider_registered_for_ndarray_takes_over():
    # torch's table registered for ndarray after ndarray was vouched for: the next call
    # asks that table, which refuses an ndarray (dlx's addon: TypeError; torch's own
    # table: RuntimeError), instead of the in-line numpy view
    r = run_python(
        "import numpy as np, dlx, os\n"
        "torch = __import__('torch')\n"
        "lib = dlx.load(os.path.join(os.environ['DLX_BUILD_DIR'], 'kernels', "
        "'compile_kernels.so'))\n"
        "x, out = np.ones(4, np.float32), np.zeros(4, np.float32)\n"
        "lib.add3(x, x, out)\n"
        "dlx.register_provider(np.ndarray, dlx.exchange_api(torch.Tensor))\n"
        "try:\n"
        "    lib.add3(x, x, out)\n"
        "    print('viewed')\n"
        "except Exception as e:\n"
        "    print('refused:', e)\n", check=False)
    if "No module named 'torch'" in r.stderr:
        pytest.skip("needs torch")
    assert r.returncode == 0, r.stderr
    assert "refused: add3(): 'x':" in r.stdout, r.stdout
