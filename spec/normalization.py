"""Algorithm 6 (layer normalisation) and RMSnorm.

Both act on one vector; applied to a matrix they act on each column (token)
separately (``norm_columns``).

Decision (the paper is silent): with no epsilon, a column of zero variance
(layer norm) or a zero column (RMSnorm) divides by zero. The spec refuses it
with ``SpecError`` rather than returning NaN or inf.
"""

from __future__ import annotations

from typing import Any, Optional

from . import numbers
from .errors import SpecError
from .intermediates import algorithm, record, with_statistics
from .linalg import Matrix, Vector, map_columns
from .numbers import centred
from .variants import PAPER, VariantSet

__all__ = ["layer_norm", "norm_columns", "rms_norm"]


def _no_nan(v: Any, what: str) -> None:
    """Refuse a NaN statistic, naming where a NaN comes from: the spec makes one only for a query
    with no key under ``empty_query="nan"`` (Algorithm 4), and it states no NaN arithmetic past
    that column, so a layer or model whose norm would take it refuses the case."""
    if numbers.current().isnan(v):
        raise SpecError("e", "a column without NaN (a query with no key under empty_query='nan' makes a NaN "
                        "column, which the spec does not carry through a norm)", f"{what} NaN")


def _sigma(v: Any, variant: VariantSet, what: str, nonzero: bool) -> Any:
    """√v with the variant's epsilon: none, √(v + ε) or √v + ε.

    ``nonzero``: whether the terms of v are not all zero. A v that overflows,
    or underflows below the arithmetic's smallest normal number, is refused
    rather than answered wrongly (binary64 cannot represent it; mpmath can).
    """
    N = numbers.current()
    _no_nan(v, what)
    if not N.isfinite(v):
        raise SpecError("e", f"a column whose {what} is representable (it overflows; inputs too large)",
                        f"{what} {N.to_float(v)!r}")
    if nonzero and v < N.tiny:
        raise SpecError("e", f"a column whose {what} is representable (it underflows: entries too small "
                        f"for {N.name} arithmetic)", f"{what} {N.to_float(v)!r}")
    if variant.epsilon_placement == "none":
        if v == 0:
            raise SpecError(
                "e", f"a column with nonzero {what} (no epsilon: the paper divides by √v)",
                f"{what} exactly 0",
            )
        return N.sqrt(v)
    eps = N.const(repr(variant.epsilon))
    if variant.epsilon_placement == "inside_root":
        return N.sqrt(v + eps)
    if v == 0:
        # A constant column: σ = √0 + ε = ε exactly, and returned as ε so that no derivative flows
        # through √ at 0 (slope ∞ times ∂v = 0 would be NaN). The norm's true derivative there is
        # (I − 11ᵀ/d)/ε: the σ term of ∂[(e − m)/σ] is multiplied by e − m = 0.
        return eps
    return N.sqrt(v) + eps  # outside_root: added to the standard deviation


def _affine(n: list, gamma: Optional[Vector], beta: Optional[Vector], variant: VariantSet) -> list:
    """ê ⊙ γ + β, for the parts of (γ, β) that the ``affine`` switch keeps.

    ``norm_gain="one_plus_gamma"`` multiplies by 1 + γ instead, the sum rounded before the product
    (Gemma: Hugging Face transformers 5.24 ``GemmaRMSNorm.forward``, ``output * (1.0 +
    self.weight.float())``; its γ is initialised at zeros, so the gain starts at 1)."""
    if variant.affine == "none":
        return n
    if gamma is None:
        raise SpecError("gamma", f"a vector of length {len(n)} (affine={variant.affine!r})", "None")
    if len(gamma) != len(n):
        raise SpecError("gamma", f"a vector of length {len(n)}", f"length {len(gamma)}")
    if variant.norm_gain == "one_plus_gamma":
        N = numbers.current()
        one = N.num(1)
        n = [ni * (one + gi) for ni, gi in zip(n, gamma)]
    else:
        n = [ni * gi for ni, gi in zip(n, gamma)]
    if beta is not None:
        if len(beta) != len(n):
            raise SpecError("beta", f"a vector of length {len(n)}", f"length {len(beta)}")
        n = [ni + bi for ni, bi in zip(n, beta)]
    return n


def layer_norm(
    e: Vector,
    gamma: Optional[Vector],
    beta: Optional[Vector],
    *,
    variant: VariantSet = PAPER,
) -> Vector:
    """Algorithm 6: ê ← layer_norm(e | γ, β).

    1. m ← Σ_i e[i] / d_e
    2. v ← Σ_i (e[i] − m)² / d_e   (``variance="unbiased"``: / (d_e − 1);
       ``variance="one_pass"``: max(0, Σ_i e[i]² / d_e − m²), Flax's)
    3. return ê = (e − m) / √v ⊙ γ + β

    Variants: ``epsilon``/``epsilon_placement`` replace √v by √(v + ε) or
    √v + ε; ``affine`` drops β or both γ and β; ``norm_gain`` multiplies by
    1 + γ in place of γ (Gemma). ``one_pass`` is the same
    mathematics as ``biased``, rounded differently (``_one_pass_variance``).
    e − m is ``numbers.centred``: the paper's subtraction, which the
    harness's arithmetic rounds as real kernels do (docs/tolerances.md).

    Intermediates (``spec/intermediates.py``, one per column under
    ``norm_columns``): mu (m, line 1) and sigma (the divisor of line 3 as the
    variant forms it: √v, √(v + ε) or √v + ε).
    """
    out, m, sigma = _layer_norm(e, gamma, beta, variant)
    record("mu", m)
    record("sigma", sigma)
    return out


