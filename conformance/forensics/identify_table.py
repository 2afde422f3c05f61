"""Identifying conventions from published numbers (``ftspec identify --table``).

Papers, tutorials and blog posts print an entry's inputs, parameters and
outputs to a few digits. A table file (format ``ftspec-table/1``,
docs/diagnosis.md "Identify from a table") holds them as JSON with the printed
precision of the outputs (significant ``digits``, ``decimals``, or an absolute
``tolerance``), optionally that of the inputs and parameters, and the dtype
the numbers were computed in. The spec is then evaluated under candidate
variant sets exactly as ``ftspec identify`` does for an implementation
(``identify.search``); only the judge differs: an output fits when

    |printed − spec| ≤ printed half-step + the dtype's rounding bound
                       + how far the input precision moves the output

the last term a *bound*, not a sample (``input_rounding.enclose``): when the table gives
the inputs' printed precision, the spec's outputs are enclosed, element by element, for every
point of the box where each real input and parameter lies anywhere within its printed half-step
(plus its rounding to the dtype): interval arithmetic through the spec's number-system protocol,
intersected with the mean-value form over the spec's own interval derivatives (the module's
docstring says why that is sound and why sampling was not: 8 random nudges underestimated the
movement and excluded seed 004's own ν = 1e-4). A candidate is *excluded* only
when some printed output lies outside its whole interval widened by the output's half-step and
the dtype's rounding bound; every other candidate remains possible. A switch is *decided* only
when every value but one is excluded (or needs parameters the table does not give); with several
left it is *undecided* and the report lists the values that remain possible. A candidate whose
outputs cannot be bounded (the spec branches differently within the box, the enclosure is
infinite, or it is wider than the printed numbers themselves: ``_informative``) is *cannot tell*:
neither a fit nor excluded, never reported as fitting (random numbers with printed inputs were
once "declare: PAPER (fits every case)"); a table on which nothing could be judged says so.

The printed outputs may also be the entry's named intermediates (``ftspec spec intermediates
ENTRY --list``; docs/plugins.md "Named intermediates"): an attention head's Q, K, V, scores S
and weights A, a norm's mu and sigma, the MLP's hidden layer, a layer's residual sums, ... as a
tutorial prints them step by step. Each is judged as an output is: against the spec's value
under the candidate, within its half-step, the Monte Carlo bound of that value at the table's
dtype (``core/intermediates.py``) and its enclosure over the inputs' intervals. A candidate that
does not compute a printed intermediate (``rms`` under layer norm, ``mlp.lin`` without a gated
MLP) does not fit.

A table file is untrusted input, read like a case file (``casefile.py``):
plain JSON only (no serialised objects, nothing imported or executed, NaN and infinities
refused), bounded in size, every name and shape checked against the entry's
schema before any array is built; every refusal is a ``TableError`` with a
one-line message. Reading and validating it is table_file.py's (``read_table``,
``parse_table``, re-exported here); this module judges the candidates on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from ftspec.spec import SpecError, evaluate
from ftspec.spec.evaluation import intermediates
from ftspec.spec.entry import Kind
from ftspec.spec.registry import REGISTRY, Entry
from ftspec.spec.variants import VariantSet

from ..core.dtypes import FORMATS, round_to
from ..core.intermediates import intermediate_references
from ..core.tolerances import ToleranceModelError
from .identify import EVALUATIONS, SECONDS, Fit, Identity, Observation, search, value_text
from .input_rounding import Enclosure, enclose, refuses_the_box
from .table_file import FORMAT, LIMITS, Table, TableError, _structure, parse_table, read_table

__all__ = ["FORMAT", "LIMITS", "Table", "TableError", "half_step", "identify_table", "input_radii", "parse_table",
           "read_table", "table_from_spec"]


# -- judging ------------------------------------------------------------------------------------

def half_step(values: np.ndarray, precision: tuple[str, float]) -> np.ndarray:
    """The printed precision of each value: half a unit in the last printed place. With significant
    ``digits`` a printed 0 gets the step of the largest |value| of its array (a zero printed among
    numbers of that size)."""
    kind, p = precision
    v = np.asarray(values, dtype=np.float64)
    if kind == "tolerance":
        return np.full(v.shape, p)
    if kind == "decimals":
        return np.full(v.shape, 0.5 * 10.0 ** -p)
    mag = np.abs(v)
    top = float(mag.max()) if mag.size else 0.0
    mag = np.where(mag > 0, mag, top if top > 0 else 1.0)
    return 0.5 * 10.0 ** (np.floor(np.log10(mag)) - p + 1)


def input_radii(table: Table, values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """How far each printed real input or parameter in ``values`` may lie from its printed value:
    its half-step, plus its rounding to the table's dtype (the numbers the source computed with
    were ``dtype`` values that print as the table does)."""
    assert table.input_precision is not None
    unit = 2.0 ** (1 - FORMATS[table.dtype].mantissa_bits)
    return {k: half_step(v, table.input_precision) + np.abs(v) * unit for k, v in values.items()}


def _enclosure(table: Table, variant: VariantSet, names: Sequence[str], params: Mapping[str, np.ndarray],
               raw_params: Mapping[str, np.ndarray]) -> tuple[Optional[Enclosure], str]:
    """The candidate's outputs over the printed inputs' intervals (``input_rounding.enclose``);
    (None, why) where they cannot be bounded."""
    real = {s.name for s in table.entry.inputs if s.kind == Kind.REAL}
    moved = {k: v for k, v in table.inputs.items() if k in real}
    used = {k: raw_params[k] for k in params}
    radii = input_radii(table, {**moved, **used})
    enclosure = enclose(table.entry, table.hyper, table.inputs, used, radii, variant, names)
    if enclosure is None:
        return None, "the spec branches (or refuses) differently within the printed inputs' intervals"
    return enclosure, ""


def _with_intermediates(table: Table, ref: Any, inputs: Mapping[str, np.ndarray], variant: VariantSet,
                        params: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, Any], str]:
    """(values, bounds, why not) of every printed name under the candidate: the entry's outputs from
    ``ref``, the printed intermediates with their Monte Carlo bounds; a name the candidate does not
    compute gets NaN (``why not`` names it)."""
    values, bounds = dict(ref.outputs), dict(ref.bound)
    wanted = [k for k in table.outputs if k not in values]
    if not wanted:
        return values, bounds, ""
    named = intermediate_references(table.entry, inputs, params, hyper=table.hyper, variant=variant,
                                    dtype=table.dtype)
    missing = ""
    for k in wanted:
        if k in named and named[k].shape == table.outputs[k].shape:
            values[k], bounds[k] = named[k].value, named[k].bound
        else:
            values[k], bounds[k] = np.full(table.outputs[k].shape, np.nan), np.zeros(table.outputs[k].shape)
            missing = missing or k
    return values, bounds, missing


def _table_judge(table: Table, raw_params: Mapping[str, np.ndarray], unbounded: dict[str, str],
                 inputs: Optional[Mapping[str, np.ndarray]] = None) -> Any:
    """The judge of a table: a candidate is excluded only when some printed output lies outside
    the candidate's whole interval (its outputs over the inputs' intervals, widened by the dtype's
    rounding bound and the output's own half-step). ``unbounded`` collects the candidates whose
    outputs could not be bounded: nothing was tested of them, so they are neither excluded nor a
    fit (``Fit.unknown``: "cannot tell"), unless an exact output or a NaN already excludes
    them. ``inputs``: the judged (rounded) inputs, for the printed intermediates' values."""
    def judge(ref: Any, variant: VariantSet, params: Mapping[str, np.ndarray]) -> Fit:
        try:
            values, bounds, missing = _with_intermediates(table, ref, table.inputs if inputs is None else inputs,
                                                          variant, params)
        except (SpecError, ToleranceModelError) as exc:
            return Fit(False, math.inf, None, f"no intermediates: {exc}")
        if missing:
            return Fit(False, math.inf, values, f"computes no intermediate {missing!r}", impossible=True)
        ref = _Merged(values, bounds)
        real = [k for k, v in table.outputs.items() if v.dtype != bool and np.asarray(ref.outputs[k]).dtype.kind == "f"]
        enclosure = None
        if table.input_precision is not None and real:
            enclosure, why = _enclosure(table, variant, real, params, raw_params)
            if enclosure is None:
                unbounded[variant.describe()] = why
        worst, centres, allowances, unknown = 0.0, {}, {}, False
        for name, printed in table.outputs.items():
            want = np.asarray(ref.outputs[name])
            if name not in real:
                if not np.array_equal(printed.astype(want.dtype), want):
                    return Fit(False, math.inf, ref.outputs, allowance={name: 0.0}, centre={name: want})
                centres[name], allowances[name] = want, 0.0
                continue
            if np.isnan(want).any():  # a table holds no NaN: no table of these sizes fits the candidate
                return Fit(False, math.inf, ref.outputs, "the spec gives NaN where the table has a number",
                               impossible=True)
            if table.input_precision is not None and enclosure is None:
                unknown = True  # no bound: this output can neither exclude the candidate nor fit it
                continue
            centre = want if enclosure is None else enclosure.centre(name)
            radius = 0.0 if enclosure is None else enclosure.radius(name)
            # a printed value fits where it lies within this of the centre; two candidates whose
            # intervals are apart by more than both allowances are separated by the table
            allowance = half_step(printed, table.precision) + ref.bound[name] + radius
            bounded = np.ones(np.shape(printed), dtype=bool) if enclosure is None else _informative(
                enclosure, name, printed, table.precision)
            if not bounded.all():  # a vacuous enclosure bounds nothing: those elements cannot fit
                unknown = True
                centre = np.where(bounded, centre, np.nan)
                allowance = np.where(bounded, allowance, np.inf)
            centres[name], allowances[name] = centre, allowance
            err = np.abs(printed - centre)[bounded]
            worst = max(worst, float(np.max(err / allowance[bounded])) if err.size else 0.0)
        if worst > 1.0:  # a bounded output already excludes it
            return Fit(False, worst, ref.outputs, allowance=allowances, centre=centres)
        if unknown:  # some printed number was compared with no bound
            unbounded.setdefault(variant.describe(), "the bound over the printed inputs' intervals is infinite or "
                                 "wider than the printed values")
            return Fit(False, math.nan, ref.outputs, "not bounded: cannot tell", unknown=True)
        return Fit(True, worst, ref.outputs, allowance=allowances, centre=centres)

    return judge


