"""Hand-written backward passes of Algorithm 5 and the layers of Algorithms 8-10.

Each ``*_bwd`` reads the cache of the matching ``*_fwd`` in ``layers.py``,
returns the gradient with respect to the layer's inputs and adds the
gradients of the parameters it used into a ``Grads`` accumulator under their
flat names (``layers.0.attn.heads.1.W_q``). Parameters used twice (tied
unembedding) simply receive two contributions.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Optional, Union

import numpy as np

from .grad_components import activation_bwd, attention_bwd, linear_bwd, norm_bwd
from .layers import MHACache, MLPCache, NamedNormCache, ParallelCache, ResidualCache

__all__ = ["Grads", "decoder_layer_bwd", "mh_attention_bwd", "mlp_bwd", "named_norm_bwd", "stack_layer_bwd"]


class Grads:
    """{flat parameter name: gradient}, zeros to start, shapes batch_shape + the parameter's shape."""

    def __init__(self, params: Mapping[str, np.ndarray], batch_shape: tuple[int, ...], dtype) -> None:
        self.batch_shape = tuple(batch_shape)
        self.values = {k: np.zeros(self.batch_shape + np.shape(v), dtype=dtype) for k, v in params.items()}

    def add(self, name: Optional[str], g: Optional[np.ndarray]) -> None:
        if name is None or g is None:
            return
        cur = self.values[name]
        if g.shape != cur.shape:
            raise AssertionError(f"gradient of {name}: shape {g.shape}, expected {cur.shape}")
        self.values[name] = cur + g


