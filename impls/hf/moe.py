"""Hugging Face transformers' sparse mixture-of-experts blocks as implementations of ``moe_mlp``
(plugins ``transformers-mixtral-moe`` and ``transformers-qwen2-moe``).

Boundary only: a tiny config from the case's sizes, ftspec's parameters loaded into the library's
own module (``experts_implementation="eager"``: the experts' Python loop quoted in spec/moe.py),
layout (tokens as rows); the mathematics is the library's. Written against
transformers 5.24.0 with torch 2.13.0, reading models/mixtral/modeling_mixtral.py
(``MixtralTopKRouter``, ``MixtralExperts``, ``MixtralSparseMoeBlock``) and
models/qwen2_moe/modeling_qwen2_moe.py (``Qwen2MoeTopKRouter``, ``Qwen2MoeExperts``,
``Qwen2MoeMLP``, ``Qwen2MoeSparseMoeBlock``).

- ``transformers-mixtral-moe``: ``MixtralSparseMoeBlock`` (always renormalises the chosen weights),
  under ``moe_topk_norm=True``.
- ``transformers-qwen2-moe``: ``Qwen2MoeSparseMoeBlock`` with ``norm_topk_prob=False`` (its
  config's default) and its shared expert (``shared_expert_intermediate_size`` = d_mlp) with the
  sigmoid ``shared_expert_gate``, under ``moe_shared=True``.

The experts' weights: expert i's ``gate_up_proj[i]`` is [W_1^i; W_3^i] (the gate half first, as
``.chunk(2, dim=-1)`` reads it), its ``down_proj[i]`` W_2^i, from the spec's stacked W_1, W_3 (rows
i·d_mlp …) and W_2 (those columns).

float32 only: both routers take the softmax in float32 (``router_logits.float()``;
``softmax(..., dtype=torch.float)``), so a float64 call's weights are float32-rounded. A tie of
positive router probabilities across the top-k boundary, which ``torch.topk`` would settle
arbitrarily, is refused by the plugin from the library's own router output (``gate(x)``'s
logits, softmax as the library takes it) before the block runs, as the spec refuses it.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch
import transformers
from transformers import MixtralConfig, Qwen2MoeConfig
from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock
from transformers.models.qwen2_moe.modeling_qwen2_moe import Qwen2MoeSparseMoeBlock

from ftspec.impls.api import Context, Implementation
from ftspec.spec.variants import PAPER

from .._torch_boundary import devices, from_numpy, to_numpy

__all__ = ["implementation_mixtral_moe", "implementation_qwen2_moe"]

MIXTRAL = PAPER.replace(moe_topk_norm=True)
QWEN2_MOE = PAPER.replace(moe_shared=True)


def _check_shapes(p: Mapping[str, torch.Tensor], E: int, d_e: int, d_mlp: int, shared: bool) -> None:
    want = {"W_g": (E, d_e), "W_1": (E * d_mlp, d_e), "W_3": (E * d_mlp, d_e), "W_2": (d_e, E * d_mlp)}
    if shared:
        want.update({"shared.W_1": (d_mlp, d_e), "shared.W_3": (d_mlp, d_e), "shared.W_2": (d_e, d_mlp),
                     "W_shared_gate": (1, d_e)})
    for name, shape in want.items():
        if tuple(p[name].shape) != shape:
            raise ValueError(f"moe_mlp: {name} of shape {tuple(p[name].shape)}, expected {shape}")


def _load_experts(experts: Any, p: Mapping[str, torch.Tensor], E: int, d_mlp: int) -> None:
    """``gate_up_proj`` (E, 2·d_mlp, d_e) = [W_1^i; W_3^i] per expert, ``down_proj`` (E, d_e, d_mlp)."""
    d_e = p["W_1"].shape[1]
    gate, up = p["W_1"].reshape(E, d_mlp, d_e), p["W_3"].reshape(E, d_mlp, d_e)
    experts.gate_up_proj.copy_(torch.cat([gate, up], dim=1))
    experts.down_proj.copy_(p["W_2"].reshape(d_e, E, d_mlp).transpose(0, 1))


def _refuse_ties(gate: Any, x: torch.Tensor, k: int, E: int) -> None:
    """The library's router logits, softmax in float32 as both routers take it; a tie of positive
    probabilities between the k-th and (k+1)-th largest raises (ValueError)."""
    if k >= E:
        return
    logits = gate(x)[0]  # (tokens, E)
    top = torch.topk(torch.softmax(logits, dim=-1, dtype=torch.float32), k + 1, dim=-1).values
    if bool(((top[:, k - 1] == top[:, k]) & (top[:, k] > 0)).any()):
        raise ValueError(f"moe_mlp: a tie at the router's top-k boundary (k = {k}): the chosen experts are undefined")


def _run(block: Any, X: torch.Tensor, k: int, E: int) -> torch.Tensor:
    """X (…, d_e, ℓ) → Y (…, d_e, ℓ) through ``block`` on (batch, ℓ, d_e)."""
    x = X.transpose(-1, -2).contiguous()  # the blocks .view() their input
    batched = x.dim() == 3
    rows = x if batched else x.unsqueeze(0)
    _refuse_ties(block.gate, rows.reshape(-1, rows.shape[-1]), k, E)
    y = block(rows)
    return (y if batched else y.squeeze(0)).transpose(-1, -2)


def _mixtral(i: Mapping[str, torch.Tensor], p: Mapping[str, torch.Tensor], ctx: Context) -> Any:
    E, k, d_e, d_mlp = ctx.hyper["E"], ctx.hyper["k"], ctx.hyper["d_e"], ctx.hyper["d_mlp"]
    _check_shapes(p, E, d_e, d_mlp, shared=False)
    config = MixtralConfig(hidden_size=d_e, intermediate_size=d_mlp, num_local_experts=E, num_experts_per_tok=k,
                           hidden_act="silu", experts_implementation="eager")
    X = i["X"]
    with torch.no_grad():
        block = MixtralSparseMoeBlock(config).to(dtype=X.dtype, device=X.device).train(False)
        block.gate.weight.copy_(p["W_g"])
        _load_experts(block.experts, p, E, d_mlp)
        return _run(block, X, k, E)


def _qwen2_moe(i: Mapping[str, torch.Tensor], p: Mapping[str, torch.Tensor], ctx: Context) -> Any:
    E, k, d_e, d_mlp = ctx.hyper["E"], ctx.hyper["k"], ctx.hyper["d_e"], ctx.hyper["d_mlp"]
    _check_shapes(p, E, d_e, d_mlp, shared=True)
    config = Qwen2MoeConfig(hidden_size=d_e, moe_intermediate_size=d_mlp, shared_expert_intermediate_size=d_mlp,
                            num_experts=E, num_experts_per_tok=k, norm_topk_prob=False, hidden_act="silu",
                            experts_implementation="eager")
    X = i["X"]
    with torch.no_grad():
        block = Qwen2MoeSparseMoeBlock(config).to(dtype=X.dtype, device=X.device).train(False)
        block.gate.weight.copy_(p["W_g"])
        _load_experts(block.experts, p, E, d_mlp)
        block.shared_expert.gate_proj.weight.copy_(p["shared.W_1"])
        block.shared_expert.up_proj.weight.copy_(p["shared.W_3"])
        block.shared_expert.down_proj.weight.copy_(p["shared.W_2"])
        block.shared_expert_gate.weight.copy_(p["W_shared_gate"])
        return _run(block, X, k, E)


def _make(name: str, fn: Any, variant: Any, model: str) -> Implementation:
    return Implementation(
        name=name,
        version=f"transformers{transformers.__version__}+torch{torch.__version__}",
        algorithms={"moe_mlp": fn},
        dtypes=("float32",),
        devices=devices,
        from_numpy=from_numpy,
        to_numpy=to_numpy,
        variants=(variant,),
        precision="highest",
        description=f"Hugging Face {model} (a sparse mixture of experts)",
        extra={"transformers": transformers.__version__, "torch": torch.__version__},
    )


implementation_mixtral_moe = _make("transformers-mixtral-moe", _mixtral, MIXTRAL, "MixtralSparseMoeBlock")
implementation_qwen2_moe = _make("transformers-qwen2-moe", _qwen2_moe, QWEN2_MOE, "Qwen2MoeSparseMoeBlock")
