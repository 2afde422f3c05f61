"""The torch.nn library plugins (``torch-nn``, ``torch-nn-weights``).

Certified through the door a user walks through (the ``ftspec certify`` CLI
in a subprocess), then the two facts the variant declarations rest on are
checked directly against torch: what a fully masked query gives on each
MultiheadAttention path (an all-masked Mask, and a key_padding_mask that
leaves a query no key, on the fast and the slow path), and the shape limits
MultiheadAttention needs. Grouped-query causal self-attention (SDPA's
enable_gqa) is judged in-process against its kv_group=2 declaration.
The layer plugins (``torch-nn-layers*``) are judged in-process by the
harness's own judge, under their declarations and under wrong ones, and
their fast and slow paths are told apart by counting torch's fused ops.
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


#: ``torch-nn`` itself is certified by tests/impls/test_library_certificates.py (with transformers and
#: flax, the plugins the README names); these are the other torch.nn plugins of the same modules.
PLUGINS = {  # plugin: (algorithms, dtypes)
    "torch-nn-weights": (("mh_attention", "padded_self_attention", "padded_causal_self_attention"), DTYPES),
}
# ``torch-nn-rms-default`` and ``-f64`` are certified by ``make bench`` (``ftspec bench libraries``);
# here their one claim, the ε that eps=None resolves to, is measured against torch itself
# (test_rms_norm_default_epsilon_is_the_declared_one): their two CLI certifications were 16 s of
# ``make test``, cut when spec 2.3.0 pushed it past its budget.


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
    for name, variant in (("torch-nn-weights", VARIANT_WEIGHTS),):
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


# --- nn.TransformerEncoderLayer / DecoderLayer (impls/torch_nn/layers.py) -------------------------
# In-process, a few small cases each: certifying the four layer plugins through the CLI takes
# 40-50 s each at --profile quick (docs/libraries.md), too long for this file's budget.

from ftspec.conformance.core.case import Case  # noqa: E402
from ftspec.conformance.core.examining import examine_case, rounded  # noqa: E402
from ftspec.conformance.core.execute import Member  # noqa: E402
from ftspec.conformance.core.tolerances import reference  # noqa: E402
from ftspec.spec.registry import REGISTRY  # noqa: E402
from ftspec.spec.variants import VariantSet  # noqa: E402
from ftspec.impls.torch_nn import (  # noqa: E402
    VARIANT_FAST, VARIANT_FAST_PADDED, VARIANT_FAST_PRE, VARIANT_FAST_PRE_PADDED, VARIANT_LAYERS,
    VARIANT_LAYERS_PRE, implementation_layers, implementation_layers_fast, implementation_layers_fast_pre,
    implementation_layers_pre,
)

LAYER_PLUGINS = {i.name: i for i in (implementation_layers, implementation_layers_pre, implementation_layers_fast,
                                     implementation_layers_fast_pre)}
FAST = ("torch-nn-layers-fast", "torch-nn-layers-fast-pre")
ARCH = {"encoder_layer": "ed_encoder", "decoder_layer": "ed_decoder", "bert_layer": "bert", "gpt2_layer": "gpt2"}
ARCH |= {f"padded_{a}": arch for a, arch in ARCH.items()}
PAIRS = [(n, a) for n, i in LAYER_PLUGINS.items() for a in i.algorithms]
PADDED_PAIRS = [(n, a) for n, a in PAIRS if a.startswith("padded_")]


def _declared(impl, algorithm: str) -> VariantSet:
    """The one variant set ``impl`` declares for ``algorithm``."""
    (variant,) = impl.variants_for(algorithm)
    assert isinstance(variant, VariantSet), (impl.name, algorithm)
    return variant


#: the slow plugin that runs the same modules as each fast one
SLOW_OF = {"torch-nn-layers-fast": "torch-nn-layers", "torch-nn-layers-fast-pre": "torch-nn-layers-pre"}


def test_layer_plugins_declare_what_the_modules_are() -> None:
    """The switches each layer plugin's one variant set resolves to, entry by entry: the
    module configuration layers.py hard-wires (norm_first, activation)."""
    want = {  # plugin: {entry: (norm placement, activation)}
        "torch-nn-layers": {"encoder_layer": ("post", "relu"), "bert_layer": ("post", "gelu_erf"),
                            "gpt2_layer": ("pre", "gelu_erf"), "decoder_layer": ("post", "relu")},
        "torch-nn-layers-pre": {"encoder_layer": ("pre", "relu"), "gpt2_layer": ("pre", "relu"),
                                "decoder_layer": ("pre", "relu")},
    }
    for name in list(want):  # each padded entry: the same module as the unpadded one
        want[name] |= {f"padded_{k}": v for k, v in want[name].items()}
    want["torch-nn-layers-fast"] = {k: v for k, v in want["torch-nn-layers"].items() if "decoder" not in k}
    want["torch-nn-layers-fast-pre"] = {k: v for k, v in want["torch-nn-layers-pre"].items() if "decoder" not in k}
    for name, impl in LAYER_PLUGINS.items():
        sets = {a: _declared(impl, a) for a in impl.algorithms}
        got = {a: (v.resolved_norm_placement(ARCH[a]), v.resolved_activation(ARCH[a])) for a, v in sets.items()}
        assert got == want[name], name
        for a, v in sets.items():
            assert (v.epsilon, v.epsilon_placement, v.variance) == (1e-5, "inside_root", "biased")
            assert v.scale_placement == ("query" if name in FAST else "scores"), name
            # an empty query: SDPA's flash kernel gives zeros, the fused op's _masked_softmax NaN
            assert v.empty_query == ("nan" if name in FAST and a.startswith("padded_") else "zeros"), (name, a)
        assert tuple(impl.dtypes) == DTYPES and not impl.problems()
    assert [VARIANT_LAYERS_PRE, VARIANT_FAST, VARIANT_FAST_PRE] == [
        VARIANT_LAYERS.replace(norm_placement="pre", activation="relu"),
        VARIANT_LAYERS.replace(scale_placement="query"),
        VARIANT_LAYERS.replace(norm_placement="pre", activation="relu", scale_placement="query")]
    assert (VARIANT_FAST_PADDED, VARIANT_FAST_PRE_PADDED) == (VARIANT_FAST.replace(empty_query="nan"),
                                                              VARIANT_FAST_PRE.replace(empty_query="nan"))


def _wrong(variant, algorithm: str) -> dict:
    """The declaration with the layer's norm placement, then its activation, flipped (a GELU
    layer also declared as the tanh GELU: torch's "gelu" is the erf form)."""
    arch = ARCH[algorithm]
    placement = "post" if variant.resolved_norm_placement(arch) == "pre" else "pre"
    activation = "relu" if variant.resolved_activation(arch) != "relu" else "gelu_erf"
    out = {"norm_placement": variant.replace(norm_placement=placement),
           "activation": variant.replace(activation=activation)}
    if variant.resolved_activation(arch) == "gelu_erf":
        out["activation=gelu_tanh"] = variant.replace(activation="gelu_tanh")
    return out


