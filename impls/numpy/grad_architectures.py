"""Hand-written backward passes of Algorithms 8-10, from the logits back to every parameter.

``*_logits_bwd(dlogits, cache, grads)`` walks the cache of the matching
``*_logits_fwd`` (``architectures.py``) in reverse: unembedding, final norm,
head (Algorithm 9), layers last to first, embedding. Parameter gradients are
added into a ``Grads`` accumulator (``grad_layers.py``); parameters that
appear twice receive both contributions:

- tied unembedding, W_u = W_eᵀ: dW_e = (embedding part) + (dW_u)ᵀ;
- Algorithm 8's W_e (and W_p) embed both z and x: both streams add up;
- the encoder output Z feeds every decoder layer's cross-attention: the dZ
  of all of them add up before the encoder's backward.
"""

from __future__ import annotations

import numpy as np

from .architectures import DCache, ECache, EDCache, EmbedTokensCache, UnembedCache
from .grad_components import activation_bwd, embed_bwd, linear_bwd
from .grad_layers import Grads, decoder_layer_bwd, named_norm_bwd, stack_layer_bwd

__all__ = ["d_logits_bwd", "e_logits_bwd", "ed_logits_bwd"]


def unembed_bwd(dlogits: np.ndarray, c: UnembedCache, grads: Grads) -> np.ndarray:
    """logits = W_u X + b_u 1ᵀ: dX = W_uᵀ dlogits, dW_u = dlogits Xᵀ, db_u = Σ_t dlogits.

    Tied (W_u = W_eᵀ): dW_uᵀ is added to W_e's gradient. Soft-capped (``c.capped`` = tanh(z/c)):
    the logits were c·tanh(z/c), so dz = dlogits ⊙ (1 − tanh²) first.
    """
    if c.capped is not None:
        dlogits = dlogits * (np.asarray(1.0, dtype=dlogits.dtype) - c.capped * c.capped)
    dX, dW_u, db_u = linear_bwd(dlogits, c.X, c.W_u, c.has_b_u)
    if c.tied:
        grads.add("W_e", np.swapaxes(dW_u, -1, -2))  # W_u = W_eᵀ
    else:
        grads.add("W_u", dW_u)
    grads.add("b_u", db_u)
    return dX


def embed_tokens_bwd(dX: np.ndarray, c: EmbedTokensCache, grads: Grads) -> None:
    dW_e, dW_p, dgamma, dbeta = embed_bwd(dX, c.cache)
    grads.add("W_e", dW_e)
    grads.add("W_p", dW_p)
    grads.add(c.gamma, dgamma)
    grads.add(c.beta, dbeta)


def ed_logits_bwd(dlogits: np.ndarray, c: EDCache, grads: Grads) -> None:
    """Algorithm 8 backwards: decoder (collecting dZ from every cross-attention), then encoder."""
    dX = unembed_bwd(dlogits, c.unembed, grads)  # line 21
    if c.dec_final is not None:
        dX = named_norm_bwd(dX, c.dec_final, grads)
    dZ = None
    for layer in reversed(c.dec_layers):  # lines 13-19
        dX, dZ_l = decoder_layer_bwd(dX, layer, grads)
        dZ = dZ_l if dZ is None else dZ + dZ_l
    embed_tokens_bwd(dX, c.dec_embed, grads)  # lines 10-12
    if dZ is None:  # L_dec = 0: the encoder does not reach the output
        return
    if c.enc_final is not None:
        dZ = named_norm_bwd(dZ, c.enc_final, grads)
    for layer in reversed(c.enc_layers):  # lines 4-8
        dZ = stack_layer_bwd(dZ, layer, grads)
    embed_tokens_bwd(dZ, c.enc_embed, grads)  # lines 1-3


def e_logits_bwd(dlogits: np.ndarray, c: ECache, grads: Grads) -> None:
    """Algorithm 9 backwards: unembedding, head (lines 10-11), final norm, layers, embedding."""
    dX = unembed_bwd(dlogits, c.unembed, grads)  # line 12
    dX = named_norm_bwd(dX, c.head_norm, grads)  # line 11
    dX = activation_bwd(c.act, c.head_pre, dX)  # line 10: act(W_f X + b_f 1ᵀ)
    dX, dW_f, db_f = linear_bwd(dX, c.head_in, c.W_f, True)
    grads.add("W_f", dW_f)
    grads.add("b_f", db_f)
    if c.final is not None:
        dX = named_norm_bwd(dX, c.final, grads)
    for layer in reversed(c.layers):  # lines 4-8
        dX = stack_layer_bwd(dX, layer, grads)
    embed_tokens_bwd(dX, c.embed, grads)  # lines 1-3


def d_logits_bwd(dlogits: np.ndarray, c: DCache, grads: Grads) -> None:
    """Algorithm 10 backwards: unembedding, final norm (line 10), layers, embedding."""
    dX = unembed_bwd(dlogits, c.unembed, grads)  # line 11
    if c.final is not None:
        dX = named_norm_bwd(dX, c.final, grads)  # line 10
    for layer in reversed(c.layers):  # lines 4-8
        dX = stack_layer_bwd(dX, layer, grads)
    embed_tokens_bwd(dX, c.embed, grads)  # lines 1-3
