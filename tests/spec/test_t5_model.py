"""T5's whole encoder-decoder (issue 38): ``ed_transformer`` under ``rel_bias="t5_buckets"`` and
``unembedding_scale``.

- the two tables: ``enc_layers.0.attn.rel_bias`` and ``dec_layers.0.self_attn.rel_bias`` (rel_buckets × H), the
  last parameters, under the bias alone; no later layer and no cross-attention holds one;
- the model is the composition written out here: T5's embedding (no positions), each encoder layer the
  ``encoder_layer`` entry with the encoder's table, the final RMSnorm by NumPy, each decoder layer the
  ``decoder_layer`` entry with the decoder's table, its final norm, d_e^(−1/2), the tied head and the softmax
  by NumPy (transformers 5.24 ``T5Stack``: the first block's ``position_bias`` reused by every block;
  ``T5ForConditionalGeneration.forward``: ``sequence_output * (self.model_dim**-0.5)``, ``lm_head`` tied);
- each stack reads its own table: moving the decoder's leaves the encoder's intermediates as they were,
  moving the encoder's moves them; a later layer reads the first one's (a per-layer reading differs);
- no earlier set's hash moves; the new switches are listed by Algorithm 8's forward entries alone.
"""

from __future__ import annotations

import numpy as np
import pytest

from ftspec.spec import evaluate
from ftspec.spec.entry import ED_HEAD
from ftspec.spec.intermediates import recorded
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import PAPER, PRESETS, VariantSet, parse

from .helpers import flat_params, random_inputs

_LAYER = ("attn_bias=False,attn_scale=none,rel_bias=t5_buckets,rel_buckets=6,rel_max_distance=5,norm=rms_norm,"
          "epsilon=1e-6,epsilon_placement=inside_root,affine=scale,norm_placement=pre,final_norm=final,"
          "mlp_bias=False,activation=relu,positions=none,unembedding=tied")
T5 = parse(_LAYER + ",unembedding_scale=inv_sqrt_d_e")
HYPER = dict(N_V=7, ell_max=6, L_enc=2, L_dec=2, H=2, d_e=4, d_attn=2, d_mid=2, d_mlp=6, ell_z=5, ell_x=5)
TABLES = ("enc_layers.0.attn.rel_bias", "dec_layers.0.self_attn.rel_bias")


def _params(seed: int = 4) -> tuple[dict, dict]:
    e = REGISTRY["ed_transformer"]
    return random_inputs(e, HYPER, seed), flat_params(e, HYPER, T5, seed)


def _sub(params: dict, prefix: str, table: str, into: str) -> dict:
    """One layer's parameters, unprefixed, with the stack's table as the layer's own ``into``."""
    out = {k[len(prefix):]: v for k, v in params.items() if k.startswith(prefix)}
    out[into] = params[table]
    return out


def _rms(X: np.ndarray, g: np.ndarray) -> np.ndarray:
    return g[:, None] * X / np.sqrt((X ** 2).mean(axis=0, keepdims=True) + 1e-6)


@pytest.mark.parametrize("which", ["both", "decoder", "encoder", "none"])
def test_the_tables_are_the_last_parameters_of_the_first_layers(which):
    e = REGISTRY["ed_transformer"]
    for padded in ("", "padded_"):
        e = REGISTRY[padded + "ed_transformer"]
        hyper = {**e.sizes, "L_enc": 2, "L_dec": 3, "H": 3}
        before = list(e.param_schema(hyper, T5.replace(rel_bias="none")))
        after = e.param_schema(hyper, T5)
        assert list(after) == before + list(TABLES)
        assert all(after[t] == (6, "H") for t in TABLES)
        assert e.param_shapes(hyper, T5)[TABLES[1]] == (6, 3)
        assert [k for k in after if k.endswith("rel_bias")] == list(TABLES)