@pytest.mark.parametrize("name,algorithm", PAIRS)
def test_layer_conforms_and_a_wrong_declaration_is_caught(name: str, algorithm: str, request) -> None:
    """The harness's own judge (``examine`` against ``tolerances.reference``) passes each layer
    entry under its plugin's declaration and fails it under the declaration with the norm
    placement or the activation flipped, at float64 and float32, with the batched call checked
    (a padded entry with the pad the case draws)."""
    impl = LAYER_PLUGINS[name]
    declared = _declared(impl, algorithm)
    again = f"reproduce: .venv/bin/python -m pytest '{request.node.nodeid}'"
    case = Case.build(algorithm, None, declared, seed=5)
    case.batch.append(Case.build(algorithm, case.hyper, declared, seed=6).inputs)
    assert impl.admits(algorithm, case.hyper)
    for dtype in ("float64", "float32"):
        def judge(variant):
            return examine_case(Member(name, impl, "cpu"), case, dtype, timeout=60, variant=variant).judgement

        j = judge(declared)
        assert j.ok, (f"{name} {algorithm} at {dtype} on cpu, hyper {case.hyper}: fails under its own "
                      f"declaration {declared.describe()}: {[f.message for f in j.findings][:2]}; likely "
                      f"cause: a parameter loaded into the wrong module (layers.py)\n{again}")
        for switch, wrong in _wrong(declared, algorithm).items():
            checks = [f.check for f in judge(wrong).findings]
            assert "spec" in checks, (f"{name} {algorithm} at {dtype} on cpu, hyper {case.hyper}: a wrong "
                                      f"{switch} was not caught ({checks})\n{again}")


