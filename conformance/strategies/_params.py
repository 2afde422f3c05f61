"""Parameters θ: every flat name of the entry's schema under a variant.

A parameter's role is read from its flat name and symbolic shape: γ
(``gamma*``), β (``beta*``), a bias (``b_*``), a table indexed by a token or a
position (2-D ``W_*`` whose columns run over N_V or ℓ_max), or a weight
(other 2-D ``W_*``, fan-in = its column count). Values per style: see
``_styles`` (including the unembedding scale of sampling entries). Each
array comes from its own generator (seed, name), so a parameter keeps its
values when the variant changes elsewhere.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence

import numpy as np
from hypothesis import strategies as st

from ftspec.spec.params import resolve_shape
from ftspec.spec.registry import Entry
from ftspec.spec.variants import PAPER, VariantSet

from ._structure import INDEX_LIMITS, heads, leaf, logit_site, norms, score_sites, symbolic_schema
from ._budgets import resolve_dtype, resolve_entry
from ._styles import SAMPLING_LOGITS, check_style
from ._values import (
    MAGNITUDES,
    Magnitudes,
    generator,
    near_constant_columns,
    seeds,
    signed_log_uniform,
    standardised,
)

__all__ = ["parameter_role", "parameter_values", "parameters"]


def parameter_role(name: str, shape: tuple) -> str:
    """scale | shift | bias | table | weight."""
    part = leaf(name)
    if part.startswith("gamma"):
        return "scale"
    if part.startswith("beta"):
        return "shift"
    if part.startswith("b_"):
        return "bias"
    if part.startswith("W_") and len(shape) == 2:
        return "table" if shape[1] in INDEX_LIMITS.values() else "weight"
    raise ValueError(f"no value strategy for parameter {name!r} of shape {shape}: "
                     "add its role to conformance/strategies/_params.py")


def _value(rng: np.random.Generator, role: str, shape: tuple[int, ...], style: str, m: Magnitudes,
           near: Optional[np.ndarray]) -> np.ndarray:
    """One parameter's values; ``near``: the deviation pattern of near-constant tables (None: not one)."""
    if style == "wide-range":
        if role == "weight":
            return rng.standard_normal(shape) / math.sqrt(shape[1]) * 10.0 ** rng.uniform(*m.wide_weight, size=shape)
        if role == "table":
            return signed_log_uniform(rng, shape, *m.wide)
        if role == "scale":
            return signed_log_uniform(rng, shape, *m.wide_scale)
        return signed_log_uniform(rng, shape, -3.0, 0.0)
    if role == "weight":
        return rng.standard_normal(shape) / math.sqrt(shape[1])
    if role == "table":
        if style == "near-constant" and near is not None:
            return near_constant_columns(rng, shape, m, sign=1.0, pattern=near)
        return rng.standard_normal(shape)
    if role == "scale":
        return 1.0 + 0.1 * rng.standard_normal(shape)
    return 0.1 * rng.standard_normal(shape)


def _columns(x: np.ndarray) -> np.ndarray:
    return x.reshape(-1, 1) if x.ndim == 1 else x


def _sources(inputs: Optional[Mapping[str, np.ndarray]], name: Optional[str], width: int,
             tables: Sequence[np.ndarray], variant: VariantSet, rng: np.random.Generator) -> list[np.ndarray]:
    """What feeds a site: the input itself, or stand-ins for the stream there:
    N(0, 1) columns (a normalised stream) and, when embedding tables of that
    width exist, sums of their columns (the un-normalised embedding that
    post-LN attention sees; × √width under ``embedding_scale``)."""
    if inputs is not None and name is not None and name in inputs:
        return [_columns(np.asarray(inputs[name], dtype=np.float64))]
    out = [rng.standard_normal((width, 4))]
    embedded = [t[:, rng.integers(0, t.shape[1], size=4)] for t in tables if t.shape[0] == width]
    if embedded:
        scale = math.sqrt(width) if variant.embedding_scale == "sqrt_d_e" else 1.0
        out.append(scale * sum(embedded))
    return out


def _target(rng: np.random.Generator, m: Magnitudes, scores: Optional[tuple[float, float]] = None) -> float:
    lo, hi = scores or m.scores
    return float(10.0 ** rng.uniform(math.log10(lo), math.log10(hi)))


def _largest(values: list[np.ndarray]) -> float:
    return max(max((float(np.max(np.abs(v))) for v in values if v.size), default=0.0), 1e-300)


def _scale_logits(entry: Entry, hyper: Mapping[str, int], variant: VariantSet, params: dict[str, np.ndarray],
                  inputs: Optional[Mapping[str, np.ndarray]], seed: int, m: Magnitudes,
                  scores: Optional[tuple[float, float]] = None) -> None:
    """Scale W_u and b_u (or the tied W_e) so that the largest |logit| is a drawn target."""
    site = logit_site(entry, variant, hyper)
    if site is not None:
        rng = generator(seed, "logits")
        M = params[site.matrix].T if site.transposed else params[site.matrix]  # (N_V, d)
        b = params[site.bias][:, None] if site.bias is not None else 0.0
        logits = [M @ x + b for x in _sources(inputs, site.source, M.shape[1], [], variant, rng)]
        f = _target(rng, m, scores) / _largest(logits)
        params[site.matrix] = params[site.matrix] * f
        if site.bias is not None:
            params[site.bias] = params[site.bias] * f


