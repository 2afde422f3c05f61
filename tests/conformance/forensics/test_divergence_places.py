"""First divergence names the right place on the cases that named a wrong one (issue 35, finding 5).

Each case is a small stand-in for what the trials ran (the public LLaMA codes are not vendored): the
bundled NumPy plugin with one bug, offering the entries the wrapped code offered. The place each test
expects is written from the bug, never read from the locator:

- a key/value head order bug lives in the self-attention (the plugin offers ``causal_self_attention``
  beside the model and ``rms_norm``; an RMSNorm cut with γ = 0 silences the attention, so agreeing
  there proves nothing about the norm);
- a model that embeds its tokens from W_u (a tied parameter loaded the other way round) is wrong in
  its embedding, not in the final norm;
- an inverted cross-attention mask in a plugin that answers a query with no key by NaN whatever it is
  asked (``empty_query`` ignored) is the decoder's cross-attention, never the residual path (a NaN is
  not silenced by zero weights, and sums make no NaN);
- ε changed in every norm is a norm, never the residual path or the MLP (each norm is checked on what
  it reads in the probe that departs; an MLP probe is checked against a control that adds the same
  column without the MLP's code).

Each test locates one fixed failing case in-process (a second or two of CPU).
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import numpy as np

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.execute import Member
from ftspec.conformance.forensics.divergence import Divergence, expected_matches, locate_failure
from ftspec.impls.discovery import load
from ftspec.spec.variants import PAPER, preset
from ftspec.tools.zoo import mutant
from ftspec.tools.zoo.groups import NORM_USERS
from ftspec.tools.zoo.injection import Edit, Mutant, build, change_inputs, source_edit, swap_variant

LY = "ftspec.impls.numpy.layers"
ALL = tuple(load("numpy").algorithms)
LLAMA = preset("llama").replace(kv_group=2)  # grouped: the preset fixes no size (until spec 2.4.0 it held 2)
#: four query heads over two key/value heads: a head order shows (issue 27's sizes), one layer
LLAMA_HYPER = {"N_V": 5, "ell_max": 4, "L": 1, "H": 4, "d_e": 8, "d_attn": 4, "d_mid": 4, "d_mlp": 6, "ell": 4}
#: what a wrapped LLaMA code offers: its model, its norm and its attention
LLAMA_ENTRIES = ("d_transformer", "rms_norm", "causal_self_attention")


def offering(impl: Any, names: tuple[str, ...]) -> Any:
    return dataclasses.replace(impl, algorithms={k: v for k, v in impl.algorithms.items() if k in names})


def located(impl: Any, c: Case, dtype: str = "float64") -> Divergence:
    """The runner's hook on the case; the case must fail (the first check is the whole model or layer)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = locate_failure(Member("m", impl, "cpu"), c, dtype, timeout=30.0)
    assert d is not None
    assert "did not recur" not in d.detail, "the bug must make this case fail"
    return d


def named(d: Divergence, place: str) -> bool:
    return expected_matches(place, d.to_dict())


def left_open_with(d: Divergence, place: str) -> bool:
    """No sublayer named (at most the layer that holds them), and ``place`` among the places the case
    cannot tell apart."""
    return not d.sublayer and place.startswith(d.where) and place in d.candidates


# -- (a) a key/value head order bug, (c) the entries the plugin offers -------------------------------

KV = mutant("kv-heads-tiled")  # query head h reads kv head h mod H_kv, not ⌊h/G⌋ (catalogue_llama)


def test_a_kv_order_bug_is_the_self_attention_through_the_entries_offered():
    """Before: "layer 0 / norm" (with gpt2_layer offered), "one of layer 0/norm, layer 0/self-attention"
    (without). The walk checks the attention through ``causal_self_attention``, which departs."""
    c = Case.build("d_transformer", LLAMA_HYPER, LLAMA, seed=0)
    for extra in ((), ("gpt2_layer",)):
        d = located(offering(build(KV), LLAMA_ENTRIES + extra), c)
        assert named(d, "layer 0/self-attention"), (extra, d.lines())
        assert "causal_self_attention departs" in d.detail, d.detail
        assert any(r["entry"] == "causal_self_attention" and r["ok"] is False for r in d.checks)


