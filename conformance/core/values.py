"""One way to build the values of a concrete case.

``build(entry, hyper, variant, seed=, style=, dtype=)`` is a deterministic
function: the same arguments give the same inputs and parameters, bit for
bit. Everything that makes a concrete case reads it:

- the strategies (``conformance/strategies``): Hypothesis draws the seed
  (it shrinks to 0) and the structure around it, and the real inputs and
  parameters come from here (``real_input``, ``parameter_values``);
- the fixtures (``fixtures/values.py``): the builder's values for a seed
  taken from the case id, with the fixtures' own choices on top (token,
  mask and data styles, float32 rounding, settled variates); the catalogue
  (``fixtures/cases.py``) takes its sizes (``DEFAULT_HYPER``) and variant
  sets (``variant_enumeration``) from here;
- the fixed cases of the plugin tests (``tests/impls/cases.py``), the
  spec's self-tests (``tests/spec/helpers.py``) and the zoo's witnesses
  (``tools/zoo/witness.py``).

This module also holds the one table of default hyperparameters
(``DEFAULT_HYPER``: each entry's ``sizes``, declared in its ``Entry``) and
the one enumeration of the variant sets worth a fixed case
(``variant_enumeration``: the paper's, the presets, each switch moved,
combinations that bite together; the strategies' random draws read the
same switch values, ``SWITCHES`` and ``EPSILONS``).

Arrays come from ``numpy.random.Generator`` seeded by (seed, a stable hash
of the array's name), so the same seed gives a parameter the same values
under every variant set: two variants then differ only where their
switches differ.
"""

from __future__ import annotations

import functools
import math
import re
import zlib
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Mapping, Optional, Sequence, Union

import numpy as np

from ftspec.spec.entry import Kind, implied_multiples
from ftspec.spec.params import resolve_shape
from ftspec.spec.registry import REGISTRY, Entry, entry as registry_entry
from ftspec.spec.variants import PAPER, PRESETS, READ_WITH, SAME_MATHEMATICS, SWITCHES, VariantSet

from .dtypes import FORMATS, round_to
from .value_flow import INDEX_LIMITS, equal_widths, heads, leaf, logit_site, norms, padded, score_sites, symbolic_schema

__all__ = [
    "DEFAULT_HYPER",
    "stated_by_twin",
    "fit_widths",
    "EPSILONS",
    "MAGNITUDES",
    "Magnitudes",
    "PLACED_EPSILON",
    "SAMPLING_LOGITS",
    "STYLES",
    "build",
    "check_style",
    "default_hyper",
    "generator",
    "near_constant_columns",
    "parameter_role",
    "quiet_columns",
    "subnormal_range",
    "parameter_values",
    "real_input",
    "separate_columns",
    "signed_log_uniform",
    "standardised",
    "variant_enumeration",
]


# --------------------------------------------------------------------------
# default hyperparameters: the entries' own sizes
# --------------------------------------------------------------------------

#: {entry: {hyperparameter: size}}: each entry's ``sizes`` (declared in its ``Entry``), the
#: defaults of every fixed case (plugin tests, spec self-tests, zoo witnesses) and the fixtures
DEFAULT_HYPER: Mapping[str, Mapping[str, int]] = MappingProxyType(
    {name: MappingProxyType(dict(e.sizes)) for name, e in REGISTRY.items()})


def _resolve(entry: Union[str, Entry]) -> Entry:
    return registry_entry(entry) if isinstance(entry, str) else entry


def default_hyper(entry: Union[str, Entry], variant: Optional[VariantSet] = None, **overrides: int) -> dict[str, int]:
    """The entry's ``DEFAULT_HYPER`` row with ``overrides``, in ``entry.hyper`` order; with a
    ``variant``, the widths it forces equal (``value_flow.equal_widths``: d_mlp = d_e under
    ``mlp="one_layer"``) copied from their leader."""
    e = _resolve(entry)
    row = e.sizes
    unknown = set(overrides) - set(e.hyper)
    if unknown:
        raise ValueError(f"{e.name}: no hyperparameter {sorted(unknown)}; it has {list(e.hyper)}")
    out = {k: int(overrides.get(k, row[k])) for k in e.hyper}
    return fit_widths(e, variant, out) if variant is not None else out


