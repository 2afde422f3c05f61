"""Algorithms 8-10: the encoder-decoder, encoder-only and decoder-only
transformers. Each returns P ∈ (0,1)^{N_V×ℓ}; column t is a distribution
over the token that follows position t (0-based; the paper's t+1).

Also the bidirectional encoder read at its last position only, p ∈ (0,1)^{N_V}
(``next_token_encoder``): the whole model of seeds 000 and 002.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Sequence

from .attention import bidirectional_mask
from .embedding import embed, pad_positions
from .functions import apply
from .intermediates import Names, algorithm
from .layers import bert_layer, decoder_layer, encoder_layer, gpt2_layer, padded
from .linalg import Matrix, Vector, add_bias, column, matmul, shape
from .normalization import norm_columns
from . import numbers
from .params import DTransformerParams, EDTransformerParams, ETransformerParams, LayerParams
from .functions import softmax, softmax_columns
from .unembedding import logits, unembedding_matrix
from .variants import PAPER, VariantSet

__all__ = ["d_transformer", "d_transformer_logits", "e_transformer", "e_transformer_logits",
           "ed_transformer", "ed_transformer_logits", "layer_variant", "next_token_encoder",
           "next_token_encoder_logits"]


def layer_variant(variant: VariantSet, l: int) -> VariantSet:
    """The variant set layer ``l`` (0-based) of a decoder-only stack computes under.

    ``global_every`` = k ≥ 1 with a ``window`` W ≥ 1 makes the stack alternate local and global
    layers: layer l is global, with no window (``window`` 0), when (l + 1) mod k = 0, and local, with
    the window W, otherwise; a local layer rotates with ``rope_local_base`` where that is set (> 0),
    and then unscaled (``rope_scaling`` "none"), a global one with ``rope_base`` and ``rope_scaling``.
    This is Gemma 2's and Gemma 3's stack (transformers 5.24: ``Gemma2Config``/``Gemma3TextConfig``
    build ``layer_types`` as "sliding_attention" if bool((i + 1) % k) else "full_attention", k = 2
    and ``sliding_window_pattern`` 6; each ``Gemma3DecoderLayer`` gets the mask and the rotary tables
    of its layer type, the sliding ones from ``rope_parameters["sliding_attention"]["rope_theta"]`` at
    the "default" rope_type: a config's ``rope_scaling``, Gemma 3 4B-27B's linear factor 8, reaches
    ``rope_parameters["full_attention"]`` alone, ``Gemma3TextConfig.convert_rope_params_to_dict``).
    Otherwise (k = 0, the paper's; or no window) every layer computes under ``variant`` itself.
    """
    k, W = variant.global_every, variant.window
    if k == 0 or W == 0:
        return variant
    if (l + 1) % k == 0:  # a global layer: the whole causal context, at the global base
        return variant.replace(window=0)
    if variant.rope_local_base > 0 and variant.rotary != "none":  # a local layer at its own base, unscaled
        return variant.replace(rope_base=variant.rope_local_base, rope_scaling="none")
    return variant


@algorithm("ed_transformer")
def ed_transformer(z: Sequence[int], x: Sequence[int], theta: EDTransformerParams, *,
                   ell_max: Optional[int] = None, variant: VariantSet = PAPER,
                   pad_z: Optional[Sequence[Any]] = None, pad_x: Optional[Sequence[Any]] = None) -> Matrix:
    """Algorithm 8: P ← EDTransformer(z, x | θ), encoder-decoder (Vaswani et al.).

    1-3.   Z ← [W_e[:, z[t]] + W_p[:, t]] for t = 0..ℓ_z-1
    4-8.   for l = 0..L_enc-1: Z ← encoder_layer(Z | W^enc_l, ...)   (lines 5-8)
    10-12. X ← [W_e[:, x[t]] + W_p[:, t]] for t = 0..ℓ_x-1  (W_p_dec under ed_positions="separate")
    13-19. for l = 0..L_dec-1: X ← decoder_layer(X, Z | W^dec_l, ...)  (lines 14-19)
    21.    return P = softmax(W_u X)

    Variants beyond the layers': ``embedding_norm`` (after lines 3 and 12,
    γ/β_emb_enc and _dec), ``final_norm="final"`` (after lines 8 and 19,
    γ/β_enc and _dec), ``unembedding``, ``logit_bias``, ``ed_positions`` (learned positions: the
    target's from a second table W_p_dec, BART's two ``BartLearnedPositionalEmbedding``s, transformers
    5.24; a sinusoid is one fixed table, unchanged), ``rel_bias="t5_buckets"`` (T5's bias tables, one per
    stack in its first layer, which every layer of the stack adds: ``_shared_table``),
    ``unembedding_scale="inv_sqrt_d_e"`` (X ← d_e^(−1/2) X before line 21: T5 v1.0's
    ``sequence_output * (self.model_dim**-0.5)`` in ``T5ForConditionalGeneration.forward``, transformers
    5.24, ahead of its tied ``lm_head``). ``ell_max`` is needed
    when W_p is not learned. ``pad_z`` masks the source's padding positions as keys in the
    encoder's layers and in every cross-attention, ``pad_x`` the target's in the decoder's
    self-attention (``layers.padded``; Hugging Face's ``attention_mask`` and
    ``decoder_attention_mask``).
    """
    return softmax_columns(ed_transformer_logits(z, x, theta, ell_max=ell_max, variant=variant,
                                                 pad_z=pad_z, pad_x=pad_x))  # line 21


def _ed_names(z: Sequence[int], x: Sequence[int], theta: EDTransformerParams, *, variant: VariantSet = PAPER,
              **_: Any) -> Names:
    """Algorithm 8's intermediates (``spec/intermediates.py``): enc_embedding, enc_layers.{l},
    enc_final_norm (under final_norm), dec_embedding, dec_layers.{l}, dec_final_norm, logits."""
    finals = (("enc_final_norm",) if variant.resolved_final_norm("ed_encoder") else ()) + \
        (("dec_final_norm",) if variant.resolved_final_norm("ed_decoder") else ())
    return {embed: ("enc_embedding", "dec_embedding"), encoder_layer: "enc_layers.{}", decoder_layer: "dec_layers.{}",
            norm_columns: finals}


@algorithm("ed_transformer", names=_ed_names)
def ed_transformer_logits(z: Sequence[int], x: Sequence[int], theta: EDTransformerParams, *,
                          ell_max: Optional[int] = None, variant: VariantSet = PAPER,
                          pad_z: Optional[Sequence[Any]] = None, pad_x: Optional[Sequence[Any]] = None) -> Matrix:
    """Algorithm 8 up to the final softmax: lines 1-20 and W_u X of line 21 (intermediates:
    ``_ed_names``)."""
    # the source's padding reaches the encoder's layers and every cross-attention: an error
    # for a query it leaves with no key names pad_z, wherever it would first be met
    padded(bidirectional_mask(len(z), len(z)), pad_z, variant, "pad_z")
    Z = embed(z, theta.W_e, theta.W_p, ell_max=ell_max, variant=variant,
              gamma=theta.gamma_emb_enc, beta=theta.beta_emb_enc)  # lines 1-3
    for layer in _shared_table(theta.enc_layers, variant):  # line 4
        Z = encoder_layer(Z, layer, variant=variant, pad=pad_z)  # lines 5-8
    if variant.resolved_final_norm("ed_encoder"):
        Z = norm_columns(Z, theta.gamma_enc, theta.beta_enc, variant)
    # ed_positions="separate" (BART's BartDecoder.embed_positions): the target reads its own learned table;
    # a sinusoid (W_p None) is one fixed table for both
    W_p_x = theta.W_p_dec if variant.ed_positions == "separate" and variant.positions == "learned" else theta.W_p
    X = embed(x, theta.W_e, W_p_x, ell_max=ell_max, variant=variant,
              gamma=theta.gamma_emb_dec, beta=theta.beta_emb_dec)  # lines 10-12
    for dec_layer in _shared_table(theta.dec_layers, variant):  # line 13
        X = decoder_layer(X, Z, dec_layer, variant=variant, pad_x=pad_x, pad_z=pad_z)  # lines 14-19
    if variant.resolved_final_norm("ed_decoder"):
        X = norm_columns(X, theta.gamma_dec, theta.beta_dec, variant)
    if variant.unembedding_scale == "inv_sqrt_d_e":  # T5 v1.0: X ← d_e^(−1/2) X before line 21
        N = numbers.current()
        s = N.num(1) / N.sqrt(N.num(shape(X)[0]))
        X = [[x * s for x in row] for row in X]
    W_u = unembedding_matrix(theta.W_u, theta.W_e, variant)
    return logits(X, W_u, theta.b_u, variant)  # line 21, before the softmax


def _shared_table(layers: Sequence[Any], variant: VariantSet) -> list[Any]:
    """The layers of one stack of Algorithm 8 under ``rel_bias="t5_buckets"``: each layer's self-attention
    with its stack's one table, the first layer's (``enc_layers.0.attn.rel_bias``,
    ``dec_layers.0.self_attn.rel_bias``), so that every layer l adds

        B^stack[t_z, t_x, h] = rel_bias^stack[bucket(t_z − t_x), h]

    to head h's scores (bidirectional buckets in the encoder, causal ones in the decoder's self-attention;
    the cross-attention adds none). Source: Raffel et al. 2020, §2.1 (the position embedding parameters
    shared across all layers, each head of a layer with its own); transformers 5.24 models/t5/modeling_t5.py,
    ``T5Stack.__init__`` (``T5Block(config, has_relative_attention_bias=bool(i == 0))``) and
    ``T5Stack.forward`` ("We share the position biases between the layers - the first layer stores them":
    block i > 0 receives the first block's ``position_bias``), one ``T5Stack`` for the encoder and one for
    the decoder, each with its own table. Under any other value the layers are as given (a later layer's
    table, absent from the schema, is never read)."""
    layers = list(layers)
    if variant.rel_bias != "t5_buckets" or not layers:
        return layers
    first = layers[0]
    attn = "attn" if isinstance(first, LayerParams) else "self_attn"
    table = getattr(first, attn).rel_bias
    return [first] + [dataclasses.replace(layer, **{attn: dataclasses.replace(getattr(layer, attn), rel_bias=table)})
                      for layer in layers[1:]]


@algorithm("e_transformer")
def e_transformer(x: Sequence[int], theta: ETransformerParams, *,
                  ell_max: Optional[int] = None, variant: VariantSet = PAPER,
                  pad: Optional[Sequence[Any]] = None) -> Matrix:
    """Algorithm 9: P ← ETransformer(x | θ), encoder-only (BERT).

    1-3. X ← [W_e[:, x[t]] + W_p[:, t]] for t = 0..ℓ-1
    4-8. for l = 0..L-1: X ← bert_layer(X | W_l, ...)   (lines 5-8)
    10.  X ← GELU(W_f X + b_f 1ᵀ)
    11.  X[:, t] ← layer_norm(X[:, t] | γ, β)
    12.  return P = softmax(W_u X)

    Variants beyond the layers': ``embedding_norm`` (γ/β_emb), ``final_norm=
    "final"`` (a norm before line 10, γ/β_final), ``activation`` (also line
    10), ``unembedding`` (tied needs d_f = d_e), ``logit_bias``. ``pad`` masks padding
    positions as keys in every layer (``layers.padded``; BERT's ``attention_mask``).
    """
    return softmax_columns(e_transformer_logits(x, theta, ell_max=ell_max, variant=variant, pad=pad))  # line 12


def _e_names(x: Sequence[int], theta: ETransformerParams, *, variant: VariantSet = PAPER, **_: Any) -> Names:
    """Algorithm 9's intermediates (``spec/intermediates.py``): embedding, layers.{l}, final_norm
    (under final_norm), head (line 11, with head.dense, head.act, head.mu, head.sigma: ``_head``), logits."""
    return {embed: ("embedding",), bert_layer: "layers.{}",
            norm_columns: ("final_norm",) if variant.resolved_final_norm("bert") else (), _head: ("head",)}


def _head_names(X: Matrix, theta: ETransformerParams, variant: VariantSet) -> Names:
    return {add_bias: ("dense",), apply: ("act",)}


@algorithm(None, names=_head_names)
def _head(X: Matrix, theta: ETransformerParams, variant: VariantSet) -> Matrix:
    """Lines 10-11 of Algorithm 9 (intermediates dense, W_f X + b_f 1ᵀ, and act; the norm's mu, sigma)."""
    X = apply(variant.resolved_activation("bert"), add_bias(matmul(theta.W_f, X), theta.b_f))  # line 10
    return norm_columns(X, theta.gamma, theta.beta, variant)  # line 11


@algorithm("e_transformer", names=_e_names)
def e_transformer_logits(x: Sequence[int], theta: ETransformerParams, *,
                         ell_max: Optional[int] = None, variant: VariantSet = PAPER,
                         pad: Optional[Sequence[Any]] = None) -> Matrix:
    """Algorithm 9 up to the final softmax: lines 1-11 and W_u X of line 12 (intermediates:
    ``_e_names``)."""
    X = embed(x, theta.W_e, theta.W_p, ell_max=ell_max, variant=variant,
              gamma=theta.gamma_emb, beta=theta.beta_emb, pad=pad)  # lines 1-3 (pad: pad_positions)
    for layer in theta.layers:  # line 4
        X = bert_layer(X, layer, variant=variant, pad=pad)  # lines 5-8
    if variant.resolved_final_norm("bert"):
        X = norm_columns(X, theta.gamma_final, theta.beta_final, variant)
    X = _head(X, theta, variant)  # lines 10-11
    W_u = unembedding_matrix(theta.W_u, theta.W_e, variant)
    return logits(X, W_u, theta.b_u, variant)  # line 12, before the softmax


@algorithm("d_transformer")
def d_transformer(x: Sequence[int], theta: DTransformerParams, *,
                  ell_max: Optional[int] = None, variant: VariantSet = PAPER,
                  pad: Optional[Sequence[Any]] = None) -> Matrix:
    """Algorithm 10: P ← DTransformer(x | θ), decoder-only (GPT-2).

    1-3. X ← [W_e[:, x[t]] + W_p[:, t]] for t = 0..ℓ-1
    4-8. for l = 0..L-1: X ← gpt2_layer(X | W_l, ...)   (lines 5-8)
    10.  X[:, t] ← layer_norm(X[:, t] | γ, β)
    11.  return P = softmax(W_u X)

    Variants beyond the layers': ``embedding_norm`` (γ/β_emb), ``final_norm=
    "none"`` (drops line 10), ``unembedding``, ``logit_bias``; layer l computes under
    ``layer_variant(variant, l)`` (Gemma's local and global layers: ``global_every``,
    ``rope_local_base``). ``pad`` (one 0/1 flag per
    position, 0 = padding) masks those positions as keys in every layer (``layers.padded``).
    """
    return softmax_columns(d_transformer_logits(x, theta, ell_max=ell_max, variant=variant, pad=pad))  # line 11


def _d_names(x: Sequence[int], theta: DTransformerParams, *, variant: VariantSet = PAPER, **_: Any) -> Names:
    """Algorithm 10's intermediates (``spec/intermediates.py``): embedding, layers.{l}, final_norm
    (line 10, unless final_norm="none"), logits."""
    return {embed: ("embedding",), gpt2_layer: "layers.{}", norm_columns: ("final_norm",)}


@algorithm("d_transformer", names=_d_names)
def d_transformer_logits(x: Sequence[int], theta: DTransformerParams, *,
                         ell_max: Optional[int] = None, variant: VariantSet = PAPER,
                         pad: Optional[Sequence[Any]] = None) -> Matrix:
    """Algorithm 10 up to the final softmax: lines 1-10 and W_u X of line 11 (intermediates:
    ``_d_names``). Under ``pad_positions="real"`` the positions of W_p and of ALiBi are
    ``pad_positions``' p(t), the real tokens before t."""
    X = embed(x, theta.W_e, theta.W_p, ell_max=ell_max, variant=variant,
              gamma=theta.gamma_emb, beta=theta.beta_emb, pad=pad)  # lines 1-3 (pad: pad_positions)
    positions = pad_positions(pad, variant, len(x))  # None: t, the index
    for l, layer in enumerate(_longrope_shared(theta)):  # line 4
        X = gpt2_layer(X, layer, variant=layer_variant(variant, l), pad=pad, positions=positions)  # lines 5-8
    if variant.resolved_final_norm("gpt2"):
        X = norm_columns(X, theta.gamma, theta.beta, variant)  # line 10
    W_u = unembedding_matrix(theta.W_u, theta.W_e, variant)
    return logits(X, W_u, theta.b_u, variant)  # line 11, before the softmax


def _longrope_shared(theta: DTransformerParams) -> list[Any]:
    """The layers of a decoder-only model, each attention with the model's LongRoPE factors ``rope_ext`` and
    ``rope_mscale`` where it has them (``rope_factors="longrope"``, spec 2.17): one rotary embedding for the
    whole stack (transformers 5.24 models/phi3/modeling_phi3.py: ``Phi3Model.rotary_emb``, whose (cos, sin)
    every ``Phi3DecoderLayer`` takes). Without them the layers are as given."""
    if theta.rope_ext is None:
        return list(theta.layers)
    return [dataclasses.replace(layer, attn=dataclasses.replace(layer.attn, rope_ext=theta.rope_ext,
                                                                rope_mscale=theta.rope_mscale))
            for layer in theta.layers]


@algorithm("next_token_encoder")
def next_token_encoder(x: Sequence[int], theta: DTransformerParams, *,
                       ell_max: Optional[int] = None, variant: VariantSet = PAPER) -> Vector:
    """A bidirectional encoder as a next-token predictor: p ← softmax(W_u X[:, ℓ−1]).

    1-3. X ← [W_e[:, x[t]] + W_p[:, t]] for t = 0..ℓ-1        (Algorithm 8 lines 1-3)
    4-8. for l = 0..L-1: X ← encoder_layer(X | W_l, ...)      (Algorithm 8 lines 4-8; Mask ≡ 1)
         e ← X[:, ℓ−1], normalised under ``final_norm="final"`` (γ, β)
    9.   return p = softmax(W_u e)                            (Algorithm 7 on the last column)

    This is the whole model of two seed documents, and they define the same
    function:

    - seed 000 (compact definition), eq. (6): X^(0)_t = W^emb_{s_t} + W^pos_t,
      then per layer Y_t = LayerNorm(X_t + attn(X, X_t)) and X_t =
      LayerNorm(Y_t + ffn(Y_t)) with attention over every row of X
      (bidirectional, eq. 4) and a one-hidden-layer ReLU FFN (eq. 5), and
      G = softmax(X^(L)_T W^une): the distribution at the last position T.
    - seed 002 (Thickstun): L transformer blocks f_θ (eqs. 1-8: post-LN,
      unmasked, ReLU), the input z_k = W_zxᵀ ReLU(W_xᵀ x_k) + p_k of eq. (12)
      (the text writes x_1 where x_k is meant: p ∈ R^{p×d} adds a row per
      position), and ŷ = softmax(W_zᵀ z) of eq. (9) with z ≡ f_θ(x)_p, the
      p'th (last) output ("language applications typically use a single
      output").

    Under preset ``compact-000`` or ``thickstun-002`` this is each document's
    model with the correspondence of parameters in tests/spec/test_seed_models.py.
    Seed 002's eq. (12) input, with one-hot tokens x_k = e_{v_k}, is the
    column v_k of the table W_zxᵀ ReLU(W_xᵀ), that is a token embedding; so an
    implementation of it is certified with W_x = I_V (ReLU(e_v) = e_v) and
    W_zx = W_eᵀ, which its adapter passes (as W_o = I for seed 003).

    Defaults (``PAPER``) are Algorithm 8's encoder: post-LN, ReLU, no final
    norm. Variants: every switch of the layers, ``positions``,
    ``embedding_scale``, ``embedding_norm`` (γ/β_emb), ``final_norm="final"``
    (γ, β on the last column: norms act per column, so this is the last
    column of the normalised X), ``unembedding``, ``logit_bias``.
    """
    return softmax(next_token_encoder_logits(x, theta, ell_max=ell_max, variant=variant))  # line 9


def _next_token_names(x: Sequence[int], theta: DTransformerParams, **_: Any) -> Names:
    """``next_token_encoder``'s intermediates: embedding, layers.{l}, final_norm (the last column
    normalised, under final_norm="final"), logits."""
    return {embed: ("embedding",), encoder_layer: "layers.{}", norm_columns: ("final_norm",)}


@algorithm("next_token_encoder", names=_next_token_names)
def next_token_encoder_logits(x: Sequence[int], theta: DTransformerParams, *,
                              ell_max: Optional[int] = None, variant: VariantSet = PAPER) -> Vector:
    """``next_token_encoder`` up to the softmax: W_u X[:, ℓ−1] (+ b_u) (intermediates:
    ``_next_token_names``)."""
    X = embed(x, theta.W_e, theta.W_p, ell_max=ell_max, variant=variant,
              gamma=theta.gamma_emb, beta=theta.beta_emb)  # lines 1-3
    for layer in theta.layers:  # line 4
        X = encoder_layer(X, layer, variant=variant)  # lines 5-8
    last = [[row[-1]] for row in X]  # X[:, ℓ−1] as a one-column matrix (d_e × 1)
    if variant.resolved_final_norm("ed_encoder"):
        last = norm_columns(last, theta.gamma, theta.beta, variant)
    W_u = unembedding_matrix(theta.W_u, theta.W_e, variant)
    return column(logits(last, W_u, theta.b_u, variant), 0)  # line 9, before the softmax
