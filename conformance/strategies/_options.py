"""Size budgets and the eager validation of the strategies' options.

A budget bounds every hyperparameter by its *kind* (a width, a sequence
length, a head count, ...), so one example of the pure-Python spec stays
fast. The kind of a hyperparameter is read from its name (the registry's
names: ``d_*`` widths, ``ell*`` lengths, ``L*`` layer counts, ...); that
table is the only per-name knowledge the strategies hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from ftspec.spec.registry import REGISTRY, Entry

from ..dtypes import FORMATS

__all__ = ["BUDGETS", "Budget", "check_int", "hyper_kind", "resolve_budget", "resolve_dtype", "resolve_entry"]


@dataclass(frozen=True)
class Budget:
    """Largest value drawn for each kind of hyperparameter."""

    name: str
    width: int  # d_e, d_x, d_z, d_in, d_out, d_f
    head_width: int  # d_attn, d_mid
    mlp_width: int  # d_mlp
    heads: int  # H
    layers: int  # L, L_enc, L_dec
    length: int  # ell, ell_x, ell_z, T
    context: int  # ell_max (at least `length`)
    vocab: int  # N_V

    def __post_init__(self) -> None:
        for k, v in self.bounds().items():
            if v < 2:
                raise ValueError(f"budget {self.name!r}: {k} must be ≥ 2 (1 and 2 must be reachable), given {v}")
        if self.context < self.length:
            raise ValueError(f"budget {self.name!r}: context ({self.context}) < length ({self.length})")

    def bounds(self) -> dict[str, int]:
        return {k: v for k, v in vars(self).items() if k != "name"}

    def bound(self, hyper_name: str) -> int:
        return getattr(self, hyper_kind(hyper_name))


#: quick: CI-sized; default and thorough draw the same sizes (thorough runs
#: more examples, not bigger ones).
BUDGETS: Mapping[str, Budget] = MappingProxyType({
    "quick": Budget("quick", width=8, head_width=4, mlp_width=12, heads=2, layers=2, length=5, context=6, vocab=12),
    "default": Budget("default", width=16, head_width=6, mlp_width=32, heads=3, layers=2, length=8, context=10,
                      vocab=24),
    "thorough": Budget("thorough", width=16, head_width=6, mlp_width=32, heads=3, layers=2, length=8, context=10,
                       vocab=24),
})

_KINDS = {
    "N_V": "vocab",
    "ell_max": "context",
    "H": "heads",
    "d_attn": "head_width",
    "d_mid": "head_width",
    "d_mlp": "mlp_width",
    "T": "length",
}


def hyper_kind(name: str) -> str:
    """The budget field that bounds hyperparameter ``name``."""
    if name in _KINDS:
        return _KINDS[name]
    if name == "ell" or name.startswith("ell_"):
        return "length"
    if name == "L" or name.startswith("L_"):
        return "layers"
    if name.startswith("d_"):
        return "width"
    raise ValueError(f"no size budget for hyperparameter {name!r}: add it to "
                     "conformance/strategies/_options.py (_KINDS)")


def resolve_entry(entry: Any) -> Entry:
    if isinstance(entry, Entry):
        return entry
    if isinstance(entry, str) and entry in REGISTRY:
        return REGISTRY[entry]
    raise ValueError(f"entry: expected a registry entry or one of {sorted(REGISTRY)}, given {entry!r}")


def resolve_budget(budget: Any) -> Budget:
    if isinstance(budget, Budget):
        return budget
    if isinstance(budget, str) and budget in BUDGETS:
        return BUDGETS[budget]
    raise ValueError(f"budget: expected one of {sorted(BUDGETS)} or a Budget, given {budget!r}")


def resolve_dtype(dtype: Any) -> str:
    if isinstance(dtype, str) and dtype in FORMATS:
        return dtype
    raise ValueError(f"dtype: expected one of {sorted(FORMATS)}, given {dtype!r}")


def check_int(name: str, value: Any, low: int = 1) -> int:
    """``value`` as an int, refusing bools, non-integers and values below ``low``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name}: expected an integer ≥ {low}, given {value!r}")
    return int(value)
