"""Parameters: each one's values by its role, and the styles that shape them (subnormal, large logits)."""

from __future__ import annotations

import functools
import math
import re
from typing import Callable, Mapping, Optional, Sequence, Union

import numpy as np

from ftspec.spec.entry import Kind
from ftspec.spec.params import resolve_shape
from ftspec.spec.registry import Entry
from ftspec.spec.variants import PAPER, VariantSet

from ..dtypes import FORMATS, round_to
from ..value_flow import INDEX_LIMITS, heads, leaf, logit_site, norms, score_sites, symbolic_schema
from .magnitudes import (MAGNITUDES, Magnitudes, generator, near_constant_columns, quiet_columns, signed_log_uniform,
                         standardised)
from .sizes import _resolve
from .styles import SAMPLING_LOGITS, _check_dtype, check_style


def parameter_role(name: str, shape: tuple) -> str:
    """scale | shift | bias | table | weight | relative bias (T5's table). The bare leaves ``W`` and ``b`` are the
    weight and bias of an indexed dense layer (``mlp_hidden.{k}.W``, ``.b`` of ``mlp_depth`` > 1)."""
    part = leaf(name)
    if part.startswith("gamma"):
        return "scale"
    if part.startswith("beta"):
        return "shift"
    if part.startswith("b_") or (part == "b" and len(shape) == 1):
        return "bias"
    if part == "rel_bias":  # T5's relative bias table (rel_buckets × H, spec 2.13): additive on the scores
        return "relative bias"
    if part in ("rope_ext", "rope_mscale"):  # LongRoPE's factors and attention factor (spec 2.17): positive
        return "rope factor" if part == "rope_ext" else "attention factor"
    if part == "W" and len(shape) == 2:
        return "weight"
    if part.startswith("W_") and len(shape) == 2:
        return "table" if shape[1] in INDEX_LIMITS.values() else "weight"
    raise ValueError(f"no value rule for parameter {name!r} of shape {shape}: "
                     "add its role to parameter_role in conformance/core/values/parameters.py")


def _value(rng: np.random.Generator, role: str, shape: tuple[int, ...], style: str, m: Magnitudes,
           near: Optional[np.ndarray]) -> np.ndarray:
    """One parameter's values; ``near``: the deviation pattern of near-constant tables (None: not one)."""
    if role == "rope factor":  # log-uniform over [1, 64] in every style: Phi-3-mini-128k's long factors run 1-~60
        return np.exp(rng.uniform(0.0, math.log(64.0), shape))
    if role == "attention factor":  # uniform over [1, 1.5]: Phi-3 128k's √(1 + ln 32 / ln 4096) ≈ 1.19
        return rng.uniform(1.0, 1.5, shape)
    if role == "relative bias":  # T5's learned biases are O(1) beside unscaled scores: unit normal in every
        # style, so that a wrong bucket moves a score by about 1 (spec 2.13)
        return rng.standard_normal(shape)
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
        if style == "near-epsilon" and near is not None:
            return quiet_columns(rng, shape, m)
        return rng.standard_normal(shape)
    if role == "scale":
        return 1.0 + 0.1 * rng.standard_normal(shape)
    if style == "near-epsilon":  # biases and β small too: a post-LN norm sees the quiet sum
        return 1e-3 * rng.standard_normal(shape)
    return 0.1 * rng.standard_normal(shape)


#: subnormal: the largest |output| is log-uniform between 16 spacings of the dtype's subnormals and
#: its smallest normal (the output's own rounding there is absolute, not relative: docs/tolerances.md)
def subnormal_range(dtype: str) -> tuple[float, float]:
    info = FORMATS[dtype]
    spacing = info.tiny * 2.0 ** (1 - info.mantissa_bits)  # of the subnormals
    return 16.0 * spacing, info.tiny


