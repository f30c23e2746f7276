"""Saved programs (jax.md, "Saved programs"): a jax.export program holding dlx kernels names
each kernel by content (its library's sha256, its name and its declaration), runs in a new
process wherever that library is loaded or in dlx's cache, and nowhere else: never another
library's kernel of the same name, never a program altered since it was staged. Each "new
process" case runs in a child process (so do the ones that feed XLA damaged programs)."""
import hashlib
import os
import shutil
import textwrap

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="JAX is installed in the venv only (make venv)")
pytest.importorskip("flatbuffers", reason="jax.export serialization needs flatbuffers")
import jax.numpy as jnp  # noqa: E402

import dlx  # noqa: E402
import dlx.jax  # noqa: E402
from conftest import BUILD, run_python  # noqa: E402

KERNELS = BUILD / "kernels" / "compile_kernels.so"

# Another library with a kernel of the same name and declaration: -x, not x * x.
NEG_SQUARE = textwrap.dedent("""\
    #include <dlx/dlx.h>
    DLX_KERNEL(square, "x: f32|f64[...] -> f32|f64[...]") {
      DLTensor *x, *out;
      if (dlx_arg_tensor(call, 0, &x) ||
          dlx_return_new_tensor(call, x->device, x->ndim, x->shape, x->dtype, &out))
        return -1;
      int64_t n = 1;
      for (int32_t d = 0; d < x->ndim; ++d) n *= x->shape[d];
      for (int64_t i = 0; i < n; ++i) ((float *)out->data)[i] = -((float *)x->data)[i];
      return 0;
    }
    """)
# A library only dlx's cache holds (load_inline): found there by digest.
CACHED = textwrap.dedent("""\
    #include <dlx/dlx.h>
    DLX_KERNEL(triple, "x: f32[n] -> f32[n]") {
      DLTensor *x, *out;
      if (dlx_arg_tensor(call, 0, &x) ||
          dlx_return_new_tensor(call, x->device, 1, x->shape, x->dtype, &out))
        return -1;
      for (int64_t i = 0; i < x->shape[0]; ++i) ((float *)out->data)[i] = 3 * ((float *)x->data)[i];
      return 0;
    }
    """)


def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.fixture(scope="module")
def ck():
    return dlx.load(KERNELS)


@pytest.fixture(scope="module")
def neg():
    return dlx.load_inline(NEG_SQUARE, name="neg_square")


X = np.arange(1, 5, dtype=np.float32)


def saved(tmp_path, fn, *specs, name="prog.bin"):
    """fn exported with dlx's helper, serialized to a file; (path, the in-process result)."""
    exp = dlx.jax.export(fn)(*specs)
    path = tmp_path / name
    path.write_bytes(exp.serialize())
    return path, exp


def child(prog, before="", expect_error=None, args="x", x=X):
    """Run the saved program in a new process (after `before`); its result, or the
    JaxRuntimeError's message when expect_error (which it must contain)."""
    code = textwrap.dedent(f"""\
        import sys, numpy as np, jax, jax.numpy as jnp, dlx, dlx.jax
        x = np.array({x.tolist()!r}, dtype=np.float32)
        """) + textwrap.dedent(before) + textwrap.dedent(f"""\
        exp = jax.export.deserialize(open({str(prog)!r}, "rb").read())
        try:
            out = exp.call({args})
            print("RESULT", np.asarray(out).tolist())
        except Exception as e:
            print("ERROR", type(e).__name__, str(e).replace(chr(10), " "))
        """)
    out = run_python(code).stdout
    line = [ln for ln in out.splitlines() if ln.startswith(("RESULT", "ERROR"))][-1]
    if expect_error is None:
        assert line.startswith("RESULT"), out
        return np.array(eval(line[len("RESULT "):]), dtype=np.float32)
    assert line.startswith("ERROR"), out
    for words in ([expect_error] if isinstance(expect_error, str) else expect_error):
        assert words in line, line
    return line


# ---- the round trip ------------------------------------------------------------------------

def test_export_needs_no_disabled_check_with_the_helper(ck):
    f = jax.jit(lambda x: ck.square(x) + 1)
    spec = jax.ShapeDtypeStruct(X.shape, jnp.float32)
    with pytest.raises(ValueError, match="dlx_kernel"):  # jax.export's own check
        jax.export.export(f)(spec)
    exp = jax.export.export(f, disabled_checks=[
        jax.export.DisabledSafetyCheck.custom_call("dlx_kernel")])(spec)
    np.testing.assert_array_equal(exp.call(X), X * X + 1)
    np.testing.assert_array_equal(dlx.jax.export(f)(spec).call(X), X * X + 1)
    np.testing.assert_array_equal(dlx.jax.export(lambda x: ck.square(x) + 1)(spec).call(X),
                                  X * X + 1)  # not jitted yet: the helper jits it