@pytest.fixture
def fused(monkeypatch: pytest.MonkeyPatch) -> dict:
    """Counts calls of the two fused ops torch.nn's Python reaches its fast paths through
    (transformer.py calls ``torch._transformer_encoder_layer_fwd``, activation.py
    ``torch._native_multi_head_attention``, both looked up on ``torch`` at call time)."""
    counts = {"_transformer_encoder_layer_fwd": 0, "_native_multi_head_attention": 0}
    for op in counts:
        original = getattr(torch, op)

        def counting(*args, _op=op, _original=original, **kwargs):
            counts[_op] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(torch, op, counting)
    return counts


#: a pad with a padding position that leaves every query a key (ℓ = ℓ_x = 3, ℓ_z = 2 here)
SOME_PADDING = {"pad": np.array([True, False, True]), "pad_x": np.array([True, False, True]),
                "pad_z": np.array([False, True])}
#: a pad that leaves query 0 with no key: every key padding, or causally a padded start
NO_KEY = {"padded_encoder_layer": np.zeros(3, bool), "padded_bert_layer": np.zeros(3, bool),
          "padded_gpt2_layer": np.array([False, True, True])}


def _call_layer(impl, algorithm: str, dtype: str, batched: bool, H: int = 2, given: dict | None = None):
    """One call of the plugin's entry on a small case; a padded entry gets ``given`` or
    ``SOME_PADDING``. Batched: the same example twice."""
    sizes = dict(H=H, d_e=2 * H, d_attn=2, d_mid=2, d_mlp=3, ell=3, ell_x=3, ell_z=2)
    entry = REGISTRY[algorithm]
    hyper = {k: sizes[k] for k in entry.hyper}
    variant = _declared(impl, algorithm)
    names = {t.name for t in entry.inputs}
    given = {k: v for k, v in (SOME_PADDING if given is None else given).items() if k in names}
    case = Case.build(algorithm, hyper, variant, seed=2, given=given)
    p = rounded(case, dtype)
    inputs = {k: impl.from_numpy(np.stack([v, v]) if batched else v, "bool" if v.dtype == bool else dtype, "cpu")
              for k, v in p.inputs.items()}
    params = {k: impl.from_numpy(v, dtype, "cpu") for k, v in p.params.items()}
    ctx = Context(algorithm=algorithm, dtype=dtype, device="cpu", hyper=case.hyper, variant=variant, batched=batched)
    return impl.to_numpy(impl.algorithms[algorithm](inputs, params, ctx))


@pytest.mark.parametrize("name", FAST)
def test_the_fast_path_is_really_taken(fused: dict, name: str) -> None:
    """Each fast entry reaches ``torch._transformer_encoder_layer_fwd`` exactly once per call, at
    every declared dtype, batched or not (an unbatched input is given a batch axis). A padded
    entry stays on it: with a padding position its output (padding column included: no nested
    tensor, no zeros) equals the slow path's in float64, and a query with no key gives NaN."""
    impl, slow = LAYER_PLUGINS[name], LAYER_PLUGINS[SLOW_OF[name]]
    for algorithm in impl.algorithms:
        for dtype in impl.dtypes:
            for batched in (False, True):
                before = fused["_transformer_encoder_layer_fwd"]
                out = _call_layer(impl, algorithm, dtype, batched)
                assert fused["_transformer_encoder_layer_fwd"] == before + 1, (name, algorithm, dtype, batched)
                assert out.shape == ((2, 4, 3) if batched else (4, 3)) and np.isfinite(out).all()
                if algorithm in NO_KEY and dtype == "float64":
                    np.testing.assert_allclose(out, _call_layer(slow, algorithm, dtype, batched), rtol=1e-12,
                                               atol=1e-12, err_msg=f"{name} {algorithm} batched={batched}")
        if algorithm in NO_KEY:
            before = fused["_transformer_encoder_layer_fwd"]
            out = _call_layer(impl, algorithm, "float32", True, given={"pad": NO_KEY[algorithm]})  # (2, d_e, ℓ)
            assert fused["_transformer_encoder_layer_fwd"] == before + 1, (name, algorithm)
            assert np.isnan(out[..., 0]).all(), (name, algorithm)
            assert np.isfinite(out[..., NO_KEY[algorithm]]).all(), (name, algorithm)  # gpt2: the queries with a key