#: subnormal, softmax outputs: the largest |logit| per dtype. A probability is exp(−gap) for its
#: logit's gap below the largest, and the gaps of a case spread over [0, 2·|logit|]; the window of
#: subnormal probabilities is a gap between ln(1/smallest normal) and ln(1/smallest subnormal)
#: (9.7-16.6 in float16, 87-103 in float32 and bfloat16, 708-745 in float64), which these ranges put
#: inside that spread, near its top
SUBNORMAL_LOGITS = {"float64": (400.0, 450.0), "float32": (50.0, 60.0), "bfloat16": (50.0, 60.0),
                    "float16": (7.0, 9.0)}


def _groups_from_the_end(schema: Mapping[str, tuple]) -> list[list[str]]:
    """The schema's parameters in groups, last first: a weight with its bias (``W_x``, ``b_x``), a γ
    with its β, or one parameter alone."""
    names = list(schema)
    out: list[list[str]] = []
    i = len(names) - 1
    while i >= 0:
        part, prefix = leaf(names[i]), names[i][: len(names[i]) - len(leaf(names[i]))]
        partner = None
        if part.startswith("b_"):
            partner = prefix + "W_" + part[2:]
        elif part.startswith("beta"):
            partner = prefix + "gamma" + part[len("beta"):]
        if partner is not None and i > 0 and names[i - 1] == partner:
            out.append([partner, names[i]])
            i -= 2
        else:
            out.append([names[i]])
            i -= 1
    return out


def _spec_outputs(entry: Entry, hyper: Mapping[str, int], variant: VariantSet, inputs: Mapping[str, np.ndarray],
                  params: Mapping[str, np.ndarray]) -> Optional[list[np.ndarray]]:
    """The spec's binary64 outputs (None where it refuses the case)."""
    from ftspec.spec import evaluate
    from ftspec.spec.errors import SpecError

    try:
        raw = evaluate(entry.name, {k: np.asarray(v).tolist() for k, v in inputs.items()},
                       {k: v.tolist() for k, v in params.items()}, hyper=dict(hyper), variant=variant)
    except (SpecError, ValueError, ZeroDivisionError, OverflowError):
        return None
    out = [np.asarray(v, dtype=np.float64) for v in raw.values()]
    return out if all(np.isfinite(v).all() for v in out) else None


def _subnormal(entry: Entry, hyper: Mapping[str, int], variant: VariantSet, params: dict[str, np.ndarray],
               inputs: Optional[Mapping[str, np.ndarray]], seed: int, dtype: str, m: Magnitudes) -> None:
    """subnormal: outputs in ``dtype``'s subnormal range. Softmax outputs: logits aimed at
    ``SUBNORMAL_LOGITS``. Otherwise the output is scaled through the parameters it is linear in:
    the last groups of the schema (``_groups_from_the_end``, one to three of them), checked on the
    spec (doubling them doubles every output, to binary64's last bits), then scaled so that the
    largest |output| is log-uniform in ``subnormal_range``. Where no such group exists (a residual
    carries an input to the output) the values stay well-scaled."""
    site = logit_site(entry, variant, hyper)
    if site is not None:  # a whole model (no input feeds its logits) stays well-scaled: see _styles.py
        if site.source is not None:
            _scale_logits(entry, hyper, variant, params, inputs, seed, m, SUBNORMAL_LOGITS[dtype])
        return
    if inputs is None:
        return
    # which groups the outputs are linear in is a property of the structure: found on its first
    # value set, then taken (a block's further value sets skip up to three evaluations each, and
    # a structure linear in none, a layer whose residual carries its input, skips the fourth too)
    key = (entry.name, tuple(sorted(hyper.items())), variant.to_json(), dtype)
    known = _LINEAR_GROUPS.get(key, ...)
    if known is None:
        return
    base = _spec_outputs(entry, hyper, variant, inputs, params)
    if base is None or not any(np.abs(v).max(initial=0.0) > 0 for v in base):
        return
    groups = _groups_from_the_end(symbolic_schema(entry, variant, hyper))
    for k in ([known] if known is not ... else range(1, min(3, len(groups)) + 1)):
        if k is None:
            return
        chosen = [n for g in groups[:k] for n in g]
        if known is ...:
            doubled = _spec_outputs(entry, hyper, variant, inputs, {**params, **{n: 2.0 * params[n] for n in chosen}})
            if doubled is None or not all(np.allclose(d, 2.0 * b, rtol=1e-12, atol=0.0)
                                          for d, b in zip(doubled, base)):
                continue
            _remember(key, k)
        lo, hi = subnormal_range(dtype)
        target = 10.0 ** generator(seed, "subnormal").uniform(math.log10(lo), math.log10(hi))
        f = target / max(float(np.abs(v).max(initial=0.0)) for v in base)
        for n in chosen:
            params[n] = params[n] * f
        return
    _remember(key, None)


