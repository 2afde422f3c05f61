"""Tests of the PyTorch plugin's own machinery: the layout adapter, mask
polarity, conversion, the SDPA path and empty queries.

Agreement with the spec at every dtype (and dtypes kept) is
tests/impls/test_bundled.py's and the fixture replay's job.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ftspec.conformance.core.calling import call  # noqa: E402
from ftspec.impls.api import Context  # noqa: E402
from ftspec.spec import PAPER  # noqa: E402
from ftspec.spec.registry import REGISTRY  # noqa: E402

from .cases import make_case  # noqa: E402

tp = pytest.importorskip("ftspec.impls.torch")
A = pytest.importorskip("ftspec.impls.torch.adapter")
impl = tp.implementation


def _native(case, dtype, device="cpu"):
    kinds = {s.name: s.kind for s in case.entry.inputs}
    ints = {"token": "int64", "position": "int64", "mask": "bool"}
    inputs = {k: impl.from_numpy(v, ints.get(kinds[k], dtype), device) for k, v in case.inputs.items()}
    params = {k: impl.from_numpy(v, dtype, device) for k, v in case.params.items()}
    return inputs, params


def _run_native(case, dtype, *, inputs=None, params=None, batched=False):
    i, p = _native(case, dtype)
    ctx = Context(case.entry.name, dtype, "cpu", case.hyper, case.variant, batched)
    return impl.algorithms[case.entry.name](inputs or i, params or p, ctx)


# --------------------------------------------------------------------------
# declaration and conversion
# --------------------------------------------------------------------------


def test_declaration():
    assert impl.problems() == []
    assert impl.name == "torch" and torch.__version__ in impl.version
    assert tuple(impl.dtypes) == ("float64", "float32", "bfloat16", "float16")
    assert impl.devices()[0] == "cpu"
    assert impl.precision == "highest"


def test_full_precision_float32_matmuls():
    assert torch.get_float32_matmul_precision() == "highest"
    assert torch.backends.cuda.matmul.allow_tf32 is False
    assert torch.backends.cudnn.allow_tf32 is False


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16", "float16", "int64", "bool"])
@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
def test_from_numpy_to_numpy_round_trip(dtype, shape):
    rng = np.random.default_rng(0)
    if dtype == "bool":
        a = rng.random(shape) < 0.5
    elif dtype == "int64":
        a = rng.integers(0, 9, size=shape).astype(np.int64)
    else:
        a = np.asarray(rng.integers(-8, 8, size=shape), dtype=np.float64) / 4  # exact in every dtype
    t = impl.from_numpy(a, dtype, "cpu")
    assert t.dtype == getattr(torch, dtype) and tuple(t.shape) == shape
    back = impl.to_numpy(t)
    assert back.dtype == np.dtype("float32" if dtype == "bfloat16" else dtype)
    np.testing.assert_array_equal(back.astype(a.dtype), a)
    if shape:  # the tensor does not alias the caller's array
        before = impl.to_numpy(t).copy()
        a.flat[0] = not a.flat[0] if dtype == "bool" else a.flat[0] + 1
        np.testing.assert_array_equal(impl.to_numpy(t), before)


# --------------------------------------------------------------------------
# the adapter
# --------------------------------------------------------------------------


def test_sequence_layout_round_trip():
    X = torch.arange(2 * 3 * 5).reshape(2, 3, 5)  # canonical (batch, d=3, ℓ=5)
    R = A.cols_to_rows(X)
    assert R.shape == (2, 5, 3)
    for b, i, t in [(0, 0, 0), (1, 2, 4), (0, 1, 3)]:
        assert R[b, t, i] == X[b, i, t]  # token t is row t natively, column t canonically
    assert torch.equal(A.rows_to_cols(R), X)


def test_mask_layout_keeps_polarity_and_flips_index_order():
    Mask = torch.tensor([[True, False, False], [True, True, False]])  # canonical (ℓ_z=2, ℓ_x=3)
    m = A.mask_to_native(Mask)
    assert m.shape == (3, 2) and m.dtype == torch.bool
    for t_z in range(2):
        for t_x in range(3):
            assert bool(m[t_x, t_z]) == bool(Mask[t_z, t_x])  # True = may attend, both sides
    assert torch.equal(A.mask_to_canonical(m), Mask)


def test_table_layout():
    W_e = torch.arange(12.0).reshape(3, 4)  # canonical (d_e=3, N_V=4)
    table = A.table_to_native(W_e)
    assert table.shape == (4, 3) and torch.equal(table[2], W_e[:, 2])
    assert torch.equal(A.table_to_canonical(table), W_e)


def test_heads_pack_head_major():
    case = make_case(REGISTRY["mh_attention"], PAPER)
    _, p = _native(case, "float64")
    a = A.attn_params(p)
    H, d_attn, d_mid = case.hyper["H"], case.hyper["d_attn"], case.hyper["d_mid"]
    assert a.heads == H
    for h in range(H):
        assert torch.equal(a.W_q[h * d_attn:(h + 1) * d_attn], p[f"heads.{h}.W_q"])
        assert torch.equal(a.b_k[h * d_attn:(h + 1) * d_attn], p[f"heads.{h}.b_k"])
        assert torch.equal(a.W_v[h * d_mid:(h + 1) * d_mid], p[f"heads.{h}.W_v"])
    assert a.W_o is p["W_o"]


def test_count_reads_structure_from_names():
    names = {"layers.0.W_mlp1": 0, "layers.1.W_mlp1": 0, "layers.10.attn.heads.0.W_q": 0, "W_e": 0}
    assert A.count(names, "layers.") == 11
    assert A.count(names, "layers.10.attn.heads.") == 1
    assert A.count(names, "enc_layers.") == 0


@pytest.mark.parametrize("ell_z,ell_x", [(4, 4), (3, 5), (5, 3)])
@pytest.mark.parametrize("alignment", ["top_left", "bottom_right"])
def test_unidirectional_mask_canonical(ell_z, ell_x, alignment):
    v = PAPER.replace(causal_alignment=alignment)
    ctx = Context("unidirectional_mask", "float64", "cpu", {"ell_z": ell_z, "ell_x": ell_x}, v)
    Mask = impl.algorithms["unidirectional_mask"]({}, {}, ctx)
    shift = 0 if alignment == "top_left" else ell_z - ell_x
    want = [[t_z <= t_x + shift for t_x in range(ell_x)] for t_z in range(ell_z)]
    assert Mask.dtype == torch.bool and Mask.tolist() == want


# --------------------------------------------------------------------------
# attention: polarity end to end, the SDPA path, empty queries
# --------------------------------------------------------------------------


@pytest.mark.parametrize("placement", ["scores", "query"])  # explicit path, SDPA path
def test_one_key_per_query_returns_that_value(placement):
    """Mask[t_z, t_x] = [[t_z = π(t_x)]]: query t_x must return v_{π(t_x)} exactly."""
    v = PAPER.replace(scale_placement=placement)
    case = make_case(REGISTRY["attention"], v)
    ell_z, ell_x = case.hyper["ell_z"], case.hyper["ell_x"]
    pick = [(2 * t + 1) % ell_z for t in range(ell_x)]
    case.inputs["Mask"] = np.zeros((ell_z, ell_x), dtype=bool)
    case.inputs["Mask"][pick, np.arange(ell_x)] = True
    got = call(impl, case.entry, case.inputs, case.params, hyper=case.hyper, variant=v, dtype="float64",
               device="cpu")["V_tilde"]
    V = case.params["W_v"] @ case.inputs["Z"] + case.params["b_v"][:, None]  # (d_out, ℓ_z)
    np.testing.assert_allclose(got, V[:, pick], rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("v,sdpa", [
    (PAPER, False),
    (PAPER.replace(scale_placement="query"), True),
    (PAPER.replace(scale_placement="query_key_sqrt"), True),
    (PAPER.replace(attn_scale="none"), True),
    (PAPER.replace(scale_placement="query", empty_query="zeros"), True),
])
def test_sdpa_used_exactly_where_its_definition_matches(monkeypatch, v, sdpa):
    import torch.nn.functional as F

    calls = []
    real = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda *a, **k: calls.append(1) or real(*a, **k))
    _run_native(make_case(REGISTRY["mh_attention"], v), "float64")
    assert bool(calls) == sdpa
    if v.empty_query != "error":  # an empty query goes to the explicit path
        calls.clear()
        _run_native(make_case(REGISTRY["mh_attention"], v, seed=1, empty_query=True), "float64")
        assert not calls


@pytest.mark.parametrize("name", ["attention", "mh_attention"])
def test_empty_query_error_in_one_batch_element(name):
    case = make_case(REGISTRY[name], PAPER)
    good = case.inputs["Mask"]
    bad = good.copy()
    bad[:, 0] = False
    i, p = _native(case, "float64")
    i["Mask"] = impl.from_numpy(np.stack([good, bad]), "bool", "cpu")
    for k in ("X", "Z"):
        i[k] = torch.stack([i[k], i[k]])
    with pytest.raises(ValueError, match="empty_query"):
        _run_native(case, "float64", inputs=i, params=p, batched=True)


@pytest.mark.parametrize("mode", ["zeros", "uniform"])
def test_empty_query_variants_keep_gradients_finite(mode):
    v = PAPER.replace(empty_query=mode)
    case = make_case(REGISTRY["mh_attention"], v, seed=1, empty_query=True)
    i, p = _native(case, "float64")
    for t in (*p.values(), i["X"], i["Z"]):
        t.requires_grad_(True)
    out = _run_native(case, "float64", inputs=i, params=p)
    out.sum().backward()
    assert torch.isfinite(out).all()
    for t in (*p.values(), i["X"], i["Z"]):
        assert torch.isfinite(t.grad).all()


def test_empty_query_nan_only_in_that_column():
    v = PAPER.replace(empty_query="nan")
    case = make_case(REGISTRY["attention"], v, seed=1, empty_query=True)
    out = _run_native(case, "float64")  # (d_out, ℓ_x); the last query is empty
    assert torch.isnan(out[:, -1]).all() and torch.isfinite(out[:, :-1]).all()


# --------------------------------------------------------------------------
# input checks
# --------------------------------------------------------------------------


def test_token_out_of_range_and_long_sequence_raise():
    case = make_case(REGISTRY["embedding"], PAPER)
    i, p = _native(case, "float64")
    i["x"] = i["x"].clone()
    i["x"][0] = case.hyper["N_V"]
    with pytest.raises(ValueError, match="token"):
        _run_native(case, "float64", inputs=i, params=p)
    i["x"] = torch.zeros(case.hyper["ell_max"] + 1, dtype=torch.int64)
    with pytest.raises(ValueError, match="ell_max"):
        _run_native(case, "float64", inputs=i, params=p)
