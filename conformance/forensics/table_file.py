"""A table file of published numbers (format ``ftspec-table/1``, docs/diagnosis.md
"Identify from a table"), read and validated (``read_table``, ``parse_table``):
an entry's inputs, parameters and printed outputs (or named intermediates), the
outputs' printed precision, optionally the inputs', and the dtype they were
computed in. identify_table.py judges candidate variant sets on it.

A table file is untrusted input, read like a case file (``casefile.py``):
plain JSON only (no serialised objects, nothing imported or executed, NaN and
infinities refused), bounded in size (``LIMITS``), every name and shape checked
against the entry's schema before any array is built; every refusal is a
``TableError`` with a one-line message.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional

import numpy as np

from ftspec.spec import SpecError
from ftspec.spec.evaluation import INTERMEDIATE_FAMILIES, intermediates
from ftspec.spec.entry import Kind
from ftspec.spec.params import resolve_shape
from ftspec.spec.registry import REGISTRY, Entry
from ftspec.spec.variants import PAPER, VariantSet

from ..core.casefile import read_untrusted_json
from ..core.dtypes import FORMATS
from .identify import groups, options, project

__all__ = ["FORMAT", "LIMITS", "Table", "TableError", "parse_table", "read_table"]

FORMAT = "ftspec-table/1"

#: the bounds a table file must keep
LIMITS = {"json_bytes": 1 << 20, "hyper": 1024, "elements": 100_000, "digits": 17, "decimals": 30, "text": 2000}

_PRECISION_KEYS = ("digits", "decimals", "tolerance")
_KEYS = {"format", "algorithm", "hyper", "inputs", "params", "outputs", "dtype", "source", "note",
         *_PRECISION_KEYS, *(f"input_{k}" for k in _PRECISION_KEYS)}
_INTEGER_KINDS = {Kind.TOKEN: "N_V", Kind.POSITION: "ell_max"}


class TableError(ValueError):
    """A table file that is malformed, out of bounds or does not fit its entry."""


@dataclass
class Table:
    """A validated table: float64/int64/bool arrays in the entry's layout."""

    entry: Entry
    hyper: dict[str, int]
    inputs: dict[str, np.ndarray]
    params: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray]
    precision: tuple[str, float]  # ("digits" | "decimals" | "tolerance", value) of the outputs
    input_precision: Optional[tuple[str, float]]  # the same for inputs and parameters; None: exact
    dtype: str = "float32"
    source: str = ""

    def describe(self) -> str:
        kind, value = self.precision
        what = {"digits": f"{value:g} significant digits", "decimals": f"{value:g} decimals",
                "tolerance": f"absolute tolerance {value:g}"}[kind]
        inputs = "exact" if self.input_precision is None else "printed"
        return f"{self.entry.name}, outputs to {what}, inputs {inputs}, computed in {self.dtype}"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _refuse_constant(name: str) -> Any:
    raise TableError(f"{name} is not a number a table may hold (NaN and infinities are refused)")


def read_table(path: Path | str) -> Table:
    """The table in ``path``, validated as untrusted input (``TableError``, one line)."""
    path = Path(path)
    try:
        return _read(path)
    except TableError as exc:
        raise TableError(f"{path}: {exc}") from None


def _read(path: Path) -> Table:
    doc = read_untrusted_json(path, what="table file", limit=LIMITS["json_bytes"], error=TableError,
                              parse_constant=_refuse_constant)
    return parse_table(doc)


