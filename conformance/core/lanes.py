"""The numbers of the Monte Carlo arithmetic (``conformance/core/rounding.py``): ``Lanes``, K+1
values of one number (lane 0 unperturbed; a batch or a block of value sets side by side), the
comparisons that follow lane 0 (lane F in a block), and what ends a batch's or a block's shared
evaluation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .mc_draws import Perturbations

__all__ = ["BLOCK_SPLITS", "BlockMismatch", "Lanes", "lanes_array"]


class _Diverged(Exception):
    """The numbers of a batch would take different branches: evaluate them one by one."""


class BlockMismatch(Exception):
    """A block's value sets cannot share one evaluation (they branch apart, or the spec converted
    numbers other than the block's): the caller evaluates them one by one."""


#: what ends a block's shared evaluation (the value sets are then evaluated one by one)
BLOCK_SPLITS: tuple[type[Exception], ...] = (_Diverged, BlockMismatch)


def _truth(c: Any) -> bool:
    """A comparison's outcome: one bool, or the common outcome of a whole batch."""
    if type(c) is np.bool_ or type(c) is bool:
        return bool(c)
    if c.all():
        return True
    if not c.any():
        return False
    raise _Diverged


class Lanes:
    """K+1 values of one number, lane 0 unperturbed: ``x`` of shape (K+1,).

    Inside a batched hook, ``x`` has shape (B, K+1): B independent numbers
    evaluated together (module docstring)."""

    __slots__ = ("x", "ns")

    def __init__(self, x: np.ndarray, ns: "Perturbations") -> None:
        self.x = x
        self.ns = ns

    # -- arithmetic: every operation rounds ------------------------------
    def __add__(self, o: Any) -> "Lanes":
        return self.ns._rounded(self.x + o.x if type(o) is Lanes else self.x + float(o))

    __radd__ = __add__

    def __sub__(self, o: Any) -> "Lanes":
        return self.ns._rounded(self.x - o.x if type(o) is Lanes else self.x - float(o))

    def __rsub__(self, o: Any) -> "Lanes":
        return self.ns._rounded(_lane(o) - self.x)

    def __mul__(self, o: Any) -> "Lanes":
        return self.ns._rounded(self.x * o.x if type(o) is Lanes else self.x * float(o))

    __rmul__ = __mul__

    def __truediv__(self, o: Any) -> "Lanes":
        return self.ns._rounded(self.x / o.x if type(o) is Lanes else self.x / float(o))

    def __rtruediv__(self, o: Any) -> "Lanes":
        return self.ns._rounded(_lane(o) / self.x)

    # -- exact operations ---------------------------------------------------
    def __neg__(self) -> "Lanes":
        return Lanes(-self.x, self.ns)

    def __pos__(self) -> "Lanes":
        return self

    def __abs__(self) -> "Lanes":
        return Lanes(np.abs(self.x), self.ns)

    # -- comparisons follow lane 0 ---------------------------------------------
    def __lt__(self, o: Any) -> bool:
        return _truth(_first(self) < _first(o))

    def __le__(self, o: Any) -> bool:
        return _truth(_first(self) <= _first(o))

    def __gt__(self, o: Any) -> bool:
        return _truth(_first(self) > _first(o))

    def __ge__(self, o: Any) -> bool:
        return _truth(_first(self) >= _first(o))

    def __eq__(self, o: object) -> bool:
        return _truth(_first(self) == _first(o))

    def __ne__(self, o: object) -> bool:
        return _truth(_first(self) != _first(o))

    __hash__ = None  # type: ignore[assignment]

    def __float__(self) -> float:
        if self.x.ndim != 1 or self.x.shape[0] != self.ns.width:
            raise _Diverged  # a batch, or a block of value sets, has no one value
        return float(self.x[0])

    def __repr__(self) -> str:
        if self.x.ndim != 1:
            return f"Lanes(batch of {self.x.shape[0]})"
        if self.x.shape[0] != self.ns.width:
            return f"Lanes(block of {self.x.shape[0] // self.ns.width})"
        spread = np.max(np.abs(self.x[1:] - self.x[0])) if self.x.size > 1 else 0.0
        return f"Lanes({self.x[0]!r} ± {spread:.3g})"



def _lane(o: Any) -> Any:
    return o.x if type(o) is Lanes else float(o)


def _first(o: Any) -> Any:
    """Lane 0: a float for one number, a (B,) array for a batch; in a block of V value sets,
    the V lanes 0: (V,) for one number, (B, V) for a batch."""
    if type(o) is Lanes:
        x = o.x
        ns = o.ns
        if ns.width == x.shape[-1]:
            return x[0] if x.ndim == 1 else x[:, 0]
        return x[..., ns.f::ns.width]  # a block: each value set's lane F
    return float(o)


def _rows_of(arr: np.ndarray, ns: Perturbations) -> list[list[Lanes]]:
    """(m, n, K+1) -> m rows of n Lanes (views of ``arr``, never modified in place)."""
    return [[Lanes(x, ns) for x in row] for row in arr]



def lanes_array(nested: Any, k: int) -> np.ndarray:
    """Nested lists of Lanes (or plain numbers) -> array of shape (..., K+1)."""
    if isinstance(nested, (list, tuple)):
        if not nested:
            return np.empty((0, k + 1))
        if all(type(v) is Lanes for v in nested):  # the innermost level: one call
            return np.array([v.x for v in nested])
        return np.stack([lanes_array(item, k) for item in nested])
    if type(nested) is Lanes:
        return nested.x
    return np.full(k + 1, float(nested))

