"""Algorithms 11-13 (EDTraining, ETraining, DTraining) and their pieces.

The losses are what PyTorch code writes: the model's logits into
``F.cross_entropy`` (log-softmax and the negative log-likelihood in one
kernel, so log P is z[v] − max z − log Σ exp(z − max z), never log 0), with
``reduction="none"`` and a *sum* over the positions of the sequence (the
paper's loss is a sum, not PyTorch's default mean). Gradients are
``torch.autograd.grad`` over the plugin's own forward code, with the flat
parameters as leaf tensors. The SGD loops are Python loops over epochs and
sequences, one step per sequence, as the algorithms are written.

Index conventions (docs/spec.md, "Training and inference"): with 0-based
positions, column t of P predicts token t+1, so the next-token loss is
−Σ_{t=0}^{ℓ−2} log P[x[t+1], t] (a one-token sequence has no term).
ETraining's T̃ is, literally, {t : x̃[t] = mask_token}: a position whose
own token already is mask_token counts even when it was not drawn.

Batched loss and gradient entries (``ctx.batched``): the forward pass runs
once on the whole batch (the native code broadcasts over leading axes) and
gives per-example losses (B,); per-example gradients (B, *shape) come from
*one* backward pass vmapped over the B one-hot output cotangents
(``torch.autograd.grad(..., is_grads_batched=True)``): row b of the result
is ∇_θ loss_b, because loss_b depends on example b only.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from ftspec.impls.api import Context

from . import models

__all__ = ["TRAINING", "gradients", "masked_nll", "next_token_nll", "sgd"]

In = Mapping[str, Tensor]
#: (params) -> per-example losses (…,): the loss as a function of θ alone
LossOfTheta = Callable[[Mapping[str, Tensor]], Tensor]


# --------------------------------------------------------------------------
# the losses (native logits (…, ℓ, N_V), tokens (…, ℓ) → (…,))
# --------------------------------------------------------------------------


def _nll(logits: Tensor, target: Tensor) -> Tensor:
    """−log softmax(logits)[target] per position, 0 where target == −100
    (``F.cross_entropy``'s ignore_index). logits (…, ℓ, N_V), target (…, ℓ) → (…, ℓ)."""
    flat = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1), reduction="none",
                           ignore_index=-100)  # (∏…·ℓ,)
    return flat.reshape(target.shape)


def next_token_nll(logits: Tensor, x: Tensor) -> Tensor:
    """Alg. 11/13 line 5: −Σ_{t=0}^{ℓ−2} log P[x[t+1], t] → (…,).

    Column t predicts token t+1: the logits of positions 0…ℓ−2 against the
    tokens 1…ℓ−1. For ℓ = 1 both are empty and the sum is 0 (gradient 0)."""
    return _nll(logits[..., :-1, :], x[..., 1:]).sum(dim=-1)


def masked_nll(logits: Tensor, x: Tensor, selected: Tensor) -> Tensor:
    """Alg. 12 line 7: −Σ_{t∈T̃} log P[x[t], t] → (…,); ``selected`` (…, ℓ) is T̃."""
    return _nll(logits, torch.where(selected, x, -100)).sum(dim=-1)


def _flags(t: Tensor) -> Tensor:
    """A flag input as booleans (it arrives as bool; a 0/1 number also works)."""
    return t if t.dtype == torch.bool else t != 0


def _ed_loss(z: Tensor, x: Tensor, ctx: Context) -> LossOfTheta:
    """Alg. 11 lines 4-5 for one pair (z, x) (or a batch of pairs)."""
    return lambda theta: next_token_nll(models.ed_logits(z, x, theta, ctx), x)


def _d_loss(x: Tensor, ctx: Context) -> LossOfTheta:
    """Alg. 13 lines 4-5 for one sequence."""
    return lambda theta: next_token_nll(models.d_logits(x, theta, ctx), x)


def _e_loss(x: Tensor, masked: Tensor, mask_token: Tensor, ctx: Context) -> LossOfTheta:
    """Alg. 12 lines 4-7 with line 4's draws given as ``masked``.

    x̃[t] = mask_token where masked[t], else x[t]; T̃ = {t : x̃[t] = mask_token}
    (as the paper writes it: an unmasked position already holding
    mask_token counts); P = ETransformer(x̃); the targets are the original x."""
    mt = mask_token.unsqueeze(-1)  # () → (1,), or (B,) → (B, 1): broadcasts over positions
    x_tilde = torch.where(_flags(masked), mt, x)  # line 4: (…, ℓ)
    selected = x_tilde == mt  # line 5: T̃
    return lambda theta: masked_nll(models.e_logits(x_tilde, theta, ctx), x, selected)


_LOSS = {
    "ed": lambda i, ctx: _ed_loss(i["z"], i["x"], ctx),
    "e": lambda i, ctx: _e_loss(i["x"], i["masked"], i["mask_token"], ctx),
    "d": lambda i, ctx: _d_loss(i["x"], ctx),
}


# --------------------------------------------------------------------------
# ∇loss(θ) by autograd, and the SGD step
# --------------------------------------------------------------------------