def parse_table(doc: Any) -> Table:
    """A table from its JSON document (already parsed)."""
    if not isinstance(doc, dict):
        raise TableError(f"the table file must hold a JSON object, not {type(doc).__name__}")
    if doc.get("format") != FORMAT:
        raise TableError(f"not an ftspec table (format {_show(doc.get('format'))}, expected {FORMAT!r})")
    unknown = sorted(set(doc) - _KEYS)
    if unknown:
        raise TableError(f"unknown fields {[_show(k) for k in unknown[:5]]}; a table has {sorted(_KEYS)}")
    for key in ("source", "note"):
        if key in doc and (not isinstance(doc[key], str) or len(doc[key]) > LIMITS["text"]):
            raise TableError(f"field {key!r} must be a string of at most {LIMITS['text']} characters")
    algorithm = doc.get("algorithm")
    if not isinstance(algorithm, str) or algorithm not in REGISTRY:
        raise TableError(f"unknown algorithm {_show(algorithm)}")
    entry = REGISTRY[algorithm]
    if entry.trace is not None or entry.family == "inference":
        raise TableError(f"{algorithm}: tables of sampled outputs are not supported")
    hyper = _hyper(entry, doc.get("hyper"))
    dtype = doc.get("dtype", "float32")
    if dtype not in FORMATS:
        raise TableError(f"field 'dtype' must be one of {sorted(FORMATS)}, got {_show(dtype)}")
    precision = _precision(doc, "")
    if precision is None:
        raise TableError("give the outputs' printed precision: exactly one of 'digits' (significant), "
                         "'decimals' or 'tolerance' (absolute)")
    input_precision = _precision(doc, "input_")
    try:
        input_shapes = entry.input_shapes(hyper)
    except Exception as exc:  # noqa: BLE001 - sizes the spec cannot resolve
        raise TableError(f"the hyperparameters do not fit {algorithm}: {type(exc).__name__}: {exc}") from None
    total = sum(math.prod(s) for s in input_shapes.values())
    if total > LIMITS["elements"]:
        raise TableError(f"the hyperparameters call for {total} input elements; at most {LIMITS['elements']}")
    kinds = {s.name: s for s in entry.inputs}
    inputs = _arrays(doc.get("inputs"), "inputs", input_shapes, exact=True)
    for name, spec in kinds.items():
        inputs[name] = _kind(name, spec.kind, inputs[name], hyper, spec)
    params_doc = doc.get("params")
    if not isinstance(params_doc, dict) or len(params_doc) > 4096:
        raise TableError("field 'params' must be a JSON object {parameter name: nested list}")
    structure = _structure(entry, hyper, params_doc)
    param_shapes = entry.param_shapes(hyper, structure)
    params = _arrays(params_doc, "params", param_shapes, exact=True)
    params = {k: v.astype(np.float64) for k, v in params.items()}
    out_specs = {s.name: s for s in entry.output_specs(hyper, structure)}
    out_doc = doc.get("outputs")
    if not isinstance(out_doc, dict) or not out_doc:
        raise TableError(f"field 'outputs' must be a non-empty JSON object; {algorithm} outputs "
                         f"{sorted(out_specs)}")
    stray = sorted(set(out_doc) - set(out_specs))
    named = _intermediate_shapes(entry, hyper, inputs, params, structure) if stray else {}
    unknown = [k for k in stray if k not in named]
    if unknown:
        more = (f" and intermediates such as {', '.join(list(named)[:4])} (ftspec spec intermediates {algorithm} "
                "--list)") if named else ""
        raise TableError(f"unknown outputs {', '.join(_show(k) for k in unknown[:5])}; {algorithm} outputs "
                         f"{sorted(out_specs)}{more}")
    out_shapes = {k: (tuple(resolve_shape(out_specs[k].shape, hyper)) if k in out_specs else named[k])
                  for k in out_doc}
    outputs = _arrays(out_doc, "outputs", out_shapes, exact=False)
    outputs = {k: (v.astype(np.float64) if k not in out_specs or out_specs[k].kind == Kind.REAL else v)
               for k, v in outputs.items()}
    return Table(entry, hyper, inputs, params, outputs, precision, input_precision, dtype,
                 str(doc.get("source", "")))


def _intermediate_shapes(entry: Entry, hyper: Mapping[str, int], inputs: Mapping[str, np.ndarray],
                         params: Mapping[str, np.ndarray], structure: VariantSet) -> dict[str, tuple[int, ...]]:
    """The named intermediates a table of ``entry`` may print, with their shapes: those the spec
    records on the table's inputs under the parameters' structure, with either norm and each norm
    placement (the switches that change which names exist without changing the parameters)."""
    if entry.family not in INTERMEDIATE_FAMILIES:
        return {}
    outputs = {s.name for s in entry.outputs}
    spec_in = {k: v.tolist() for k, v in inputs.items()}
    spec_par = {k: v.tolist() for k, v in params.items()}
    shapes: dict[str, tuple[int, ...]] = {}
    for norm in ("layer_norm", "rms_norm"):
        for placement in ("paper", "post", "pre", "res_post", "sandwich"):
            try:
                v = structure.replace(norm=norm, norm_placement=placement)
                values = intermediates(entry.name, spec_in, spec_par, hyper=dict(hyper), variant=v)
            except (SpecError, ValueError):
                continue
            for k, x in values.items():
                if k not in outputs:
                    shapes.setdefault(k, tuple(np.shape(x)))
    return shapes


def _hyper(entry: Entry, value: Any) -> dict[str, int]:
    if not isinstance(value, dict) or set(value) != set(entry.hyper):
        got = sorted(map(str, value)) if isinstance(value, dict) else _show(value)
        raise TableError(f"field 'hyper' must give exactly {entry.name}'s hyperparameters "
                         f"{', '.join(entry.hyper)}; got {got}")
    out = {}
    for k in entry.hyper:
        v = value[k]
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= LIMITS["hyper"]:
            raise TableError(f"hyperparameter {k} must be an integer from 1 to {LIMITS['hyper']}, got {_show(v)}")
        out[k] = v
    return out


