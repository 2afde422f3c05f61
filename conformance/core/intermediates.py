"""Each named intermediate of the spec with its Monte Carlo bound.

``spec.evaluation.intermediates`` returns the values the spec computes on the
way to an entry's outputs (``layers.0.attn.heads.1.Q``, ``final_norm.sigma``,
..., docs/plugins.md "Named intermediates"). Here each gets the tolerance the
harness gives an output (``tolerances.reference``): the spec in binary64
(``FLOAT``) is the value, and the same evaluation in Monte Carlo arithmetic
of the dtype gives its rounding spread s, the largest deviation of a lane
from lane 0; the bound is SAFETY × s. It is one evaluation, with the seed
``reference`` uses, so the entry's outputs get exactly the bounds
``reference`` gives them (recording changes no arithmetic; ``output_bound``:
their own rounding as a floor, a softmax's on the log scale too), and every
intermediate the bound of the same lanes: what an implementation that
computes the entry in that dtype may depart from the value, there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

import numpy as np

from ftspec.spec.evaluation import intermediates
from ftspec.spec.registry import Entry
from ftspec.spec.variants import VariantSet

from .rounding import lanes_array
from .tolerances import LANES, SAFETY, ToleranceModelError, _lists, _numbers, _seed, output_bound

__all__ = ["MAX_SIZE", "MAX_WORK", "Intermediate", "check_sizes", "intermediate_references", "work"]

#: the largest size a hyperparameter may take here: a case file's bound (casefile.LIMITS["hyper"])
MAX_SIZE = 1024
#: the most ``work`` a call computes. The spec runs in pure Python, and the Monte Carlo evaluation
#: holds each value in LANES lanes, with arrays as large as ℓ × d × d × LANES (a norm over every
#: column); measured on 2 cores, gpt2_layer at ℓ = d_e = 64 (work 524,288) takes 6 s and 0.4 GB,
#: at ℓ = d_e = d_mlp = 100 (work 2,000,000) 28 s and 1.2 GB, and at ℓ = d_e = 1000 it asks
#: NumPy for 246 GiB. Case files and tables stop at 4,000,000 and 100,000 elements before
#: anything is computed (casefile.py, identify_table.py); this is that bound for the work.
MAX_WORK = 1 << 20


def _kind(name: str) -> str:
    """How a hyperparameter enters ``work`` (the registry's names, spec/registry.py)."""
    if name == "ell_max":
        return "context"  # only the position table's width: no product runs over it
    if name == "T" or name == "ell" or name.startswith("ell_") and name != "ell_gen":
        return "length"
    if name.startswith("d_") or name == "N_V":
        return "width"
    if name == "L" or name.startswith("L_"):
        return "layers"
    return "repeat"  # H, N, N_epochs, ell_gen: the computation again, once per head, sequence, step


def work(hyper: Mapping[str, int]) -> int:
    """An estimate of the spec's work on a case of these sizes: the largest length × the largest
    width × the larger of those two again (a matrix product or a norm over every column), times
    the layers (summed over the stacks) and the repeats (heads, sequences, epochs, generated
    tokens). Monotone in every size, so a bound on it bounds time and memory together."""
    sizes: dict[str, list[int]] = {}
    for name, value in hyper.items():
        sizes.setdefault(_kind(name), []).append(int(value))
    length = max(sizes.get("length", [1]))
    width = max(sizes.get("width", [1]))
    total = length * width * max(length, width) * max(1, sum(sizes.get("layers", [])))
    for r in sizes.get("repeat", []):
        total *= max(1, r)
    return total


def check_sizes(entry: Entry, hyper: Mapping[str, Any], *, given: Optional[Mapping[str, Any]] = None) -> None:
    """Refuse (ValueError, one line) sizes this evaluation should not start on: a hyperparameter
    below the entry's least value or above ``MAX_SIZE``, or a case whose ``work`` exceeds
    ``MAX_WORK``. ``given``: the sizes as the user typed them, checked before the variant fits them."""
    for name, value in {**dict(hyper), **dict(given or {})}.items():
        least = int(entry.minimum.get(name, 1))
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not least <= value <= MAX_SIZE:
            raise ValueError(f"{entry.name}: {name} = {value} is out of range: a size is a whole number from "
                             f"{least} to {MAX_SIZE}")
    w = work(hyper)
    if w > MAX_WORK:
        shown = ", ".join(f"{k}={v}" for k, v in hyper.items())
        raise ValueError(f"{entry.name} with {shown} is too large to evaluate here: about {w:,} steps (the "
                         f"largest length × width × the larger again, × layers and heads), more than "
                         f"{MAX_WORK:,}; choose smaller sizes")


@dataclass
class Intermediate:
    """One named value: the spec's binary64 value and its tolerance at a dtype, per element."""

    name: str
    value: np.ndarray  # float64 (−∞ where a score is masked)
    bound: np.ndarray  # SAFETY × spread
    spread: np.ndarray  # the largest |lane − lane 0| over the Monte Carlo lanes
    dtype: str

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.value.shape)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON: −∞ as the string "-inf")."""
        return {"name": self.name, "shape": list(self.shape), "value": _plain(self.value),
                "bound": _plain(self.bound), "dtype": self.dtype}


def _plain(a: np.ndarray) -> Any:
    def one(x: float) -> Any:
        return x if np.isfinite(x) else ("nan" if np.isnan(x) else ("inf" if x > 0 else "-inf"))

    if a.ndim == 0:
        return one(float(a))
    return [_plain(row) for row in a] if a.ndim > 1 else [one(float(x)) for x in a]


def intermediate_references(entry: Entry, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray], *,
                            hyper: Mapping[str, int], variant: VariantSet, dtype: str,
                            precision: str = "highest") -> dict[str, Intermediate]:
    """Every named intermediate of ``entry`` on inputs already rounded to ``dtype``, then its real
    outputs, each with its value and bound (module docstring), in the order computed.

    Raises ``SpecError`` if the spec refuses the inputs (or the entry records no intermediates),
    ``ToleranceModelError`` if the lanes of a value become NaN where its binary64 value is a number.
    """
    spec_in, spec_par = _lists(inputs), _lists(params)
    ref = intermediates(entry.name, spec_in, spec_par, hyper=hyper, variant=variant)
    mc = _numbers(entry, dtype, precision, _seed(entry, inputs, params, variant, dtype))
    with np.errstate(all="ignore"):
        lanes = intermediates(entry.name, spec_in, spec_par, hyper=hyper, variant=variant, numbers=mc)
    specs = entry.output_specs(hyper, variant)
    exact = {s.name for s in specs if not s.is_real}
    scale = {s.name: s.scale for s in specs if s.is_real}  # an output: exactly the bound ``reference`` gives
    safety = SAFETY[dtype]
    out: dict[str, Intermediate] = {}
    for name, value in ref.items():
        if name in exact:
            continue
        v = np.asarray(value, dtype=np.float64)
        arr = lanes_array(lanes[name], LANES)
        lost = ~np.isnan(arr[..., 0]) & np.isnan(arr[..., 1:]).any(axis=-1)
        if lost.any():  # a modelling failure must be loud, never a zero tolerance
            at = [int(i) for i in np.argwhere(lost)[0]]
            raise ToleranceModelError(f"{entry.name}: Monte Carlo lanes of intermediate {name!r} became NaN at "
                                      f"{at} where the binary64 value is {float(v[tuple(at)])!r}")
        with np.errstate(invalid="ignore"):
            s = np.max(np.abs(arr[..., 1:] - arr[..., :1]), axis=-1)
        s = np.where(np.isnan(s), 0.0, s)  # −∞ in every lane (a masked score), or the spec's own NaN
        bound = output_bound(v, arr, s, safety=safety, dtype=dtype, scale=scale[name]) if name in scale else safety * s
        out[name] = Intermediate(name, v, bound, s, dtype)
    return out
