"""Which dimensions a declared kernel may have split across devices (issue 32): the rule
derived in C from the declaration (dlx_derive_shard), as dlx._shard.rule gives it to the
compiler integrations, and the declarations whose marks contradict their shapes, refused
at dlx.load."""
import pytest

import dlx
from dlx import _shard
from conftest import BUILD

KERNEL = '#include <dlx/dlx.h>\nDLX_KERNEL(k, "{sig}") {{ return 0; }}\n'


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DLX_CACHE_DIR", str(tmp_path / "cache"))


def kernel(tmp_path, sig):
    src = tmp_path / "k.c"
    src.write_text(KERNEL.format(sig=sig))
    return dlx.load(dlx.build(src, name="k")).k


def test_rule_labels_and_independent_dims():
    jk = dlx.load(BUILD / "kernels" / "jax_kernels.so")
    r = _shard.rule(jk.shard_rows)
    assert r == _shard.ShardRule(inputs=(("b", "n"), ("n",)), results=(("b", "n"), ("b",)),
                                 independent=frozenset({"b"}))
    assert r is _shard.rule(jk.shard_rows)  # once per kernel
    assert _shard.rule(jk.shard_batch) == (((("...", "n"),)), (("...", "n"), ("...",)),
                                           frozenset({"..."}))
    assert _shard.rule(jk.shard_accumulate) == ((("k",), ("k",)), (), frozenset({"k"}))
    assert _shard.rule(jk.noop3).independent == frozenset()
    assert jk.shard_rows.signature.startswith("x: f32[b*, n]")


def test_rule_of_mixed_declarations(tmp_path, cache):
    k = kernel(tmp_path, "x: f32[..., 3, c*, _], w: tensor, s: int, o: f32[c] mut? = None "
                         "-> (f32[..., c], f32[c])")
    r = _shard.rule(k)
    # scalars are left out; a tensor without brackets has no labels; the second result has
    # no "...": a reduction over the batch, so the batch is not independent
    assert r.inputs == (("...", None, "c", None), None, ("c",))
    assert r.results == (("...", "c"), ("c",))
    assert r.independent == frozenset({"c"})


def test_rule_of_an_undeclared_kernel_is_none():
    tk = dlx.load(BUILD / "kernels" / "test_kernels.so")
    undeclared = [tk[n] for n in tk.kernels if tk[n].signature is None]
    assert undeclared and _shard.rule(undeclared[0]) is None


@pytest.mark.parametrize("sig, column, words", [
    ("x: f32[b*, n] -> f32[n]", 9, "result 0 has no dimension 'b'"),
    ("x: f32[b*], acc: f32[] mut", 9, "mut parameter 'acc' has no dimension 'b'"),
    ("x: f32[n] -> f32[k*]", 19, "no parameter has it"),
    ("x: f32[3*]", 9, "only a size symbol"),
])
def test_contradicting_marks_are_an_import_error_at_load(tmp_path, cache, sig, column, words):
    src = tmp_path / "k.c"
    src.write_text(KERNEL.format(sig=sig))
    path = dlx.build(src, name="k")
    with pytest.raises(ImportError) as e:
        dlx.load(path)
    msg = str(e.value)
    assert "kernel 'k'" in msg and f"malformed signature at column {column}" in msg
    assert words in msg