def test_staged_call_names_the_kernel_by_content(ck):
    text = dlx.jax.export(ck.square)(jax.ShapeDtypeStruct((4,), jnp.float32)).mlir_module()
    assert f'dlx_lib = "{sha256(KERNELS)}"' in text
    assert 'dlx_name = "square"' in text and f'dlx_decl = "{ck.square.signature}"' in text
    assert f'dlx_from = "{KERNELS}"' in text
    assert "dlx_id" not in text


def test_round_trip_in_a_new_process(ck, tmp_path):
    prog, exp = saved(tmp_path, lambda x: ck.square(x) * 2 + ck.square(x + 1),
                      jax.ShapeDtypeStruct(X.shape, jnp.float32))
    want = np.asarray(jax.jit(lambda x: ck.square(x) * 2 + ck.square(x + 1))(X))
    np.testing.assert_array_equal(exp.call(X), want)
    # loaded, not registered with dlx.jax: found among the libraries the process loaded
    got = child(prog, f"lib = dlx.load({str(KERNELS)!r})\n")
    np.testing.assert_array_equal(got, want)


def test_library_partly_registered_finds_its_other_kernels(ck, tmp_path):
    """A process that staged one kernel of a library registered only that one: a saved
    program calling another kernel of the same library still finds it (not refused as a
    kernel the library does not declare)."""
    prog, _ = saved(tmp_path, lambda x: ck.square_grad(x, x),
                    jax.ShapeDtypeStruct(X.shape, jnp.float32))
    before = f"""\
        lib = dlx.load({str(KERNELS)!r})
        assert np.asarray(jax.jit(lib.square)(x)).tolist() == (x * x).tolist()
        """
    np.testing.assert_array_equal(child(prog, before), np.asarray(ck.square_grad(X, X)))


def test_loading_a_library_again_registers_nothing_more(ck, tmp_path):
    """A kernel is registered once per file: neither another dlx.load of the path nor a
    program naming a kernel its library lacks (which asks the finder, that loads it
    again) adds registry entries, which are never freed and hold 4096 at most."""
    dlx.jax.register(ck)
    entries = len(dlx.jax._keep)
    dlx.jax.register(dlx.load(KERNELS))
    ref = dlx.jax._kernel_ref(ck.square)
    call = jax.ffi.ffi_call(dlx.jax.TARGET, jax.ShapeDtypeStruct((4,), jnp.float32))
    for _ in range(3):
        with pytest.raises(jax.errors.JaxRuntimeError, match="has no declared kernel"):
            jax.block_until_ready(jax.jit(lambda x: call(x, dlx_none=np.int64(0), **dict(
                ref, dlx_name="nosuch")))(X))
    assert len(dlx.jax._keep) == entries


def test_other_libraries_first_in_another_order(ck, neg, tmp_path):
    prog, _ = saved(tmp_path, ck.square, jax.ShapeDtypeStruct(X.shape, jnp.float32))
    before = f"""\
        neg = dlx.load_inline({NEG_SQUARE!r}, name="neg_square")
        other = dlx.load({str(BUILD / 'kernels' / 'jax_kernels.so')!r})
        dlx.jax.register(other); dlx.jax.register(neg)
        assert np.asarray(jax.jit(neg.square)(x)).tolist() == (-x).tolist()
        lib = dlx.load({str(KERNELS)!r})
        """
    np.testing.assert_array_equal(child(prog, before), X * X)


def test_same_named_kernel_of_another_library_never_runs(ck, neg, tmp_path):
    prog, _ = saved(tmp_path, ck.square, jax.ShapeDtypeStruct(X.shape, jnp.float32))
    before = f"""\
        neg = dlx.load_inline({NEG_SQUARE!r}, name="neg_square")
        dlx.jax.register(neg)
        assert np.asarray(jax.jit(neg.square)(x)).tolist() == (-x).tolist()
        """
    child(prog, before, expect_error=[
        "square(): the program runs kernel 'square' of library sha256 " + sha256(KERNELS),
        f"traced from {KERNELS}", "dlx.load(path)",
        "a kernel of that name from another library is loaded and is not run"])


def test_unloaded_library_is_dlx_error_not_xlas(ck, tmp_path):
    prog, _ = saved(tmp_path, ck.square, jax.ShapeDtypeStruct(X.shape, jnp.float32))
    line = child(prog, expect_error=[
        "square(): the program runs kernel 'square' of library sha256 " + sha256(KERNELS),
        f"(traced from {KERNELS})", "which this process has not loaded",
        "lib = dlx.load(path); dlx.jax.register(lib)"])
    assert "No FFI handler" not in line


