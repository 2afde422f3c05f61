"""Algorithms 11-13: training by plain SGD on log loss, one sequence per step.

Each algorithm is also split into the pieces it is made of, each a registry
entry of its own: the loss of one sequence, its gradient with respect to
every parameter, and one SGD step.

Decisions where the paper is silent:
- log P(θ)[v, t] is evaluated as z[v] − max z − log Σ exp(z − max z) on the
  logits z = W_u X[:, t] (+ b_u): the same number in exact arithmetic, and
  never log 0 when a probability underflows.
- The gradient is exact (reverse-mode differentiation of the spec's own
  arithmetic, ``spec/autodiff.py``), with ReLU'(0) = 0.
- Randomness is an explicit input: ETraining takes one uniform variate per
  position, epoch and sequence, and masks position t iff u < p_mask. The
  masked set is the paper's T̃ = {t : x̃[t] = mask_token}, so a position whose
  token already is mask_token counts as masked (as written).
- Sequences of different lengths come padded: ``x`` is (N, ℓ_pad) with the
  true lengths in ``x_len``; entries beyond a length are ignored.
- A sequence of length 1 has no next-token term: its loss is 0 (an empty
  sum) and the step leaves θ unchanged.

Indices are 0-based: the paper's Σ_{t=1}^{ℓ−1} log P[x[t+1], t] is
Σ_{t=0}^{ℓ−2} log P[x[t+1], t] here.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from . import numbers
from .architectures import d_transformer_logits, e_transformer_logits, ed_transformer_logits
from .autodiff import gradient
from .errors import SpecError
from .intermediates import algorithm
from .linalg import Vector, column
from .params import DTransformerParams, EDTransformerParams, ETransformerParams, from_flat
from .variants import PAPER, VariantSet

__all__ = [
    "d_loss",
    "d_training",
    "e_loss",
    "e_training",
    "ed_loss",
    "ed_training",
    "log_softmax_at",
    "loss_and_gradient",
    "masked_sequence",
    "sgd_step",
]

Flat = dict[str, Any]


def log_softmax_at(z: Vector, v: int) -> Any:
    """log softmax(z)[v] = z[v] − m − log Σ_w exp(z[w] − m), m = max z."""
    N = numbers.current()
    m = N.detach(numbers.largest(z))
    return z[v] - m - N.log(N.fsum([N.exp(zw - m) for zw in z]))


@algorithm("ed_loss")
def ed_loss(z: Sequence[int], x: Sequence[int], theta: EDTransformerParams, *, ell_max: int | None = None,
            variant: VariantSet = PAPER) -> Any:
    """Algorithm 11, lines 4-5 for one pair: loss(θ) = −Σ_{t=0}^{ℓ−2} log P(θ)[x[t+1], t],
    P(θ) ← EDTransformer(z, x | θ)."""
    N = numbers.current()
    L = ed_transformer_logits(z, x, theta, ell_max=ell_max, variant=variant)  # line 4 (logits)
    return -N.fsum([log_softmax_at(column(L, t), x[t + 1]) for t in range(len(x) - 1)])  # line 5


@algorithm("d_loss")
def d_loss(x: Sequence[int], theta: DTransformerParams, *, ell_max: int | None = None,
           variant: VariantSet = PAPER) -> Any:
    """Algorithm 13, lines 4-5 for one sequence: loss(θ) = −Σ_{t=0}^{ℓ−2} log P(θ)[x[t+1], t],
    P(θ) ← DTransformer(x | θ)."""
    N = numbers.current()
    L = d_transformer_logits(x, theta, ell_max=ell_max, variant=variant)  # line 4 (logits)
    return -N.fsum([log_softmax_at(column(L, t), x[t + 1]) for t in range(len(x) - 1)])  # line 5


def masked_sequence(x: Sequence[int], masked: Sequence[Any], mask_token: int) -> tuple[list[int], list[int]]:
    """Algorithm 12, lines 4-5: x̃[t] ← mask_token where masked[t], else x[t];
    T̃ ← {t : x̃[t] = mask_token}. Returns (x̃, T̃)."""
    if len(masked) != len(x):
        raise SpecError("masked", f"one flag per position ({len(x)})", f"{len(masked)}")
    x_tilde = [mask_token if m else v for v, m in zip(x, masked)]  # line 4
    return x_tilde, [t for t, v in enumerate(x_tilde) if v == mask_token]  # line 5


@algorithm("e_loss")
def e_loss(x: Sequence[int], masked: Sequence[Any], mask_token: int, theta: ETransformerParams, *,
           ell_max: int | None = None, variant: VariantSet = PAPER) -> Any:
    """Algorithm 12, lines 4-7 for one sequence: x̃ and T̃ as in ``masked_sequence``,
    P(θ) ← ETransformer(x̃ | θ), loss(θ) = −Σ_{t∈T̃} log P(θ)[x[t], t]."""
    N = numbers.current()
    x_tilde, T = masked_sequence(x, masked, mask_token)  # lines 4-5
    L = e_transformer_logits(x_tilde, theta, ell_max=ell_max, variant=variant)  # line 6 (logits)
    return -N.fsum([log_softmax_at(column(L, t), x[t]) for t in T])  # line 7


_LOSSES: dict[str, tuple[type, Callable[..., Any]]] = {
    "ed": (EDTransformerParams, ed_loss),
    "e": (ETransformerParams, e_loss),
    "d": (DTransformerParams, d_loss),
}


def loss_and_gradient(model: str, data: Sequence[Any], params: Flat, *, ell_max: int | None,
                      variant: VariantSet) -> tuple[Any, Flat]:
    """(loss(θ), ∇loss(θ)) for one example of ``model`` ("ed": data = (z, x); "e": (x, masked,
    mask_token); "d": (x,)), with θ given flat. Values are in the active number system."""
    cls, loss = _LOSSES[model]

    def f(lifted: Flat) -> Any:
        return loss(*data, from_flat(cls, lifted), ell_max=ell_max, variant=variant)

    return gradient(f, params, base=numbers.current())


def sgd_step(params: Flat, grads: Flat, eta: Any) -> Flat:
    """θ ← θ − η ∇loss(θ), parameter by parameter (the last line of each training step)."""

    def update(p: Any, g: Any) -> Any:
        if isinstance(p, list):
            return [update(a, b) for a, b in zip(p, g)]
        return p - eta * g

    return {k: update(v, grads[k]) for k, v in params.items()}


def _train(model: str, examples: Callable[[int, int], Sequence[Any]], n_sequences: int, n_epochs: int,
           params: Flat, eta: Any, *, ell_max: int | None, variant: VariantSet) -> Flat:
    theta = dict(params)
    for epoch in range(n_epochs):  # line 1
        for n in range(n_sequences):  # line 2
            _, grads = loss_and_gradient(model, examples(epoch, n), theta, ell_max=ell_max, variant=variant)
            theta = sgd_step(theta, grads, eta)  # the update line
    return theta


def _sequence(tokens: Sequence[Sequence[int]], lengths: Sequence[int], n: int, name: str) -> list[int]:
    length = lengths[n]
    if not 1 <= length <= len(tokens[n]):
        raise SpecError(f"{name}_len", f"lengths in [1, {len(tokens[n])}]", f"{length} for sequence {n}")
    return list(tokens[n][:length])


@algorithm("ed_training")
def ed_training(z: Sequence[Sequence[int]], z_len: Sequence[int], x: Sequence[Sequence[int]],
                x_len: Sequence[int], params: Flat, eta: Any, *, n_epochs: int, ell_max: int | None = None,
                variant: VariantSet = PAPER) -> Flat:
    """Algorithm 11: θ̂ ← EDTraining(z_{1:N}, x_{1:N}, θ), hyperparameters N_epochs, η.

    1. for i = 1, 2, ..., N_epochs
    2.   for n = 1, 2, ..., N
    3.     ℓ ← length(x_n)
    4.     P(θ) ← EDTransformer(z_n, x_n | θ)
    5.     loss(θ) = −Σ_{t=1}^{ℓ−1} log P(θ)[x_n[t+1], t]
    6.     θ ← θ − η·∇loss(θ)
    7. return θ̂ = θ
    """
    def example(epoch: int, n: int) -> tuple[list[int], list[int]]:
        return _sequence(z, z_len, n, "z"), _sequence(x, x_len, n, "x")  # line 3

    return _train("ed", example, len(x), n_epochs, params, eta, ell_max=ell_max, variant=variant)


@algorithm("d_training")
def d_training(x: Sequence[Sequence[int]], x_len: Sequence[int], params: Flat, eta: Any, *, n_epochs: int,
               ell_max: int | None = None, variant: VariantSet = PAPER) -> Flat:
    """Algorithm 13: θ̂ ← DTraining(x_{1:N}, θ), hyperparameters N_epochs, η.

    1. for i = 1, 2, ..., N_epochs
    2.   for n = 1, 2, ..., N
    3.     ℓ ← length(x_n)
    4.     P(θ) ← DTransformer(x_n | θ)
    5.     loss(θ) = −Σ_{t=1}^{ℓ−1} log P(θ)[x_n[t+1], t]
    6.     θ ← θ − η·∇loss(θ)
    7. return θ̂ = θ
    """
    return _train("d", lambda epoch, n: (_sequence(x, x_len, n, "x"),), len(x), n_epochs, params, eta,
                  ell_max=ell_max, variant=variant)


@algorithm("e_training")
def e_training(x: Sequence[Sequence[int]], x_len: Sequence[int], u: Sequence[Sequence[Sequence[Any]]],
               p_mask: Any, mask_token: int, params: Flat, eta: Any, *, n_epochs: int,
               ell_max: int | None = None, variant: VariantSet = PAPER) -> Flat:
    """Algorithm 12: θ̂ ← ETraining(x_{1:N}, θ), hyperparameters N_epochs, η, p_mask.

    1. for i = 1, 2, ..., N_epochs
    2.   for n = 1, 2, ..., N
    3.     ℓ ← length(x_n)
    4.     for t = 1..ℓ: x̃_n[t] ← mask_token with probability p_mask, else x_n[t]
    5.     T̃ ← {t ∈ [ℓ] : x̃_n[t] = mask_token}
    6.     P(θ) ← ETransformer(x̃_n | θ)
    7.     loss(θ) = −Σ_{t∈T̃} log P(θ)[x_n[t], t]
    8.     θ ← θ − η·∇loss(θ)
    9. return θ̂ = θ

    Line 4's randomness is the input ``u`` (N_epochs × N × ℓ_pad uniform
    variates): position t of sequence n in epoch i is masked iff
    u[i][n][t] < p_mask.
    """
    def example(epoch: int, n: int) -> tuple[list[int], list[bool], int]:
        seq = _sequence(x, x_len, n, "x")  # line 3
        masked = [u[epoch][n][t] < p_mask for t in range(len(seq))]  # line 4's draws
        return seq, masked, mask_token

    return _train("e", example, len(x), n_epochs, params, eta, ell_max=ell_max, variant=variant)
