"""First divergence inside a model (conformance/forensics/divergence/).

The spec's intermediate values are computed by calling the spec's layer functions in sequence;
that sequence must reproduce the spec's own output exactly (float64, the same operations in the
same order), or every later comparison would rest on other values. Then bug-zoo mutants whose bug
sits in one known place are located: the layer and sublayer they name come from the catalogue's
description of the bug (a residual, an activation, the unembedding, another layer's parameters),
never from the code under test; a correct implementation is located nowhere.
"""

from __future__ import annotations

import numpy as np
import pytest

from ftspec.conformance.core.case import Case
from ftspec.conformance.forensics.divergence import (
    expected_matches,
    layer_walk,
    locate,
    model_walk,
    spec_intermediates,
)
from ftspec.conformance.core.execute import Member
from ftspec.impls.discovery import load
from ftspec.spec.evaluation import evaluate, intermediates
from ftspec.spec.functions import apply
from ftspec.spec.linalg import add_bias, matmul
from ftspec.spec.variants import PAPER
from ftspec.tools.zoo import build, mutant

MODELS = {"d_transformer": "d", "e_transformer": "e", "ed_transformer": "ed"}
VARIANTS = [
    PAPER,
    PAPER.replace(norm_placement="pre", final_norm="final", unembedding="tied", logit_bias=True),
    PAPER.replace(norm_placement="post", activation="gelu_tanh", embedding_norm=True, attn_bias=False),
]


def _case(algorithm: str, variant=PAPER, **hyper) -> Case:
    c = Case.build(algorithm, None, variant)
    if hyper:
        c = Case.build(algorithm, {**c.hyper, **hyper}, variant)
    return c


@pytest.mark.parametrize("variant", VARIANTS, ids=["paper", "pre-final-tied", "post-tanh-embnorm"])
@pytest.mark.parametrize("algorithm", sorted(MODELS))
def test_the_walk_reproduces_the_spec_exactly(algorithm, variant):
    c = _case(algorithm, variant)
    want = evaluate(algorithm, c.spec_inputs(), c.spec_params(), hyper=c.hyper, variant=variant)["P"]
    steps, P = model_walk(MODELS[algorithm], c.inputs, c.params, c.hyper, variant)
    assert np.array_equal(P, np.asarray(want, dtype=np.float64))
    # every step's input is the previous step's output: the first is the embedding, the last the unembedding
    assert steps[0].entry == "embedding" and steps[-1].entry == "unembedding"
    assert sum(s.entry.endswith("_layer") for s in steps) == sum(c.hyper.get(k, 0) for k in ("L", "L_enc", "L_dec"))
    # the values are the model's own, recorded as it runs: each step's entry, fed the recorded value at
    # its input, gives exactly the next step's input (the last gives P); the sequence is the whole model
    context = [s for s in steps if s.where == "decoder embedding"]
    for k, s in enumerate(steps):
        got = evaluate(s.entry, {n: v.tolist() for n, v in s.inputs.items()},
                       {n: v.tolist() for n, v in s.params.items()}, hyper=s.hyper, variant=variant)
        out = np.asarray(next(iter(got.values())), dtype=np.float64)
        if k + 1 == len(steps):
            assert np.array_equal(out, P)
        elif steps[k + 1] in context:  # the encoder's output is the decoder layers' context
            assert np.array_equal(out, next(t.context for t in steps[k + 1:] if t.context is not None)), s.where
        elif steps[k + 1].where == "head norm":  # Algorithm 9 line 10 comes between (no entry of its own)
            dense = add_bias(matmul(c.params["W_f"].tolist(), out.tolist()), c.params["b_f"].tolist())
            line10 = apply(variant.resolved_activation("bert"), dense)
            assert np.array_equal(np.asarray(line10), steps[k + 1].inputs["X"]), s.where
        else:
            nxt = steps[k + 1].inputs
            assert np.array_equal(out, nxt["X"] if "X" in nxt else nxt["Z"]), s.where


LAYER_VARIANTS = {
    "post": PAPER.replace(norm_placement="post"),
    "pre": PAPER.replace(norm_placement="pre"),
    "res_post": PAPER.replace(norm_placement="res_post"),
    "pre-swiglu-deep": PAPER.replace(norm_placement="pre", mlp="gated", activation="silu", mlp_depth=3),
}