def _precision(doc: Mapping[str, Any], prefix: str) -> Optional[tuple[str, float]]:
    given = [k for k in _PRECISION_KEYS if prefix + k in doc]
    if not given:
        return None
    if len(given) > 1:
        raise TableError(f"give one of {', '.join(prefix + k for k in _PRECISION_KEYS)}, not {len(given)}")
    key = given[0]
    value = doc[prefix + key]
    if key == "tolerance":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
            raise TableError(f"field {prefix + key!r} must be a positive number, got {_show(value)}")
        return key, float(value)
    high = LIMITS[key]
    low = 1 if key == "digits" else 0
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise TableError(f"field {prefix + key!r} must be an integer from {low} to {high}, got {_show(value)}")
    return key, float(value)


def _arrays(doc: Any, what: str, shapes: Mapping[str, tuple[int, ...]], *, exact: bool) -> dict[str, np.ndarray]:
    """{name: array} with exactly the given names (``exact``) or a subset, each of its shape."""
    if not isinstance(doc, dict):
        raise TableError(f"field {what!r} must be a JSON object {{name: nested list}}")
    if exact and set(doc) != set(shapes):
        missing, extra = sorted(set(shapes) - set(doc)), sorted(set(doc) - set(shapes))
        raise TableError(f"field {what!r} must hold exactly {sorted(shapes)[:8]}"
                         f"{' ...' if len(shapes) > 8 else ''} (missing {missing[:5]}, unexpected "
                         f"{[_show(x) for x in extra[:5]]})")
    out = {}
    for name, value in doc.items():
        out[name] = _array(value, shapes[name], f"{what} {name!r}")
    return out


def _array(value: Any, shape: tuple[int, ...], what: str) -> np.ndarray:
    flat: list[Any] = []

    def walk(v: Any, depth: int) -> None:
        if depth == len(shape):
            if isinstance(v, bool) or isinstance(v, (int, float)):
                flat.append(v)
                return
            raise TableError(f"{what}: expected numbers {_dims(shape)}, found {_show(v)}")
        if not isinstance(v, list) or len(v) != shape[depth]:
            raise TableError(f"{what}: expected shape {_dims(shape)} (axis {depth} of length {shape[depth]})")
        for x in v:
            walk(x, depth + 1)

    walk(value, 0)
    if all(isinstance(x, bool) for x in flat) and flat:
        return np.array(flat, dtype=bool).reshape(shape)
    arr = np.array([float(x) for x in flat], dtype=np.float64).reshape(shape)
    if not np.all(np.isfinite(arr)):
        raise TableError(f"{what}: every number must be finite")
    return arr


def _dims(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]" if shape else "a scalar"


def _kind(name: str, kind: Kind, a: np.ndarray, hyper: Mapping[str, int], spec: Any) -> np.ndarray:
    """An input of its kind: integers in range for tokens, positions, lengths; booleans for masks."""
    if kind in (Kind.TOKEN, Kind.POSITION, Kind.LENGTH):
        if a.dtype == bool or np.any(a != np.round(a)):
            raise TableError(f"input {name!r}: expected integers")
        limit = hyper[_INTEGER_KINDS[kind]] if kind in _INTEGER_KINDS else hyper[spec.bound] + 1
        low = 1 if kind == Kind.LENGTH else 0
        if a.size and (a.min() < low or a.max() >= limit):
            raise TableError(f"input {name!r}: values must lie in [{low}, {limit - 1}]")
        return a.astype(np.int64)
    if kind in (Kind.MASK, Kind.FLAG, Kind.PADDING):
        if a.dtype != bool:
            if np.any((a != 0) & (a != 1)):
                raise TableError(f"input {name!r}: expected true/false (or 1/0)")
            a = a.astype(bool)
        return a
    if a.dtype == bool:
        raise TableError(f"input {name!r}: expected numbers, found true/false")
    return a.astype(np.float64)


def _structure(entry: Entry, hyper: Mapping[str, int], params: Mapping[str, Any]) -> VariantSet:
    """A variant set whose parameters are the names the table gives: from the paper's, switches that
    change the parameter set moved one at a time while that brings the names closer."""
    given = set(params)

    def distance(v: VariantSet) -> int:
        try:
            return len(set(entry.param_shapes(dict(hyper), v)) ^ given)
        except (SpecError, KeyError, ValueError):
            return 1 << 30

    current = project(PAPER, entry)
    best = distance(current)
    for _ in range(4):
        moved = False
        for g in groups(entry):
            for opt in options(g):
                try:
                    cand = current.replace(**opt)
                except ValueError:
                    continue
                d = distance(cand)
                if d < best:
                    current, best, moved = cand, d, True
        if best == 0 or not moved:
            break
    if best:
        want = sorted(entry.param_shapes(dict(hyper), current))
        raise TableError(f"the parameters given ({len(given)}) match no variant set's parameters for {entry.name}; "
                         f"nearest: {want[:6]}{' ...' if len(want) > 6 else ''}")
    return current
