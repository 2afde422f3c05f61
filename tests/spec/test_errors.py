"""Bad input raises SpecError (a ValueError) naming algorithm and argument,
and nothing else escapes.

docs/spec.md: "SpecError is raised for: mismatched shapes, unknown or
missing parameters, token IDs outside [0, N_V), positions outside
[0, ℓ_max), sequences longer than ℓ_max, an empty query under
empty_query="error", non-finite or non-real numbers, zero variance under a
no-epsilon norm, and an output that overflows." Each kind is checked
through ``evaluate`` (and, where the paper-faithful functions check it
themselves, directly), with ``pytest.raises(SpecError)``: any other
exception type (IndexError, ZeroDivisionError, a bare ValueError, ...)
propagates and fails the test.
"""

from __future__ import annotations

import copy
import math
import random
from typing import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ftspec.spec import (
    SpecError,
    attention,
    embed,
    evaluate,
    layer_norm,
    positional_embedding,
    rms_norm,
    token_embedding,
    unidirectional_mask,
)
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import PAPER, VariantSet

from .helpers import FAST, FORWARD, case

ATTN_NOBIAS = PAPER.replace(attn_bias=False)


def expect(name: str, inputs: dict, params: dict, argument: str | set[str], *,
           hyper: dict | None = None, variant: VariantSet = PAPER, algorithm: str | None = None) -> SpecError:
    """evaluate() raises SpecError for ``argument`` with a message naming both."""
    with pytest.raises(SpecError) as info:
        evaluate(name, inputs, params, hyper=hyper, variant=variant)
    err = info.value
    assert isinstance(err, ValueError)
    wanted = {argument} if isinstance(argument, str) else argument
    assert err.argument in wanted, f"{err.argument!r} not in {wanted}: {err}"
    assert err.algorithm == (algorithm or name), str(err)
    msg = str(err)
    assert msg.startswith(f"{err.algorithm}: ") and repr(err.argument) in msg
    return err


def mutated(name: str, change: Callable[[dict, dict, dict], None], variant: VariantSet = PAPER, seed: int = 0,
            **overrides: int):
    inputs, params, hyper = case(name, variant, seed, **overrides)
    inputs, params, hyper = copy.deepcopy(inputs), copy.deepcopy(params), dict(hyper)
    change(inputs, params, hyper)
    return inputs, params, hyper


# --------------------------------------------------------------------------
# shapes
# --------------------------------------------------------------------------


def test_mismatched_parameter_shape_names_the_binding():
    i, p, h = mutated("attention", lambda i, p, h: [row.append(0.5) for row in p["W_k"]])
    err = expect("attention", i, p, "W_k")
    assert "d_z" in str(err) and "'Z'" in str(err)  # where d_z was bound


@pytest.mark.parametrize("name,target,axis", [
    ("mh_attention", "W_o", "col"), ("mh_attention", "heads.1.b_v", "row"), ("layer_norm", "gamma", "row"),
    ("encoder_layer", "W_mlp2", "col"), ("decoder_layer", "cross_attn.heads.0.W_k", "col"),
    ("unembedding", "W_u", "col"), ("d_transformer", "W_p", "row"), ("e_transformer", "W_f", "col"),
    ("ed_transformer", "dec_layers.0.gamma5", "row"),
])
def test_mismatched_parameter_shapes(name, target, axis):
    """One dimension of a parameter disagrees with a size fixed earlier (by
    an input or a parameter before it in the schema): that parameter is named."""
    def change(i, p, h):
        v = p[target]
        p[target] = [row[:-1] for row in v] if axis == "col" else v[:-1]
    i, p, h = mutated(name, change)
    expect(name, i, p, target, hyper=None)


@pytest.mark.parametrize("name,target", [("attention", "X"), ("attention", "Mask"), ("layer_norm", "X"),
                                         ("decoder_layer", "Z"), ("basic_single_query_attention", "E")])
