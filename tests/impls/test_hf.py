"""The Hugging Face transformers plugins (``transformers``, ``transformers-sdpa``:
GPT-2 and BERT in one plugin, each under its own preset; ``transformers-bert``,
``transformers-bert-sdpa``: BERT alone, kept for scripts that name them).

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


def _settings(tmp_path, **kw) -> Settings:
    return Settings(profile="quick", fixtures="none", in_process=True, case_dir=str(tmp_path / "cases"), **kw)


@pytest.mark.parametrize("name", PLUGINS)
def test_discovered_with_its_declarations(name: str) -> None:
    impl = load(name)
    declared = PLUGINS[name]
    assert impl.name == name and set(impl.algorithms) == set(declared)
    assert {a: impl.variants_for(a) for a in declared} == {a: (preset(p),) for a, p in declared.items()}
    assert tuple(impl.dtypes) == DTYPES and impl.extra["transformers"] == transformers.__version__
    assert impl.extra["attn_implementation"] == ("sdpa" if name.endswith("sdpa") else "eager")
    assert not impl.problems()
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
    run) and of BERT's LayerNorm, the one entry only ``transformers-bert``
    has (its other entries are the functions ``transformers`` and
    ``transformers-sdpa`` call), at float32 and bfloat16 (where sdpa's CPU
    kernel accumulates in float32 and eager does not). float64 is run below,
    float16 by ``ftspec certify`` (docs/libraries.md); all four dtypes here
    would double the time."""
    dtypes = ("float32", "bfloat16")
    bert = load("transformers-bert")
    bert_norm = dataclasses.replace(bert, algorithms={"layer_norm": bert.algorithms["layer_norm"]},
                                    variants=[preset("hf-bert")], limits={})
    result = run(["transformers", "transformers-sdpa", ("transformers-bert", bert_norm)],
                 _settings(tmp_path, examples=2, dtypes=dtypes))
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