def _informative(enclosure: Enclosure, name: str, printed: np.ndarray, precision: tuple[str, float]) -> np.ndarray:
    """Where the enclosure of output ``name`` says something about the printed numbers: finite, and
    its radius (how far the printed inputs may move the output, as far as the bound can tell)
    below the size of every number the table prints for that output (its largest magnitude plus
    a half-step). A wider one holds a sign flip of the largest printed value: any numbers of that
    size would fit it as well as these, so it can neither confirm a candidate nor exclude one
    (interval arithmetic through a variance that may be near 0 gives such bounds: sound, vacuous)."""
    radius = enclosure.radius(name)
    size = (float(np.max(np.abs(printed))) if printed.size else 0.0) + float(np.max(half_step(printed, precision),
                                                                                   initial=0.0))
    with np.errstate(invalid="ignore"):
        return enclosure.bounded(name) & (radius < size)


def _table_refusal(table: Table, raw_params: Mapping[str, np.ndarray], unbounded: dict[str, str]) -> Any:
    """What the spec's refusal of the printed point means for a candidate: with exact inputs, the
    refusal (a table of numbers fits no refusing candidate); with printed inputs, the same only
    where the spec refuses the whole box of the inputs' half-steps, else "cannot tell" (other
    points in the half-steps are answered, and the numbers may come from one of them)."""
    if table.input_precision is None:
        return None

    def on_refusal(variant: VariantSet, params: Mapping[str, np.ndarray]) -> Optional[Fit]:
        real = {s.name for s in table.entry.inputs if s.kind == Kind.REAL}
        used = {k: raw_params[k] for k in params}
        radii = input_radii(table, {**{k: v for k, v in table.inputs.items() if k in real}, **used})
        names = [k for k, v in table.outputs.items() if v.dtype != bool]
        if refuses_the_box(table.entry, table.hyper, table.inputs, used, radii, variant, names):
            return None
        unbounded.setdefault(variant.describe(), "the spec refuses the printed point, not the whole of the "
                             "inputs' half-steps")
        return Fit(False, math.nan, None, "refuses the printed point only: cannot tell", unknown=True)

    return on_refusal