def fit_widths(entry: Union[str, Entry], variant: VariantSet, hyper: Mapping[str, int]) -> dict[str, int]:
    """``hyper`` with each width ``variant`` forces equal to another set to it (followers only move),
    and each size it needs a multiple of k (RoPE's even d_attn, H a multiple of ``kv_group``;
    ``spec.entry.implied_multiples``) raised to the next multiple."""
    e = _resolve(entry)
    out = dict(hyper)
    for name, k in implied_multiples(e, variant).items():
        if name in out:
            out[name] = -(-out[name] // k) * k
    if variant.kv_order != "consecutive" and "H" in out and "kv_group" in e.switches:
        out["H"] = max(out["H"], 2 * variant.kv_group)  # two kv heads at least: an order to see
    if variant.rotary != "none" and "d_attn" in out and "rotary" in e.switches:
        out["d_attn"] = max(out["d_attn"], 4)  # two RoPE pairs at least: a pairing to see
    for follower, leader in equal_widths(e, variant):
        if follower in out and leader in out:
            out[follower] = out[leader]
    return out


# --------------------------------------------------------------------------
# variant sets: the one enumeration
# --------------------------------------------------------------------------

#: PyTorch/HF GPT-2, Flax/T5 and the Annotated Transformer, BERT, a large one (the strategies draw from these)
EPSILONS = (1e-5, 1e-6, 1e-12, 1e-3)
#: ε values the forensics try (diagnosis, identify), inside or outside the root: the strategies'
#: values, the ν = 1e-4 of seed 004 (numeric tutorial) and the machine epsilons that real defaults
#: use (nn.RMSNorm(eps=None): finfo(dtype).eps). A finite list: an ε between two of these fits the
#: nearer one, or none.
EPSILON_CANDIDATES = tuple(sorted(set(EPSILONS) | {1e-4, float(np.finfo(np.float32).eps),
                                                   float(np.finfo(np.float64).eps)}))
#: ε of the enumerated single-switch sets that move ``epsilon_placement``
PLACED_EPSILON = {"inside_root": 1e-5, "outside_root": 1e-6}
assert set(PLACED_EPSILON.values()) <= set(EPSILONS)

_NORM_SWITCHES = frozenset(n for n, sw in SWITCHES.items() if sw.group == "normalisation")
#: switches that change how a whole model is wired: they get single-switch sets at the whole models
_WIRING_SWITCHES = frozenset({"norm_placement"})
#: combinations that only bite together: (switches the entry needs, label, the changes)
COMBINATIONS: tuple[tuple[frozenset[str], str, dict[str, Any]], ...] = (
    (frozenset({"embedding_norm", "affine"}), "embedding-rms-norm", dict(embedding_norm=True, norm="rms_norm")),
    (frozenset({"norm_placement", "norm"}), "pre-rms-norm-scale",
     dict(norm="rms_norm", norm_placement="pre", affine="scale")),
    # SwiGLU (Shazeer 2020; LLaMA): the gate's product with the activation SiLU alone never reaches
    (frozenset({"mlp", "activation"}), "swiglu", dict(mlp="gated", activation="silu")),
)


def _updates(e: Entry) -> bool:
    return any(s.kind == Kind.RATE for s in e.inputs)


def _whole_model(e: Entry) -> bool:
    """An architecture or a model's loss: the layer switches reach it through the presets."""
    return e.family == "architecture" or (e.family == "training" and e.output_schema is None
                                          and not _updates(e))


def _single_switches(e: Entry) -> list[str]:
    """The switches moved one at a time at ``e``.

    Forward entries: all of theirs; whole models (architectures, losses):
    only those that are not a layer's own (a switch acting inside a layer
    has its single-switch sets at the four layers); gradients, SGD steps,
    training loops and inference: none (their outputs are as large as θ; the
    presets reach them)."""
    if e.family in ("training", "inference") and not _whole_model(e):
        return []
    names = set(e.switches) - {"epsilon", "empty_query"}  # ε goes with its placement; empty queries are edges
    if _whole_model(e):
        inside = frozenset().union(*(x.switches for x in REGISTRY.values() if x.family == "layer"))
        names -= inside - _WIRING_SWITCHES
    return sorted(names)


def variant_enumeration(entry: Union[str, Entry]) -> list[tuple[str, VariantSet]]:
    """The variant sets worth a fixed case of ``entry``, labelled, in order:

    ``paper``; ``preset-NAME`` for every preset that moves a switch the
    entry uses (not for entries that update parameters: a step's preset
    effect is the gradient's); ``switch-NAME-VALUE`` for each switch of
    ``_single_switches`` at each non-paper value (ε placements with
    ``PLACED_EPSILON``; at an entry whose only norm is the embedding's, the
    norm switches with ``embedding_norm`` on; not the values of
    ``SAME_MATHEMATICS``, such as ``variance="one_pass"``: a case of one
    would repeat its exact twin's to the last bits, and the fixtures stay as
    they were; the strategies still draw them); ``combination-LABEL`` for
    ``COMBINATIONS`` of switches that only bite together, where the entry
    has single-switch sets and the switches involved (and the set is not
    already listed). No set is listed twice.
    """
    e = _resolve(entry)
    out: list[tuple[str, VariantSet]] = [("paper", PAPER)]
    if not _updates(e):
        for name, v in PRESETS.items():
            if v != PAPER and set(v.differences()) & e.switches:
                out.append((f"preset-{name}", v))
    singles = _single_switches(e)
    # an entry whose only norm is the embedding's normalises only under embedding_norm=True
    norm_base = PAPER.replace(embedding_norm=True) if "embedding_norm" in e.switches and \
        "norm_placement" not in e.switches else PAPER
    for name in singles:
        base = norm_base if name in _NORM_SWITCHES else PAPER
        if name == "epsilon_placement":
            for placement, eps in PLACED_EPSILON.items():
                out.append((f"switch-epsilon-{placement}", base.replace(epsilon=eps, epsilon_placement=placement)))
            continue
        base = base.replace(**READ_WITH.get(name, {}))  # a switch read only with another one on
        for choice in SWITCHES[name].choices:
            if choice != SWITCHES[name].paper and (name, choice) not in SAME_MATHEMATICS:
                out.append((f"switch-{name}-{str(choice).lower()}", base.replace(**{name: choice})))
    if singles:
        for needs, label, changes in COMBINATIONS:
            v = PAPER.replace(**changes)
            if needs <= e.switches and v not in {w for _, w in out}:
                out.append((f"combination-{label}", v))
    return out


def stated_by_twin(entry: Union[str, Entry], slug: str, variant: VariantSet) -> bool:
    """Whether ``variant_enumeration``'s set ``slug`` of a padded entry (``padded_NAME``, whose
    unpadded twin ``NAME`` is in the registry) moves only switches its twin has: the twin's fixed
    cases state that mathematics on the same code path with every position real, so the fixtures
    and the plugin tests keep, of a padded entry, its ``paper``, presets and own switches
    (``empty_query``) and leave out these copies."""
    e = _resolve(entry)
    twin = REGISTRY.get(e.name.removeprefix("padded_")) if e.name.startswith("padded_") else None
    if twin is None or slug == "paper" or slug.startswith("preset-"):
        return False
    return not set(variant.differences()) - twin.switches


# --------------------------------------------------------------------------
# seeded generators and magnitudes
# --------------------------------------------------------------------------

def generator(seed: int, name: str = "") -> np.random.Generator:
    """The generator for the array called ``name`` under ``seed``: Philox keyed
    by (seed, crc32 of the name), a counter-based stream per array that is
    cheap to create."""
    return np.random.Generator(np.random.Philox(key=(int(seed) % 2**32) << 32 | zlib.crc32(name.encode())))


@dataclass(frozen=True)
class Magnitudes:
    """Per-dtype ranges of the adversarial styles (exponents are base 10)."""

    wide: tuple[float, float]  # wide-range data: ±10^U(lo, hi)
    wide_weight: tuple[float, float]  # multipliers of N(0, 1/fan_in) weights
    wide_scale: tuple[float, float]  # γ: ±10^U(lo, hi)
    scores: tuple[float, float]  # large-logits: largest |score| / |logit|, log-uniform
    spread: float  # near-constant: smallest relative spread (must survive rounding)
    level: tuple[float, float]  # near-constant: |c| of the columns c + deviations
    rate: float = 1.0  # the largest |η| of SGD (a few steps compound it)
    #: near-epsilon: log10 of the mean square of a column that reaches a norm, U(lo, hi): around the
    #: ε values the strategies draw (1e-6, 1e-5, 1e-3) inside the root (mean square near ε) and
    #: outside it (root mean square near ε), where ε moves the normalised value
    quiet: tuple[float, float] = (-12.0, -3.0)


MAGNITUDES = {
    "float64": Magnitudes((-3, 2), (-2, 0.5), (-2, 0.5), (50, 1000), 1e-4, (0.25, 3.0)),
    "float32": Magnitudes((-3, 2), (-2, 0.5), (-2, 0.5), (50, 500), 1e-4, (0.25, 3.0)),
    # range of float32, 8 significant bits: scores past ~100 would be all rounding
    # η: with 8 significant bits, a few SGD steps at η ≳ 0.4 amplify rounding
    # chaotically (the Monte Carlo lanes diverge: no tolerance can be derived)
    "bfloat16": Magnitudes((-3, 2), (-2, 0.5), (-2, 0.5), (12, 100), 3e-2, (0.5, 3.0), rate=0.25),
    # max 65504: data ≤ 5 keeps Σ x² and Kᵀ Q small; exp overflows past 11.09
    # near-epsilon: columns of rms ≥ 1e-3 (their squares, 1e-6, are already float16 subnormals)
    "float16": Magnitudes((-3, 0.7), (-2, 0.0), (-2, 0.3), (12, 60), 1e-2, (1.0, 4.0), quiet=(-6.0, -3.0)),
}
assert set(MAGNITUDES) == set(FORMATS)


def signed_log_uniform(rng: np.random.Generator, shape: tuple[int, ...], lo: float, hi: float) -> np.ndarray:
    """±10^U(lo, hi), signs fair: values spanning hi − lo orders of magnitude."""
    mag = 10.0 ** rng.uniform(lo, hi, size=shape)
    return np.where(rng.random(shape) < 0.5, -mag, mag)


def quiet_columns(rng: np.random.Generator, shape: tuple[int, ...], m: Magnitudes) -> np.ndarray:
    """Columns of mean 0 and mean square 10^U(m.quiet) (one per column; a 1-D array is one column):
    where the mean square (RMSNorm) or the variance (layer norm) is comparable with ε, so that ε
    moves the normalised value by a large fraction (a wrong ε shows in any dtype; on
    well-scaled values a wrong ε went unseen at bfloat16 for 100+ examples)."""
    x = np.empty(shape)
    cols = x.reshape(shape[0], -1) if len(shape) > 1 else x.reshape(-1, 1)
    d, n = cols.shape
    for j in range(n):
        rms = math.sqrt(10.0 ** rng.uniform(*m.quiet))
        z = standardised(rng.standard_normal(d)) if d > 1 else np.array([1.0 if rng.random() < 0.5 else -1.0])
        cols[:, j] = rms * z
    return x


def near_constant_columns(rng: np.random.Generator, shape: tuple[int, ...], m: Magnitudes, *,
                          sign: float = 0.0, pattern: Optional[np.ndarray] = None) -> np.ndarray:
    """Columns c + c·s·z: |c| from ``m.level``, relative spread s log-uniform in
    [m.spread, 0.1], z standardised (mean 0, standard deviation 1).

    A 1-D array is one column. ``sign`` fixes the sign of every c (0: random)
    and ``pattern`` fixes z for every column: sums of such columns (token plus
    position embeddings) then have a relative spread between their columns'.
    """
    x = np.empty(shape)
    cols = x.reshape(shape[0], -1) if len(shape) > 1 else x.reshape(-1, 1)
    d, n = cols.shape
    for j in range(n):
        c = rng.uniform(*m.level) * (sign or (1.0 if rng.random() < 0.5 else -1.0))
        s = 10.0 ** rng.uniform(np.log10(m.spread), -1.0)
        z = standardised(rng.standard_normal(d)) if pattern is None else pattern
        cols[:, j] = c + c * s * z
    return x


def standardised(z: np.ndarray) -> np.ndarray:
    """z with mean 0 and standard deviation 1 (unchanged when it has one entry)."""
    if z.size < 2:
        return z
    z = z - z.mean()
    return z / z.std()


def separate_columns(x: np.ndarray, dtype: str) -> np.ndarray:
    """Make every column with d ≥ 2 entries non-constant after rounding to
    ``dtype`` (a layer norm without ε refuses zero variance): a column whose
    rounded entries are all equal gets its first entry moved by a few ulps."""
    if x.ndim != 2 or x.shape[0] < 2:
        return x
    step = 2.0 ** (3 - FORMATS[dtype].mantissa_bits)
    r = round_to(x, dtype)
    for j in np.flatnonzero(np.all(r == r[:1], axis=0)):
        x[0, j] += max(abs(x[0, j]), 1e-2) * step
    return x


# --------------------------------------------------------------------------
# styles
# --------------------------------------------------------------------------

#: what the values look like (``conformance/core/strategies/_styles.py`` says what each does
#: and which an entry can show)
STYLES = ("well-scaled", "large-logits", "near-constant", "wide-range", "sparse", "near-epsilon", "subnormal")


#: well-scaled models of sampling entries: the largest |logit|, log-uniform in this range
SAMPLING_LOGITS = (2.0, 8.0)


def check_style(style: str) -> str:
    if style not in STYLES:
        raise ValueError(f"style: expected one of {list(STYLES)}, given {style!r}")
    return style


def _check_dtype(dtype: str) -> str:
    if dtype not in FORMATS:
        raise ValueError(f"dtype: expected one of {sorted(FORMATS)}, given {dtype!r}")
    return dtype


# --------------------------------------------------------------------------
# real inputs
# --------------------------------------------------------------------------

def real_input(entry: Entry, spec: Any, hyper: Mapping[str, int], variant: VariantSet, *, seed: int,
               dtype: str = "float64", style: str = "well-scaled") -> np.ndarray:
    """One real input (kind ``real``): "wide-range" draws ±10^U(lo, hi);
    "near-constant" gives near-constant columns to an input whose rows are a
    normalised width, "near-epsilon" columns whose mean square is near ε
    (``quiet_columns``); the other styles draw N(0, 1). An input whose rows
    reach a layer norm never holds a column that rounds to a constant in
    ``dtype``."""
    m = MAGNITUDES[dtype]
    kinds = {n.width: n.kind for n in norms(entry, variant, hyper)}
    shape = resolve_shape(spec.shape, hyper)
    rng = generator(seed, spec.name)
    feeds = spec.shape[0] in kinds if spec.shape else None
    if style == "wide-range":
        x = signed_log_uniform(rng, shape, *m.wide)
    elif style == "near-epsilon" and feeds:
        x = quiet_columns(rng, shape, m)
    elif style == "near-constant" and feeds:
        x = near_constant_columns(rng, shape, m)
    else:
        x = rng.standard_normal(shape)
    if feeds and kinds[spec.shape[0]] == "layer_norm":
        x = separate_columns(x, dtype)
    return x


# --------------------------------------------------------------------------
# parameters
# --------------------------------------------------------------------------

def parameter_role(name: str, shape: tuple) -> str:
    """scale | shift | bias | table | weight. The bare leaves ``W`` and ``b`` are the weight and bias
    of an indexed dense layer (``mlp_hidden.{k}.W``, ``.b`` of ``mlp_depth`` > 1)."""
    part = leaf(name)
    if part.startswith("gamma"):
        return "scale"
    if part.startswith("beta"):
        return "shift"
    if part.startswith("b_") or (part == "b" and len(shape) == 1):
        return "bias"
    if part == "W" and len(shape) == 2:
        return "weight"
    if part.startswith("W_") and len(shape) == 2:
        return "table" if shape[1] in INDEX_LIMITS.values() else "weight"
    raise ValueError(f"no value rule for parameter {name!r} of shape {shape}: "
                     "add its role to parameter_role in conformance/core/values.py")


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
    base = _spec_outputs(entry, hyper, variant, inputs, params)
    if base is None or not any(np.abs(v).max(initial=0.0) > 0 for v in base):
        return
    groups = _groups_from_the_end(symbolic_schema(entry, variant, hyper))
    # which groups the outputs are linear in is a property of the structure: found on its first
    # value set, then taken (a block's further value sets skip up to three evaluations each)
    key = (entry.name, tuple(sorted(hyper.items())), variant.to_json(), dtype)
    known = _LINEAR_GROUPS.get(key, ...)
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


# --------------------------------------------------------------------------
# inputs of every kind, and whole cases
# --------------------------------------------------------------------------

def _exact(x: float, dtype: str) -> np.ndarray:
    return np.array(float(round_to(np.array(x), dtype)))


def _below_one(u: np.ndarray, dtype: str) -> np.ndarray:
    """Variates rounded to ``dtype`` and kept below 1."""
    return np.minimum(round_to(u, dtype), 1.0 - 2.0 ** -FORMATS[dtype].mantissa_bits)


def _mask(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Random, every query column keeping at least one key."""
    m = np.asarray(rng.random(shape) < 0.6)
    m[rng.integers(0, shape[0], size=shape[1]), np.arange(shape[1])] = True
    return m


def _padding(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Right padding of at least one position when there are two or more; position 0 real, so
    no query is left without a key under any convention (the strategies draw the rest)."""
    pad = np.ones(shape, dtype=bool)
    if pad.size >= 2:
        pad.flat[int(rng.integers(1, pad.size)):] = False
    return pad


def _flags(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Random, both values present when there are two positions."""
    f = rng.random(shape) < 0.5
    if f.size >= 2 and (f == f.flat[0]).all():
        f.flat[int(rng.integers(0, f.size))] = not f.flat[0]
    return f


#: one rule per kind: (rng, shape, hyper, spec, dtype) -> array; real inputs are ``real_input``'s
_KIND_RULES: dict[Kind, Callable[..., np.ndarray]] = {
    Kind.TOKEN: lambda rng, shape, h, s, dt: rng.integers(0, h[INDEX_LIMITS[Kind.TOKEN]], size=shape,
                                                          dtype=np.int64),
    Kind.POSITION: lambda rng, shape, h, s, dt: rng.integers(0, h[INDEX_LIMITS[Kind.POSITION]], size=shape,
                                                             dtype=np.int64),
    Kind.MASK: lambda rng, shape, h, s, dt: _mask(rng, shape),
    Kind.FLAG: lambda rng, shape, h, s, dt: _flags(rng, shape),
    Kind.PADDING: lambda rng, shape, h, s, dt: _padding(rng, shape),
    Kind.LENGTH: lambda rng, shape, h, s, dt: rng.integers(1, h[s.bound] + 1, size=shape, dtype=np.int64),
    Kind.VARIATE: lambda rng, shape, h, s, dt: _below_one(rng.random(shape), dt),
    Kind.PROBABILITY: lambda rng, shape, h, s, dt: np.broadcast_to(_exact(0.5, dt), shape).copy(),
    Kind.RATE: lambda rng, shape, h, s, dt: np.broadcast_to(_exact(0.1, dt), shape).copy(),
    Kind.TEMPERATURE: lambda rng, shape, h, s, dt: np.broadcast_to(_exact(1.0, dt), shape).copy(),
    Kind.DISTRIBUTION: lambda rng, shape, h, s, dt: round_to(
        (lambda p: p / p.sum(axis=-1, keepdims=True))(0.05 + rng.random(shape)), dt),
}


def build(entry: Union[str, Entry], hyper: Optional[Mapping[str, int]] = None, variant: VariantSet = PAPER, *,
          seed: int = 0, style: str = "well-scaled", dtype: str = "float64",
          given: Optional[Mapping[str, Any]] = None) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The inputs and flat parameters of one case of ``entry`` (deterministic).

    ``hyper``: default ``default_hyper(entry)``. Real inputs follow ``style``
    (``real_input``); the other kinds: tokens and positions uniform, masks
    random with every query keeping a key, flags random with both values,
    lengths uniform in [1, their bound] (the token rows they measure padded
    with token 0 beyond each length), variates uniform in [0, 1), p_mask
    0.5, η 0.1, τ 1, distributions positive; reals exact in ``dtype``
    where the kind says so. ``given``: {input name: value} replacing a built
    input (lengths given are used for the padding). Parameters:
    ``parameter_values`` aimed at these inputs.
    """
    e = _resolve(entry)
    hp = default_hyper(e, variant) if hyper is None else {k: int(hyper[k]) for k in e.hyper}
    check_style(style)
    _check_dtype(dtype)
    given = dict(given or {})
    unknown = set(given) - {s.name for s in e.inputs}
    if unknown:
        raise ValueError(f"{e.name}: no input {sorted(unknown)}; it has {[s.name for s in e.inputs]}")
    inputs: dict[str, np.ndarray] = {}
    for spec in e.inputs:
        shape = resolve_shape(spec.shape, hp)
        if spec.kind == Kind.REAL:
            value = real_input(e, spec, hp, variant, seed=seed, dtype=dtype, style=style)
        elif spec.kind in _KIND_RULES:
            value = _KIND_RULES[spec.kind](generator(seed, spec.name), shape, hp, spec, dtype)
        else:
            raise ValueError(f"{e.name}: no value rule for input {spec.name!r} of kind {spec.kind!r}")
        if spec.name in given:
            value = np.asarray(given[spec.name], dtype=value.dtype).reshape(shape)
        inputs[spec.name] = value
    for name, length in padded(e).items():  # token 0 beyond each length
        if name not in given:
            for row, n in zip(inputs[name].reshape(-1, inputs[name].shape[-1]), inputs[length].reshape(-1)):
                row[int(n):] = 0
    params = parameter_values(e, hp, variant, seed=seed, dtype=dtype, style=style, inputs=inputs)
    return inputs, params