@pytest.mark.parametrize("placement", sorted(LAYER_VARIANTS))
@pytest.mark.parametrize("layer", ["encoder_layer", "bert_layer", "gpt2_layer", "decoder_layer"])
def test_the_layer_walk_reproduces_each_layer_exactly(layer, placement):
    variant = LAYER_VARIANTS[placement]
    c = _case(layer, variant)
    want = evaluate(layer, c.spec_inputs(), c.spec_params(), hyper=c.hyper, variant=variant)
    x_name = "Z" if layer == "encoder_layer" else "X"
    Z = c.inputs["Z"].tolist() if layer == "decoder_layer" else None
    blocks, out = layer_walk(layer, c.inputs[x_name].tolist(), c.params, variant, Z)
    assert np.array_equal(np.asarray(out), np.asarray(next(iter(want.values()))))
    assert [b.name for b in blocks][-1] == "MLP" and all(b.norm_in is not None for b in blocks)
    # each block as the walk reads it: its norm entry on what the walk says it reads, its attention entry
    # on the walk's (X, Z, Mask), give the layer's own recorded values exactly
    named = intermediates(layer, c.spec_inputs(), c.spec_params(), hyper=c.hyper, variant=variant)
    norms = {"decoder_layer": ("norm1", "norm2", "norm3")}.get(layer, ("norm1", "norm2"))
    for b, norm in zip(blocks, norms):
        g = {k: v for k, v in (("gamma", c.params.get(b.gamma)), ("beta", c.params.get(b.beta))) if v is not None}
        got = evaluate("layer_norm", {"X": b.norm_in}, {k: v.tolist() for k, v in g.items()}, variant=variant)
        assert np.array_equal(np.asarray(got["X_hat"]), np.asarray(named[norm])), (b.name, norm)
        if b.attn_in is not None:
            p = {k[len(b.attn):]: v.tolist() for k, v in c.params.items() if k.startswith(b.attn)}
            q, kv, mask = b.attn_in
            got = evaluate("mh_attention", {"X": q, "Z": kv, "Mask": mask}, p, variant=variant)
            assert np.array_equal(np.asarray(got["V_tilde"]), np.asarray(named[b.attn[:-1]])), b.name
        else:
            assert np.array_equal(np.asarray(b.pre), np.asarray(named["mlp.pre"]))


def test_the_named_intermediates_end_in_the_spec_logits():
    c = _case("d_transformer")
    named = spec_intermediates("d", c.inputs, c.params, c.hyper, PAPER)
    coarse = ["embedding", "layers.0", "layers.1", "final_norm", "logits"]
    assert [n for n in named if n in coarse] == coarse and list(named)[-1] == "logits"
    # the fine names inside them, in the order computed: a layer's pieces before the layer
    assert list(named).index("layers.0.attn.heads.1.A") < list(named).index("layers.0.mlp.hidden") < \
        list(named).index("layers.0") < list(named).index("layers.1.norm1.sigma")
    P = evaluate("d_transformer", c.spec_inputs(), c.spec_params(), hyper=c.hyper)["P"]
    L = named["logits"]
    softmax = np.exp(L - L.max(axis=0)) / np.exp(L - L.max(axis=0)).sum(axis=0)
    assert np.allclose(softmax, np.asarray(P), rtol=1e-13, atol=0)


def _locate(m_id: str, algorithm: str, variant=PAPER, **hyper):
    impl = build(mutant(m_id)) if m_id != "correct" else load("numpy")
    c = _case(algorithm, variant, **hyper)
    return locate(Member(m_id, impl, "cpu"), algorithm, c.inputs, c.params, c.hyper, variant, "float64")


# (mutant, model, variant, where it must be located: from the bug's description in the catalogue)
LOCATED = [
    ("pre-ln-residual-normalised", "d_transformer", PAPER, "layer 0/residual"),  # X <- norm(X) + f(norm(X))
    ("gelu-tanh", "d_transformer", PAPER, "layer 0/MLP activation"),  # GELU's tanh form in the MLP
    ("scale-missing", "e_transformer", PAPER, "layer 0/self-attention"),  # scores not divided by √d_attn
    ("epsilon-added", "ed_transformer", PAPER, "encoder layer 0/norm"),  # ε in the layer norm
    ("tied-unembedding-untransposed", "d_transformer", PAPER.replace(unembedding="tied"), "unembedding"),
    ("layers-share-parameters", "d_transformer", PAPER, "layer 1"),  # layer 1 runs with layer 0's θ
    ("bert-head-relu", "e_transformer", PAPER, "head"),  # ETransformer line 10's activation
    ("final-norm-missing", "d_transformer", PAPER, "final norm"),
    ("cross-attention-to-self", "ed_transformer", PAPER, "decoder layer 0/cross-attention"),
    ("mlp-bias-wrong-axis", "e_transformer", PAPER, "layer 0/MLP"),  # raises: b1 added along ℓ (d_mlp ≠ ℓ)
    ("causal-mask-excludes-self", "d_transformer", PAPER, "layer 0/self-attention"),  # its causal mask
]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("m_id,algorithm,variant,where", LOCATED, ids=[m for m, *_ in LOCATED])
def test_a_zoo_bug_is_located_in_its_layer_and_sublayer(m_id, algorithm, variant, where):
    d = _locate(m_id, algorithm, variant)
    assert expected_matches(where, d.to_dict()), (m_id, d.label(), d.detail, d.checks[-3:])
    assert d.lines()[0].startswith("first divergence: ") and not d.gave_up


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("m_id,algorithm,where", [("final-norm-missing", "d_transformer", "final norm"),
                                                  ("bert-head-relu", "e_transformer", "head")])