def test_mismatched_input_shapes(name, target):
    def change(i, p, h):
        i[target] = [row[:-1] for row in i[target]] if target == "Mask" else i[target][:-1]
    i, p, h = mutated(name, change)
    # the disagreement is found at the input or at the first parameter it binds against
    e = REGISTRY[name]
    expect(name, i, p, {target} | set(p) | {s.name for s in e.inputs})


@pytest.mark.parametrize("bad", [[[1.0, 2.0], [3.0]], [1.0, 2.0], [[[1.0]]], 1.0, "X", None, []])
def test_ragged_or_wrongly_nested_inputs(bad):
    i, p, h = mutated("attention", lambda i, p, h: None)
    i["X"] = bad
    expect("attention", i, p, {"X", "Mask", "W_q"})


def test_direct_calls_check_shapes_too():
    i, p, h = case("attention")
    from ftspec.spec.params import AttentionParams
    W = AttentionParams(**p)
    with pytest.raises(SpecError) as info:
        attention(i["X"], i["Z"], W, [[1] * 2])  # Mask of the wrong shape
    assert info.value.argument == "Mask" and info.value.algorithm == "attention"
    with pytest.raises(SpecError):
        layer_norm([1.0, 2.0], [1.0], [0.0])  # γ of the wrong length
    with pytest.raises(SpecError):
        layer_norm([], [], [])


# --------------------------------------------------------------------------
# parameters and inputs present or not
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name,target", [("attention", "W_q"), ("mh_attention", "heads.0.b_k"),
                                         ("gpt2_layer", "gamma2"), ("ed_transformer", "W_u"),
                                         ("d_transformer", "W_e")])
def test_missing_parameter(name, target):
    i, p, h = mutated(name, lambda i, p, h: p.pop(target))
    err = expect(name, i, p, target)
    assert "missing" in str(err)


@pytest.mark.parametrize("name,target,variant", [
    ("attention", "W_x", PAPER), ("attention", "b_q", ATTN_NOBIAS), ("mh_attention", "b_o", ATTN_NOBIAS),
    ("d_transformer", "W_p", PAPER.replace(positions="sinusoidal_vaswani")),
    ("d_transformer", "W_u", PAPER.replace(unembedding="tied")),
    ("layer_norm", "beta", PAPER.replace(affine="scale")), ("rms_norm", "beta", PAPER),
])
def test_unexpected_parameter(name, target, variant):
    def change(i, p, h):
        p[target] = [0.0] * 3
    i, p, h = mutated(name, change, variant)
    expect(name, i, p, target, hyper=h, variant=variant)


def test_missing_and_unknown_inputs():
    i, p, h = case("attention")
    expect("attention", {k: v for k, v in i.items() if k != "Z"}, p, "Z")
    expect("attention", {**i, "Y": i["X"]}, p, "Y")


# --------------------------------------------------------------------------
# tokens, positions, lengths
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name,target", [("embedding", "x"), ("d_transformer", "x"), ("e_transformer", "x"),
                                         ("ed_transformer", "z"), ("ed_transformer", "x")])
@pytest.mark.parametrize("bad", ["negative", "N_V"])
def test_tokens_outside_the_vocabulary(name, target, bad):
    def change(i, p, h):
        i[target][-1] = -1 if bad == "negative" else h["N_V"]
    i, p, h = mutated(name, change)
    err = expect(name, i, p, target, hyper=h)
    assert "N_V" in str(err)


@pytest.mark.parametrize("bad", [-1, 5, 2**70])
def test_token_embedding_refuses_ids_outside_the_vocabulary(bad):
    i, p, h = case("token_embedding", N_V=5)
    expect("token_embedding", {"v": bad}, p, "v")
    with pytest.raises(SpecError):
        token_embedding(bad, p["W_e"])


@pytest.mark.parametrize("bad", [-1, 4])
def test_positions_outside_ell_max(bad):
    i, p, h = case("positional_embedding", ell_max=4)
    expect("positional_embedding", {"t": bad}, p, "t")
    with pytest.raises(SpecError):
        positional_embedding(bad, p["W_p"])


@pytest.mark.parametrize("name,length", [("embedding", "ell"), ("d_transformer", "ell"), ("e_transformer", "ell"),
                                         ("ed_transformer", "ell_x"), ("ed_transformer", "ell_z")])
