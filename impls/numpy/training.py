"""Algorithms 11-13 in NumPy: the losses, their gradients, one SGD step and the training loops.

Losses (0-based indices, docs/spec.md "The loss"):

- EDTraining / DTraining (Alg. 11/13 lines 4-5): loss = −Σ_{t=0}^{ℓ−2} log P[x[t+1], t]
  (column t predicts token t+1; one token: loss 0, gradient 0).
- ETraining (Alg. 12 lines 4-7): x̃[t] = mask_token where ``masked[t]``, else
  x[t]; T̃ = {t : x̃[t] = mask_token} taken literally (a position whose token
  already is mask_token counts); loss = −Σ_{t∈T̃} log P[x[t], t] with
  P = ETransformer(x̃).

log P comes from the logits (``grad_components.log_softmax_loss``); the
gradient is the hand-written backward pass of ``grad_architectures.py``,
seeded with dloss/dlogits = w_t (softmax − onehot). Loss and gradient entries
take a leading batch axis (per-example losses and gradients); nothing is
summed over it.

Training loops (lines 1-2): SGD over the sequences in order, one step per
sequence, epoch after epoch; sequence n is ``x[n, :x_len[n]]``. ETraining's
line 4 draws are explicit: position t of sequence n in epoch i is masked iff
``u[i, n, t] < p_mask``.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from ftspec.impls.api import Context

from .architectures import d_logits_fwd, e_logits_fwd, ed_logits_fwd
from .components import check_probability, check_tokens, check_variates
from .grad_architectures import d_logits_bwd, e_logits_bwd, ed_logits_bwd
from .grad_components import log_softmax_loss
from .grad_layers import Grads

__all__ = ["ALGORITHMS", "loss_and_gradient", "sgd_step"]

Params = Mapping[str, Any]
Inputs = Mapping[str, Any]

#: the inputs of one training example, per model
EXAMPLE = {"ed": ("z", "x"), "e": ("x", "masked", "mask_token"), "d": ("x",)}


def _next_token_targets(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Targets x[t+1] of columns t = 0..ℓ−2 (weight 1); the last column has no target (weight 0)."""
    ell = x.shape[-1]
    targets = np.concatenate([x[..., 1:], np.zeros(x.shape[:-1] + (1,), dtype=x.dtype)], axis=-1)  # (..., ℓ)
    weights = np.broadcast_to(np.arange(ell) < ell - 1, x.shape)  # (..., ℓ)
    return targets, weights


def loss_and_gradient(model: str, data: Inputs, params: Params, variant, hyper: Mapping[str, int],
                      want_grad: bool = True) -> tuple[np.ndarray, dict[str, np.ndarray] | None]:
    """The loss of one example (or a batch: leading axes) and, if wanted, its gradient for every parameter.

    ``data`` holds the example's inputs (``EXAMPLE[model]``). Returns
    (loss (...), {flat name: gradient (..., *shape)} or None).
    """
    cache: Any  # the model's forward cache, read by its own backward
    backward: Callable[[np.ndarray, Any, Grads], None]
    if model == "d":
        x = np.asarray(data["x"])
        logits, cache = d_logits_fwd(x, params, variant, hyper)
        targets, weights = _next_token_targets(x)
        backward = d_logits_bwd
    elif model == "ed":
        x = np.asarray(data["x"])
        logits, cache = ed_logits_fwd(np.asarray(data["z"]), x, params, variant, hyper)
        targets, weights = _next_token_targets(x)
        backward = ed_logits_bwd
    elif model == "e":
        x = np.asarray(data["x"])
        mask_token = np.asarray(data["mask_token"])[..., None]  # (..., 1)
        N_V = params["W_e"].shape[1]
        check_tokens(x, N_V, "x")
        check_tokens(mask_token, N_V, "mask_token")
        x_tilde = np.where(np.asarray(data["masked"], dtype=bool), mask_token, x)  # line 4
        logits, cache = e_logits_fwd(x_tilde, params, variant, hyper)  # line 6
        targets, weights = x, x_tilde == mask_token  # lines 5, 7: T̃ = {t : x̃[t] = mask_token}
        backward = e_logits_bwd
    else:
        raise ValueError(f"unknown model {model!r}")
    loss, dlogits = log_softmax_loss(logits, targets, weights, want_grad)
    if not want_grad:
        return loss, None
    assert dlogits is not None  # log_softmax_loss gives it when want_grad
    grads = Grads(params, x.shape[:-1], logits.dtype)
    backward(dlogits, cache, grads)
    return loss, grads.values