@dataclass
class _Merged:
    """A reference's outputs and bounds with the printed intermediates added (for the judge)."""

    outputs: dict[str, np.ndarray]
    bound: dict[str, Any]


def identify_table(table: Table, subject: str = "table", *, seconds: float = SECONDS,
                   evaluations: int = EVALUATIONS) -> Identity:
    """Which variant sets reproduce the table's outputs within its printed precision."""
    entry = table.entry
    structure = _structure(entry, table.hyper, table.params)
    real = {s.name for s in entry.inputs if s.kind == Kind.REAL}
    inputs = {k: (round_to(v, table.dtype) if k in real else v) for k, v in table.inputs.items()}
    params = {k: round_to(v, table.dtype) for k, v in table.params.items()}
    unbounded: dict[str, str] = {}
    obs = Observation("the table", entry, dict(table.hyper), inputs, params, dict(table.outputs), table.dtype,
                      judge=_table_judge(table, table.params, unbounded, inputs), rigorous=True,
                      on_refusal=_table_refusal(table, table.params, unbounded))
    identity = search(entry, [obs], structure, subject, table.dtype, seconds=seconds, evaluations=evaluations)
    identity.notes.insert(0, f"table: {table.describe()}")
    identity.notes.extend(_notes(table, identity, unbounded))
    return identity


