"""The Hugging Face transformers plugins (``transformers``, ``transformers-sdpa``:
GPT-2, BERT and Llama in one plugin, each under its own preset (Llama's entries:
tests/impls/test_hf_llama.py); ``transformers-bert``,
``transformers-bert-sdpa``: BERT alone, kept for scripts that name them).
BERT's padded entries (padded_e_transformer, padded_self_attention) are
declared per path: eager with ``empty_query="uniform"`` (not at float16),
sdpa with ``"zeros"``; a fully padded sequence pins the difference down.

Loaded through discovery as a user gets them (entry points), run through the
harness's library API at every declared dtype, and checked against the
library's own defaults; a wrong declaration (a variant set the library does
not compute) must be found non-conformant, so the passing runs mean
something. The full certification is ``ftspec certify transformers``
(docs/libraries.md); here a few examples per cell keep the file fast.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from ftspec.conformance.core.case import Case  # noqa: E402
from ftspec.conformance.core.examining import examine_case  # noqa: E402
from ftspec.conformance.core.execute import Member  # noqa: E402
from ftspec.conformance.session.commands import Settings, run  # noqa: E402
from ftspec.impls.api import Context  # noqa: E402
from ftspec.impls.discovery import load  # noqa: E402
from ftspec.spec.variants import preset  # noqa: E402

DTYPES = ("float64", "float32", "bfloat16", "float16")
GPT2 = {"d_transformer": "hf-gpt2", "gpt2_layer": "hf-gpt2"}
BERT = {"e_transformer": "hf-bert", "bert_layer": "hf-bert"}
PLUGINS = {  # name: {algorithm: the preset it is declared under}
    "transformers": {**GPT2, "layer_norm": "hf-gpt2", **BERT},  # GPT-2's LayerNorm (ε 1e-5)
    "transformers-sdpa": {**GPT2, **BERT},
    "transformers-bert": {**BERT, "layer_norm": "hf-bert"},  # BERT's LayerNorm (ε 1e-12)
    "transformers-bert-sdpa": dict(BERT),
}
#: the Llama entries the merged plugins hold besides (tests/impls/test_hf_llama.py)
LLAMA = {"transformers": {"padded_d_transformer", "cached_decoding", "padded_causal_self_attention", "rms_norm"},
         "transformers-sdpa": {"padded_d_transformer", "cached_decoding", "padded_causal_self_attention"}}
#: BERT's padded entries, in every plugin that has BERT: hf-bert with the path's empty_query
BERT_PADDED = ("padded_e_transformer", "padded_self_attention")
EMPTY_QUERY = {"eager": "uniform", "sdpa": "zeros"}


def _path(name: str) -> str:
    return "sdpa" if name.endswith("sdpa") else "eager"


def _settings(tmp_path, **kw) -> Settings:
    return Settings(profile="quick", fixtures="none", in_process=True, case_dir=str(tmp_path / "cases"), **kw)


@pytest.mark.parametrize("name", PLUGINS)
def test_discovered_with_its_declarations(name: str) -> None:
    impl = load(name)
    declared = PLUGINS[name]
    assert impl.name == name and set(impl.algorithms) == set(declared) | LLAMA.get(name, set()) | set(BERT_PADDED)
    assert {a: impl.variants_for(a) for a in declared} == {a: (preset(p),) for a, p in declared.items()}
    padded = preset("hf-bert").replace(empty_query=EMPTY_QUERY[_path(name)])
    assert {a: impl.variants_for(a) for a in BERT_PADDED} == {a: (padded,) for a in BERT_PADDED}
    assert tuple(impl.dtypes) == DTYPES and impl.extra["transformers"] == transformers.__version__
    assert impl.extra["attn_implementation"] == _path(name)
    assert not impl.problems()
    for algorithm in BERT_PADDED:  # eager's min-filled mask is not uniform at float16 (below)
        assert impl.dtypes_for(algorithm) == (DTYPES[:3] if _path(name) == "eager" else DTYPES)
    for algorithm in set(declared) - {"layer_norm"}:
        assert ("d_attn", "d_mid") in impl.limits_for(algorithm).equal
        assert ("d_e", "H*d_attn") in impl.limits_for(algorithm).equal


def test_presets_are_the_library_defaults() -> None:
    """The declared switches are what an unmodified config computes."""
    gpt2, bert = transformers.GPT2Config(), transformers.BertConfig()
    assert (gpt2.activation_function, preset("hf-gpt2").activation) == ("gelu_new", "gelu_tanh")
    assert gpt2.layer_norm_epsilon == preset("hf-gpt2").epsilon
    assert gpt2.scale_attn_weights and not gpt2.scale_attn_by_inverse_layer_idx
    assert not gpt2.reorder_and_upcast_attn
    assert (bert.hidden_act, preset("hf-bert").activation) == ("gelu", "gelu_erf")
    assert bert.layer_norm_eps == preset("hf-bert").epsilon


def test_every_plugin_passes_through_the_harness(tmp_path) -> None:
    """Two harness examples (the run minimum) per (algorithm, dtype) cell of the
    merged plugins (GPT-2 judged under hf-gpt2 and BERT under hf-bert in one
    run; Llama's entries have their own file) and of BERT's LayerNorm, the one entry only ``transformers-bert``
    has (its other entries are the functions ``transformers`` and
    ``transformers-sdpa`` call), at float32 and bfloat16 (where sdpa's CPU
    kernel accumulates in float32 and eager does not). float64 is run below,
    float16 by ``ftspec certify`` (docs/libraries.md); all four dtypes here
    would double the time."""
    dtypes = ("float32", "bfloat16")
    bert = load("transformers-bert")
    bert_norm = dataclasses.replace(bert, algorithms={"layer_norm": bert.algorithms["layer_norm"]},
                                    variants=[preset("hf-bert")], limits={})
    algorithms = tuple(sorted({a for algs in PLUGINS.values() for a in algs}))
    result = run(["transformers", "transformers-sdpa", ("transformers-bert", bert_norm)],
                 _settings(tmp_path, examples=2, dtypes=dtypes, algorithms=algorithms))
    assert not result.broken
    cells = {(c.impl, c.algorithm, c.dtype): c
             for c in result.cells if c.status != "not implemented"}
    ran = {"transformers": PLUGINS["transformers"], "transformers-sdpa": PLUGINS["transformers-sdpa"],
           "transformers-bert": {"layer_norm": "hf-bert"}}
    want = {(n, a, d) for n, algs in ran.items() for a in algs for d in dtypes}
    assert set(cells) == want
    bad = {k: (c.status, c.note) for k, c in cells.items() if c.status != "pass" or c.examples < 2}
    assert not bad


@pytest.mark.parametrize("name, algorithm, wrong", [
    ("transformers", "gpt2_layer", dict(activation="gelu_erf")),  # GPT-2's gelu_new is the tanh GELU
    ("transformers", "bert_layer", dict(epsilon=1e-5)),  # BERT's LayerNorm ε is 1e-12
], ids=["gpt2-gelu-erf", "bert-epsilon-1e-5"])
def test_a_wrong_declaration_is_caught(tmp_path, name: str, algorithm: str, wrong: dict) -> None:
    """A wrong set declared for one algorithm of a plugin (the others' sets as they are) fails it."""
    impl = load(name)
    (variant,) = impl.variants_for(algorithm)
    liar = dataclasses.replace(impl, name=f"{name}-wrong",
                               variants={**impl.declared_variants(), algorithm: [variant.replace(**wrong)]})
    assert not liar.problems()
    result = run([liar], _settings(tmp_path, examples=4, algorithms=(algorithm,), dtypes=("float64",)))
    (cell,) = [c for c in result.cells if c.algorithm == algorithm]
    assert cell.status == "fail", (cell.status, cell.note)
    assert result.verdict == "non-conformant"


def test_gpt2_layer_is_causal_in_both_attention_paths() -> None:
    """A block called without a mask would attend both ways in eager mode;
    changing the last column of X must leave every earlier column as it was."""
    rng = np.random.default_rng(0)
    H, hd, d_mlp, ell = 2, 2, 6, 4
    d_e = H * hd
    hyper = dict(H=H, d_e=d_e, d_attn=hd, d_mid=hd, d_mlp=d_mlp, ell=ell)
    p = {"attn.W_o": rng.standard_normal((d_e, d_e)), "attn.b_o": rng.standard_normal(d_e),
         "gamma1": rng.standard_normal(d_e), "beta1": rng.standard_normal(d_e),
         "gamma2": rng.standard_normal(d_e), "beta2": rng.standard_normal(d_e),
         "W_mlp1": rng.standard_normal((d_mlp, d_e)), "b_mlp1": rng.standard_normal(d_mlp),
         "W_mlp2": rng.standard_normal((d_e, d_mlp)), "b_mlp2": rng.standard_normal(d_e)}
    for h in range(H):
        for n in ("q", "k", "v"):
            p[f"attn.heads.{h}.W_{n}"] = rng.standard_normal((hd, d_e))
            p[f"attn.heads.{h}.b_{n}"] = rng.standard_normal(hd)
    X = rng.standard_normal((d_e, ell))
    X2 = X.copy()
    X2[:, -1] += 1.0
    for name in ("transformers", "transformers-sdpa"):
        impl = load(name)
        ctx = Context(algorithm="gpt2_layer", dtype="float64", device="cpu", hyper=hyper,
                      variant=impl.variants_for("gpt2_layer")[0])
        params = {k: impl.from_numpy(v, "float64", "cpu") for k, v in p.items()}
        y1, y2 = (impl.to_numpy(impl.algorithms["gpt2_layer"]({"X": impl.from_numpy(x, "float64", "cpu")},
                                                               params, ctx)) for x in (X, X2))
        assert np.array_equal(y1[:, :-1], y2[:, :-1]), name
        assert not np.allclose(y1[:, -1], y2[:, -1]), name


def test_padded_bert_entries_pass_through_the_harness(tmp_path) -> None:
    """Two harness examples per cell of BERT's padded entries on both paths, at float64 and
    float16 (sdpa only: eager is not declared there)."""
    dtypes = ("float64", "float16")
    result = run(["transformers-bert", "transformers-bert-sdpa"],
                 _settings(tmp_path, examples=2, dtypes=dtypes, algorithms=BERT_PADDED))
    assert not result.broken
    cells = {(c.impl, c.algorithm, c.dtype): c for c in result.cells if c.status != "not implemented"}
    assert set(cells) == {(n, a, d) for n in ("transformers-bert", "transformers-bert-sdpa") for a in BERT_PADDED
                          for d in dtypes if d != "float16" or n.endswith("sdpa")}
    bad = {k: (c.status, c.note) for k, c in cells.items() if c.status != "pass" or c.examples < 2}
    assert not bad


def _fully_padded(algorithm: str, variant, scale: float = 1.0) -> Case:
    """A case of ``algorithm`` whose every position is padding (no query has a key), with W_q and W_k
    multiplied by ``scale`` (a power of two: the values stay representable)."""
    hyper = dict(H=2, d_e=4, d_attn=2, d_mid=2, ell=3)
    if algorithm == "padded_e_transformer":
        hyper |= dict(N_V=7, ell_max=4, L=1, d_mlp=6, d_f=4)
    case = Case.build(algorithm, hyper, variant, seed=5)
    case.inputs["pad"] = np.zeros(3, dtype=bool)
    for k in case.params:
        if k.endswith(("W_q", "W_k")):
            case.params[k] = case.params[k] * scale
    return case


def _judged(impl, case: Case, dtype: str, variant):
    """The harness's judgement (the path of ``ftspec replay``) of ``impl`` on ``case`` under ``variant``."""
    case = Case(case.algorithm, case.hyper, variant, case.inputs, case.params)
    return examine_case(Member(impl.name, impl, "cpu"), case, dtype, timeout=60.0).judgement


@pytest.mark.parametrize("algorithm", BERT_PADDED)
def test_a_fully_padded_sequence_is_uniform_under_eager_and_zeros_under_sdpa(algorithm: str) -> None:
    """No query has a key. Eager adds finfo(dtype).min to every score: equal scores, uniform weights
    (the mean of the values); sdpa's CPU kernel gives zero weights (ṽ = W_o·0 + b_o). Each path passes
    under its own declaration and fails under the other's, at float64 and float32."""
    bert = preset("hf-bert")
    case = _fully_padded(algorithm, bert.replace(empty_query="uniform"))
    for name in ("transformers-bert", "transformers-bert-sdpa"):
        impl = load(name)
        mine = EMPTY_QUERY[_path(name)]
        other = EMPTY_QUERY["eager" if mine == "zeros" else "sdpa"]
        for dtype in ("float64", "float32"):
            right = _judged(impl, case, dtype, bert.replace(empty_query=mine))
            assert right.ok, (name, dtype, [f.message for f in right.findings])
            wrong = _judged(impl, case, dtype, bert.replace(empty_query=other))
            assert not wrong.ok, (name, dtype, f"declaring {other} was not caught")


def test_eager_float16_empty_query_is_not_uniform_under_large_scores() -> None:
    """Why eager's padded entries are not declared at float16: s + finfo(float16).min rounds to
    −65504 only while |s| < 16 (ulp(65504) = 32), so large scores give a fully padded sequence
    non-uniform weights or NaN; sdpa's zeros hold at the same case."""
    case = _fully_padded("padded_self_attention", preset("hf-bert"), scale=16.0)
    eager, sdpa = load("transformers-bert"), load("transformers-bert-sdpa")
    assert not _judged(eager, case, "float16", eager.variants_for("padded_self_attention")[0]).ok
    assert _judged(sdpa, case, "float16", sdpa.variants_for("padded_self_attention")[0]).ok
    assert _judged(eager, case, "float32", eager.variants_for("padded_self_attention")[0]).ok
