"""One drawn test case: what the strategies produce and the runner judges.

A case is plain data (NumPy arrays, ints, a variant set), so it can be
written to a replayable case file (JSON + safetensors only, no serialised
Python objects) and read back bit for bit (``conformance/core/casefile.py``).
It is the one case class: the strategies draw it, the plugin tests, the
zoo's witnesses and the spec's self-tests build it with
``conformance/core/values/`` (``Case.build``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ftspec.spec.registry import Entry, entry
from ftspec.spec.variants import PAPER, VariantSet

from .values import build, default_hyper

__all__ = ["Case"]


@dataclass
class Case:
    """Inputs and parameters of one example, before rounding to a dtype.

    ``inputs``: {input name: array} (reals float64, tokens/positions int64,
    masks bool with True = may attend, in the canonical layout).
    ``params``: {flat parameter name: float64 array}.
    ``batch``: further input sets with the same hyperparameters and
    parameters; when non-empty the runner also makes one batched call on
    [inputs] + batch and compares it with per-example calls.
    ``style``: which parameter/input family drew it (for reports).
    """

    algorithm: str
    hyper: dict[str, int]
    variant: VariantSet
    inputs: dict[str, np.ndarray]
    params: dict[str, np.ndarray]
    batch: list[dict[str, np.ndarray]] = field(default_factory=list)
    style: str = "well-scaled"

    @classmethod
    def build(cls, algorithm: str | Entry, hyper: dict[str, int] | None = None, variant: VariantSet = PAPER,
              *, seed: int = 0, style: str = "well-scaled", dtype: str = "float64",
              given: dict[str, Any] | None = None) -> Case:
        """The deterministic case of ``conformance.values.build`` (same arguments)."""
        e = entry(algorithm) if isinstance(algorithm, str) else algorithm
        hp = default_hyper(e, variant) if hyper is None else {k: int(hyper[k]) for k in e.hyper}
        inputs, params = build(e, hp, variant, seed=seed, style=style, dtype=dtype, given=given)
        return cls(e.name, hp, variant, inputs, params, style=style)

    @property
    def entry(self) -> Entry:
        return entry(self.algorithm)

    @property
    def id(self) -> str:
        """``algorithm[variant]``: a short name for test ids and messages."""
        return f"{self.algorithm}[{self.variant.describe()}]"

    def spec_inputs(self) -> dict[str, Any]:
        """The inputs as nested lists, for ``ftspec.spec.evaluate``."""
        return {k: v.tolist() for k, v in self.inputs.items()}

    def spec_params(self) -> dict[str, Any]:
        """The parameters as nested lists, for ``ftspec.spec.evaluate``."""
        return {k: v.tolist() for k, v in self.params.items()}

    def describe(self) -> str:
        """Shapes and settings, for failure messages."""
        shapes = ", ".join(f"{k}{tuple(v.shape)}" for k, v in self.inputs.items())
        hyper = ", ".join(f"{k}={v}" for k, v in self.hyper.items())
        extra = f", batch of {1 + len(self.batch)}" if self.batch else ""
        return (f"{self.algorithm}({shapes}) with {hyper}; variant {self.variant.describe()}; "
                f"{len(self.params)} parameters ({self.style}{extra})")

    def __repr__(self) -> str:
        return f"Case<{self.describe()}>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        """Hypothesis's printer: the compact form, not every array."""
        p.text(repr(self))

    def size(self) -> int:
        """Number of scalars in inputs and parameters (a shrinking measure)."""
        return int(sum(v.size for v in self.inputs.values()) + sum(v.size for v in self.params.values())
                   + sum(v.size for b in self.batch for v in b.values()))

    def summary(self) -> dict[str, Any]:
        return {
            "algorithm": self.algorithm,
            "hyper": dict(self.hyper),
            "variant": self.variant.describe(),
            "variant_hash": self.variant.hash,
            "style": self.style,
            "batch": 1 + len(self.batch),
            "scalars": self.size(),
        }
