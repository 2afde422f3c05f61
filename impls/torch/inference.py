"""Algorithms 14-15 (DInference, EDInference) and one sampling step.

Randomness is an input (docs/spec.md, "Randomness is an input"): every draw
gets one uniform variate u ∈ [0, 1) and is the inverse CDF over token IDs
in increasing order. With q ∝ p^{1/τ} computed as
exp((log p − log max p)/τ) and normalised, and c = cumsum(q), the token is
the smallest v with u < c_v: ``torch.searchsorted(c, u, right=True)``
(the first index whose c exceeds u), clamped to the last token when
rounding leaves every c_v ≤ u. A p_v = 0 gives log 0 = −inf, q_v = 0.
τ = 0 is ``argmax`` (PyTorch returns the first maximal index: ties go to
the lowest ID); τ = inf is uniform, ⌊u·N_V⌋, computed in at least float32
so that u·N_V is exact for the half types.

The generation loops are Python loops, one full forward pass per token (no
key/value cache: ℓ_max is the bound and the recomputation is exact).
EDInference encodes z once and re-runs only the decoder per step.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import torch
from torch import Tensor

from ftspec.impls.api import Context

from . import models

__all__ = ["INFERENCE", "sample"]

In = Mapping[str, Tensor]


def check_variates(u: Tensor) -> None:
    """Variates lie in [0, 1): a 1 or a negative u would still pick a token, silently."""
    if u.numel() and not bool(((u >= 0) & (u < 1)).all()):
        raise ValueError(f"u: variates must lie in [0, 1); given range [{float(u.min())}, {float(u.max())}]")


def check_distribution(p: Tensor) -> None:
    if not bool(torch.isfinite(p).all()) or bool((p < 0).any()) or not bool((p > 0).any(dim=-1).all()):
        raise ValueError("p: non-negative finite probabilities with a positive entry")


def check_token(token: Tensor, n_v: int, what: str) -> None:
    if not 0 <= int(token) < n_v:
        raise ValueError(f"{what}: a token ID in [0, {n_v}); given {int(token)}")


def sample(p: Tensor, u: Tensor, tau: Tensor) -> Tensor:
    """Alg. 14 line 5: y ~ q ∝ p^{1/τ} with the variate u. p (…, N_V), u (…) → int64 (…)."""
    t = float(tau)
    if math.isnan(t) or t < 0:
        raise ValueError(f"sample: temperature tau must be ≥ 0 (0 = argmax, inf = uniform), got {t}")
    N_V = p.shape[-1]
    if t == 0:  # the τ → 0 limit: argmax, ties to the lowest ID
        return torch.argmax(p, dim=-1)
    if math.isinf(t):  # the τ → ∞ limit: uniform, token ⌊u·N_V⌋
        wide = torch.promote_types(u.dtype, torch.float32)
        return torch.floor(u.to(wide) * N_V).to(torch.int64).clamp(0, N_V - 1)
    logp = torch.log(p)  # (…, N_V); −inf where p_v = 0
    q = torch.exp((logp - logp.amax(dim=-1, keepdim=True)) / tau)  # ∝ p^{1/τ}, max entry 1
    c = torch.cumsum(q / q.sum(dim=-1, keepdim=True), dim=-1)  # the CDF over IDs 0, 1, …
    y = torch.searchsorted(c, u.unsqueeze(-1).to(c.dtype), right=True).squeeze(-1)  # min v with u < c_v
    return y.clamp(max=N_V - 1)


def _sample_entry(i: In, p: In, ctx: Context) -> Any:
    """Alg. 14 line 5 on a given distribution p (N_V,) → y () int64."""
    check_variates(i["u"])
    check_distribution(i["p"])
    return {"y": sample(i["p"], i["u"], i["tau"])}


def _last_distribution(logits: Tensor) -> Tensor:
    """The last column of P (Alg. 14 line 3, Alg. 15 line 4) from native logits (ℓ, N_V)."""
    return torch.softmax(logits[-1], dim=-1)


@torch.no_grad()
def _d_inference(i: In, p: In, ctx: Context) -> Any:
    """Alg. 14 lines 1-7: ℓ_gen tokens after the prompt x, step k using u[k] → y (ℓ_gen,)."""
    x, u, tau = i["x"], i["u"], i["tau"]
    ell, ell_gen, ell_max = x.shape[-1], ctx.hyper["ell_gen"], ctx.hyper["ell_max"]
    if ell + ell_gen - 1 > ell_max:
        raise ValueError(f"d_inference: ell + ell_gen - 1 = {ell + ell_gen - 1} tokens exceed ell_max = {ell_max}")
    check_variates(u)
    seq = x
    for k in range(ell_gen):  # line 2
        P = _last_distribution(models.d_logits(seq, p, ctx))  # lines 3-4: column ℓ + k − 1
        y = sample(P, u[k], tau)  # line 5
        seq = torch.cat([seq, y.reshape(1)])  # line 6
    return {"y": seq[ell:]}  # line 7: the ℓ_gen new tokens


@torch.no_grad()
def _ed_inference(i: In, p: In, ctx: Context) -> Any:
    """Alg. 15 lines 1-8: from [bos], sample until eos or ℓ_max tokens.

    → x_hat (ℓ_max,) int64 padded with −1 after ``length`` tokens, length (),
    eos () (True iff eos_token was sampled)."""
    z, u, tau = i["z"], i["u"], i["tau"]
    ell_max = ctx.hyper["ell_max"]
    bos, eos_token = i["bos_token"].reshape(1).to(torch.int64), int(i["eos_token"])
    check_variates(u)
    check_token(i["eos_token"], ctx.hyper["N_V"], "eos_token")  # never embedded: a lookup would not see it
    Z = models.ed_encode(z, p, ctx)  # z's encoding does not change while decoding
    x_hat, eos = bos, False  # line 1
    for k in range(ell_max - 1):  # lines 2-7; W_p has no column for token ℓ_max + 1
        P = _last_distribution(models.ed_decode_logits(x_hat, Z, p, ctx))  # lines 3-4
        y = sample(P, u[k], tau)  # line 5
        x_hat = torch.cat([x_hat, y.reshape(1)])  # line 6
        if int(y) == eos_token:  # line 7
            eos = True
            break
    length = x_hat.shape[0]
    padded = torch.full((ell_max,), -1, dtype=torch.int64, device=x_hat.device)
    padded[:length] = x_hat
    return {"x_hat": padded,
            "length": torch.tensor(length, dtype=torch.int64, device=x_hat.device),
            "eos": torch.tensor(eos, dtype=torch.bool, device=x_hat.device)}


INFERENCE = {
    "sample": _sample_entry,
    "d_inference": _d_inference,
    "ed_inference": _ed_inference,
}