#: (entry, hyper, variant, dtype) -> how many of the last parameter groups the outputs are linear in
#: (None: none of one to three), for the subnormal style; bounded, cleared when full
_LINEAR_GROUPS: dict[tuple, Optional[int]] = {}


def _remember(key: tuple, k: Optional[int]) -> None:
    if len(_LINEAR_GROUPS) >= 4096:
        _LINEAR_GROUPS.clear()
    _LINEAR_GROUPS[key] = k


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
        out.append(scale * functools.reduce(np.add, embedded))
    return out


def _heads_beside(prefix: str, params: Mapping[str, np.ndarray]) -> int:
    """H of the multi-head attention whose head ``prefix`` (``….heads.{h}.``) is, counted by its
    heads' W_q; 1 for an attention of one head (a prefix not under ``heads``)."""
    outer, _, h = prefix.rstrip(".").rpartition(".")
    if not outer.endswith("heads") or outer.endswith("kv_heads") or not h.isdigit():
        return 1
    H = 0
    while f"{outer}.{H}.W_q" in params:
        H += 1
    return H


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
                  m: Magnitudes, dtype: str = "float64") -> None:
    """Scale the unembedding, then each head's W_q, b_q, W_k, b_k, so that the
    largest |logit| and each head's largest |score| equal drawn targets. Where the scores cancel
    (a query nearly orthogonal to every key: the factor is large), rounding the scaled weights to
    ``dtype`` moves the largest score far from its target; one correction, measured on the rounded
    values, brings it back."""
    _scale_logits(entry, hyper, variant, params, inputs, seed, m)
    tables = [params[t] for t in table_names]
    mask = None
    if inputs is not None:
        mask = next((np.asarray(inputs[s.name], dtype=bool) for s in entry.inputs
                     if s.kind == Kind.MASK and s.name in inputs), None)
    for head in score_sites(entry, variant, hyper):
        rng = generator(seed, head.prefix + "scores")
        p, kp = head.prefix, head.key_prefix or head.prefix
        W_q, W_k = params[p + "W_q"], params[kp + "W_k"]
        divisor = {"sqrt_d_attn": math.sqrt(W_q.shape[0]), "sqrt_d_model": math.sqrt(W_q.shape[1]),
                   "sqrt_d_model_per_head": math.sqrt(W_q.shape[1] / _heads_beside(p, params)),
                   "none": 1.0}[variant.attn_scale]
        pairs = [(X, Z) for X in _sources(inputs, head.query, W_q.shape[1], tables, variant, rng)
                 for Z in _sources(inputs, head.key, W_k.shape[1], tables, variant, rng)]

        def largest(r: Callable[[np.ndarray], np.ndarray]) -> float:
            """The head's largest |score| with every value passed through ``r``."""
            b_q = r(params[p + "b_q"])[:, None] if p + "b_q" in params else 0.0
            b_k = r(params[kp + "b_k"])[:, None] if kp + "b_k" in params else 0.0
            scores = []
            for X, Z in pairs:
                S = (r(params[kp + "W_k"]) @ r(Z) + b_k).T @ (r(params[p + "W_q"]) @ r(X) + b_q) / divisor
                if mask is not None and mask.shape == S.shape and mask.any():
                    S = S[mask]
                scores.append(S)
            return _largest(scores)

        target = _target(rng, m)
        f = math.sqrt(target / largest(lambda x: x))
        _scale_head(params, p, kp, f)
        rounded = largest(lambda x: round_to(x, dtype))
        if not target / 1.05 <= rounded <= target * 1.05:
            _scale_head(params, p, kp, math.sqrt(target / rounded))