def test_a_kv_order_bug_without_attention_entries_is_never_put_in_the_norm():
    """The layer entry alone: an RMSNorm has no β, so its cut (γ = 0) feeds the attention zeros and
    silences it: agreeing there clears nothing, and the norm is not named from it."""
    c = Case.build("gpt2_layer", {k: v for k, v in LLAMA_HYPER.items() if k not in ("N_V", "ell_max", "L")},
                   LLAMA, seed=0)
    d = located(offering(build(KV), ("gpt2_layer",)), c)
    assert d.sublayer != "norm", d.lines()
    assert named(d, "layer/self-attention") or left_open_with(d, "layer/self-attention"), d.lines()


def test_a_bidirectional_self_attention_is_checked_through_self_attention():
    """BERT's blocks with grouped heads, the plugin offering its layer, its norm and ``self_attention``
    (no mh_attention): the self-attention entry departs and names the place."""
    v = PAPER.replace(kv_group=2)
    hyper = {"H": 4, "d_e": 8, "d_attn": 4, "d_mid": 4, "d_mlp": 6, "ell": 4}
    d = located(offering(build(KV), ("bert_layer", "layer_norm", "self_attention")),
                Case.build("bert_layer", hyper, v, seed=0))
    assert named(d, "layer/self-attention") and "self_attention departs" in d.detail, d.lines()


def _token_embeddings_doubled(inputs: dict, params: dict, ctx: Any, base: Any) -> tuple[dict, dict]:
    params["W_e"] = 2.0 * np.asarray(params["W_e"])
    return inputs, params


def test_a_plugin_offering_the_embeddings_parts_is_checked_through_them():
    """No ``embedding`` entry, but ``token_embedding`` and ``positional_embedding`` (each of the plugin's
    own code): a token embedding that doubles W_e departs through ``token_embedding``, and names the
    embedding."""
    m = Mutant("token-embedding-doubled", "W_e read doubled", ("d_transformer", "token_embedding"),
               change_inputs(_token_embeddings_doubled))
    impl = offering(build(m), ("d_transformer", "token_embedding", "positional_embedding"))
    d = located(impl, Case.build("d_transformer", None, PAPER, seed=0))
    assert (d.where, d.sublayer) == ("embedding", "") and "token_embedding entry departs" in d.detail, d.lines()


# -- (b) untied unembedding weights ------------------------------------------------------------------

def _embedding_from_w_u(inputs: dict, params: dict, ctx: Any, base: Any) -> tuple[dict, dict]:
    """W_e and W_u loaded into one shared tensor, W_u last: the model embeds its tokens by W_uᵀ."""
    params["W_e"] = np.ascontiguousarray(np.asarray(params["W_u"]).T)
    return inputs, params


UNTIED = Mutant("embedding-reads-w-u", "the token embedding reads W_uᵀ (a tied tensor loaded the other way round)",
                ("d_transformer",), change_inputs(_embedding_from_w_u))


def test_untied_unembedding_weights_read_by_the_embedding_are_the_embedding():
    """Before: "final norm" (every token embedded alike still departs). The model's output does not move
    with W_e while the spec's does, and moves with the tokens: the embedding."""
    c = Case.build("d_transformer", LLAMA_HYPER, LLAMA, seed=1)
    for names in (LLAMA_ENTRIES, ("d_transformer",)):
        d = located(offering(build(UNTIED), names), c)
        assert (d.where, d.sublayer) == ("embedding", ""), (names, d.lines())


# -- (d) an inverted cross-attention mask answered by NaN ------------------------------------------------

CROSS_NAN = Mutant("cross-mask-inverted-nan", "the cross-attention's mask inverted (every key masked), a query "
                   "with no key answered by NaN whatever empty_query says", ALL,
                   source_edit(Edit(LY, "decoder_layer_fwd",
                                    "return mh_attention_fwd(Y, Z, W_cross, cross_mask, variant,",
                                    "return mh_attention_fwd(Y, Z, W_cross, np.zeros((Z.shape[-1], Y.shape[-1]), "
                                    "dtype=bool), variant.replace(empty_query='nan'),")))