@pytest.mark.parametrize("name", ["torch-nn-layers", "torch-nn-layers-pre"])
def test_the_slow_path_takes_no_fused_op(fused: dict, name: str) -> None:
    impl = LAYER_PLUGINS[name]
    for algorithm in impl.algorithms:
        for dtype in impl.dtypes:
            _call_layer(impl, algorithm, dtype, batched=True)
    assert fused == {"_transformer_encoder_layer_fwd": 0, "_native_multi_head_attention": 0}


def test_odd_heads_leave_the_fast_path_so_the_fast_plugins_hold_h_to_2(fused: dict) -> None:
    """transformer.py takes the slow path for an odd head count ("num_head is odd"): the fast
    plugins' limits admit only H = 2 (Limits has no parity), the slow ones any H."""
    fast = LAYER_PLUGINS["torch-nn-layers-fast"]
    _call_layer(fast, "encoder_layer", "float32", batched=True, H=1)
    assert fused["_transformer_encoder_layer_fwd"] == 0
    sizes = dict(d_attn=2, d_mid=2, d_mlp=3, ell=3)
    for H in (1, 2, 3, 4):
        assert fast.admits("encoder_layer", dict(sizes, H=H, d_e=2 * H)) == (H == 2)
        assert implementation_layers.admits("encoder_layer", dict(sizes, H=H, d_e=2 * H))
    assert not implementation_layers.admits("encoder_layer", dict(sizes, H=2, d_e=5))  # d_e = H·d_attn


# --- key_padding_mask and grouped-query attention (impls/torch_nn/entries.py) ---------------------
# padded_self_attention / padded_causal_self_attention through MultiheadAttention (torch-nn: slow
# path, need_weights=False; torch-nn-weights: need_weights=True, fast path when batched with even H)
# and causal_self_attention through SDPA(enable_gqa=True) under kv_group=2 (torch-nn).

from ftspec.impls.torch_nn import VARIANT_GQA, VARIANT_PADDED  # noqa: E402
from ftspec.spec import SpecError  # noqa: E402

PADDED = ("padded_self_attention", "padded_causal_self_attention")
#: a pad vector that leaves query 0 with no key: every key padded (bidirectional) or the first
#: one (causal: query 0 sees only key 0)
EMPTY = {"padded_self_attention": np.array([False, False, False]),
         "padded_causal_self_attention": np.array([False, True, True])}
WRONG_EMPTY = {"zeros": "nan", "nan": "zeros"}


def _judge(impl, algorithm: str, variant, dtype: str, *, seed: int, hyper=None, given=None):
    """The harness's judgement of one case plus a batched call of two (the second drawn with
    ``seed + 1``), under ``variant``."""
    case = Case.build(algorithm, hyper, variant, seed=seed, given=given)
    case.batch.append(Case.build(algorithm, case.hyper, variant, seed=seed + 1, given=given).inputs)
    assert impl.admits(algorithm, case.hyper), case.hyper
    return examine_case(Member(impl.name, impl, "cpu"), case, dtype, timeout=60, variant=variant).judgement


@pytest.mark.parametrize("impl", [implementation, implementation_weights], ids=lambda i: i.name)
@pytest.mark.parametrize("algorithm", PADDED)
def test_padded_self_attention_conforms(impl, algorithm: str) -> None:
    """Drawn pads (seeds 3 and 7; H = 2 and 3), at float64, float32 and bfloat16, batched call
    included: torch-nn-weights' batched H = 2 calls run the native fast path, the others the
    Python path (test_which_multihead_attention_path_each_padded_entry_takes)."""
    (variant,) = impl.variants_for(algorithm)
    for seed, hyper in ((3, None), (7, dict(H=3, d_e=6, d_attn=2, d_mid=2, ell=5))):
        for dtype in ("float64", "float32", "bfloat16"):
            j = _judge(impl, algorithm, variant, dtype, seed=seed, hyper=hyper)
            assert j.ok, (impl.name, algorithm, dtype, seed, [f.message for f in j.findings][:2])


