"""Layers of Algorithms 8-10 for ONE example (tokens as rows: X is (ℓ, d_e)).

Parameters are the nested trees built by ``boundary.py``:
layer = {"attn": mha, "norm1": {gamma, beta}, "mlp": {W1, b1, V, c, hidden, W2, b2}, "norm2": …}
decoder layer = {"self_attn", "norm3", "cross_attn", "norm4", "mlp", "norm5"}.

``arch`` ("ed_encoder", "ed_decoder", "bert", "gpt2") resolves the switches
whose paper value depends on the algorithm: norm placement (post for the
encoder, decoder and BERT; pre for GPT-2) and activation (ReLU for Alg. 8,
exact GELU for Alg. 9 and 10). Other placements: ``res_post`` (X + norm(f(X)),
Swin Transformer v2) and ``sandwich`` (X + norm'(f(norm(X))), Gemma 2; the layer's tree then
holds "norm1_out", "norm2_out" (decoder: "norm3_out" … "norm5_out")). Other MLPs: gated
(Shazeer 2020), deeper (``mlp_depth``) and one-layer (``mlp="one_layer"``, seed 004:
act(W_mlp1 X + b_mlp1 1ᵀ) with no second map).
"""

from __future__ import annotations

from typing import Callable, Optional

import jax.numpy as jnp

from ftspec.spec.variants import VariantSet

from .components import Array, Params, activation, linear, mh_attention, norm, unidirectional_mask


def mlp(X: Array, p: Params, act: Callable[[Array], Array], variant: VariantSet) -> Array:
    """W_mlp2 h + b_mlp2 1ᵀ with h = act(W_mlp1 X + b_mlp1 1ᵀ) (Alg. 8 line 7, Alg. 9/10 lines 7-8).
    X: (ℓ, d_e) → (ℓ, d_e); biases absent under ``mlp_bias=False``.

    ``mlp="gated"``: h = act(W_mlp1 x + b_mlp1) ⊙ (V x + c), Shazeer (2020), "GLU Variants Improve
    Transformer" (act(xW) ⊗ xV; SwiGLU with silu). ``mlp_depth`` = k: k − 1 further layers
    h ← act(W h + b), W: (d_mlp, d_mlp), in order. ``mlp="one_layer"``: no second map, the last h is
    the output, so d_mlp = d_e (seed 004, the numeric tutorial, II.J: F = ReLU(A W_L + b_L), "one
    linear layer L, and one ReLU layer R"). Which of these apply is the variant's to say; a
    parameter it needs and the tree lacks is a KeyError/TypeError, not a silent plain MLP."""
    one_layer = variant.mlp == "one_layer"
    if one_layer and p["W1"].shape[0] != X.shape[-1]:  # else a d_mlp of 1 would broadcast into X
        raise ValueError(f"mlp='one_layer' adds act(W_mlp1 x) to x: d_mlp = {p['W1'].shape[0]} must equal "
                         f"d_e = {X.shape[-1]}")
    h = act(linear(X, p["W1"], p.get("b1")))  # (ℓ, d_mlp)
    if variant.mlp == "gated":
        h = h * linear(X, p["V"], p.get("c"))  # (ℓ, d_mlp): act(·) ⊙ linear branch
    hidden = p.get("hidden", [])
    if len(hidden) != variant.mlp_depth - 1:
        raise ValueError(f"mlp_depth={variant.mlp_depth} needs {variant.mlp_depth - 1} further hidden layer(s); "
                         f"the parameters hold {len(hidden)}")
    for layer in hidden:
        h = act(linear(h, layer["W"], layer.get("b")))  # (ℓ, d_mlp)
    if one_layer:
        return h  # (ℓ, d_mlp = d_e)
    if p.get("W2") is None:
        raise KeyError(f"mlp={variant.mlp!r} needs the second map W_mlp2 (W_mlp4); the parameters lack it")
    return linear(h, p["W2"], p.get("b2"))  # (ℓ, d_e)