@pytest.mark.parametrize("positions", ["learned", "sinusoidal_paper"])
def test_sequences_longer_than_ell_max(name, length, positions):
    variant = PAPER.replace(positions=positions)
    seq = {"ell": "x", "ell_x": "x", "ell_z": "z"}[length]

    def change(i, p, h):
        i[seq] = i[seq] + [0] * (h["ell_max"] + 1 - len(i[seq]))
        h[length] = h["ell_max"] + 1
    i, p, h = mutated(name, change, variant)
    expect(name, i, p, {length, seq}, hyper=h, variant=variant)


def test_embed_refuses_long_sequences_directly():
    i, p, h = case("embedding")
    with pytest.raises(SpecError) as info:
        embed([0] * (h["ell_max"] + 1), p["W_e"], p["W_p"])
    assert info.value.argument == "x"


@pytest.mark.parametrize("bad", [1.0, 1.5, "1", True, None, [1], float("nan")])
@pytest.mark.parametrize("name", ["embedding", "d_transformer"])
def test_non_integer_tokens(name, bad):
    def change(i, p, h):
        i["x"][0] = bad
    i, p, h = mutated(name, change)
    expect(name, i, p, "x", hyper=h)


# --------------------------------------------------------------------------
# masks and empty queries
# --------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [2, -1, 0.5, "1", None, float("nan")])
@pytest.mark.parametrize("name", ["attention", "mh_attention"])
def test_mask_entries_must_be_0_or_1(name, bad):
    def change(i, p, h):
        i["Mask"][0][0] = bad
    i, p, h = mutated(name, change)
    expect(name, i, p, "Mask")


@pytest.mark.parametrize("name", ["attention", "mh_attention"])
def test_empty_query_is_refused_by_default(name):
    def change(i, p, h):
        for row in i["Mask"]:
            row[1] = 0
    i, p, h = mutated(name, change)
    err = expect(name, i, p, "Mask")
    assert "t_x=1" in str(err)


def test_unidirectional_mask_sizes():
    for bad in (0, -1, 1.5, True):
        with pytest.raises(SpecError):
            unidirectional_mask(bad, 2)
        with pytest.raises(SpecError):
            evaluate("unidirectional_mask", hyper={"ell_z": bad, "ell_x": 2})


# --------------------------------------------------------------------------
# numbers
# --------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("name,target", [("attention", "X"), ("attention", "Z"), ("attention", "b_v"),
                                         ("layer_norm", "X"), ("layer_norm", "gamma"),
                                         ("d_transformer", "W_e"), ("d_transformer", "layers.0.attn.W_o"),
                                         ("ed_transformer", "enc_layers.0.beta1")])
def test_non_finite_numbers(name, target, bad):
    def change(i, p, h):
        d = i if target in i else p
        v = d[target]
        if isinstance(v[0], list):
            v[-1][-1] = bad
        else:
            v[-1] = bad
    i, p, h = mutated(name, change)
    err = expect(name, i, p, target, hyper=h)
    assert "finite" in str(err)


@pytest.mark.parametrize("bad", ["1.0", None, True, 1j, [1.0]])
def test_non_real_numbers(bad):
    i, p, h = case("attention")
    i["X"][0][0] = bad
    expect("attention", i, p, {"X"})


@pytest.mark.parametrize("name", ["layer_norm", "rms_norm"])
def test_zero_variance_without_epsilon(name):
    """A constant column (layer norm) or a zero column (RMSnorm) divides by
    √0 in the paper: refused. With ε > 0 it is fine (control)."""
    X = [[2.0, 1.0], [2.0, -1.0], [2.0, 0.5]] if name == "layer_norm" else [[0.0, 1.0], [0.0, 2.0], [0.0, 0.0]]
    params = {"gamma": [1.0] * 3, "beta": [0.0] * 3} if name == "layer_norm" else {"gamma": [1.0] * 3}
    err = expect(name, {"X": X}, params, {"e", "X"})
    assert "0" in str(err)
    fn = layer_norm if name == "layer_norm" else rms_norm
    col = [row[0] for row in X]
    with pytest.raises(SpecError):
        fn(col, *([[1.0] * 3, [0.0] * 3] if name == "layer_norm" else [[1.0] * 3]))
    eps = PAPER.replace(epsilon=1e-5, epsilon_placement="inside_root")
    out = evaluate(name, {"X": X}, params, variant=eps)["X_hat"]
    assert [row[0] for row in out] == [0.0, 0.0, 0.0]