def _scale_head(params: dict[str, np.ndarray], p: str, kp: str, f: float) -> None:
    """Scores of the head at ``p`` (keys at ``kp``) times f²: W_q, b_q, W_k, b_k times f (under
    grouped-query attention, keys shared by a group: f² on this head's queries alone)."""
    scaled: tuple[str, ...] = ("W_q", "b_q", "W_k", "b_k")
    if kp != p:
        f, scaled = f * f, ("W_q", "b_q")
    for name in scaled:
        if p + name in params:
            params[p + name] = params[p + name] * f


def _every_layer(found: list[tuple[str, Optional[str]]], params: Mapping[str, np.ndarray]
                 ) -> list[tuple[str, Optional[str]]]:
    """``heads``' (weight, bias) pairs, read off one layer's schema, at every layer of ``params``
    (``layers.0.W_mlp1`` stands for ``layers.{l}.W_mlp1``)."""
    out = []
    for weight, bias in found:
        pattern = re.compile(re.sub(r"layers\\\.0\\\.", r"layers\\.\\d+\\.", re.escape(weight)) + "$")
        for name in params:
            if pattern.match(name):
                prefix = name[:len(name) - len(weight.rsplit(".", 1)[-1])]
                out.append((name, None if bias is None else prefix + bias.rsplit(".", 1)[-1]))
    return out


def _prune(params: dict[str, np.ndarray], seed: int, alive: frozenset[str] = frozenset()) -> None:
    """Zero some rows (at least one) of each MLP's first weight matrix and the matching biases; of a
    weight in ``alive`` (a ``heads`` weight: its row 1 becomes −row 0) row 0 stays, and with it row 1."""
    for name in list(params):
        if not name.endswith(("W_mlp1", "W_mlp3")):
            continue
        rng = generator(seed, "prune " + name)
        rows = params[name].shape[0]
        dead = np.asarray(rng.random(rows) < 0.4)
        dead[rng.integers(rows)] = True
        if name in alive:
            dead[0] = False
        params[name][dead] = 0.0
        bias = name[: -len("W_mlp1")] + "b_mlp" + name[-1]
        if bias in params:
            params[bias][dead] = 0.0


def parameter_values(entry: Union[str, Entry], hyper: Mapping[str, int], variant: VariantSet = PAPER, *,
                     seed: int, dtype: str = "float64", style: str = "well-scaled",
                     inputs: Optional[Mapping[str, np.ndarray]] = None,
                     magnitudes: Optional[Magnitudes] = None) -> dict[str, np.ndarray]:
    """{flat name: float64 array} for ``entry`` under ``variant`` (deterministic).

    A parameter's role is read from its flat name and symbolic shape: γ
    (``gamma*``), β (``beta*``), a bias (``b_*``), a table indexed by a token
    or a position (2-D ``W_*`` whose columns run over N_V or ℓ_max), or a
    weight (other 2-D ``W_*``, fan-in = its column count). Each array comes
    from its own generator (seed, name), so a parameter keeps its values
    when the variant changes elsewhere, except where large-logits aims them
    at ``inputs`` (the case's; without them, stand-ins). ``magnitudes``:
    instead of ``MAGNITUDES[dtype]`` (the fixtures ask for scores in the
    hundreds).
    """
    e = _resolve(entry)
    m = magnitudes or MAGNITUDES[_check_dtype(dtype)]
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
        _large_logits(e, hyper, variant, params, table_names, inputs, seed, m, dtype)
    elif style == "sparse":
        _prune(params, seed, frozenset(w for w, _ in _every_layer(heads(e, variant), params)))
    elif style == "well-scaled" and e.trace is not None:
        _scale_logits(e, hyper, variant, params, inputs, seed, m, SAMPLING_LOGITS)
    elif style == "subnormal":
        _subnormal(e, hyper, variant, params, inputs, seed, dtype, m)
    for weight, bias in _every_layer(heads(e, variant), params):
        if params[weight].shape[0] >= 2:  # output row 1 = −(row 0): never an all-zero column
            params[weight][1] = -params[weight][0]
            if bias is not None:
                params[bias][1] = -params[bias][0]
    return params