def _sublayer(X: Array, f: Callable[[Array], Array], norm_p: Optional[Params], variant: VariantSet,
              placement: str, rows: Optional[Array] = None, out_p: Optional[Params] = None) -> Array:
    """One residual sublayer. post: X ← norm(X + f(X)); pre: X ← X + f(norm(X));
    res_post: X ← X + norm(f(X)) (Liu et al. 2022, Swin Transformer v2's res-post-norm);
    sandwich: X ← X + norm'(f(norm(X))), norm' with ``out_p`` (Gemma 2: transformers 5.24
    Gemma2DecoderLayer, input_layernorm then post_attention_layernorm around the attention).
    The pre, res_post and sandwich residuals add the UN-normalised X (normalising X in place is a classic bug).
    ``rows``: the real rows (a zero-variance row of padding is not refused; None: every row)."""
    if placement == "sandwich":
        if out_p is None:
            raise ValueError("norm_placement='sandwich' needs each sublayer's output norm")
        return X + norm(f(norm(X, norm_p, variant, rows=rows)), out_p, variant, rows=rows)
    if placement == "pre":
        return X + f(norm(X, norm_p, variant, rows=rows))
    if placement == "res_post":
        return X + norm(f(X), norm_p, variant, rows=rows)
    if placement != "post":
        raise ValueError(f"unknown norm placement {placement!r}")
    return norm(X + f(X), norm_p, variant, rows=rows)


def valid_rows(ell: int, valid: Optional[Array]) -> Optional[Array]:
    """(ℓ,) bool: rows t < valid are real, the rest padding (None: every row is real)."""
    return None if valid is None else jnp.arange(ell) < valid


def self_mask(ell: int, variant: VariantSet, causal: bool, pad: Optional[Array] = None) -> Optional[Array]:
    """A layer's self-attention mask, [query, key]: causal [[t_z ≤ t_x]] or ≡ 1 (None), and with
    ``pad`` (ℓ,) bool (False = padding) every padding position masked as a key (Mask ∧ pad[t_z]:
    Hugging Face's ``attention_mask``, Flax's ``make_attention_mask(pad, pad)`` restricted to keys)."""
    mask = unidirectional_mask(ell, ell, variant) if causal else None  # (ℓ, ℓ) or Mask ≡ 1
    if pad is None:
        return mask
    keys = jnp.broadcast_to(pad[None, :], (ell, ell))  # (ℓ_x, ℓ_z): key t_z real
    return keys if mask is None else mask & keys


def block(X: Array, p: Params, variant: VariantSet, arch: str,
          attend: Callable[[Array], Array], rows: Optional[Array] = None) -> Array:
    """Alg. 8 lines 5-8, Alg. 9 / 10 lines 5-8 around a given self-attention ``attend`` (Y ↦ Ṽ):
    the residual sublayers, norms and MLP of ``arch``. Shared by the full-sequence layers and the
    key/value-cache decoder (architectures.py), whose ``attend`` reads and fills the cache."""
    placement = variant.resolved_norm_placement(arch)
    act = activation(variant.resolved_activation(arch))
    if variant.residual != "sequential" and arch == "gpt2":  # both read the same X (GPT-NeoX, GPT-J, Falcon)
        if placement != "pre":
            raise ValueError(f"residual={variant.residual!r} is defined for pre-LN layers only; given {placement!r}")
        Y1 = norm(X, p["norm1"], variant, rows=rows)  # (ℓ, d_e)
        Y2 = Y1 if variant.residual == "parallel_shared" else norm(X, p["norm2"], variant, rows=rows)
        return X + (attend(Y1) + mlp(Y2, p["mlp"], act, variant))  # the branches summed first, as HF does
    X = _sublayer(X, attend, p["norm1"], variant, placement, rows, p.get("norm1_out"))
    X = _sublayer(X, lambda Y: mlp(Y, p["mlp"], act, variant), p["norm2"], variant, placement, rows,
                  p.get("norm2_out"))
    return X  # (ℓ, d_e)


