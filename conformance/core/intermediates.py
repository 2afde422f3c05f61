"""Each named intermediate of the spec with its Monte Carlo bound.

``spec.evaluation.intermediates`` returns the values the spec computes on the
way to an entry's outputs (``layers.0.attn.heads.1.Q``, ``final_norm.sigma``,
..., docs/plugins.md "Named intermediates"). Here each gets the tolerance the
harness gives an output (``tolerances.reference``): the spec in binary64
(``FLOAT``) is the value, and the same evaluation in Monte Carlo arithmetic
of the dtype gives its rounding spread s, the largest deviation of a lane
from lane 0; the bound is SAFETY × s. It is one evaluation, with the seed
``reference`` uses, so the entry's outputs get exactly the bounds
``reference`` gives them (recording changes no arithmetic), and every
intermediate the bound of the same lanes: what an implementation that
computes the entry in that dtype may depart from the value, there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ftspec.spec.evaluation import intermediates
from ftspec.spec.registry import Entry
from ftspec.spec.variants import VariantSet

from .rounding import lanes_array
from .tolerances import LANES, SAFETY, ToleranceModelError, _lists, _numbers, _seed

__all__ = ["Intermediate", "intermediate_references"]


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
    exact = {s.name for s in entry.output_specs(hyper, variant) if not s.is_real}
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
        out[name] = Intermediate(name, v, safety * s, s, dtype)
    return out
