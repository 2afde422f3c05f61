"""A sparse mixture-of-experts MLP (the registry entry ``moe_mlp``) in JAX, Flax-style: one
unbatched example with tokens as rows (ℓ, d_e), ``jax.lax.top_k`` for the chosen experts, the
routed experts stacked on one axis and run in one einsum; ``jax.vmap`` batches.

After Hugging Face transformers 5.24 (models/mixtral/modeling_mixtral.py ``MixtralTopKRouter``,
``MixtralExperts``; models/qwen2_moe/modeling_qwen2_moe.py ``Qwen2MoeTopKRouter``,
``Qwen2MoeSparseMoeBlock``): p = softmax(W_g x) over all E experts, the k largest chosen, their
weights p_i (``norm_topk_prob=False``, Qwen2-MoE's default) or p_i / Σ_chosen p_j (Mixtral;
``moe_topk_norm``), y = Σ_chosen w_i W2_i (silu(W1_i x) ⊙ W3_i x), plus σ(w_s x)·(shared expert)
under ``moe_shared`` (Qwen2-MoE). Half precision is routed in float32 (DeepSeek-V3's router). A
tie between the k-th and (k+1)-th largest p (k < E), where the chosen set is undefined, fails a
``checkify.check`` inside the program and raises on the host (``boundary.jitted``), as the spec
refuses it (a tie at p = 0, underflow, is none of the mathematics and decides nothing: accepted).
"""

from __future__ import annotations

from typing import Any, Mapping

import jax
import jax.numpy as jnp
from jax.experimental import checkify

from ftspec.impls.api import Context

from . import components as C
from .boundary import jitted, to_rows

__all__ = ["moe_mlp"]

HIGHEST = jax.lax.Precision.HIGHEST


def _expert(x: Any, W1: Any, W3: Any, W2: Any) -> Any:
    """(ℓ, d_e) → (ℓ, d_e): x W1ᵀ through silu, times x W3ᵀ, then W2ᵀ (weights out × in)."""
    h = jax.nn.silu(jnp.matmul(x, W1.T, precision=HIGHEST)) * jnp.matmul(x, W3.T, precision=HIGHEST)
    return jnp.matmul(h, W2.T, precision=HIGHEST)


def _one(x: Any, theta: Mapping[str, Any], E: int, k: int, renormalise: bool, shared: bool) -> Any:
    """One example: x (ℓ, d_e) → y (ℓ, d_e)."""
    # half precision is routed in float32, logits and softmax (DeepSeek-V3's router, transformers 5.24
    # DeepseekV3TopkRouter): half-precision logits of nearby values tie
    wide = jnp.float32 if x.dtype in (jnp.float16, jnp.bfloat16) else x.dtype
    logits = jnp.matmul(x.astype(wide), theta["W_g"].T.astype(wide), precision=HIGHEST)  # (ℓ, E)
    probs = jax.nn.softmax(logits, axis=-1)
    top, index = jax.lax.top_k(probs, min(k + 1, E))  # one more than chosen: the tie check
    if k < E and C.CHECKED.get():
        # a tie at p = 0 (underflow) is none of the mathematics, and either expert would weigh 0
        checkify.check(~jnp.any((top[:, k - 1] == top[:, k]) & (top[:, k] > 0)),
                       f"moe_mlp: a tie at the router's top-k boundary (k = {k}): the chosen experts are undefined")
    top, index = top[:, :k], index[:, :k]
    if renormalise:
        top = top / jnp.sum(top, axis=-1, keepdims=True)
    weights = jnp.sum(jax.nn.one_hot(index, E, dtype=top.dtype) * top[..., None], axis=-2).astype(x.dtype)  # (ℓ, E)
    outs = jax.vmap(_expert, in_axes=(None, 0, 0, 0))(x, theta["W1"], theta["W3"], theta["W2"])  # (E, ℓ, d_e)
    y = jnp.einsum("te,etd->td", weights, outs, precision=HIGHEST)
    if shared:
        gate = jax.nn.sigmoid(jnp.matmul(x, theta["W_shared_gate"].T, precision=HIGHEST))  # (ℓ, 1)
        y = y + gate * _expert(x, theta["shared.W_1"], theta["shared.W_3"], theta["shared.W_2"])
    return y


def _theta(params: Mapping[str, Any], E: int, d_e: int, shared: bool) -> dict[str, Any]:
    """The experts on a leading axis, as MixtralExperts stores them (W1, W3: (E, d_mlp, d_e); W2:
    (E, d_e, d_mlp)), from the stacked matrices; every shape checked (ValueError)."""
    d_mlp = params["W_1"].shape[0] // max(E, 1)
    want = {"W_g": (E, d_e), "W_1": (E * d_mlp, d_e), "W_3": (E * d_mlp, d_e),
            "W_2": (d_e, E * d_mlp)}
    if shared:
        want.update({"shared.W_1": (d_mlp, d_e), "shared.W_3": (d_mlp, d_e),
                     "shared.W_2": (d_e, d_mlp), "W_shared_gate": (1, d_e)})
    for name, shape in want.items():
        if tuple(params[name].shape) != shape:
            raise ValueError(f"moe_mlp: {name} of shape {tuple(params[name].shape)}, expected {shape}")
    theta = {"W_g": params["W_g"], "W1": params["W_1"].reshape(E, d_mlp, d_e),
             "W3": params["W_3"].reshape(E, d_mlp, d_e),
             "W2": jnp.transpose(params["W_2"].reshape(d_e, E, d_mlp), (1, 0, 2))}
    if shared:
        theta.update({n: params[n] for n in ("shared.W_1", "shared.W_3", "shared.W_2",
                                             "W_shared_gate")})
    return theta


def moe_mlp(inputs: Mapping[str, Any], params: Mapping[str, Any], ctx: Context, platform: str) -> Any:
    """X (…, d_e, ℓ) → Y (…, d_e, ℓ); a leading batch axis under ``ctx.batched``."""
    E, k, v = ctx.hyper["E"], ctx.hyper["k"], ctx.variant
    if not 1 <= k <= E or params["W_g"].shape[0] != E:
        raise ValueError(f"moe_mlp: expected 1 ≤ k ≤ E and W_g with E rows; given k = {k}, E = {E}, "
                         f"W_g {tuple(params['W_g'].shape)}")
    theta = _theta(params, E, inputs["X"].shape[-2], v.moe_shared)

    def make() -> Any:
        def run(X: Any, theta: Mapping[str, Any]) -> Any:
            one = lambda x: _one(to_rows(x), theta, E, k, v.moe_topk_norm, v.moe_shared).T  # noqa: E731
            return jax.vmap(one)(X) if ctx.batched else one(X)
        return run

    return jitted(("moe_mlp", E, k, v.moe_topk_norm, v.moe_shared, ctx.batched), make, platform)(inputs["X"], theta)