def mh_attention_bwd(dOut: np.ndarray, c: MHACache, grads: Grads) -> tuple[np.ndarray, np.ndarray]:
    """Backward of Ṽ = W_o [Y^1; …; Y^H] + b_o 1ᵀ (Algorithm 5).

    dW_o = dṼ Yᵀ, db_o = Σ_t dṼ, dY = W_oᵀ dṼ split back into heads; each head
    through ``attention_bwd``; X and Z were broadcast over the head axis, so
    their gradients sum over it. Under grouped-query attention the key/value
    gradients come back per kv head (each the sum over its group's query heads)
    and go to ``kv_heads.{g}.*``. Returns (dX, dZ).
    """
    dY, dW_o, db_o = linear_bwd(dOut, c.Y, c.W.W_o, c.W.b_o is not None)
    grads.add(c.prefix + "W_o", dW_o)
    grads.add(c.prefix + "b_o", db_o)
    H = c.W.W_q.shape[0]
    dY = dY.reshape(dY.shape[:-2] + (H, dY.shape[-2] // H, dY.shape[-1]))  # (..., H, d_mid, ℓ_x)
    dXh, dZh, head_grads = attention_bwd(dY, c.heads)
    for leaf, g in head_grads.items():
        if g is None:
            continue
        if leaf.startswith("gamma_"):  # QK-norm's gains, shared by the heads: the sum over the head axis
            grads.add(c.prefix + leaf, np.sum(g, axis=-2))
            continue
        leaf_ndim = 1 if leaf.startswith("b_") else 2
        per_head = np.moveaxis(g, -(leaf_ndim + 1), 0)  # (H or H_kv, ..., *leaf shape)
        group = "kv_heads" if c.W.kv_index is not None and leaf[-1] in "kv" else "heads"
        for h in range(per_head.shape[0]):
            grads.add(f"{c.prefix}{group}.{h}.{leaf}", per_head[h])
    return np.sum(dXh, axis=-3), np.sum(dZh, axis=-3)


def named_norm_bwd(dOut: np.ndarray, c: NamedNormCache, grads: Grads) -> np.ndarray:
    dX, dgamma, dbeta = norm_bwd(dOut, c.cache)
    grads.add(c.gamma, dgamma)
    grads.add(c.beta, dbeta)
    return dX


def mlp_bwd(dOut: np.ndarray, c: MLPCache, grads: Grads) -> np.ndarray:
    """Backward of W2 H + b2 1ᵀ, H = act(W1 X + b1 1ᵀ) [⊙ (V X + c 1ᵀ)], then each further layer
    H ← act(W H + b 1ᵀ), walked in reverse:

      further layer k (last first): dpre = act'(pre) ⊙ dH, dW = dpre inpᵀ, db = Σ_t dpre, dH ← Wᵀ dpre;
      gate (product rule of U = A ⊙ G): dA = dU ⊙ G, dG = dU ⊙ A, and G = V X + c 1ᵀ gives dV, dc
      and a second contribution Vᵀ dG to dX;
      first layer: dH1 = act'(H1) ⊙ dA, dX += W1ᵀ dH1.

    Under ``mlp="one_layer"`` (no W2, b2) the last hidden state is the output: dH = dOut.
    """
    w1, b1, w2, b2 = c.names
    if c.W2 is None:  # mlp="one_layer"
        dH = dOut  # (..., d_mlp = d_e, ℓ)
    else:
        last = c.A1 if c.last is None else c.last  # (..., d_mlp, ℓ)  what W2 read
        dH, dW2, db2 = linear_bwd(dOut, last, c.W2, b2 is not None)
        grads.add(w2, dW2)
        grads.add(b2, db2)
    for dense in reversed(c.hidden):
        dpre = activation_bwd(c.act, dense.pre, dH)  # (..., d_mlp, ℓ)
        dH, dW, db = linear_bwd(dpre, dense.inp, dense.W, dense.names[1] is not None)
        grads.add(dense.names[0], dW)
        grads.add(dense.names[1], db)
    dX_gate = None
    if c.gate is not None:
        dG = dH * c.A1  # (..., d_mlp, ℓ)  ∂(A ⊙ G)/∂G
        dH = dH * c.gate.G  # ∂(A ⊙ G)/∂A
        dX_gate, dV, dc = linear_bwd(dG, c.X, c.gate.W, c.gate.names[1] is not None)
        grads.add(c.gate.names[0], dV)
        grads.add(c.gate.names[1], dc)
    dH1 = activation_bwd(c.act, c.H1, dH)
    dX, dW1, db1 = linear_bwd(dH1, c.X, c.W1, b1 is not None)
    grads.add(w1, dW1)
    grads.add(b1, db1)
    return dX if dX_gate is None else dX + dX_gate


def _sublayer_bwd(dOut: np.ndarray, c: ResidualCache, grads: Grads) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """Backward of f: returns (d input, dZ of a cross-attention or None)."""
    if c.kind == "self":  # f(Y) = MHA(Y, Y): Y is both the primary input and the context
        dX, dZ = mh_attention_bwd(dOut, c.f, grads)
        return dX + dZ, None
    if c.kind == "cross":  # f(Y) = MHA(Y, Z)
        return mh_attention_bwd(dOut, c.f, grads)
    if c.kind == "mlp":
        return mlp_bwd(dOut, c.f, grads), None
    raise ValueError(f"unknown sublayer {c.kind!r}")


def residual_bwd(dOut: np.ndarray, c: ResidualCache, grads: Grads) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """post: out = norm(X + f(X)); pre: out = X + f(norm(X)); res_post: out = X + norm(f(X));
    sandwich: out = X + norm'(f(norm(X))). Returns (dX, dZ or None)."""
    if c.placement == "post":
        dT = named_norm_bwd(dOut, c.norm, grads)  # through the norm of X + f(X)
        dF, dZ = _sublayer_bwd(dT, c, grads)
        return dT + dF, dZ
    if c.placement == "pre":
        dF, dZ = _sublayer_bwd(dOut, c, grads)
        return dOut + named_norm_bwd(dF, c.norm, grads), dZ
    if c.placement == "res_post":
        dF, dZ = _sublayer_bwd(named_norm_bwd(dOut, c.norm, grads), c, grads)  # through norm(f(X))
        return dOut + dF, dZ
    if c.placement == "sandwich":
        if c.norm_out is None:
            raise ValueError("a sandwich sublayer's cache lacks its output norm")
        dF, dZ = _sublayer_bwd(named_norm_bwd(dOut, c.norm_out, grads), c, grads)  # through norm'(f(·))
        return dOut + named_norm_bwd(dF, c.norm, grads), dZ  # then through the input norm
    raise ValueError(f"unknown norm placement {c.placement!r}")


def stack_layer_bwd(dX: np.ndarray, caches: Iterable[Union[ResidualCache, ParallelCache]], grads: Grads) -> np.ndarray:
    """Backward of an encoder, BERT or GPT-2 layer (attention block, then MLP block; or both side by
    side under a parallel residual)."""
    for c in reversed(tuple(caches)):
        if isinstance(c, ParallelCache):
            dX = _parallel_bwd(dX, c, grads)
        else:
            dX, _ = residual_bwd(dX, c, grads)
    return dX


def _parallel_bwd(dOut: np.ndarray, c: ParallelCache, grads: Grads) -> np.ndarray:
    """out = X + (Attn(Y₁, Y₁) + MLP(Y₂)), Yᵢ = Nᵢ(X) (Y₂ = Y₁ with one shared norm):
    dX = dOut + N₁ᵀ(dY₁) + N₂ᵀ(dY₂), the attention's primary and context gradients both into Y₁."""
    dA_X, dA_Z = mh_attention_bwd(dOut, c.attn, grads)
    dY1 = dA_X + dA_Z
    dY2 = mlp_bwd(dOut, c.mlp, grads)
    if c.norm2 is None:
        return dOut + named_norm_bwd(dY1 + dY2, c.norm1, grads)
    return dOut + named_norm_bwd(dY1, c.norm1, grads) + named_norm_bwd(dY2, c.norm2, grads)


def decoder_layer_bwd(dX: np.ndarray, caches: Iterable[ResidualCache], grads: Grads) -> tuple[np.ndarray, np.ndarray]:
    """Backward of a decoder layer; returns (dX, dZ), dZ from the cross-attention to the encoder output."""
    dZ_total = None
    for c in reversed(tuple(caches)):
        dX, dZ = residual_bwd(dX, c, grads)
        if dZ is not None:
            dZ_total = dZ if dZ_total is None else dZ_total + dZ
    if dZ_total is None:
        raise ValueError("a decoder layer's caches hold no cross-attention sublayer")
    return dX, dZ_total
