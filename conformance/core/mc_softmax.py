"""Softmax in the Monte Carlo arithmetic (``conformance/core/rounding.py``): the four lines of
``spec/functions.py`` ``softmax`` on a stacked vector, or on a batch of vectors (every column of
attention's scores at once), and the largest entry per value set of a block."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ftspec.spec.errors import SpecError
from ftspec.spec.numbers import FLOAT

from . import portable_math as pm
from .lanes import Lanes, _Diverged
from .mc_backward import BackwardPass

__all__ = ["SoftmaxOps"]


class SoftmaxOps(BackwardPass):
    """``MonteCarloNumbers``' softmax hook and ``PerValueMax`` (the module docstring)."""

    def softmax(self, z: Sequence[Any]) -> list[Lanes]:
        """spec/functions.py ``softmax``, its four lines on the stacked vector (n, K+1); under a
        wider softmax format (``softmax_u``) its operations at that unit and each output stored
        once in the dtype."""
        if self.soft is None:
            return self._softmax(z)
        with self._computing_at(self.soft):
            out = self._softmax(z)
        if len({y.x.shape for y in out}) == 1:  # one call: each output its own draw
            return [Lanes(row, self) for row in self._stored(np.stack([y.x for y in out]))]
        return [Lanes(self._stored(y.x.copy()), self) for y in out]

    def _softmax(self, z: Sequence[Any]) -> list[Lanes]:
        Z = self._stack(z)
        if Z.ndim == 3:  # a batch of B vectors (``map_columns``: softmax of every column at once)
            return self._softmax_batch(Z)
        first = self._branch(Z) if Z.ndim == 2 else None  # (n, V)
        if first is None or np.isnan(first).any():  # Python's max over NaN, or a batch: line by line
            m = self.detach(max(z))
            if not self.isfinite(m):
                raise SpecError("softmax", "at least one finite entry", f"max entry {self.to_float(m)!r}")
            exps = [self.exp(x - m) for x in z]
            total = self.fsum(exps)
            return [y / total for y in exps]
        top = np.argmax(first, axis=0)  # the first largest entry, as Python's max, per value set
        tops = first[top, np.arange(self.v)]
        if not np.isfinite(tops).all():
            raise SpecError("softmax", "at least one finite entry",
                            f"max entry {float(tops[~np.isfinite(tops)][0])!r}")
        saved, self._batch = self._batch, len(z)
        try:
            m = self._sets(Z)[top, np.arange(self.v)].reshape(self.total)  # each value set's own max
            shifted = Lanes(Z, self) - Lanes(m, self)  # x − m, rounded
            ex = self._fn(pm.exp, shifted, FLOAT.exp)  # exp, t·u
            # fsum: terms rounded, then left to right, the rounding drawn whole (``_drawn_whole``)
            s = Lanes(self._drawn_whole(ex.x, self.u, self.u), self)
            y = ex / s  # rounded
        finally:
            self._batch = saved
        return [Lanes(row, self) for row in y.x]

    def _softmax_batch(self, Z: np.ndarray) -> list[Lanes]:
        """``_softmax`` of a batch: Z (n, B, V·W), entry i of B vectors; the same four lines, each
        vector shifted by its own first largest entry (per value set, by the lane branches
        follow), each operation's result rounded with its own draw, each sum's drawn whole: the
        vectors' lanes are distributed as the vectors' evaluated one by one. NaN or no finite
        entry in some vector: ``_Diverged`` (the caller goes vector by vector, and the spec's
        refusal names the vector)."""
        n, b, w = Z.shape
        first = self._branch(Z)  # (n, B, V)
        if np.isnan(first).any():
            raise _Diverged
        top = np.argmax(first, axis=0)  # (B, V)
        if not np.isfinite(np.take_along_axis(first, top[None], axis=0)).all():
            raise _Diverged
        m = np.take_along_axis(self._sets(Z), top[None, :, :, None], axis=0)  # (1, B, V, W)
        saved, self._batch = self._batch, n * b
        try:
            shifted = self._rounded((Z - m.reshape(1, b, w)).reshape(n * b, w))  # x − m
            ex = self._fn(pm.exp, shifted, FLOAT.exp)  # exp, t·u
            s = self._drawn_whole(ex.x.reshape(n, b, w), self.u, self.u)  # (B, V·W): each vector's fsum
            y = self._rounded((ex.x.reshape(n, b, w) / s).reshape(n * b, w))  # rounded
        finally:
            self._batch = saved
        return [Lanes(row, self) for row in y.x.reshape(n, b, w)]

    def largest(self, z: Sequence[Any]) -> Any:
        """``PerValueMax``: Python's ``max`` of z (the first largest entry by lane 0), for each value
        set of a block on its own; one value set: ``max`` itself."""
        if self.v == 1 or self._batch:
            return max(z)
        Z = self._stack(z)  # (n, V·W)
        first = self._branch(Z)
        if np.isnan(first).any():  # Python's max over NaN depends on the order: no one answer
            raise _Diverged
        top = np.argmax(first, axis=0)
        return Lanes(self._sets(Z)[top, np.arange(self.v)].reshape(self.total), self)

    # -- the model of one-pass moments ------------------------------------------
