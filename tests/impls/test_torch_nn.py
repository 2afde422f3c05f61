"""The torch.nn library plugins (``torch-nn``, ``torch-nn-weights``).

Certified through the door a user walks through (the ``ftspec certify`` CLI
in a subprocess), then the two facts the variant declarations rest on are
checked directly against torch: what a fully masked query gives on each
MultiheadAttention path, and the shape limits MultiheadAttention needs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ftspec.impls import api  # noqa: E402
from ftspec.impls.api import Context  # noqa: E402
from ftspec.impls.torch_nn import (  # noqa: E402
    VARIANT_SDPA, VARIANT_WEIGHTS, implementation, implementation_rms_default, implementation_rms_default_f64,
    implementation_weights,
)

FTSPEC = Path(sys.executable).with_name("ftspec")
DTYPES = ("float64", "float32", "bfloat16", "float16")
ALGORITHMS = ("layer_norm", "rms_norm", "attention", "mh_attention")


def _certify(name: str, tmp: Path) -> dict:
    out = tmp / name
    proc = subprocess.run(
        [str(FTSPEC), "certify", name, "--profile", "quick", "--jobs", "1", "--quiet",
         "--out", str(out), "--case-dir", str(tmp / "cases")],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"ftspec certify {name} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return json.loads((out / "certificate.json").read_text())


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    tmp = tmp_path_factory.mktemp("torch_nn")
    return {name: _certify(name, tmp) for name in PLUGINS}


PLUGINS = {  # plugin: (algorithms, dtypes)
    "torch-nn": (ALGORITHMS, DTYPES),
    "torch-nn-weights": (("mh_attention",), DTYPES),
    "torch-nn-rms-default": (("rms_norm",), DTYPES[1:]),
    "torch-nn-rms-default-f64": (("rms_norm",), DTYPES[:1]),
}


@pytest.mark.parametrize("name", PLUGINS)
def test_certified_conformant_at_every_dtype(certificates: dict, name: str) -> None:
    algorithms, dtypes = PLUGINS[name]
    cert = certificates[name]
    assert cert["verdict"] == "conformant", cert["reasons"]
    cells = {(r["algorithm"], r["dtype"]): r for r in cert["results"] if r["algorithm"] in algorithms}
    assert set(cells) == {(a, d) for a in algorithms for d in dtypes}
    for key, r in cells.items():
        assert r["status"] == "pass" and r["examples"] >= 10, (key, r)


def test_certificates_name_the_declared_variant_sets(certificates: dict) -> None:
    for name, variant in (("torch-nn", VARIANT_SDPA), ("torch-nn-weights", VARIANT_WEIGHTS)):
        assert [v["hash"] for v in certificates[name]["variants"]] == [variant.hash]


def _mh_case(H: int = 2, hd: int = 2, d_z: int = 3, ell_x: int = 3, ell_z: int = 4):
    """Random float64 mh_attention inputs with query 1 masked from every key."""
    rng = np.random.default_rng(0)
    d_x = H * hd
    p = {"W_o": rng.standard_normal((d_x, d_x)), "b_o": rng.standard_normal(d_x)}
    for h in range(H):
        p |= {f"heads.{h}.W_q": rng.standard_normal((hd, d_x)), f"heads.{h}.b_q": rng.standard_normal(hd),
              f"heads.{h}.W_k": rng.standard_normal((hd, d_z)), f"heads.{h}.b_k": rng.standard_normal(hd),
              f"heads.{h}.W_v": rng.standard_normal((hd, d_z)), f"heads.{h}.b_v": rng.standard_normal(hd)}
    Mask = np.ones((ell_z, ell_x), dtype=bool)
    Mask[:, 1] = False  # query t_x = 1 may attend to nothing
    i = {"X": rng.standard_normal((d_x, ell_x)), "Z": rng.standard_normal((d_z, ell_z)), "Mask": Mask}
    hyper = dict(H=H, d_x=d_x, d_z=d_z, d_attn=hd, d_mid=hd, d_out=d_x, ell_x=ell_x, ell_z=ell_z)
    return i, p, hyper


def _call(impl, name: str, i: dict, p: dict, hyper: dict, variant) -> np.ndarray:
    conv = {k: impl.from_numpy(v, "bool" if v.dtype == bool else "float64", "cpu") for k, v in i.items()}
    params = {k: impl.from_numpy(v, "float64", "cpu") for k, v in p.items()}
    ctx = Context(algorithm=name, dtype="float64", device="cpu", hyper=hyper, variant=variant)
    return impl.to_numpy(impl.algorithms[name](conv, params, ctx))


def test_empty_query_matches_each_declared_variant() -> None:
    """need_weights=False (SDPA) gives ṽ = 0, so the output column is b_o
    ("zeros"); need_weights=True gives NaN ("nan"). The other columns agree,
    so the two paths differ only where the declarations say."""
    i, p, hyper = _mh_case()
    fast = _call(implementation, "mh_attention", i, p, hyper, VARIANT_SDPA)  # (d_out, ℓ_x)
    slow = _call(implementation_weights, "mh_attention", i, p, hyper, VARIANT_WEIGHTS)
    np.testing.assert_allclose(fast[:, 1], p["b_o"], rtol=0, atol=1e-12)
    assert np.isnan(slow[:, 1]).all()
    np.testing.assert_allclose(fast[:, [0, 2]], slow[:, [0, 2]], rtol=1e-12, atol=1e-12)


def test_sdpa_attention_gives_zero_for_an_empty_query() -> None:
    rng = np.random.default_rng(1)
    p = {"W_q": rng.standard_normal((3, 4)), "b_q": rng.standard_normal(3), "W_k": rng.standard_normal((3, 2)),
         "b_k": rng.standard_normal(3), "W_v": rng.standard_normal((5, 2)), "b_v": rng.standard_normal(5)}
    Mask = np.ones((4, 3), dtype=bool)
    Mask[:, 2] = False
    i = {"X": rng.standard_normal((4, 3)), "Z": rng.standard_normal((2, 4)), "Mask": Mask}
    hyper = dict(d_x=4, d_z=2, d_attn=3, d_out=5, ell_x=3, ell_z=4)
    out = _call(implementation, "attention", i, p, hyper, VARIANT_SDPA)
    assert out.shape == (5, 3) and (out[:, 2] == 0).all() and np.isfinite(out).all()


def test_multihead_attention_declares_its_tied_sizes() -> None:
    if not hasattr(api, "Limits"):
        pytest.skip("this ftspec's plugin contract has no Limits")
    for impl in (implementation, implementation_weights):
        limits = impl.limits["mh_attention"]
        assert set(limits.equal) == {("d_attn", "d_mid"), ("d_x", "H*d_attn"), ("d_out", "d_x")}
        assert not impl.problems()


@pytest.mark.parametrize("impl", [implementation_rms_default, implementation_rms_default_f64],
                         ids=lambda i: i.name)
def test_rms_norm_default_epsilon_is_the_declared_one(impl) -> None:
    """nn.RMSNorm(eps=None): solve x / √(x² + ε) = y for ε in float64 on a
    constant column, at each declared dtype, and compare with the variant.
    With x = 1e-4, x² = 1e-8 and ε is resolved to about 1 % at 1.2e-7
    (the float32 eps); finfo(float16).eps ≈ 1e-3 or 0 would be far off."""
    (variant,) = impl.variants
    for dtype in impl.dtypes:
        x = impl.from_numpy(np.full((4, 1), 1e-4), dtype, "cpu")  # (d_e, ℓ)
        xv = float(impl.to_numpy(x)[0, 0])
        gamma = impl.from_numpy(np.ones(4), dtype, "cpu")
        ctx = Context(algorithm="rms_norm", dtype=dtype, device="cpu", hyper={"d_e": 4, "ell": 1}, variant=variant)
        y = float(impl.to_numpy(impl.algorithms["rms_norm"]({"X": x}, {"gamma": gamma}, ctx))[0, 0])
        if dtype == "float64":  # ε = 2.2e-16 shows only in y's last bits: compare y itself
            assert y == pytest.approx(xv / np.sqrt(xv * xv + variant.epsilon), rel=1e-15)
            assert y != pytest.approx(1.0, rel=1e-15)  # ε is not 0
        else:
            implied = (xv / y) ** 2 - xv ** 2
            assert implied == pytest.approx(variant.epsilon, rel=0.02), (dtype, implied)