def gradients(loss: LossOfTheta, params: Mapping[str, Tensor], batched: bool = False
              ) -> tuple[Tensor, dict[str, Tensor]]:
    """(loss, {name: ∇_name loss}) with every parameter a fresh leaf tensor.

    ``batched``: the loss is (B,) per-example losses of one batched forward;
    the gradients are (B, *shape), one backward pass vmapped over the rows
    of the B×B identity (``is_grads_batched``). A parameter the loss does
    not reach gets a zero gradient (``materialize_grads``), so every name in
    ``params`` has one."""
    names = list(params)
    leaves = [params[k].detach().requires_grad_(True) for k in names]
    grads: Sequence[Tensor]
    with torch.enable_grad():
        value = loss(dict(zip(names, leaves)))
        if not batched:
            grads = torch.autograd.grad(value, leaves, allow_unused=True, materialize_grads=True)
        elif value.shape[0] == 0:  # an empty batch: nothing to differentiate
            grads = [torch.zeros((0, *p.shape), dtype=p.dtype, device=p.device) for p in leaves]
        else:
            B = value.shape[0]
            seeds = torch.eye(B, dtype=value.dtype, device=value.device)  # row b: d loss_b
            grads = torch.autograd.grad(value, leaves, grad_outputs=seeds, is_grads_batched=True,
                                        allow_unused=True, materialize_grads=True)
    return value.detach(), {k: g.detach() for k, g in zip(names, grads)}


def sgd(params: Mapping[str, Tensor], grads: Mapping[str, Tensor], eta: Tensor) -> dict[str, Tensor]:
    """θ ← θ − η ∇loss(θ) (Alg. 11-13 line 6), name by name, in the params' dtype."""
    return {k: (params[k] - eta * grads[k]).detach() for k in params}


# --------------------------------------------------------------------------
# entries
# --------------------------------------------------------------------------


def _loss_entry(model: str):
    def fn(i: In, p: In, ctx: Context) -> Any:
        with torch.no_grad():
            return {"loss": _LOSS[model](i, ctx)(p)}  # () or (B,)
    fn.__doc__ = f"The {model.upper()}Training loss of one example → loss (); batched: (B,)."
    return fn


def _gradient_entry(model: str):
    def fn(i: In, p: In, ctx: Context) -> Any:
        _, grads = gradients(_LOSS[model](i, ctx), p, batched=ctx.batched)
        return {f"grad.{k}": g for k, g in grads.items()}
    fn.__doc__ = f"∇ of the {model.upper()}Training loss → grad.<param> (B, *shape when batched)."
    return fn


def _step_entry(model: str):
    def fn(i: In, p: In, ctx: Context) -> Any:
        _, grads = gradients(_LOSS[model](i, ctx), p)
        return {f"theta.{k}": t for k, t in sgd(p, grads, i["eta"]).items()}
    fn.__doc__ = f"One SGD step on one {model.upper()}Training example → theta.<param>."
    return fn


def _check_lengths(lengths: Sequence[int], width: int, name: str) -> None:
    """Lengths lie in [1, the padded width]: slicing would silently cut a longer one, and an empty
    sequence would silently be a step of zero."""
    if any(not 1 <= n <= width for n in lengths):
        raise ValueError(f"{name}: lengths must lie in [1, {width}]; given {list(lengths)}")


def _training_entry(model: str):
    def fn(i: In, p: In, ctx: Context) -> Any:
        """Alg. 11-13 lines 1-7: N_epochs passes over the N sequences in order."""
        theta = dict(p)
        x, n_len = i["x"], [int(n) for n in i["x_len"]]
        z_len = [int(n) for n in i["z_len"]] if model == "ed" else []
        _check_lengths(n_len, x.shape[-1], "x_len")
        if model == "ed":
            _check_lengths(z_len, i["z"].shape[-1], "z_len")
        if model == "e":  # line 4's variates and p_mask: a u of 1 or a p_mask of 1.5 would still mask
            u, p_mask = i["u"], float(i["p_mask"])
            if u.numel() and not bool(((u >= 0) & (u < 1)).all()):
                raise ValueError(f"u: variates must lie in [0, 1); given range [{float(u.min())}, {float(u.max())}]")
            if not 0 <= p_mask <= 1:
                raise ValueError(f"p_mask: a probability in [0, 1]; given {p_mask}")
        for epoch in range(ctx.hyper["N_epochs"]):  # line 1
            for n in range(ctx.hyper["N"]):  # line 2
                xn = x[n, : n_len[n]]  # line 3: ℓ ← length(x_n); the padding is dropped
                if model == "ed":
                    loss = _ed_loss(i["z"][n, : z_len[n]], xn, ctx)
                elif model == "d":
                    loss = _d_loss(xn, ctx)
                else:  # Alg. 12 line 4: position t masked iff u[epoch, n, t] < p_mask
                    loss = _e_loss(xn, i["u"][epoch, n, : n_len[n]] < i["p_mask"], i["mask_token"], ctx)
                _, grads = gradients(loss, theta)
                theta = sgd(theta, grads, i["eta"])  # line 6 (Alg. 12: line 8)
        return {f"theta.{k}": t for k, t in theta.items()}
    fn.__doc__ = f"{model.upper()}Training → theta.<param> after N_epochs·N SGD steps."
    return fn


TRAINING = {
    **{f"{m}_loss": _loss_entry(m) for m in ("ed", "e", "d")},
    **{f"{m}_gradient": _gradient_entry(m) for m in ("ed", "e", "d")},
    **{f"{m}_sgd_step": _step_entry(m) for m in ("ed", "e", "d")},
    **{f"{m}_training": _training_entry(m) for m in ("ed", "e", "d")},
}