def encoder_block(X: Array, p: Params, variant: VariantSet, arch: str, valid: Optional[Array] = None,
                  pad: Optional[Array] = None, alibi_positions: Optional[Array] = None) -> Array:
    """Alg. 8 lines 5-8 (arch "ed_encoder"), Alg. 9 lines 5-8 ("bert"), Alg. 10 lines 5-8 ("gpt2").

    Self-attention with Mask ≡ 1, except GPT-2's causal Mask[t, t'] = [[t ≤ t']]
    (ℓ_z = ℓ_x, so the causal alignment switch cannot matter here), and ∧ pad[t_z] with ``pad``.
    Pre-LN GPT-2 attends from and to the normalised X̃ (MHAttention(X̃, X̃)).
    ``valid`` (causal stacks only): rows t ≥ valid are padding of a fixed-size buffer
    (architectures.py): their values are zeroed and their norms not checked. ``alibi_positions`` (ℓ,):
    ALiBi's positions counted among the real tokens (a padded model under ``pad_positions="real"``).
    """
    ell = X.shape[0]
    causal = arch == "gpt2"
    mask = self_mask(ell, variant, causal, pad)
    kv = valid_rows(ell, valid)
    return block(X, p, variant, arch, lambda Y: mh_attention(Y, Y, p["attn"], mask, variant, kv, alibi=causal,
                                                                 bidirectional=not causal,
                                                                 alibi_positions=alibi_positions), kv)


def decoder_block(X: Array, Z: Array, p: Params, variant: VariantSet, valid: Optional[Array] = None,
                  pad_x: Optional[Array] = None, pad_z: Optional[Array] = None) -> Array:
    """Alg. 8 lines 14-19. X: (ℓ_x, d_e) decoder stream, Z: (ℓ_z, d_e) encoder output.

    post (paper): X ← LN3(X + SelfAttn(X, causal)); X ← LN4(X + CrossAttn(X, Z));
    X ← LN5(X + MLP(X)). pre: X += SelfAttn(LN3 X); X += CrossAttn(LN4 X, Z);
    X += MLP(LN5 X), with the context Z used as given. res_post: X += LN3(SelfAttn(X, causal));
    X += LN4(CrossAttn(X, Z)); X += LN5(MLP(X)). sandwich: X += LN3'(SelfAttn(LN3 X, causal)); …,
    LN3' … LN5' the trees' "norm3_out" … "norm5_out". ``valid``: rows t ≥ valid of X
    are padding of a fixed-size buffer (architectures.py, inference).

    Padding over keys (the ``padded_`` entries): ``pad_x`` (ℓ_x,) bool masks the decoder's own
    padding positions in line 14 (Mask = [[t_z ≤ t_x]] ∧ pad_x[t_z], Hugging Face's
    ``decoder_attention_mask``), ``pad_z`` (ℓ_z,) bool the encoder's in line 16 (Mask ≡ 1 ∧
    pad_z[t_z], the encoder's ``attention_mask`` passed on to cross-attention). A padding row of X
    still computes its own output.
    """
    placement = variant.resolved_norm_placement("ed_decoder")
    act = activation(variant.resolved_activation("ed_decoder"))
    ell_x, ell_z = X.shape[0], Z.shape[0]
    causal = self_mask(ell_x, variant, True, pad_x)  # (ℓ_x, ℓ_x) [t_x, t_z], line 14 (∧ pad_x[t_z])
    cross = None if pad_z is None else jnp.broadcast_to(pad_z[None, :], (ell_x, ell_z))  # (ℓ_x, ℓ_z), line 16
    kv = valid_rows(ell_x, valid)
    X = _sublayer(X, lambda Y: mh_attention(Y, Y, p["self_attn"], causal, variant, kv, alibi=True,
                                            bidirectional=False), p["norm3"],
                  variant, placement, kv, p.get("norm3_out"))  # lines 14-15 (T5's causal buckets, spec 2.13)
    X = _sublayer(X, lambda Y: mh_attention(Y, Z, p["cross_attn"], cross, variant), p["norm4"], variant,
                  placement, kv, p.get("norm4_out"))  # lines 16-17, Mask ≡ 1 (∧ pad_z[t_z])
    X = _sublayer(X, lambda Y: mlp(Y, p["mlp"], act, variant), p["norm5"], variant, placement, kv,
                  p.get("norm5_out"))  # lines 18-19
    return X  # (ℓ_x, d_e)
