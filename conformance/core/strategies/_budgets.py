"""Size budgets and the eager validation of the strategies' options.

A budget bounds every hyperparameter by its *kind* (a width, a sequence
length, a head count, ...), so one example of the pure-Python spec stays
fast. The kind of a hyperparameter is read from its name (the registry's
names: ``d_*`` widths, ``ell*`` lengths, ``L*`` layer counts, ``N`` the
sequences of a dataset, ...); that table is the only per-name knowledge the
strategies hold.

Training and inference entries (``Entry.family``) run a whole model per
step, and the harness evaluates them in Monte Carlo arithmetic through a
reverse-mode tape, so they get their own, smaller budgets
(``MODEL_BUDGETS``, chosen by ``resolve_budget(name, entry)``): one layer
per stack except in one draw of ``RARE`` (``Budget.often``).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping, Optional

import numpy as np

from ftspec.spec.registry import REGISTRY, Entry

from ..dtypes import FORMATS

__all__ = [
    "AT_MOST",
    "BUDGETS",
    "MODEL_BUDGETS",
    "MODEL_FAMILIES",
    "RARE",
    "Budget",
    "check_int",
    "hyper_kind",
    "resolve_budget",
    "resolve_dtype",
    "resolve_entry",
]

#: one draw in RARE may go past a budget's ``often`` bound, up to the full bound
RARE = 8


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
    sequences: int = 3  # N, the sequences of a training set
    epochs: int = 2  # N_epochs
    generated: int = 3  # ell_gen, tokens generated
    experts: int = 4  # E, a mixture's experts (spec 2.11: moe_mlp)
    chosen: int = 4  # k, the experts chosen per token: also at most the E drawn (``AT_MOST``)
    #: (kind, usual bound) pairs: draws stay within the usual bound except
    #: in one of ``RARE``, which may reach the full bound
    often: tuple[tuple[str, int], ...] = ()
    #: kinds drawn uniformly (``uniform_integer``) instead of by Hypothesis's
    #: integers, which favour the smallest value: a dataset of one sequence
    #: cannot show different lengths
    uniform: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for k, v in self.bounds().items():
            if v < 2:
                raise ValueError(f"budget {self.name!r}: {k} must be ≥ 2 (1 and 2 must be reachable), given {v}")
        if self.context < self.length:
            raise ValueError(f"budget {self.name!r}: context ({self.context}) < length ({self.length})")
        for kind, usual in self.often:
            if kind not in self.bounds() or not 1 <= usual <= self.bounds()[kind]:
                raise ValueError(f"budget {self.name!r}: often {kind}={usual} must be a budget field "
                                 "and within its bound")
        for kind in self.uniform:
            if kind not in self.bounds():
                raise ValueError(f"budget {self.name!r}: uniform {kind!r} is not a budget field")

    def bounds(self) -> dict[str, int]:
        return {k: v for k, v in vars(self).items() if k not in ("name", "often", "uniform")}

    def bound(self, hyper_name: str) -> int:
        return getattr(self, hyper_kind(hyper_name))

    def usual(self, hyper_name: str) -> int:
        """The bound of all but one draw in ``RARE`` (the full bound unless ``often`` says less)."""
        return dict(self.often).get(hyper_kind(hyper_name), self.bound(hyper_name))


#: quick: CI-sized; default and thorough draw the same sizes (thorough runs
#: more examples, not bigger ones).
BUDGETS: Mapping[str, Budget] = MappingProxyType({
    "quick": Budget("quick", width=8, head_width=4, mlp_width=12, heads=2, layers=2, length=5, context=6, vocab=12),
    "default": Budget("default", width=16, head_width=6, mlp_width=32, heads=3, layers=2, length=8, context=10,
                      vocab=24),
    "thorough": Budget("thorough", width=16, head_width=6, mlp_width=32, heads=3, layers=2, length=8, context=10,
                       vocab=24),
})

#: Training and inference (families in MODEL_FAMILIES): d_e ≤ 6, d_mlp ≤ 8,
#: H ≤ 2, one layer per stack (two in one draw of RARE), ℓ ≤ 5, N ≤ 3,
#: N_epochs ≤ 2, ℓ_gen ≤ 3, N_V ≤ 8; quick about two thirds of that. The
#: dataset's shape (N, N_epochs, lengths, ℓ_gen) and N_V are drawn uniformly.
_MODEL: dict[str, Any] = dict(often=(("layers", 1),),
                              uniform=("sequences", "epochs", "length", "generated", "vocab"))
MODEL_BUDGETS: Mapping[str, Budget] = MappingProxyType({
    "quick": Budget("quick", width=4, head_width=2, mlp_width=4, heads=2, layers=2, length=4, context=5, vocab=6,
                    sequences=2, epochs=2, generated=2, **_MODEL),
    "default": Budget("default", width=6, head_width=3, mlp_width=8, heads=2, layers=2, length=5, context=6,
                      vocab=8, sequences=3, epochs=2, generated=3, **_MODEL),
    "thorough": Budget("thorough", width=6, head_width=3, mlp_width=8, heads=2, layers=2, length=5, context=6,
                       vocab=8, sequences=3, epochs=2, generated=3, **_MODEL),
})
MODEL_FAMILIES = frozenset({"training", "inference"})
assert set(MODEL_BUDGETS) == set(BUDGETS)

_KINDS = {
    "N_V": "vocab",
    "N": "sequences",
    "N_epochs": "epochs",
    "ell_gen": "generated",
    "ell_max": "context",
    "H": "heads",
    "d_attn": "head_width",
    "d_mid": "head_width",
    "d_mlp": "mlp_width",
    "T": "length",
    "E": "experts",
    "k": "chosen",
}

#: sizes bounded by another size of the same entry, drawn before them: a mixture's k chosen
#: experts out of E (``moe_mlp``'s check, 1 ≤ k ≤ E), drawn within [1, E] rather than discarded
AT_MOST = MappingProxyType({"k": "E"})


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
                     "conformance/core/strategies/_budgets.py (_KINDS)")


def resolve_entry(entry: Any) -> Entry:
    """An Entry, or the entry of that name in REGISTRY."""
    if isinstance(entry, Entry):
        return entry
    if isinstance(entry, str) and entry in REGISTRY:
        return REGISTRY[entry]
    raise ValueError(f"entry: expected a registry entry or one of {sorted(REGISTRY)}, "
                     f"given {entry!r}")


def resolve_budget(budget: Any, entry: Optional[Entry] = None) -> Budget:
    """A Budget as given, or the named one: from ``MODEL_BUDGETS`` for an
    entry of a family in ``MODEL_FAMILIES``, else from ``BUDGETS``."""
    if isinstance(budget, Budget):
        return budget
    if isinstance(budget, str) and budget in BUDGETS:
        if entry is not None and entry.family in MODEL_FAMILIES:
            return MODEL_BUDGETS[budget]
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