def test_zero_variance_inside_a_layer_names_the_layer():
    """gpt2_layer normalises its input first (pre-LN): a constant input column is refused."""
    i, p, h = case("gpt2_layer")
    for row in i["X"]:
        row[0] = 1.25
    expect("gpt2_layer", i, p, {"e", "X"})


def test_unbiased_variance_needs_two_rows():
    with pytest.raises(SpecError):
        layer_norm([1.0], [1.0], [0.0], variant=PAPER.replace(variance="unbiased"))
    expect("layer_norm", {"X": [[1.0, 2.0]]}, {"gamma": [1.0], "beta": [0.0]}, "d_e",
           variant=PAPER.replace(variance="unbiased"))


# --------------------------------------------------------------------------
# hyperparameters, variant, algorithm
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name,hyper,argument", [
    ("attention", {"d_attn": 5}, "d_attn"),
    ("attention", {"ell_x": 7}, "ell_x"),
    ("mh_attention", {"H": 3}, {"heads.2.W_q"}),
    ("d_transformer", {"L": 2}, {"layers.1.attn.heads.0.W_q"}),
    ("d_transformer", {"N_V": 9}, "N_V"),
    ("attention", {"d_foo": 1}, "hyper"),
    ("attention", {"d_attn": 0}, "d_attn"),
    ("attention", {"d_attn": True}, "d_attn"),
    ("attention", {"d_attn": 2.0}, "d_attn"),
])
def test_hyperparameters_that_disagree_with_shapes(name, hyper, argument):
    i, p, _ = case(name, L=1)  # one layer: the hyper {"L": 2} then disagrees with the parameters
    expect(name, i, p, argument, hyper=hyper)


def test_hyperparameters_nothing_determines():
    expect("sinusoidal_paper", {}, {}, {"d_e", "ell_max"})
    expect("d_transformer", *case("d_transformer", PAPER.replace(positions="none"))[:2], "ell_max",
           variant=PAPER.replace(positions="none"))


def test_tied_unembedding_needs_d_f_equal_d_e():
    v = PAPER.replace(unembedding="tied")
    i, p, h = case("e_transformer", v, d_f=3)
    expect("e_transformer", i, p, "d_f", hyper=h, variant=v)


def test_variant_and_algorithm_names():
    i, p, h = case("attention")
    with pytest.raises(SpecError) as info:
        evaluate("attention", i, p, variant={"attn_bias": False})  # type: ignore[arg-type]
    assert info.value.argument == "variant"
    with pytest.raises(SpecError) as info:
        evaluate("attention_v2", i, p)
    assert info.value.argument == "algorithm"


# --------------------------------------------------------------------------
# fuzzing: every corruption of a valid case gives a result or a SpecError
# --------------------------------------------------------------------------

BAD_LEAVES = [math.nan, math.inf, -math.inf, "x", None, True, [], [1.0], -1, 0.5, 7, 2**40]