def test_found_in_the_cache_by_digest(tmp_path):
    lib = dlx.load_inline(CACHED, name="triple_cached")
    prog, _ = saved(tmp_path, lambda x: lib.triple(x) + 1,
                    jax.ShapeDtypeStruct(X.shape, jnp.float32))
    # a new process that loaded nothing: the program finds the library by its digest
    np.testing.assert_array_equal(child(prog), X * 3 + 1)


def test_a_carried_path_is_never_loaded(ck, tmp_path):
    """The traced-from path is only words: a copy of the library there is not loaded."""
    copy = tmp_path / "copy.so"
    shutil.copy(KERNELS, copy)
    lib = dlx.load(copy)
    prog, _ = saved(tmp_path, lib.square, jax.ShapeDtypeStruct(X.shape, jnp.float32))
    child(prog, expect_error=[f"traced from {copy}", "has not loaded"])


def test_library_at_a_non_utf8_path(tmp_path):
    """A file name is bytes: one that is not UTF-8 still stages (dlx_from, a str for
    messages, shows the other bytes as \\xNN) and is named in the not-loaded message."""
    path = os.fsdecode(os.fsencode(tmp_path) + b"/lib\xff.so")
    shutil.copy(KERNELS, path)
    lib = dlx.load(path)
    np.testing.assert_array_equal(jax.jit(lib.square)(X), X * X)
    prog, exp = saved(tmp_path, lib.square, jax.ShapeDtypeStruct(X.shape, jnp.float32))
    np.testing.assert_array_equal(exp.call(X), X * X)
    child(prog, expect_error=[f"traced from {tmp_path}/lib\\xff.so", "has not loaded"])


# ---- shapes and transformations inside the program ------------------------------------------

def test_shape_polymorphic_export(ck, tmp_path):
    n, = jax.export.symbolic_shape("n")
    prog, exp = saved(tmp_path, lambda x: ck.square(x) * 2,
                      jax.ShapeDtypeStruct((n, 2), jnp.float32))
    for rows in (1, 3):
        x = np.arange(rows * 2, dtype=np.float32).reshape(rows, 2)
        np.testing.assert_array_equal(exp.call(x), x * x * 2)
    m, = jax.export.symbolic_shape("m")
    prog2, exp2 = saved(tmp_path, ck.outer, jax.ShapeDtypeStruct((m,), jnp.float32),
                        jax.ShapeDtypeStruct((3,), jnp.float32), name="outer.bin")
    np.testing.assert_array_equal(exp2.call(X, X[:3]), np.outer(X, X[:3]))
    got = child(prog2, f"lib = dlx.load({str(KERNELS)!r})\n", args="x, x[:3]")
    np.testing.assert_array_equal(got, np.outer(X, X[:3]))
    got = child(prog, f"lib = dlx.load({str(KERNELS)!r})\n", args="x.reshape(2, 2)")
    np.testing.assert_array_equal(got, (X * X * 2).reshape(2, 2))


def test_vmap_and_custom_vjp_inside(ck, tmp_path):
    y = np.ones(3, np.float32)
    prog, _ = saved(tmp_path, jax.vmap(lambda r: ck.outer(r, y)),
                    jax.ShapeDtypeStruct((2, 2), jnp.float32))
    got = child(prog, f"lib = dlx.load({str(KERNELS)!r})\n", args="x.reshape(2, 2)")
    np.testing.assert_array_equal(got, np.stack([np.outer(r, y) for r in X.reshape(2, 2)]))

    @jax.custom_vjp
    def sq(x):
        return ck.square(x)

    sq.defvjp(lambda x: (ck.square(x), x), lambda x, g: (ck.square_grad(x, g),))
    prog, _ = saved(tmp_path, jax.grad(lambda x: sq(x).sum()),
                    jax.ShapeDtypeStruct(X.shape, jnp.float32), name="grad.bin")
    np.testing.assert_array_equal(child(prog, f"lib = dlx.load({str(KERNELS)!r})\n"), 2 * X)


# ---- tampered programs, changed libraries ---------------------------------------------------

def forged(tmp_path, prog, old, new, name):
    blob = prog.read_bytes()
    assert old in blob and len(old) == len(new)
    out = tmp_path / name
    out.write_bytes(blob.replace(old, new))
    return out