def _notes(table: Table, identity: Identity, unbounded: Mapping[str, str]) -> list[str]:
    """What "decided" rests on, what remains possible, and what could not be bounded."""
    out = []
    if table.input_precision is not None:
        out.append("inputs printed: a value is excluded only when a printed output lies outside its whole "
                   "interval over the inputs' half-steps (a bound, not a sample)")
    for g in identity.groups:
        # possible and judged, the values that are the same computation here counted once
        fitting = [g.chosen] + [v for v in g.alternatives if v not in g.cannot_tell]
        if g.status != "undecided" or len(fitting) < 2:
            continue
        if not g.excluded:
            out.append(f"cannot be separated at this precision: {g.group}: all {len(fitting)} values "
                       f"judged remain possible")
        else:
            values = ", ".join(value_text(g.group, v) for v in fitting[:6])
            more = f" (+{len(fitting) - 6} more)" if len(fitting) > 6 else ""
            out.append(f"cannot be separated at this precision: {g.group}: still possible {values}{more}")
    if unbounded:
        some = sorted(unbounded)
        out.append(f"cannot tell (not bounded: {unbounded[some[0]]}; neither a fit nor excluded): "
                   f"{'; '.join(some[:3])}{f' (+{len(some) - 3} more)' if len(some) > 3 else ''}")
    if identity.untested:
        out.append("nothing was tested: the printed inputs leave every candidate's outputs unbounded, so no "
                   "variant set can be said to fit or not (print the inputs to more digits, or give them exact)")
    return out


# -- making tables (tests, examples) --------------------------------------------------------------

def table_from_spec(entry: Entry | str, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray],
                    hyper: Mapping[str, int], variant: VariantSet, *, digits: Optional[int] = None,
                    decimals: Optional[int] = None, dtype: str = "float64", source: str = "",
                    names: Optional[Sequence[str]] = None) -> dict[str, Any]:
    """A table document: the spec's outputs under ``variant`` printed to ``digits`` significant digits
    or ``decimals`` places (one of them), inputs and parameters exact. ``names``: print these
    outputs or named intermediates instead of the entry's outputs."""
    if (digits is None) == (decimals is None):
        raise ValueError("give digits or decimals")
    e = REGISTRY[entry] if isinstance(entry, str) else entry
    run = evaluate if names is None else intermediates
    out = run(e.name, {k: np.asarray(v).tolist() for k, v in inputs.items()},
              {k: np.asarray(v).tolist() for k, v in params.items()}, hyper=dict(hyper), variant=variant)
    if names is not None:
        out = {k: out[k] for k in names}
    fmt = f".{digits}g" if digits is not None else f".{decimals}f"
    printed = {k: _print(np.asarray(v, dtype=np.float64), fmt) for k, v in out.items()}
    doc: dict[str, Any] = {"format": FORMAT, "algorithm": e.name, "hyper": dict(hyper),
                           "inputs": {k: np.asarray(v).tolist() for k, v in inputs.items()},
                           "params": {k: np.asarray(v).tolist() for k, v in params.items()},
                           "outputs": printed, "dtype": dtype}
    doc.update({"digits": digits} if digits is not None else {"decimals": decimals})
    if source:
        doc["source"] = source
    return doc


def _print(a: np.ndarray, fmt: str) -> Any:
    """Values as they print with ``fmt`` (``.3g``, ``.3f``), as nested lists of numbers."""
    if not a.size:
        return a.tolist()
    return np.vectorize(lambda x: float(format(float(x), fmt)))(a).tolist()