@algorithm("layer_norm")
def _layer_norm(e: Vector, gamma: Optional[Vector], beta: Optional[Vector],
                variant: VariantSet) -> tuple[Vector, Any, Any]:
    """``layer_norm``'s lines: (ê, m, σ)."""
    N = numbers.current()
    d_e = len(e)
    if d_e == 0:
        raise SpecError("e", "a non-empty vector", "length 0")
    if variant.variance == "unbiased" and d_e < 2:
        raise SpecError("e", "length d_e ≥ 2 (unbiased variance divides by d_e − 1)", f"length {d_e}")
    m = N.fsum(e) / N.num(d_e)  # line 1
    e_m: Optional[list] = None
    if variant.variance != "one_pass":
        e_m = centred(e, m, line=2)  # e − m
        v = N.dot(e_m, e_m) / N.num(d_e if variant.variance == "biased" else d_e - 1)  # line 2
        nonzero = any(c != 0 for c in e_m)
    else:
        v = _one_pass_variance(e, m)  # line 2, as E[e²] − m²
        nonzero = v != 0
    sigma = _sigma(v, variant, "variance", nonzero)  # √v
    e_m = centred(e, m, line=3, line_2=e_m)  # e − m
    return _affine([c / sigma for c in e_m], gamma, beta, variant), m, sigma  # line 3


def _one_pass_variance(e: Vector, m: Any) -> Any:
    """Line 2 in one pass over e: v = max(0, Σ_i e[i]²/d_e − m²).

    The convention of Flax (``use_fast_variance=True``, the default of
    ``nn.LayerNorm``; flax/linen/normalization.py ``_compute_stats``:
    ``var = maximum(0, mean(x²) − mean(x)²)``). In exact arithmetic it is
    the biased variance; in floating point the subtraction cancels when
    |m| is large against the spread of e, and rounding can leave it
    negative, which the library clips to 0 (so does this line: ``relu``,
    taken per Monte Carlo lane). Computing it this way here is what lets
    the tolerance follow the library's arithmetic.

    The binary64 spec refuses a mean square it cannot represent (overflow,
    or underflow of a nonzero column) as ``_sigma`` does for v.
    """
    N = numbers.current()
    m2 = N.dot(e, e) / N.num(len(e))
    _no_nan(m2, "mean square")
    if not N.isfinite(m2):
        raise SpecError("e", "a column whose mean square is representable (it overflows; inputs too large)",
                        f"mean square {N.to_float(m2)!r}")
    if m2 < N.tiny and any(ei != 0 for ei in e):
        raise SpecError("e", "a column whose mean square is representable (it underflows: entries too small "
                        f"for {N.name} arithmetic)", f"mean square {N.to_float(m2)!r}")
    return N.relu(m2 - m * m)


def rms_norm(
    e: Vector,
    gamma: Optional[Vector],
    *,
    variant: VariantSet = PAPER,
) -> Vector:
    """RMSnorm (Zhang & Sennrich 2019; Gopher), the paper's layer_norm with m = 0, β = 0.

    1. v ← Σ_i e[i]² / d_e
    2. return ê = e / √v ⊙ γ

    Variants: ``epsilon``/``epsilon_placement`` as for layer norm; ``affine``
    "none" drops γ (there is never a β); ``norm_gain="one_plus_gamma"`` returns
    e / √v ⊙ (1 + γ) (Gemma's RMSNorm); ``variance`` does not apply.

    Intermediate (one per column under ``norm_columns``): rms, the divisor of
    line 2 as the variant forms it (√v, √(v + ε) or √v + ε).
    """
    out, rms = _rms_norm(e, gamma, variant)
    record("rms", rms)
    return out


@algorithm("rms_norm")
def _rms_norm(e: Vector, gamma: Optional[Vector], variant: VariantSet) -> tuple[Vector, Any]:
    """``rms_norm``'s lines: (ê, the root mean square it divides by)."""
    N = numbers.current()
    d_e = len(e)
    if d_e == 0:
        raise SpecError("e", "a non-empty vector", "length 0")
    v = N.dot(e, e) / N.num(d_e)  # line 1
    sigma = _sigma(v, variant, "mean square", any(ei != 0 for ei in e))  # line 2
    return _affine([ei / sigma for ei in e], gamma, None, variant), sigma


@algorithm(None)
def norm_columns(
    X: Matrix,
    gamma: Optional[Vector],
    beta: Optional[Vector],
    variant: VariantSet = PAPER,
    kind: Optional[str] = None,
) -> Matrix:
    """X[:, t] ← norm(X[:, t] | γ, β) for every column t; ``kind`` overrides ``variant.norm``.

    Intermediates: mu and sigma (layer norm) or rms (RMSnorm), each the vector of its columns'
    values (length ℓ).
    """
    kind = kind or variant.norm
    if kind == "layer_norm":
        return with_statistics(map_columns, lambda e: _layer_norm(e, gamma, beta, variant), X, ("mu", "sigma"))
    return with_statistics(map_columns, lambda e: _rms_norm(e, gamma, variant), X, ("rms",))
