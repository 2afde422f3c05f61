"""Training, Algorithms 11-13, and their pieces, on the plugin's own forward code.

Written from ALGORITHMS.md and docs/spec.md ("Training and inference"),
0-based indices throughout:

- next-token loss (Alg. 11 and 13, lines 4-5): with ℓ = length(x),
  loss(θ) = −Σ_{t=0}^{ℓ−2} log P(θ)[x[t+1], t] (the paper's t = 1..ℓ−1:
  column t predicts token t+1). A sum, not a mean; one token gives 0.
- masked loss (Alg. 12, lines 4-7): x̃[t] = mask_token where ``masked[t]``,
  else x[t]; T̃ = {t : x̃[t] = mask_token}, literally (a position whose token
  already is mask_token counts); loss(θ) = −Σ_{t∈T̃} log P(θ)[x[t], t] with
  P = ETransformer(x̃).
- log P is taken from the logits as ``jax.nn.log_softmax`` does:
  z[v] − max z − log Σ exp(z − max z), the max a constant for differentiation
  (never log 0).
- ∇loss is ``jax.grad`` of that loss, taken with respect to the FLAT
  parameter dict (the flat → tree conversion of boundary.py is part of the
  differentiated function), so gradients come back under the spec's names;
  a tied W_u = W_eᵀ collects both uses in ``W_e``. Batched losses and
  gradients are ``jax.vmap`` of the per-example functions (params unbatched).
- one SGD step: θ ← θ − η ∇loss(θ), in the call's dtype (η·g rounded, then
  the difference rounded, as written).
- training (lines 1-2 of Alg. 11-13): a Python loop over epochs and
  sequences in order, each sequence cut to its length (``x[n, :x_len[n]]``)
  on the host, one SGD step per sequence. ETraining's line 4 draws come from
  the variates: position t of sequence n in epoch i is masked iff
  u[i, n, t] < p_mask (u and p_mask are exact in the call's dtype, so the
  comparison is done once, exactly, on the host).

Compilation: one jitted function per (kind, model, variant, ℓ_max, batched)
in boundary.py's bounded LRU; the hyperparameters that only size the data
(ℓ, ℓ_z, ℓ_x, N, N_epochs) are not part of the key, so jit's own cache
reuses an executable whenever the shapes repeat: a training loop compiles
its step once per distinct sequence length (pair), and ``*_sgd_step`` and
``*_training`` share those executables.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, TypeAlias

import jax
import jax.numpy as jnp
import numpy as np

from ftspec.impls.api import Context
from ftspec.spec.variants import VariantSet

from . import architectures as A
from . import boundary as B

Array: TypeAlias = jax.Array  # an alias mypy accepts when it does not follow jax (pyproject)
Flat = Mapping[str, Any]

#: the inputs that make one training example of each model (spec/entries_training.py)
EXAMPLE = {"ed": ("z", "x"), "e": ("x", "masked", "mask_token"), "d": ("x",)}
#: flat parameters → the nested tree of the forward code
THETA = {"ed": B._ed_theta, "e": B._e_theta, "d": B._d_theta}


# --------------------------------------------------------------------------
# losses of one example
# --------------------------------------------------------------------------


def _log_probs(logits: Array) -> Array:
    """log P from logits, row by row: z − max z − log Σ exp(z − max z). (ℓ, N_V) → (ℓ, N_V)."""
    return jax.nn.log_softmax(logits, axis=-1)


def next_token_loss(logits: Array, x: Array) -> Array:
    """−Σ_{t=0}^{ℓ−2} log P[x[t+1], t]. logits: (ℓ, N_V) (row t = column t of P), x: (ℓ,) → ()."""
    logp = _log_probs(logits[:-1])  # (ℓ−1, N_V): the last row predicts nothing
    picked = jnp.take_along_axis(logp, x[1:, None], axis=-1)[:, 0]  # (ℓ−1,)  log P[x[t+1], t]
    return -jnp.sum(picked)  # () (0 for ℓ = 1)


def masked_loss(logits: Array, x: Array, in_T: Array) -> Array:
    """−Σ_{t∈T̃} log P[x[t], t]. logits: (ℓ, N_V) of ETransformer(x̃), x: (ℓ,), in_T: (ℓ,) bool → ()."""
    logp = _log_probs(logits)  # (ℓ, N_V)
    picked = jnp.take_along_axis(logp, x[:, None], axis=-1)[:, 0]  # (ℓ,)  log P[x[t], t]
    return -jnp.sum(jnp.where(in_T, picked, jnp.zeros((), picked.dtype)))


def loss_fn(model: str, variant: VariantSet, ell_max: int) -> Callable[[Flat, Mapping[str, Array]], Array]:
    """``loss(flat params, example) -> ()`` for one example of ``model`` ("ed", "e", "d")."""

    def loss(params: Flat, ex: Mapping[str, Array]) -> Array:
        theta = THETA[model](params)
        if model == "ed":  # Alg. 11 lines 4-5
            return next_token_loss(A.ed_logits(ex["z"], ex["x"], theta, ell_max, variant), ex["x"])
        if model == "d":  # Alg. 13 lines 4-5
            return next_token_loss(A.d_logits(ex["x"], theta, ell_max, variant), ex["x"])
        x, mask_token = ex["x"], ex["mask_token"]  # Alg. 12
        x_tilde = jnp.where(ex["masked"], mask_token, x)  # line 4 (x̃)
        in_T = x_tilde == mask_token  # line 5: T̃ = {t : x̃[t] = mask_token}, literally
        return masked_loss(A.e_logits(x_tilde, theta, ell_max, variant), x, in_T)  # lines 6-7

    return loss


def sgd_update(params: Flat, grads: Flat, eta: Array) -> dict:
    """θ ← θ − η ∇loss(θ), parameter by parameter, in the parameters' dtype."""
    return {k: params[k] - eta * grads[k] for k in params}