@st.composite
def corrupted_cases(draw):
    name = draw(st.sampled_from(sorted(FORWARD)))
    e = REGISTRY[name]
    variant = draw(st.sampled_from([PAPER, ATTN_NOBIAS, PAPER.replace(positions="sinusoidal_vaswani"),
                                    PAPER.replace(unembedding="tied", logit_bias=True)]))
    seed = draw(st.integers(0, 100))
    inputs, params, hyper = case(name, variant, seed)
    inputs, params = copy.deepcopy(inputs), copy.deepcopy(params)
    pools = [d for d in (inputs, params) if d]
    kind = draw(st.sampled_from(["leaf", "drop_row", "drop_col", "add_row", "wrap", "scalar", "delete",
                                 "extra", "hyper"]))
    if kind == "hyper":
        key = draw(st.sampled_from(list(e.hyper)))
        hyper = dict(hyper, **{key: draw(st.sampled_from([0, 1, 2, hyper[key] + 1, -3, True]))})
        return name, inputs, params, hyper, variant
    if not pools:
        return name, inputs, params, hyper, variant
    d = draw(st.sampled_from(pools))
    key = draw(st.sampled_from(sorted(d)))
    v = d[key]
    rng = random.Random(draw(st.integers(0, 1000)))
    if kind == "leaf":
        bad = draw(st.sampled_from(BAD_LEAVES))
        if isinstance(v, list) and v:
            row = v[rng.randrange(len(v))] if isinstance(v[0], list) else v
            if row:
                row[rng.randrange(len(row))] = bad
        else:
            d[key] = bad
    elif kind == "drop_row" and isinstance(v, list) and v:
        v.pop()
    elif kind == "drop_col" and isinstance(v, list) and v and isinstance(v[0], list):
        for row in v:
            if row:
                row.pop()
    elif kind == "add_row" and isinstance(v, list) and v:
        v.append(copy.deepcopy(v[-1]))
    elif kind == "wrap":
        d[key] = [v]
    elif kind == "scalar":
        d[key] = 1.0
    elif kind == "delete":
        del d[key]
    elif kind == "extra":
        d[key + "_extra"] = v
    return name, inputs, params, hyper, variant


@FAST
@given(corrupted_cases())
def test_corrupted_input_gives_a_result_or_spec_error(c):
    name, inputs, params, hyper, variant = c
    try:
        evaluate(name, inputs, params, hyper=hyper, variant=variant)
    except SpecError as err:
        assert err.algorithm == name and err.argument
        assert str(err).startswith(f"{name}: argument ")


# --------------------------------------------------------------------------
# overflow: "an output that overflows" is refused, never answered wrongly
# --------------------------------------------------------------------------


@pytest.mark.parametrize("big", [1e200, 1e300])
def test_overflowing_attention_is_refused_with_spec_error(big):
    """Finite but huge inputs overflow the binary64 scores. The spec must
    raise SpecError (docs/spec.md), not let math.fsum's bare ValueError or
    OverflowError escape."""
    X = [[big, 1.0], [2.0, -big]]
    W = [[1.0, 1.0], [1.0, -1.0]]
    params = {"W_q": W, "b_q": [0.0, 0.0], "W_k": W, "b_k": [0.0, 0.0], "W_v": W, "b_v": [0.0, 0.0]}
    with pytest.raises(SpecError):
        evaluate("attention", {"X": X, "Z": X, "Mask": [[1, 1], [1, 1]]}, params)


@pytest.mark.parametrize("name", ["layer_norm", "rms_norm"])
def test_overflowing_variance_is_refused_not_answered_wrongly(name):
    """layer_norm([1e155, −1e155]) = [1, −1] and rms_norm([1e200, 0]) = [√2, 0]
    exactly; the variance Σc²/d overflows binary64. The spec must either
    answer right or raise SpecError; it must not return [0, 0]."""
    col = [1e155, -1e155] if name == "layer_norm" else [1e200, 0.0]
    want = [1.0, -1.0] if name == "layer_norm" else [math.sqrt(2.0), 0.0]
    params = {"gamma": [1.0, 1.0], "beta": [0.0, 0.0]} if name == "layer_norm" else {"gamma": [1.0, 1.0]}
    try:
        out = evaluate(name, {"X": [[x] for x in col]}, params)["X_hat"]
    except SpecError:
        return
    got = [row[0] for row in out]
    assert all(abs(g - w) <= 4e-16 * abs(w) + 1e-300 for g, w in zip(got, want)), got


def test_integers_beyond_binary64_are_refused_with_spec_error():
    """10**400 is a real number but no binary64 one: SpecError, not OverflowError."""
    with pytest.raises(SpecError):
        evaluate("layer_norm", {"X": [[10**400], [1.0]]}, {"gamma": [1.0, 1.0], "beta": [0.0, 0.0]})