@pytest.mark.parametrize("impl", [implementation, implementation_weights], ids=lambda i: i.name)
@pytest.mark.parametrize("algorithm", PADDED)
def test_padded_empty_query_matches_the_declaration_and_a_wrong_one_fails(impl, algorithm: str) -> None:
    """A pad that leaves query 0 with no key (all padded; causally, a padded start): the declared
    empty_query (torch-nn "zeros", torch-nn-weights "nan") passes at every declared dtype, and
    the other one is caught in float64."""
    (variant,) = impl.variants_for(algorithm)
    assert variant.empty_query == ("zeros" if impl is implementation else "nan")
    for dtype in impl.dtypes:
        j = _judge(impl, algorithm, variant, dtype, seed=11, given={"pad": EMPTY[algorithm]})
        assert j.ok, (impl.name, algorithm, dtype, [f.message for f in j.findings][:2])
    wrong = variant.replace(empty_query=WRONG_EMPTY[variant.empty_query])
    checks = [f.check for f in _judge(impl, algorithm, wrong, "float64", seed=11,
                                      given={"pad": EMPTY[algorithm]}).findings]
    assert checks, f"{impl.name} {algorithm}: empty_query={wrong.empty_query} was not caught"


def test_which_multihead_attention_path_each_padded_entry_takes(fused: dict) -> None:
    """torch-nn (need_weights=False) never reaches ``torch._native_multi_head_attention`` (autograd
    on), so its zeros hold for every call; torch-nn-weights does exactly when the call is batched
    with even H, and gives NaN for an empty query on both paths."""
    H1 = dict(H=1, d_e=2, d_attn=2, d_mid=2, ell=3)
    for algorithm in PADDED:
        for impl, hyper, batched, native in ((implementation, None, True, 0), (implementation, None, False, 0),
                                             (implementation_weights, None, True, 1),
                                             (implementation_weights, None, False, 0),
                                             (implementation_weights, H1, True, 0)):
            (variant,) = impl.variants_for(algorithm)
            case = Case.build(algorithm, hyper, variant, seed=2, given={"pad": EMPTY[algorithm]})
            inputs = {k: impl.from_numpy(np.stack([v, v]) if batched else v, "bool" if v.dtype == bool else "float32",
                                         "cpu") for k, v in case.inputs.items()}
            params = {k: impl.from_numpy(v, "float32", "cpu") for k, v in case.params.items()}
            ctx = Context(algorithm=algorithm, dtype="float32", device="cpu", hyper=case.hyper, variant=variant,
                          batched=batched)
            before = fused["_native_multi_head_attention"]
            out = impl.to_numpy(impl.algorithms[algorithm](inputs, params, ctx))
            assert fused["_native_multi_head_attention"] - before == native, (impl.name, algorithm, hyper, batched)
            col = out[..., 0]  # the empty query's column
            if impl is implementation:
                np.testing.assert_allclose(col, np.broadcast_to(case.params["b_o"], col.shape), rtol=1e-6, atol=1e-6)
            else:
                assert np.isnan(col).all(), (algorithm, hyper, batched)


def test_gqa_causal_self_attention_conforms_and_a_wrong_grouping_fails() -> None:
    """SDPA(enable_gqa=True) under the declared kv_group=2, kv_order="consecutive": H = 4 and 2,
    three dtypes, batched call included; the same case declared "strided" (query head h reads kv
    head h mod H_kv) is caught; d_attn ≠ d_mid is outside the limits (it would leave the flash kernel)."""
    (variant,) = implementation.variants_for("causal_self_attention")
    assert variant == VARIANT_GQA and (variant.kv_group, variant.kv_order, variant.rotary) == (2, "consecutive", "none")
    four = dict(H=4, d_e=6, d_attn=3, d_mid=3, ell=4)
    for hyper in (four, dict(H=2, d_e=4, d_attn=2, d_mid=2, ell=3)):
        for dtype in ("float64", "float32", "float16"):
            j = _judge(implementation, "causal_self_attention", variant, dtype, seed=4, hyper=hyper)
            assert j.ok, (hyper, dtype, [f.message for f in j.findings][:2])
    j = _judge(implementation, "causal_self_attention", variant.replace(kv_order="strided"), "float64", seed=4,
               hyper=four)
    assert "spec" in [f.check for f in j.findings]
    assert not implementation.admits("causal_self_attention", dict(four, d_mid=2))  # the flash kernel's tie