# --------------------------------------------------------------------------
# jitted programs (cached in boundary.py's LRU)
# --------------------------------------------------------------------------


def _key(kind: str, model: str, ctx: Context, batched: bool = False) -> tuple:
    return (kind, model, ctx.variant, ctx.hyper["ell_max"], batched)


def loss_program(model: str, ctx: Context, platform: str) -> Callable:
    def make():
        loss = loss_fn(model, ctx.variant, ctx.hyper["ell_max"])
        return jax.vmap(loss, in_axes=(None, 0)) if ctx.batched else loss
    return B.jitted(_key("loss", model, ctx, ctx.batched), make, platform)


def gradient_program(model: str, ctx: Context, platform: str) -> Callable:
    def make():
        grad = jax.grad(loss_fn(model, ctx.variant, ctx.hyper["ell_max"]))
        return jax.vmap(grad, in_axes=(None, 0)) if ctx.batched else grad
    return B.jitted(_key("grad", model, ctx, ctx.batched), make, platform)


def step_program(model: str, ctx: Context, platform: str) -> Callable:
    """``(params, example, eta) -> params``: one fused value_and_grad + update (Alg. 11-13 line 6)."""
    def make():
        grad = jax.grad(loss_fn(model, ctx.variant, ctx.hyper["ell_max"]))
        return lambda params, ex, eta: sgd_update(params, grad(params, ex), eta)
    return B.jitted(_key("step", model, ctx), make, platform)


# --------------------------------------------------------------------------
# registry entries: fn(inputs, params, ctx, device)
# --------------------------------------------------------------------------


def _example(model: str, inputs: Mapping[str, Any]) -> dict:
    return {k: inputs[k] for k in EXAMPLE[model]}


def _unbatched(ctx: Context) -> None:
    if ctx.batched:
        raise ValueError(f"{ctx.algorithm} takes no batch axis (the spec's Entry.batchable is False)")


def loss_entry(model: str):
    def fn(inputs, params, ctx, dev):
        return {"loss": loss_program(model, ctx, dev.platform)(dict(params), _example(model, inputs))}
    return fn


def gradient_entry(model: str):
    def fn(inputs, params, ctx, dev):
        grads = gradient_program(model, ctx, dev.platform)(dict(params), _example(model, inputs))
        return {f"grad.{k}": g for k, g in grads.items()}
    return fn


def sgd_step_entry(model: str):
    def fn(inputs, params, ctx, dev):
        _unbatched(ctx)
        theta = step_program(model, ctx, dev.platform)(dict(params), _example(model, inputs), inputs["eta"])
        return {f"theta.{k}": v for k, v in theta.items()}
    return fn


def _host(a: Any) -> np.ndarray:
    return np.asarray(a)


def training_entry(model: str):
    """Alg. 11 / 12 / 13: N_epochs passes over the N sequences in order, one SGD step each."""

    def fn(inputs, params, ctx, dev):
        _unbatched(ctx)
        step = step_program(model, ctx, dev.platform)
        def put(a):  # committed like the harness's inputs: one executable
            return jax.device_put(a, dev)

        n_epochs = ctx.hyper["N_epochs"]
        x, x_len = _host(inputs["x"]), _host(inputs["x_len"])
        n_seq = x.shape[0]
        if model == "ed":
            z, z_len = _host(inputs["z"]), _host(inputs["z_len"])
            data = [{"z": put(z[n, :z_len[n]]), "x": put(x[n, :x_len[n]])} for n in range(n_seq)]
        else:
            data = [{"x": put(x[n, :x_len[n]])} for n in range(n_seq)]
        if model == "e":  # line 4's draws: masked iff u[i, n, t] < p_mask (exact values, exact comparison)
            u = _host(inputs["u"]).astype(np.float64)
            p_mask = float(_host(inputs["p_mask"]).astype(np.float64))
            masked = u < p_mask  # (N_epochs, N, ell)
        theta, eta = dict(params), inputs["eta"]
        for i in range(n_epochs):  # line 1
            for n in range(n_seq):  # line 2
                ex = data[n]
                if model == "e":
                    ex = {**ex, "masked": put(masked[i, n, :x_len[n]]), "mask_token": inputs["mask_token"]}
                theta = step(theta, ex, eta)  # lines 3-6 (Alg. 12: 3-8)
        return {f"theta.{k}": v for k, v in theta.items()}

    return fn


ENTRIES: dict[str, Callable] = {}
for _m in ("ed", "e", "d"):
    ENTRIES[f"{_m}_loss"] = loss_entry(_m)
    ENTRIES[f"{_m}_gradient"] = gradient_entry(_m)
    ENTRIES[f"{_m}_sgd_step"] = sgd_step_entry(_m)
    ENTRIES[f"{_m}_training"] = training_entry(_m)