def test_tampered_programs_refused(ck, tmp_path):
    prog, _ = saved(tmp_path, ck.square, jax.ShapeDtypeStruct(X.shape, jnp.float32))
    load = f"lib = dlx.load({str(KERNELS)!r}); dlx.jax.register(lib)\n"
    digest = sha256(KERNELS).encode()
    bad = forged(tmp_path, prog, digest, b"0" * 64, "digest.bin")
    child(bad, load, expect_error=["square(): the program runs kernel 'square' of library "
                                   "sha256 " + "0" * 64, "loaded here with other content",
                                   "not run"])
    bad = forged(tmp_path, prog, digest, b"Z" * 64, "notdigest.bin")
    child(bad, load, expect_error="square(): the call's library digest (attribute dlx_lib) "
                                  "is not a sha256")
    # another kernel's name of the same library: its declaration is not the staged one
    bad = forged(tmp_path, prog, b'square', b'minmax', "name.bin")
    child(bad, load, expect_error=["minmax(): the program was staged with the declaration",
                                   "not run"])
    # a name the library does not declare: refused once the whole library is registered
    bad = forged(tmp_path, prog, b'square', b'sqvare', "undeclared.bin")
    child(bad, load, expect_error=["sqvare(): library sha256 " + digest.decode(),
                                   "has no declared kernel of that name"])
    decl = ck.square.signature.encode()
    bad = forged(tmp_path, prog, decl, decl.replace(b"f64", b"i64"), "decl.bin")
    child(bad, load, expect_error=['square(): the program was staged with the declaration '
                                   '"x: f32|i64[...] -> f32|i64[...]"', "not run"])
    for cut in (len(prog.read_bytes()) // 2, 40):  # truncated: jax's error, no crash
        short = tmp_path / f"cut{cut}.bin"
        short.write_bytes(prog.read_bytes()[:cut])
        r = run_python(f"import jax, dlx.jax\ntry:\n    jax.export.deserialize(open("
                       f"{str(short)!r}, 'rb').read())\n"
                       "except Exception as e:\n    print('REFUSED')\n", check=False)
        assert r.returncode == 0 and "REFUSED" in r.stdout, r.stderr[-2000:]


def test_library_changed_on_disk_since_export(tmp_path):
    copy = tmp_path / "changed.so"
    shutil.copy(KERNELS, copy)
    lib = dlx.load(copy)
    prog, _ = saved(tmp_path, lib.square, jax.ShapeDtypeStruct(X.shape, jnp.float32))
    with open(copy, "ab") as f:  # still a library that loads: trailing bytes
        f.write(b"\0changed")
    child(prog, f"lib = dlx.load({str(copy)!r}); dlx.jax.register(lib)\n",
          expect_error=[f"sha256 {sha256(KERNELS)}, but {copy}, the file it was traced from, "
                        f"is loaded here with other content (sha256 {sha256(copy)}): the "
                        "library changed since the program was staged; not run"])
    # in this process the loaded library is no longer the file's content: not staged anew
    with pytest.raises(ValueError, match=r"outer\(\): cannot stage it: the library .* changed "
                                         r"on disk since it was loaded"):
        jax.jit(lib.outer)(X, X)


def test_hand_built_attributes_refused(ck):
    ref = dlx.jax._kernel_ref(ck.square)
    call = jax.ffi.ffi_call(dlx.jax.TARGET, jax.ShapeDtypeStruct((3,), jnp.float32))
    x = np.ones(3, np.float32)
    cases = (
        (dict(ref, dlx_lib=ref["dlx_lib"][:63]), "square(): the call's library digest"),
        ({k: v for k, v in ref.items() if k != "dlx_decl"},
         "square(): the call's declaration (attribute dlx_decl) is missing"),
        (dict(ref, dlx_decl="x\x01"), "control byte 0x01"),
        (dict(ref, dlx_name="squ are"), "the call's kernel name (attribute dlx_name) is 'squ are'"),
        (dict(ref, dlx_name=np.int64(1)), "dlx_name) is not a str"),
        (dict(dlx_id=np.int64(0), dlx_name="square"), "staged by an older dlx"),
        (dict(ref, dlx_from=np.int64(3)), "attribute dlx_from) is not a path"),
    )
    for attrs, words in cases:
        for _ in range(2):  # refused each time (nothing proved)
            with pytest.raises(jax.errors.JaxRuntimeError) as e:
                jax.block_until_ready(jax.jit(lambda x: call(x, dlx_none=np.int64(0),
                                                             **attrs))(x))
            assert words in str(e.value)
    np.testing.assert_array_equal(jax.jit(lambda x: call(x, dlx_none=np.int64(0), **ref))(x),
                                  x * x)