def sgd_step(params: Params, grads: Mapping[str, np.ndarray], eta) -> dict[str, np.ndarray]:
    """θ ← θ − η ∇loss(θ) for every parameter."""
    eta = np.asarray(eta)
    return {k: v - eta * grads[k] for k, v in params.items()}


# --------------------------------------------------------------------------
# registry entries
# --------------------------------------------------------------------------


def _example(model: str, i: Inputs) -> dict[str, Any]:
    return {k: i[k] for k in EXAMPLE[model]}


def _loss_entry(model: str):
    def fn(i: Inputs, p: Params, ctx: Context):
        loss, _ = loss_and_gradient(model, _example(model, i), p, ctx.variant, ctx.hyper, want_grad=False)
        return {"loss": loss}
    fn.__name__ = f"_{model}_loss"
    return fn


def _gradient_entry(model: str):
    def fn(i: Inputs, p: Params, ctx: Context):
        _, grads = loss_and_gradient(model, _example(model, i), p, ctx.variant, ctx.hyper)
        assert grads is not None  # want_grad (default True) gives gradients
        return {f"grad.{k}": g for k, g in grads.items()}
    fn.__name__ = f"_{model}_gradient"
    return fn


def _sgd_step_entry(model: str):
    def fn(i: Inputs, p: Params, ctx: Context):
        _, grads = loss_and_gradient(model, _example(model, i), p, ctx.variant, ctx.hyper)
        assert grads is not None  # want_grad (default True) gives gradients
        return {f"theta.{k}": v for k, v in sgd_step(p, grads, i["eta"]).items()}
    fn.__name__ = f"_{model}_sgd_step"
    return fn


def _check_lengths(lengths: np.ndarray, width: int, name: str) -> None:
    if lengths.size and (lengths.min() < 1 or lengths.max() > width):
        raise ValueError(f"{name}: lengths must lie in [1, {width}]; given range [{lengths.min()}, {lengths.max()}]")


def _training_entry(model: str):
    """Algorithms 11-13 lines 1-7 (ETraining lines 1-9)."""
    def fn(i: Inputs, p: Params, ctx: Context):
        x, x_len = np.asarray(i["x"]), np.asarray(i["x_len"])
        N = x.shape[0]
        if "N" in ctx.hyper and ctx.hyper["N"] != N:
            raise ValueError(f"x: {N} sequences, but N = {ctx.hyper['N']}")
        _check_lengths(x_len, x.shape[1], "x_len")
        if model == "ed":
            z, z_len = np.asarray(i["z"]), np.asarray(i["z_len"])
            _check_lengths(z_len, z.shape[1], "z_len")
        if model == "e":
            check_variates(i["u"])
            check_probability(i["p_mask"])
        theta = dict(p)
        for epoch in range(ctx.hyper["N_epochs"]):  # line 1
            for n in range(N):  # line 2
                seq = x[n, : x_len[n]]
                if model == "d":
                    data = {"x": seq}
                elif model == "ed":
                    data = {"z": z[n, : z_len[n]], "x": seq}
                else:  # line 4's draws: masked iff u < p_mask
                    data = {"x": seq, "masked": i["u"][epoch, n, : x_len[n]] < i["p_mask"],
                            "mask_token": i["mask_token"]}
                _, grads = loss_and_gradient(model, data, theta, ctx.variant, ctx.hyper)
                assert grads is not None  # want_grad (default True) gives gradients
                theta = sgd_step(theta, grads, i["eta"])  # the last line of the loop body
        return {f"theta.{k}": v for k, v in theta.items()}
    fn.__name__ = f"_{model}_training"
    return fn


ALGORITHMS = {}
for _m in ("ed", "e", "d"):
    ALGORITHMS[f"{_m}_loss"] = _loss_entry(_m)
    ALGORITHMS[f"{_m}_gradient"] = _gradient_entry(_m)
    ALGORITHMS[f"{_m}_sgd_step"] = _sgd_step_entry(_m)
    ALGORITHMS[f"{_m}_training"] = _training_entry(_m)
del _m