def test_torch_nn_declares_its_sets_per_algorithm() -> None:
    declared = implementation.declared_variants()
    assert declared["padded_self_attention"] == declared["padded_causal_self_attention"] == (VARIANT_PADDED,)
    assert VARIANT_PADDED == VARIANT_SDPA.replace(scale_placement="scores")
    assert all(declared[a] == (VARIANT_SDPA,) for a in ALGORITHMS)
    for impl in (implementation, implementation_weights):
        for algorithm in PADDED:
            assert set(impl.limits[algorithm].equal) == {("d_attn", "d_mid"), ("d_e", "H*d_attn")}
        assert not impl.problems()


# --- the padded layers (impls/torch_nn/layers.py): key padding masks on the four layer plugins ----

#: pads (ℓ = ℓ_x = 3, ℓ_z = 4) that leave some query no key: every key padding, or causally a
#: padded start; the decoder once through its own (pad_x) and once through the source (pad_z)
NO_KEY_GIVEN = {
    "padded_encoder_layer": ({"pad": np.zeros(3, bool)},),
    "padded_bert_layer": ({"pad": np.zeros(3, bool)},),
    "padded_gpt2_layer": ({"pad": np.array([False, True, True])},),
    "padded_decoder_layer": ({"pad_x": np.array([False, True, True]), "pad_z": np.array([True, True, False, True])},
                             {"pad_x": np.ones(3, bool), "pad_z": np.zeros(4, bool)}),
}


def _spec_refuses(algorithm: str, variant, given: dict) -> bool:
    """Whether the spec refuses the empty-query case under ``variant`` (the harness then counts
    it rejected and examines no implementation on it)."""
    case = Case.build(algorithm, None, variant, seed=11, given=given)
    p = rounded(case, "float64")
    try:
        reference(case.entry, p.inputs, p.params, hyper=case.hyper, variant=variant, dtype="float64")
    except SpecError as exc:
        assert "variance" in str(exc), exc  # the NaN column reaches a layer norm
        return True
    return False


@pytest.mark.parametrize("name,algorithm", PADDED_PAIRS)
def test_padded_layer_empty_query_matches_the_declaration_and_a_wrong_one_fails(name: str, algorithm: str) -> None:
    """A pad that leaves a query no key. Slow path: the declared "zeros" passes the judge at every
    declared dtype (batched call included) and "uniform" is caught in float64. Fast path: torch
    gives NaN in that column at every dtype (declared "nan"); "zeros" and "uniform" are caught.

    Under "nan" the spec itself refuses such a case for a layer entry: the NaN attention column
    reaches a layer norm, whose variance check (spec/normalization.py ``_sigma``) raises
    SpecError, so the harness counts the case rejected: a "nan" declaration, right (fast) or
    wrong (slow), is never judged on an empty query. Pinned here so that a spec that carries
    the NaN through shows up."""
    impl = LAYER_PLUGINS[name]
    variant = _declared(impl, algorithm)
    assert variant.empty_query == ("nan" if name in FAST else "zeros")
    for given in NO_KEY_GIVEN[algorithm]:
        if name in FAST:
            for dtype in impl.dtypes:  # what the declaration says, checked on torch directly
                out = _call_layer(impl, algorithm, dtype, batched=False, given=given)  # (d_e, ℓ)
                assert np.isnan(out[:, 0]).all() and not np.isnan(out[:, given["pad"]]).any(), (name, dtype)
        else:
            for dtype in impl.dtypes:
                j = _judge(impl, algorithm, variant, dtype, seed=11, given=given)
                assert j.ok, (name, algorithm, given, dtype, [f.message for f in j.findings][:2])
        for other in {"zeros", "uniform", "nan"} - {variant.empty_query}:
            wrong = variant.replace(empty_query=other)
            if _spec_refuses(algorithm, wrong, given):
                assert other == "nan", (name, algorithm, other)
                continue
            checks = [f.check for f in _judge(impl, algorithm, wrong, "float64", seed=11, given=given).findings]
            assert checks, f"{name} {algorithm} {given}: empty_query={other} was not caught"