def _large_logits(entry: Entry, hyper: Mapping[str, int], variant: VariantSet, params: dict[str, np.ndarray],
                  table_names: Sequence[str], inputs: Optional[Mapping[str, np.ndarray]], seed: int,
                  m: Magnitudes) -> None:
    """Scale the unembedding, then each head's W_q, b_q, W_k, b_k, so that the
    largest |logit| and each head's largest |score| equal drawn targets."""
    _scale_logits(entry, hyper, variant, params, inputs, seed, m)
    tables = [params[t] for t in table_names]
    mask = None
    if inputs is not None:
        mask = next((np.asarray(inputs[s.name], dtype=bool) for s in entry.inputs
                     if s.kind == "mask" and s.name in inputs), None)
    for head in score_sites(entry, variant, hyper):
        rng = generator(seed, head.prefix + "scores")
        p = head.prefix
        W_q, W_k = params[p + "W_q"], params[p + "W_k"]
        divisor = {"sqrt_d_attn": math.sqrt(W_q.shape[0]), "sqrt_d_model": math.sqrt(W_q.shape[1]),
                   "none": 1.0}[variant.attn_scale]
        b_q = params[p + "b_q"][:, None] if p + "b_q" in params else 0.0
        b_k = params[p + "b_k"][:, None] if p + "b_k" in params else 0.0
        scores = []
        for X in _sources(inputs, head.query, W_q.shape[1], tables, variant, rng):
            for Z in _sources(inputs, head.key, W_k.shape[1], tables, variant, rng):
                S = (W_k @ Z + b_k).T @ (W_q @ X + b_q) / divisor  # (ℓ_z, ℓ_x)
                if mask is not None and mask.shape == S.shape and mask.any():
                    S = S[mask]
                scores.append(S)
        f = math.sqrt(_target(rng, m) / _largest(scores))
        for name in ("W_q", "b_q", "W_k", "b_k"):
            if p + name in params:
                params[p + name] = params[p + name] * f


def _prune(params: dict[str, np.ndarray], seed: int) -> None:
    """Zero some rows (at least one) of each MLP's first weight matrix and the matching biases."""
    for name in list(params):
        if not name.endswith(("W_mlp1", "W_mlp3")):
            continue
        rng = generator(seed, "prune " + name)
        rows = params[name].shape[0]
        dead = rng.random(rows) < 0.4
        dead[rng.integers(rows)] = True
        params[name][dead] = 0.0
        bias = name[: -len("W_mlp1")] + "b_mlp" + name[-1]
        if bias in params:
            params[bias][dead] = 0.0


def parameter_values(entry: Any, hyper: Mapping[str, int], variant: VariantSet = PAPER, *, seed: int,
                     dtype: str = "float64", style: str = "well-scaled",
                     inputs: Optional[Mapping[str, np.ndarray]] = None) -> dict[str, np.ndarray]:
    """The parameters ``parameters`` draws for ``seed`` (deterministic; see there)."""
    e = resolve_entry(entry)
    m = MAGNITUDES[resolve_dtype(dtype)]
    check_style(style)
    schema = symbolic_schema(e, variant, hyper)
    widths = {n.width for n in norms(e, variant, hyper)}
    patterns = {w: standardised(generator(seed, "pattern " + w).standard_normal(resolve_shape((w,), hyper)))
                for w in widths}  # near-constant tables of one width share a deviation pattern
    params: dict[str, np.ndarray] = {}
    table_names = []
    for name, sym in schema.items():
        role = parameter_role(name, sym)
        if role == "table":
            table_names.append(name)
        params[name] = _value(generator(seed, name), role, resolve_shape(sym, hyper), style, m,
                              near=patterns.get(sym[0]) if role == "table" else None)
    if style == "large-logits":
        _large_logits(e, hyper, variant, params, table_names, inputs, seed, m)
    elif style == "sparse":
        _prune(params, seed)
    elif style == "well-scaled" and e.trace is not None:
        _scale_logits(e, hyper, variant, params, inputs, seed, m, SAMPLING_LOGITS)
    for weight, bias in heads(e, variant):
        if params[weight].shape[0] >= 2:  # output row 1 = −(row 0): never an all-zero column
            params[weight][1] = -params[weight][0]
            if bias is not None:
                params[bias][1] = -params[bias][0]
    return params


@st.composite
def parameters(draw: st.DrawFn, entry: Any, hyper: Mapping[str, int], variant: VariantSet = PAPER, *,
               dtype: str = "float64", style: str = "well-scaled",
               inputs: Optional[Mapping[str, np.ndarray]] = None) -> dict[str, np.ndarray]:
    """{flat name: float64 array} for ``entry`` under ``variant`` with sizes ``hyper``.

    Hypothesis draws the seed; a parameter's values depend only on the seed,
    its name, its shape and the style (not on the variant), except where
    large-logits aims them. ``inputs``: the case's inputs, at which
    large-logits aims its scores and logits (without them, stand-ins).
    """
    e = resolve_entry(entry)
    resolve_dtype(dtype)
    check_style(style)
    if not symbolic_schema(e, variant, hyper):
        return {}
    return parameter_values(e, hyper, variant, seed=draw(seeds), dtype=dtype, style=style, inputs=inputs)
