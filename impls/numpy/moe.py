"""A sparse mixture-of-experts MLP (the registry entry ``moe_mlp``), in the paper's column layout.

Written from docs/spec.md ("Mixture of experts") and the reference code it cites, Hugging Face
transformers 5.24: ``MixtralTopKRouter`` / ``MixtralExperts`` (models/mixtral/modeling_mixtral.py:
softmax over all E router logits, ``torch.topk``, the chosen weights renormalised) and
``Qwen2MoeTopKRouter`` / ``Qwen2MoeSparseMoeBlock`` (models/qwen2_moe/modeling_qwen2_moe.py:
renormalised only under ``norm_topk_prob``; a shared expert scaled by a sigmoid gate).

Per column x of X (..., d_e, ℓ): router probabilities p = softmax(W_g x) over the E experts (axis
−2), the k largest chosen, their weights p_i (or p_i / Σ_chosen p_j under ``moe_topk_norm``), and
y = Σ_chosen w_i W2_i (silu(W1_i x) ⊙ W3_i x), plus σ(w_s x)·(shared expert) under ``moe_shared``.

The experts' weights arrive stacked (expert i: rows i·d_mlp … (i+1)·d_mlp − 1 of W_1 and
W_3, those columns of W_2; Mixtral's gate_up_proj and down_proj of shape (E, ·, ·)
flattened). Every expert runs on every column (the sizes are tiny) and is weighted by 0 where not chosen; the
chosen set is read from a stable descending sort of p. A tie between the k-th and (k+1)-th largest
p of any column (k < E) raises ValueError: which expert is chosen is then undefined (torch.topk's
order among equal values is unspecified), and the spec refuses it. A tie at p = 0 (probabilities
that underflowed: logits ~104 below the largest in float32) is no tie of the mathematics and
changes nothing (either expert's weight is 0): it is accepted. Computed in X's dtype.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from . import components as C

__all__ = ["check_shapes", "moe_mlp", "router_weights"]


def router_weights(X: np.ndarray, W_g: np.ndarray, k: int, renormalise: bool) -> np.ndarray:
    """(..., E, ℓ): each expert's weight per column, 0 for an expert not chosen."""
    E = W_g.shape[0]
    if not 1 <= k <= E:
        raise ValueError(f"moe_mlp: k = {k} chosen experts: expected 1 ≤ k ≤ E = {E}")
    # float16 is routed in float32, logits and softmax, as DeepSeek-V3's router does (transformers 5.24
    # DeepseekV3TopkRouter: F.linear(hidden_states.type(torch.float32), self.weight.type(torch.float32));
    # Mixtral and Qwen2-MoE take the softmax alone in float32): float16 logits or probabilities of
    # nearby values tie, and a tie across the top-k boundary is refused
    wide = np.float32 if X.dtype == np.float16 else X.dtype
    R = W_g.astype(wide) @ X.astype(wide)  # (..., E, ℓ) router logits
    P = C.softmax_columns(R)  # over all E experts
    order = np.argsort(-P, axis=-2, kind="stable")  # (..., E, ℓ) experts by decreasing p
    ranked = np.take_along_axis(P, order, axis=-2)
    if k < E and np.any((ranked[..., k - 1, :] == ranked[..., k, :]) & (ranked[..., k, :] > 0)):
        raise ValueError(f"moe_mlp: the router's k-th and (k+1)-th largest probabilities tie (k = {k}): "
                         "the chosen experts are undefined")
    chosen = np.zeros(P.shape, dtype=bool)
    np.put_along_axis(chosen, order[..., :k, :], True, axis=-2)
    weights = np.where(chosen, P, np.zeros_like(P))
    if renormalise:
        weights = weights / np.sum(weights, axis=-2, keepdims=True)  # Mixtral: Σ over the chosen = 1
    return weights.astype(X.dtype)


def _expert(X: np.ndarray, W1: np.ndarray, W3: np.ndarray, W2: np.ndarray) -> np.ndarray:
    """W2 (silu(W1 X) ⊙ W3 X): the SwiGLU expert (Mixtral's w2(act(w1 x) * w3 x))."""
    return W2 @ (C.silu(W1 @ X) * (W3 @ X))  # (..., d_e, ℓ)


def check_shapes(p: Mapping[str, Any], E: int, d_e: int, d_mlp: int, shared: bool) -> None:
    """Every parameter of the shape the entry declares (the experts stacked: rows i·d_mlp … of
    W_1 and W_3, those columns of W_2), else ValueError."""
    want = {"W_g": (E, d_e), "W_1": (E * d_mlp, d_e), "W_3": (E * d_mlp, d_e),
            "W_2": (d_e, E * d_mlp)}
    if shared:
        want.update({"shared.W_1": (d_mlp, d_e), "shared.W_3": (d_mlp, d_e),
                     "shared.W_2": (d_e, d_mlp), "W_shared_gate": (1, d_e)})
    for name, shape in want.items():
        if tuple(p[name].shape) != shape:
            raise ValueError(f"moe_mlp: {name} of shape {tuple(p[name].shape)}, expected {shape}")


def moe_mlp(X: np.ndarray, p: Mapping[str, Any], variant, E: int, k: int) -> np.ndarray:
    """Y (..., d_e, ℓ) for X (..., d_e, ℓ)."""
    d_e = X.shape[-2]
    d_mlp = p["W_1"].shape[0] // max(E, 1)
    check_shapes(p, E, d_e, d_mlp, variant.moe_shared)
    weights = router_weights(X, p["W_g"], k, variant.moe_topk_norm)
    Y = np.zeros_like(X)
    for i in range(E):  # in index order, as Mixtral's loop over the experts hit
        rows = slice(i * d_mlp, (i + 1) * d_mlp)
        Y = Y + weights[..., i : i + 1, :] * _expert(X, p["W_1"][rows], p["W_3"][rows],
                                                     p["W_2"][:, rows])
    if variant.moe_shared:
        gate = C.logistic_pair(p["W_shared_gate"] @ X)[0]  # (..., 1, ℓ): σ(w_s x)
        Y = Y + gate * _expert(X, p["shared.W_1"], p["shared.W_3"], p["shared.W_2"])
    return Y
