"""Gemma 2's "sandwich" norms (``norm_placement="sandwich"``): a norm before each sublayer, as pre-LN,
and a second norm of the sublayer's own on its output before the residual sum,

    h = x + N₁'(Attn(N₁ x)),   out = h + N₂'(MLP(N₂ h))

(transformers 5.24 ``Gemma2DecoderLayer.forward``: input_layernorm, self_attn,
post_attention_layernorm, residual add; pre_feedforward_layernorm, mlp, post_feedforward_layernorm,
residual add). Checked here:

- the GPT-2 and decoder layers under it are that composition, written out below from the spec's
  norm, attention and MLP functions (the sublayers are the yardstick, tested on their own; the
  wiring is what is under test), and differ from pre-LN and from res-post-norm on the same case;
- the output norms' parameters (γ{k}_out, and β{k}_out where the norm has a β) exist under this
  placement alone and come after every other parameter of the layer, so that every other
  placement's schema, and the order of every other parameter under this one, are as before;
- the parallel residual (GPT-NeoX, GPT-J) stays defined for pre-LN alone: sandwich is refused there.
"""

from __future__ import annotations

import pytest

from ftspec.conformance.core.case import Case
from ftspec.spec import SpecError, evaluate
from ftspec.spec.attention import bidirectional_mask, mh_attention, unidirectional_mask
from ftspec.spec.layers import mlp
from ftspec.spec.linalg import add
from ftspec.spec.normalization import norm_columns
from ftspec.spec.params import DecoderLayerParams, LayerParams, decoder_layer_schema, from_flat, layer_schema
from ftspec.spec.variants import PAPER, parse

SANDWICH = PAPER.replace(norm_placement="sandwich", epsilon=1e-5, epsilon_placement="inside_root")
#: Gemma's conventions with the sandwich: RMSnorm (no β), gains 1 + γ, GeGLU
GEMMA_SANDWICH = parse("gemma+norm_placement=sandwich")


def _case(name: str, variant) -> Case:
    return Case.build(name, variant=variant, seed=11)


def _run(c: Case, variant) -> list:
    out = evaluate(c.algorithm, c.spec_inputs(), c.spec_params(), hyper=c.hyper, variant=variant)
    return out[c.entry.outputs[0].name]


def _ffn(W, variant, arch: str, first: str = "1"):
    act = variant.resolved_activation(arch)
    g = lambda n: getattr(W, n.replace("?", first))  # noqa: E731
    second = str(int(first) + 1)
    lin = None if g("W_mlp?_lin") is None else (g("W_mlp?_lin"), g("b_mlp?_lin"))
    return lambda Y: mlp(Y, g("W_mlp?"), g("b_mlp?"), getattr(W, f"W_mlp{second}"),
                         getattr(W, f"b_mlp{second}"), act, lin=lin, hidden=W.mlp_hidden)


def _sandwich_block(X, f, gamma, beta, gamma_out, beta_out, variant):
    """X + N'(f(N(X))): Gemma2DecoderLayer's residual + post_norm(sublayer(pre_norm(residual)))."""
    return add(X, norm_columns(f(norm_columns(X, gamma, beta, variant)), gamma_out, beta_out, variant))


@pytest.mark.parametrize("variant", [SANDWICH, GEMMA_SANDWICH], ids=["layer_norm", "gemma"])
def test_the_gpt2_layer_is_the_sandwich_composition(variant):
    c = _case("gpt2_layer", variant)
    X = c.spec_inputs()["X"]
    W = from_flat(LayerParams, c.spec_params())
    ell = len(X[0])
    Mask = unidirectional_mask(ell, ell)
    h = _sandwich_block(X, lambda Y: mh_attention(Y, Y, W.attn, Mask, variant=variant, causal_self=True),
                        W.gamma1, W.beta1, W.gamma1_out, W.beta1_out, variant)
    out = _sandwich_block(h, _ffn(W, variant, "gpt2"), W.gamma2, W.beta2, W.gamma2_out, W.beta2_out, variant)
    assert _run(c, variant) == out


def test_the_decoder_layer_is_the_sandwich_composition():
    c = _case("decoder_layer", SANDWICH)
    X, Z = c.spec_inputs()["X"], c.spec_inputs()["Z"]
    W = from_flat(DecoderLayerParams, c.spec_params())
    v = SANDWICH
    ell_x, ell_z = len(X[0]), len(Z[0])
    causal, full = unidirectional_mask(ell_x, ell_x), bidirectional_mask(ell_z, ell_x)
    X = _sandwich_block(X, lambda Y: mh_attention(Y, Y, W.self_attn, causal, variant=v, causal_self=True),
                        W.gamma3, W.beta3, W.gamma3_out, W.beta3_out, v)
    X = _sandwich_block(X, lambda Y: mh_attention(Y, Z, W.cross_attn, full, variant=v),
                        W.gamma4, W.beta4, W.gamma4_out, W.beta4_out, v)
    X = _sandwich_block(X, _ffn(W, v, "ed_decoder", "3"), W.gamma5, W.beta5, W.gamma5_out, W.beta5_out, v)
    assert _run(c, v) == X


@pytest.mark.parametrize("layer", ["gpt2_layer", "bert_layer", "encoder_layer", "decoder_layer"])
def test_sandwich_differs_from_pre_and_from_res_post(layer):
    """The same case (its parameters less the output norms') under pre-LN and under res-post-norm gives
    other values: neither of the two norms of a block is redundant."""
    c = _case(layer, SANDWICH)
    got = _run(c, SANDWICH)
    params = {k: v for k, v in c.spec_params().items() if "_out" not in k}
    for other in ("pre", "res_post"):
        v = SANDWICH.replace(norm_placement=other)
        out = evaluate(layer, c.spec_inputs(), params, hyper=c.hyper, variant=v)[c.entry.outputs[0].name]
        assert out != got, other


@pytest.mark.parametrize("variant,extra", [
    (SANDWICH, ["gamma1_out", "beta1_out", "gamma2_out", "beta2_out"]),
    (SANDWICH.replace(norm="rms_norm"), ["gamma1_out", "gamma2_out"]),  # RMSnorm has no β
    (SANDWICH.replace(affine="none"), []),  # the norms are there, without parameters
])
def test_the_output_norms_parameters_come_last_and_only_under_sandwich(variant, extra):
    for other in ("paper", "post", "pre", "res_post"):
        plain = layer_schema(2, variant.replace(norm_placement=other))
        assert not any("_out" in k for k in plain), other
    pre = layer_schema(2, variant.replace(norm_placement="pre"))
    got = layer_schema(2, variant)
    assert list(got) == list(pre) + extra
    assert all(got[k] == ("d_e",) for k in extra)
    dec_pre = decoder_layer_schema(2, variant.replace(norm_placement="pre"))
    dec = decoder_layer_schema(2, variant)
    assert list(dec) == list(dec_pre) + [n.replace("1", str(k)) for k in (3, 4, 5) for n in extra if "1" in n]


def test_a_parallel_residual_refuses_the_sandwich():
    c = _case("gpt2_layer", SANDWICH.replace(residual="parallel"))
    with pytest.raises(SpecError) as err:
        _run(c, c.variant)
    assert err.value.argument == "residual"