def test_a_norm_without_gamma_leaves_the_place_open_never_wrong(m_id, algorithm, where):
    """Norms without γ (affine=none) cannot be cut: the walk once named the first place after the
    embedding (the unembedding, the embedding) for a bug in the final norm or the head. The case
    cannot tell where on the path: the right place is among the candidates, no other is named."""
    d = _locate(m_id, algorithm, PAPER.replace(affine="none"))
    named = expected_matches(where, d.to_dict())
    open_with_it = not d.where and any(c == where or c.startswith(where + "/") for c in d.candidates)
    assert named or open_with_it, (m_id, d.label(), d.candidates, d.detail)
    assert d.where in ("", where), (m_id, d.label(), d.detail)


def test_a_failing_layer_entry_is_located_inside_itself():
    d = _locate("epsilon-added", "gpt2_layer")
    assert (d.where, d.sublayer) == ("layer", "norm")


def test_the_correct_implementation_is_located_nowhere():
    for algorithm in ("d_transformer", "gpt2_layer"):
        d = _locate("correct", algorithm)
        assert not d.found, (algorithm, d.label())
        assert all(r["ok"] is not False for r in d.checks)


def test_a_loss_whose_forward_pass_is_right_is_blamed_on_the_loss():
    d = _locate("loss-target-not-shifted", "d_loss")
    assert d.where == "loss or its gradient"
    d = _locate("epsilon-added", "d_loss")
    assert expected_matches("layer 0/norm", d.to_dict())


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_an_exception_of_a_model_is_located_and_reported_without_a_variant_search():
    """W_e where W_eᵀ belongs (tied): the shapes clash when N_V ≠ d_e, the model raises."""
    from ftspec.conformance.forensics.diagnosis import diagnose_failure

    variant = PAPER.replace(unembedding="tied")
    c = _case("d_transformer", variant)
    assert c.hyper["N_V"] != c.hyper["d_e"]
    m = Member("m", build(mutant("tied-unembedding-untransposed")), "cpu")
    d = diagnose_failure(m, c, "exception", "float64", timeout=30.0)
    assert d is not None and d.divergence["where"] == "unembedding"
    assert d.lines()[0].startswith("first divergence: unembedding") and "likely cause" not in "".join(d.lines())
    # a causal mask without its diagonal leaves the first query no key: the implementation raises
    # (empty_query="error"); the decoder layer raises, and its unidirectional_mask entry departs
    c = _case("ed_transformer")
    m = Member("m", build(mutant("causal-mask-excludes-self")), "cpu")
    d = diagnose_failure(m, c, "exception", "float64", timeout=30.0)
    assert expected_matches("decoder layer 0/self-attention", d.divergence), d.divergence["detail"]


def test_expected_matches_reads_where_and_sublayer():
    rec = {"where": "encoder layer 0", "sublayer": "norm"}
    assert expected_matches("layer 0/norm", rec) and expected_matches("layer 0", rec)
    assert not expected_matches("layer 1/norm", rec) and not expected_matches("layer 0/MLP", rec)
    assert not expected_matches("layer 0", {"where": "", "sublayer": ""})
    assert expected_matches("layer 0/MLP|head", {"where": "head", "sublayer": ""})


# -- the implementation's own named intermediates ---------------------------------------------------

def _with_intermediates(impl, planted_in: str = ""):
    """The NumPy plugin with named intermediates of its DTransformer, computed step by step with its
    own functions (impls/numpy/architectures.py: d_logits_fwd's steps); ``planted_in``: the step
    after which 0.5 is added to every value (a bug planted there, carried into later steps)."""
    import dataclasses

    from ftspec.impls.numpy import architectures as A
    from ftspec.impls.numpy import layers as L

    def d_intermediates(inputs, params, ctx):
        v, h = ctx.variant, ctx.hyper
        out = {}

        def keep(name, X):
            X = X + 0.5 if name == planted_in else X
            out[name] = X
            return X

        X = keep("embedding", A.embed_tokens(inputs["x"], params, v, h["ell_max"]))
        for l in range(h["L"]):
            X = keep(f"layers.{l}", L.stack_layer(X, params, f"layers.{l}.", v, h["H"], "gpt2"))
        X = keep("final_norm", A._final_norm(X, params, v, "gpt2", "gamma", "beta")[0])
        keep("logits", A.unembed_logits_fwd(X, params, v)[0])
        return out

    return dataclasses.replace(impl, intermediates={"d_transformer": d_intermediates})