def test_a_nan_from_the_cross_attention_mask_is_the_cross_attention_not_the_residual():
    """Before: "decoder layer 0 / residual" (whole plugin). With every weight of every sublayer 0 the
    layer still returns NaN: a division (a norm or a softmax over no key); the norms and the
    self-attention (through causal_self_attention, which builds its own mask) are cleared."""
    impl = build(CROSS_NAN)
    d = located(impl, Case.build("ed_transformer", None, PAPER, seed=0))
    assert named(d, "decoder layer 0/cross-attention"), d.lines()
    d = located(impl, Case.build("decoder_layer", None, PAPER, seed=0))
    assert named(d, "layer/cross-attention"), d.lines()


def test_a_nan_no_entry_can_place_leaves_the_attentions_open_never_the_residual():
    """The layer or the model entry alone: before, "one of … residual …" and "model entry". Now the
    places that can make a NaN out of finite numbers stay open, the cross-attention among them; the
    residual path and the model's wiring are never among them."""
    for algorithm, want in (("decoder_layer", "layer/cross-attention"),
                            ("ed_transformer", "decoder layer 0/cross-attention")):
        d = located(offering(build(CROSS_NAN), (algorithm,)), Case.build(algorithm, None, PAPER, seed=0))
        assert left_open_with(d, want), (algorithm, d.lines())
        assert not any(c.endswith("residual") for c in d.candidates) and d.where != "model entry", d.lines()


# -- (e) ε changed in every norm ---------------------------------------------------------------------------

def _every_epsilon(v: Any, algorithm: str) -> Any:
    """ε = 1e-5 added where the paper has none, ten times the declared one elsewhere."""
    if v.epsilon_placement == "none":
        return v.replace(epsilon=1e-5, epsilon_placement="inside_root")
    return v.replace(epsilon=v.epsilon * 10)


EPSILON = Mutant("epsilon-every-norm", "ε changed in every norm", NORM_USERS + ("rms_norm",),
                 swap_variant(_every_epsilon))


def test_epsilon_in_every_post_ln_norm_is_the_norm_not_the_residual():
    """BERT (post-LN), float32, wide-range values: the first norm reads large columns where ε does not
    show, the second reads unit columns where it does. Before: "layer 0 / residual" (only the first norm
    was checked); now each norm is checked on what it reads with every sublayer silenced."""
    c = Case.build("e_transformer", Case.build("e_transformer", None, PAPER).hyper, PAPER, seed=1,
                   style="wide-range")
    d = located(build(EPSILON), c, "float32")
    assert named(d, "layer 0/norm"), d.lines()


def test_a_marginal_epsilon_departure_is_not_put_in_the_mlp():
    """LLaMA's layer, float32: the layer departs at about twice its bound, the MLP made constant at 1.04
    (it adds exactly what the silenced MLP adds: 0). Before: "layer / MLP". The control (the same column
    without the MLP's code) departs as well, and the RMSNorm departs on what it reads there."""
    c = Case.build("gpt2_layer", Case.build("gpt2_layer", None, LLAMA).hyper, LLAMA, seed=2)
    d = located(build(EPSILON), c, "float32")
    assert named(d, "layer/norm"), d.lines()


# -- what "not located" says ------------------------------------------------------------------------------

def test_not_located_never_reports_agreement_from_no_checks():
    """No check made (nothing offered, or no time): "nothing could be checked", never "every piece
    agrees"; checks made: their number, counting only those that gave a verdict."""
    none = Divergence("d_transformer", "float64", checks=[
        {"where": "layer 0", "entry": "gpt2_layer", "config": "as given", "ok": None, "ratio": None,
         "note": "not offered by the implementation"}])
    line = none.lines()[0]
    assert "nothing could be checked" in line and "agrees" not in line and "0 checks" not in line, line
    assert "time budget" in dataclasses.replace(none, gave_up=True).lines()[0]
    made = dataclasses.replace(none, checks=none.checks + [
        {"where": "final norm", "entry": "layer_norm", "config": "as given", "ok": True, "ratio": 0.1, "note": ""}])
    line = made.lines()[0]
    assert "every piece checked agrees" in line and "(1 check made)" in line, line
