"""Forward passes of Algorithms 8-10 in native layout.

Tokens are (…, ℓ) integer tensors; every hidden state is (…, ℓ, d); the
result P is (…, ℓ, N_V), row t a distribution over the next token (the
adapter transposes it to the canonical (N_V, ℓ)).
"""

from __future__ import annotations

from typing import Sequence

import torch.nn.functional as F
from torch import Tensor

from ftspec.spec.variants import VariantSet

from .adapter import Block, DecBlock, Embedding, Norm, Unembedding
from .components import activation, embed, norm, unembed
from .layers import block, decoder_block

__all__ = ["d_transformer", "e_transformer", "ed_transformer"]


def ed_transformer(z: Tensor, x: Tensor, emb_enc: Embedding, emb_dec: Embedding, enc: Sequence[Block],
                   dec: Sequence[DecBlock], final_enc: Norm, final_dec: Norm, head: Unembedding,
                   v: VariantSet, ell_max: int) -> Tensor:
    """Alg. 8. z: (…, ℓ_z) source, x: (…, ℓ_x) target → P: (…, ℓ_x, N_V).

    ``emb_enc``/``emb_dec`` share W_e and W_p and differ only in their
    embedding norms (γ_emb_enc, γ_emb_dec); ``final_enc``/``final_dec`` are
    used when the variant resolves to a final norm (γ_enc, γ_dec)."""
    Z = embed(z, emb_enc.table, emb_enc.positions, v, ell_max, emb_enc.norm)  # lines 1-3: (…, ℓ_z, d_e)
    for p in enc:  # line 4
        Z = block(Z, p, v, "ed_encoder")  # lines 5-8
    if v.resolved_final_norm("ed_encoder"):
        Z = norm(Z, final_enc, v)
    X = embed(x, emb_dec.table, emb_dec.positions, v, ell_max, emb_dec.norm)  # lines 10-12: (…, ℓ_x, d_e)
    for p in dec:  # line 13
        X = decoder_block(X, Z, p, v)  # lines 14-19
    if v.resolved_final_norm("ed_decoder"):
        X = norm(X, final_dec, v)
    return unembed(X, head.W_u, head.b_u)  # line 21: (…, ℓ_x, N_V)


def e_transformer(x: Tensor, emb: Embedding, layers: Sequence[Block], final: Norm, W_f: Tensor, b_f: Tensor,
                  head_norm: Norm, head: Unembedding, v: VariantSet, ell_max: int) -> Tensor:
    """Alg. 9. x: (…, ℓ) → P: (…, ℓ, N_V). ``final`` (γ_final) only under
    final_norm="final"; the head's norm (γ, β over d_f) is line 11 and always there."""
    X = embed(x, emb.table, emb.positions, v, ell_max, emb.norm)  # lines 1-3: (…, ℓ, d_e)
    for p in layers:  # line 4
        X = block(X, p, v, "bert")  # lines 5-8
    if v.resolved_final_norm("bert"):
        X = norm(X, final, v)
    X = activation(F.linear(X, W_f, b_f), v.resolved_activation("bert"))  # line 10: (…, ℓ, d_f)
    X = norm(X, head_norm, v)  # line 11
    return unembed(X, head.W_u, head.b_u)  # line 12: (…, ℓ, N_V)


def d_transformer(x: Tensor, emb: Embedding, layers: Sequence[Block], final: Norm, head: Unembedding,
                  v: VariantSet, ell_max: int) -> Tensor:
    """Alg. 10. x: (…, ℓ) → P: (…, ℓ, N_V)."""
    X = embed(x, emb.table, emb.positions, v, ell_max, emb.norm)  # lines 1-3: (…, ℓ, d_e)
    for p in layers:  # line 4
        X = block(X, p, v, "gpt2")  # lines 5-8
    if v.resolved_final_norm("gpt2"):
        X = norm(X, final, v)  # line 10
    return unembed(X, head.W_u, head.b_u)  # line 11: (…, ℓ, N_V)