def _with_spec_intermediates(impl, planted: str, masked: float = -np.inf):
    """A plugin offering every name the spec records (the spec's own values, as an implementation that
    computes them right would give), with 0.5 added to ``planted`` only, and masked scores given as
    ``masked`` instead of −∞."""
    import dataclasses

    def d_intermediates(inputs, params, ctx):
        x = {"x": np.asarray(inputs["x"])}
        p = {k: np.asarray(v) for k, v in params.items()}
        out = spec_intermediates("d", x, p, ctx.hyper, ctx.variant)
        out = {k: np.where(np.isneginf(v), masked, v) for k, v in out.items()}
        if planted:
            out[planted] = out[planted] + 0.5
        return out

    return dataclasses.replace(impl, intermediates={"d_transformer": d_intermediates})


def test_fine_named_intermediates_are_compared_too():
    """A departure planted in one head's attention weights is named by its fine name, before the layer
    that carries it; masked scores given as a large negative number instead of −∞ are no departure."""
    c = _case("d_transformer")
    for planted, masked in (("layers.1.attn.heads.0.A", -np.inf), ("layers.0.norm2.sigma", -1e9), ("", -1e9)):
        impl = _with_spec_intermediates(load("numpy"), planted, masked)
        d = locate(Member("numpy", impl, "cpu"), "d_transformer", c.inputs, c.params, c.hyper, PAPER, "float64")
        assert d.intermediate == planted, (planted, d.intermediate)
    impl = _with_spec_intermediates(load("numpy"), "", masked=-1.0)  # a masked score that still gets weight
    d = locate(Member("numpy", impl, "cpu"), "d_transformer", c.inputs, c.params, c.hyper, PAPER, "float64")
    assert d.intermediate == "layers.0.attn.heads.0.S"


def test_named_intermediates_name_the_first_that_departs():
    c = _case("d_transformer")
    for planted in ("layers.1", "final_norm", ""):
        impl = _with_intermediates(load("numpy"), planted)
        d = locate(Member("numpy", impl, "cpu"), "d_transformer", c.inputs, c.params, c.hyper, PAPER, "float64")
        assert d.intermediate == planted
        assert not d.found  # its entries agree: only its own intermediates show the planted step


@pytest.mark.parametrize("depth", [1, 2])
def test_a_one_layer_mlp_is_silenced_and_located(depth):
    """Under ``mlp="one_layer"`` there is no second map to zero: silencing zeroes the MLP's last
    layer (W_mlp1, b_mlp1, or the last ``mlp_hidden``), act(0) = 0, so the spec's MLP adds nothing;
    an activation changed in the MLP is located there, the correct implementation nowhere."""
    import dataclasses

    from ftspec.conformance.forensics.divergence.ablations import _silenced
    from ftspec.conformance.forensics.divergence.walk import _blocks

    variant = PAPER.replace(mlp="one_layer", mlp_depth=depth)
    c = _case("gpt2_layer", variant)
    last = f"mlp_hidden.{depth - 2}.W" if depth > 1 else "W_mlp1"
    silent = _silenced(dict(c.params), _blocks("gpt2_layer")[1])
    assert not np.any(silent[last]) and np.any(c.params[last])
    named = intermediates("gpt2_layer", c.spec_inputs(), {k: v.tolist() for k, v in silent.items()},
                          hyper=c.hyper, variant=variant)
    assert not np.any(np.asarray(named["mlp"]))
    numpy_impl = load("numpy")

    def tanh_gelu(fn):
        return lambda i, p, ctx: fn(i, p, dataclasses.replace(ctx, variant=ctx.variant.replace(activation="gelu_tanh")))

    wrong = dataclasses.replace(numpy_impl, algorithms={k: tanh_gelu(f) for k, f in numpy_impl.algorithms.items()})
    m = _case("d_transformer", variant)
    for impl, where in ((numpy_impl, None), (wrong, "MLP")):
        d = locate(Member("numpy", impl, "cpu"), "d_transformer", m.inputs, m.params, m.hyper, variant, "float64")
        assert (d.sublayer.startswith(where) if where else not d.found), (d.label(), d.detail)
