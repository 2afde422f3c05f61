"""The library functions of the Monte Carlo arithmetic (``conformance/core/rounding.py``): exp, log,
sqrt, tanh, erf, sin, cos and pow on every lane, perturbed by ``transcendental_units`` × u
(``portable_math``: the same bits on every CPU; lane F takes ``FLOAT``'s own), and the branches
taken per value (ReLU, its step, ``by_sign``)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ftspec.spec.numbers import FLOAT

from . import portable_math as pm
from .lanes import Lanes, _lane
from .mc_scalar import ScalarOps

__all__ = ["LibraryFunctions"]


class LibraryFunctions(ScalarOps):
    """``MonteCarloNumbers``' library functions and per-value branches (the module docstring)."""

    def _fn(self, f: Callable[[np.ndarray], Any], x: Any, exact: Callable[..., float]) -> Lanes:
        """Library function ``f`` on every lane (``portable_math``); lane F takes ``exact``, the
        ``FLOAT`` function itself (so its refusals, such as log of 0, are the spec's)."""
        arg = np.array(_lane(x), dtype=np.float64)
        with np.errstate(all="ignore"):
            r = np.asarray(f(arg), dtype=np.float64)
        if r.ndim == 0:
            r = np.full(self.total, float(r))
        elif r.base is not None:  # rounded in place below: never a view of another number's lanes
            r = r.copy()
        if self.f:
            given = self._sets(np.broadcast_to(arg, r.shape).copy())[..., self.f]
            self._sets(r)[..., self.f] = np.array([exact(a) for a in given.ravel().tolist()]).reshape(given.shape)
        return self._rounded(r, self.t)

    def exp(self, x: Any) -> Lanes:
        return self._fn(pm.exp, x, FLOAT.exp)

    def log(self, x: Any) -> Lanes:
        return self._fn(pm.log, x, FLOAT.log)

    def sqrt(self, x: Any) -> Lanes:
        return self._fn(np.sqrt, x, FLOAT.sqrt)

    def tanh(self, x: Any) -> Lanes:
        return self._fn(pm.tanh, x, FLOAT.tanh)

    def erf(self, x: Any) -> Lanes:
        return self._fn(pm.erf, x, FLOAT.erf)

    def sin(self, x: Any) -> Lanes:
        return self._fn(pm.sin, x, FLOAT.sin)

    def cos(self, x: Any) -> Lanes:
        return self._fn(pm.cos, x, FLOAT.cos)

    def pow(self, base: Any, exponent: Any) -> Lanes:
        b, e = _lane(base), _lane(exponent)
        shape = np.broadcast_shapes(np.shape(b), np.shape(e), (self.total,))
        r = pm.pow(np.broadcast_to(b, shape), e)
        if self.f:
            bs, es = (self._sets(np.broadcast_to(a, shape).copy())[..., self.f].ravel().tolist() for a in (b, e))
            self._sets(r)[..., self.f] = np.array([FLOAT.pow(x, y) for x, y in zip(bs, es)]).reshape(
                self._sets(r)[..., self.f].shape)
        return self._rounded(r, self.t)

    def by_sign(self, x: Any, nonnegative: Callable[[Any], Any], negative: Callable[[Any], Any]) -> Any:
        """``PerValueSign``: each number (each entry of a batch, each value set of a block) takes
        the branch its lane 0 (lane F in a block) takes alone, so every entry draws what its own
        branch draws, the scalar evaluation's distribution. Where a batch or block mixes signs,
        both forms run, each on the entries that take it (the others read 0 there, so a form's
        overflow outside its domain, such as exp(−x) for x ≪ 0, never reaches ``ranges``)."""
        if type(x) is not Lanes:
            x = self.num(x)
        ahead = self._branch(x.x) >= 0  # (..., V); NaN takes the negative form, as ``x >= 0`` does
        if ahead.all():
            return nonnegative(x)
        if not ahead.any():
            return negative(x)
        mask = np.repeat(ahead, self.width, axis=-1)
        up = nonnegative(Lanes(np.where(mask, x.x, 0.0), self))
        down = negative(Lanes(np.where(mask, 0.0, x.x), self))
        return Lanes(np.where(mask, _lane(up), _lane(down)), self)

    def step(self, x: Any) -> Lanes:
        """[[x > 0]] per lane: ReLU's derivative, so a sign that rounding flips flips the branch."""
        if type(x) is not Lanes:
            x = self.num(x)
        return Lanes(np.where(x.x > 0, 1.0, 0.0), self)

    def relu(self, x: Any) -> Lanes:
        if type(x) is not Lanes:
            x = self.num(x)
        return Lanes(np.where(np.isnan(x.x) | (x.x > 0), x.x, 0.0), self)
