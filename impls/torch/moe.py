"""A sparse mixture-of-experts MLP (the registry entry ``moe_mlp``), the way PyTorch MoE code
is written: tokens as rows (…, ℓ, d_e), ``F.linear`` maps, ``torch.softmax`` over the experts,
``torch.topk`` for the chosen ones, the chosen weights scattered into a dense (…, ℓ, E) table.

After Hugging Face transformers 5.24 ``MixtralTopKRouter.forward`` (models/mixtral/
modeling_mixtral.py: ``F.linear(x, weight)``, softmax, ``torch.topk``, ``router_top_value /=
router_top_value.sum(dim=-1, keepdim=True)``) and ``Qwen2MoeSparseMoeBlock.forward``
(models/qwen2_moe/modeling_qwen2_moe.py: the renormalisation under ``norm_topk_prob`` only;
``F.sigmoid(shared_expert_gate(x)) * shared_expert(x)`` added). Half precision is routed in
float32, logits and softmax, as DeepSeek-V3's router does (Mixtral's and Qwen2-MoE's take the
softmax alone in float32), and the weights are cast back to the call's dtype. One difference is the spec's:
a tie between the k-th and (k+1)-th largest probabilities raises ValueError instead of letting
``torch.topk`` pick one (its order among equal values is unspecified).
"""

from __future__ import annotations

from typing import Any, Mapping

import torch
import torch.nn.functional as F

from ftspec.impls.api import Context

from . import adapter as A

__all__ = ["moe_mlp"]


def _expert(x: torch.Tensor, W1: torch.Tensor, W3: torch.Tensor, W2: torch.Tensor) -> torch.Tensor:
    """Mixtral's expert: down_proj(silu(gate_proj x) * up_proj x), no biases (…, ℓ, d_e)."""
    return F.linear(F.silu(F.linear(x, W1)) * F.linear(x, W3), W2)


def _check(p: Mapping[str, torch.Tensor], E: int, d_e: int, d_mlp: int, shared: bool) -> None:
    want = {"W_g": (E, d_e), "W_1": (E * d_mlp, d_e), "W_3": (E * d_mlp, d_e),
            "W_2": (d_e, E * d_mlp)}
    if shared:
        want.update({"shared.W_1": (d_mlp, d_e), "shared.W_3": (d_mlp, d_e),
                     "shared.W_2": (d_e, d_mlp), "W_shared_gate": (1, d_e)})
    for name, shape in want.items():
        if tuple(p[name].shape) != shape:
            raise ValueError(f"moe_mlp: {name} of shape {tuple(p[name].shape)}, expected {shape}")


def _routing(x: torch.Tensor, W_g: torch.Tensor, k: int, renormalise: bool) -> torch.Tensor:
    """(…, ℓ, E): each expert's weight per token, 0 where it is not chosen."""
    E = W_g.shape[0]
    if not 1 <= k <= E:
        raise ValueError(f"moe_mlp: k = {k}: expected 1 ≤ k ≤ E = {E}")
    # half precision is routed in float32, logits and softmax (DeepSeek-V3's router: transformers 5.24
    # DeepseekV3TopkRouter, F.linear(hidden_states.type(torch.float32), self.weight.type(torch.float32));
    # Mixtral and Qwen2-MoE take the softmax alone in float32): bfloat16 logits of nearby values tie
    wide = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    probs = torch.softmax(F.linear(x.to(wide), W_g.to(wide)), dim=-1)  # (…, ℓ, E)
    top, index = torch.topk(probs, min(k + 1, E), dim=-1)  # one more than chosen: the tie check
    # a tie at p = 0 (underflow) is none of the mathematics, and either expert would weigh 0
    if k < E and bool(((top[..., k - 1] == top[..., k]) & (top[..., k] > 0)).any()):
        raise ValueError(f"moe_mlp: a tie at the router's top-k boundary (k = {k}): the chosen experts are undefined")
    top, index = top[..., :k], index[..., :k]
    if renormalise:
        top = top / top.sum(dim=-1, keepdim=True)
    return torch.zeros_like(probs).scatter(-1, index, top).to(x.dtype)


def moe_mlp(i: Mapping[str, torch.Tensor], p: Mapping[str, torch.Tensor], ctx: Context) -> Any:
    """X (…, d_e, ℓ) → Y (…, d_e, ℓ)."""
    E, k, v = ctx.hyper["E"], ctx.hyper["k"], ctx.variant
    x = A.cols_to_rows(i["X"])  # (…, ℓ, d_e)
    d_mlp = p["W_1"].shape[0] // max(E, 1)
    _check(p, E, x.shape[-1], d_mlp, v.moe_shared)
    # the stacked experts on a leading axis, as MixtralExperts stores them: (E, d_mlp, d_e), (E, d_e, d_mlp)
    gate_proj = p["W_1"].reshape(E, d_mlp, -1)
    up_proj = p["W_3"].reshape(E, d_mlp, -1)
    down_proj = p["W_2"].reshape(-1, E, d_mlp).transpose(0, 1)
    w = _routing(x, p["W_g"], k, v.moe_topk_norm)
    y = torch.zeros_like(x)
    for e in range(E):
        y = y + w[..., e : e + 1] * _expert(x, gate_proj[e], up_proj[e], down_proj[e])
    if v.moe_shared:
        y = y + torch.sigmoid(F.linear(x, p["W_shared_gate"])) * _expert(
            x, p["shared.W_1"], p["shared.W_3"], p["shared.W_2"])
    return A.rows_to_cols(y)
