"""Inference, Algorithms 14-15, and one sampling step, on the plugin's own forward code.

Written from ALGORITHMS.md and docs/spec.md ("Randomness is an input"):

- one draw (Alg. 14 line 5), variate u ∈ [0, 1), temperature τ:
  τ = 0: argmax p, ties to the lowest ID (``jnp.argmax`` returns the first);
  τ = inf: the uniform token ⌊u·N_V⌋, capped at N_V − 1;
  otherwise q_v = exp((log p_v − log max p)/τ) (p_v = 0 gives q_v = 0),
  normalised, c_v = Σ_{w≤v} q_w, and the token is the smallest v with
  u < c_v (the last token if rounding leaves every c_v ≤ u).
  All three are computed with jnp ops and the one τ asks for is selected, so
  the whole draw is data-dependent code inside one compiled program (τ is an
  array, not a compile-time constant). q and c are computed in the call's
  dtype; ⌊u·N_V⌋ is formed in float64, where it is exact for every dtype's u
  (it is an index, the definition's integer, not a rounding of the dtype).
- DInference (Alg. 14): ℓ_gen steps; step i (0-based) samples from the last
  column of DTransformer(x + y[:i]) with u[i]; ℓ + ℓ_gen − 1 ≤ ℓ_max.
- EDInference (Alg. 15): x̂ = [bos]; step i samples from column
  length(x̂) − 1 of EDTransformer(z, x̂) with u[i]; stops when it samples
  eos_token (eos = True) or when x̂ has ℓ_max tokens (eos = False);
  ``x_hat`` is padded with −1 after ``length`` tokens.

Fixed shapes: the decoder is causal, so row t of DTransformer(x) depends on
x[0..t] only. Generation therefore runs on ONE token buffer of fixed size
(ℓ + ℓ_gen − 1 for DInference, ℓ_max for EDInference), in a ``lax.fori_loop``
/ ``lax.while_loop``; step i reads row (current length − 1), and the rows
beyond the current length are padding that the causal mask hides (and
``valid`` zeroes in the attention values, see architectures.py). The
encoder of EDInference runs once. Result: one compiled program per
configuration instead of one per prefix length, and no host round trip per
token.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, TypeAlias

import jax
import jax.numpy as jnp

from ftspec.impls.api import Context

from . import architectures as A
from . import boundary as B

Array: TypeAlias = jax.Array  # an alias mypy accepts when it does not follow jax (pyproject)


def sample_token(p: Array, u: Array, tau: Array) -> Array:
    """One draw from q ∝ p^{1/τ} by inverse CDF over IDs in increasing order. p: (N_V,), u, τ: () → int64 ()."""
    n_v = p.shape[-1]
    by_argmax = jnp.argmax(p).astype(jnp.int64)  # τ = 0: the first maximal ID
    by_uniform = jnp.minimum(jnp.floor(u.astype(jnp.float64) * n_v), n_v - 1).astype(jnp.int64)  # τ = inf
    finite = (tau > 0) & jnp.isfinite(tau)
    t = jnp.where(finite, tau, jnp.ones((), tau.dtype))  # a harmless τ where another branch is taken
    q = jnp.exp((jnp.log(p) - jnp.log(jnp.max(p))) / t)  # (N_V,); log 0 = −inf gives q = 0
    q = q / jnp.sum(q)
    c = jnp.cumsum(q)  # (N_V,) the CDF over IDs 0, 1, ...
    hit = u < c
    by_cdf = jnp.where(jnp.any(hit), jnp.argmax(hit), n_v - 1).astype(jnp.int64)  # smallest v with u < c_v
    return jnp.where(tau == 0, by_argmax, jnp.where(finite, by_cdf, by_uniform))


def _row_distribution(logits: Array, row: Array) -> Array:
    """P[:, row] = softmax of one logits row (Alg. 7). logits: (ℓ, N_V), row: traced () → (N_V,)."""
    return jax.nn.softmax(jax.lax.dynamic_index_in_dim(logits, row, axis=0, keepdims=False), axis=-1)


def d_generate(params: Mapping[str, Array], x: Array, u: Array, tau: Array, *, ell_max: int, variant) -> Array:
    """Alg. 14 lines 1-7. x: (ℓ,) prompt, u: (ℓ_gen,) → y: (ℓ_gen,) int64."""
    theta = B._d_theta(params)
    ell, n_gen = x.shape[0], u.shape[0]
    size = ell + n_gen - 1  # the last step reads ℓ + ℓ_gen − 1 tokens
    buf = jnp.zeros((size,), jnp.int64).at[:ell].set(x)  # padding: token 0, never seen by real rows

    def step(i, state):
        buf, y = state
        n = ell + i  # length(x + y[:i])
        logits = A.d_logits(buf, theta, ell_max, variant, valid=n)  # (size, N_V), rows < n exact
        tok = sample_token(_row_distribution(logits, n - 1), u[i], tau)  # lines 4-5
        return buf.at[n].set(tok, mode="drop"), y.at[i].set(tok)  # line 6: x ← [x, y]

    _, y = jax.lax.fori_loop(0, n_gen, step, (buf, jnp.zeros((n_gen,), jnp.int64)))
    return y


def ed_generate(params: Mapping[str, Array], z: Array, u: Array, tau: Array, bos: Array, eos: Array, *,
                ell_max: int, variant) -> dict:
    """Alg. 15 lines 1-8. z: (ℓ_z,), u: (ℓ_max − 1,) → x_hat (ℓ_max,) int64, length (), eos () bool."""
    theta = B._ed_theta(params)
    Z = A.ed_encode(z, theta, ell_max, variant)  # (ℓ_z, d_e): the encoder does not change while decoding
    buf = jnp.full((ell_max,), -1, jnp.int64).at[0].set(bos)  # line 1: x̂ ← [bos]

    def running(state):
        _, n, stopped = state
        return (~stopped) & (n < ell_max)  # until eos, or W_p has no column for another token

    def step(state):
        buf, n, _ = state
        tokens = jnp.where(buf >= 0, buf, 0)  # padding −1 → a valid ID; those rows are ignored
        logits = A.ed_decode_logits(tokens, Z, theta, ell_max, variant, valid=n)  # (ℓ_max, N_V)
        y = sample_token(_row_distribution(logits, n - 1), u[n - 1], tau)  # p ← P[:, length(x̂)], sample
        return buf.at[n].set(y), n + 1, y == eos  # x̂ ← [x̂, y]; until y = eos_token

    buf, n, stopped = jax.lax.while_loop(running, step, (buf, jnp.int64(1), jnp.bool_(False)))
    return {"x_hat": buf, "length": n, "eos": stopped}


# --------------------------------------------------------------------------
# registry entries: fn(inputs, params, ctx, device)
# --------------------------------------------------------------------------


def _unbatched(ctx: Context) -> None:
    if ctx.batched:
        raise ValueError(f"{ctx.algorithm} takes no batch axis (the spec's Entry.batchable is False)")


def _sample(inputs, params, ctx, dev):
    _unbatched(ctx)
    fn = B.jitted(("sample",), lambda: sample_token, dev.platform)
    return {"y": fn(inputs["p"], inputs["u"], inputs["tau"])}


def _d_inference(inputs, params, ctx, dev):
    _unbatched(ctx)
    h = ctx.hyper
    if h["ell"] + h["ell_gen"] - 1 > h["ell_max"]:
        raise ValueError(f"d_inference: ell + ell_gen − 1 ≤ ell_max = {h['ell_max']} is required "
                         f"(ell = {h['ell']}, ell_gen = {h['ell_gen']})")
    key = ("d_inference", ctx.variant, h["ell_max"])
    def make():
        return lambda params, x, u, tau: d_generate(params, x, u, tau, ell_max=h["ell_max"], variant=ctx.variant)

    return {"y": B.jitted(key, make, dev.platform)(dict(params), inputs["x"], inputs["u"], inputs["tau"])}


def _ed_inference(inputs, params, ctx, dev):
    _unbatched(ctx)
    ell_max = ctx.hyper["ell_max"]
    key = ("ed_inference", ctx.variant, ell_max)
    def make():
        return lambda params, z, u, tau, bos, eos: ed_generate(params, z, u, tau, bos, eos, ell_max=ell_max,
                                                               variant=ctx.variant)

    return B.jitted(key, make, dev.platform)(dict(params), inputs["z"], inputs["u"], inputs["tau"],
                                             inputs["bos_token"], inputs["eos_token"])


ENTRIES: dict[str, Callable[..., Any]] = {"sample": _sample, "d_inference": _d_inference,
                                          "ed_inference": _ed_inference}