def test_the_model_is_its_layers_with_each_stacks_one_table():
    inputs, p = _params()
    z, x = inputs["z"], inputs["x"]
    W_e = np.array(p["W_e"])
    lh = dict(H=2, d_e=4, d_attn=2, d_mid=2, d_mlp=6)
    Z = W_e[:, z]  # positions none: the token embedding alone
    for l in range(2):
        layer = _sub(p, f"enc_layers.{l}.", TABLES[0], "attn.rel_bias")
        Z = np.array(evaluate("encoder_layer", {"Z": Z.tolist()}, layer, hyper={**lh, "ell": 5}, variant=T5)["Z"])
    Z = _rms(Z, np.array(p["gamma_enc"]))
    X = W_e[:, x]
    for l in range(2):
        X = np.array(evaluate("decoder_layer", {"X": X.tolist(), "Z": Z.tolist()},
                              _sub(p, f"dec_layers.{l}.", TABLES[1], "self_attn.rel_bias"),
                              hyper={**lh, "ell_x": 5, "ell_z": 5}, variant=T5)["X"])
    X = _rms(X, np.array(p["gamma_dec"])) / 2.0  # d_e^(−1/2) = 1/2
    logits = W_e.T @ X
    P = np.exp(logits - logits.max(axis=0)) / np.exp(logits - logits.max(axis=0)).sum(axis=0)
    got = np.array(evaluate("ed_transformer", inputs, p, hyper=HYPER, variant=T5)["P"])
    assert np.allclose(got, P, rtol=1e-12, atol=1e-14)
    unscaled = np.array(evaluate("ed_transformer", inputs, p, hyper=HYPER,
                                 variant=T5.replace(unembedding_scale="one"))["P"])
    assert not np.allclose(unscaled, P, atol=1e-6)


def _intermediates(inputs: dict, p: dict, variant: VariantSet = T5) -> dict:
    with recorded() as values:
        evaluate("ed_transformer", inputs, p, hyper=HYPER, variant=variant)
    return {k: np.array(v, dtype=float) for k, v in values.items()
            if k.startswith(("enc_layers.", "dec_layers.")) and k.count(".") == 1}


def _moved(p: dict, table: str) -> dict:
    return {**p, table: [[v + 0.7 * (b + 1) * (h + 1) for h, v in enumerate(row)] for b, row in enumerate(p[table])]}


def test_each_stack_reads_its_own_table():
    inputs, p = _params()
    base = _intermediates(inputs, p)
    dec = _intermediates(inputs, _moved(p, TABLES[1]))
    assert all(np.array_equal(base[k], dec[k]) for k in base if k.startswith("enc_layers."))
    assert not np.allclose(base["dec_layers.0"], dec["dec_layers.0"])
    enc = _intermediates(inputs, _moved(p, TABLES[0]))
    assert not np.allclose(base["enc_layers.0"], enc["enc_layers.0"])


def test_a_later_layer_reads_the_first_layers_table():
    """Layer 1 of each stack, computed by its layer entry with no table and with the stack's: the model's
    layer 1 is the latter (the per-layer reading, a layer 1 without a table of its own, is the former)."""
    inputs, p = _params()
    got = _intermediates(inputs, p)
    lh = dict(H=2, d_e=4, d_attn=2, d_mid=2, d_mlp=6, ell=5)
    layer1 = {k[len("enc_layers.1."):]: v for k, v in p.items() if k.startswith("enc_layers.1.")}
    Z0 = got["enc_layers.0"].tolist()
    shared = np.array(evaluate("encoder_layer", {"Z": Z0}, {**layer1, "attn.rel_bias": p[TABLES[0]]}, hyper=lh,
                               variant=T5)["Z"])
    alone = np.array(evaluate("encoder_layer", {"Z": Z0}, layer1, hyper=lh, variant=T5.replace(rel_bias="none"))["Z"])
    assert np.allclose(got["enc_layers.1"], shared, rtol=1e-13, atol=1e-14)
    assert not np.allclose(got["enc_layers.1"], alone, atol=1e-6)


def test_no_earlier_set_moves_its_hash():
    assert PAPER.hash == "fc2d657e21da4545" and PRESETS["hf-bart"].hash == "8dafd638fad5abe1"
    for v in (PAPER, *PRESETS.values()):
        assert "unembedding_scale" not in v.to_json()
    assert "unembedding_scale" in T5.to_json() and T5.hash != T5.replace(unembedding_scale="one").hash


def test_listed_by_the_encoder_decoder_forward_entries_alone():
    assert {n for n, e in REGISTRY.items() if e.switches & ED_HEAD} == {"ed_transformer", "padded_ed_transformer"}
    assert {n for n, e in REGISTRY.items() if "rel_bias" in e.switches and "L_enc" in e.hyper} == \
        {"ed_transformer", "padded_ed_transformer"}
