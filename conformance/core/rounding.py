"""Monte Carlo arithmetic: how much a computation can lose to rounding in a dtype.

``MonteCarloNumbers`` is a number system for the spec (it implements
``spec.numbers.NumberSystem``): each number carries K+1 *lanes*. Lane 0 is the
computation in binary64 (its sums accumulate left to right, so it can differ
in the last bits from the spec's ``FLOAT``, whose sums are correctly rounded;
the harness takes reference values from ``FLOAT`` and only the spread of the
lanes from here); in lanes 1..K every operation's result is perturbed
as the standard model of floating-point arithmetic allows for the target
dtype with unit roundoff u::

    fl(x op y) = (x op y)(1 + δ) + η,   |δ| ≤ u,  |η| ≤ η_dtype

with δ, η drawn uniformly and independently per operation and lane (Parker,
*Monte Carlo Arithmetic*, 1997; the same idea as Vignes' CESTAC and the
Verrou tool). Sums and dot products perturb every product and every partial
sum of a left-to-right accumulation. Library functions (exp, erf, tanh, sqrt,
...) are perturbed by ``transcendental_units`` × u; they are evaluated by
``conformance/core/portable_math.py`` (IEEE basic operations only), never by
NumPy's or libm's own, whose last bits depend on the CPU: the lanes, and so
the stored bounds, are the same bits on every machine. Inputs are exact (the
harness rounds them to the dtype first); decimal constants of an algorithm
(GELU's 0.044715, an epsilon) are perturbed once, as their rounding to the
dtype.

Because the perturbations propagate through the spec's own code path with
their signs, cancellation is seen as it happens (softmax's shift invariance,
layer norm's projection): the spread of the lanes around lane 0 estimates the
rounding error of an implementation of the same mathematics in that dtype,
which a first-order bound through absolute values overestimates by orders
of magnitude (docs/tolerances.md). ``conformance/core/tolerances.py`` turns the
spread into a tolerance.

Lanes are float64 NumPy vectors; branches (softmax's max, a zero-variance
check) follow lane 0, and elementwise maps like ReLU act per lane. Lane 0 is
multiplied by exactly 1 where the other lanes are perturbed, so it stays the
binary64 computation bit for bit.

Whole matrices at once. A NumPy call per scalar operation costs far more
than the arithmetic on 33 lanes, so the system offers the spec's optional
interface ``Batched`` (``spec/numbers.py``; used by ``spec/linalg.py`` and
``spec/functions.py``) and evaluates many entries in one call, under the
same model:

- ``matmul``: every entry of A B, each lane summing its own products left
  to right, and the rounding ``dot`` would add to it (each product and each
  partial sum perturbed) drawn whole: one normal draw per entry and lane of
  that sum's first-order variance, which has tails at least as heavy
  (``matmul``'s docstring; docs/tolerances.md, "Whole products"). Sums and
  dot products inside a batch or a block, softmax's denominator and layer
  norm's centres draw their rounding the same way (``_drawn_whole``);
- ``map_matrix(f, A, ...)`` (activations, residual sums, biases) and
  ``map_columns(f, X)`` (layer norm of each token): ``f`` runs *once* on a
  *batch*, a ``Lanes`` of shape (B, K+1) holding B independent numbers. While
  a batch runs, every rounded result gets B independent perturbations, even
  one computed from constants only (``√2`` inside GELU), so each entry
  draws exactly what it would draw evaluated alone: the joint distribution
  of the lanes is the scalar evaluation's, only the order of the random
  stream differs. A branch (a comparison) must go the same way for the
  whole batch; where it does not (``_Diverged``), or where ``f`` refuses an
  entry (``SpecError``), the entries are evaluated one by one instead, so
  branches and errors are exactly the scalar evaluation's;
- ``softmax(z)``: the spec's four lines (shift by the first largest entry,
  exp, left-to-right sum, divide) on the stacked vector.

Two optional interfaces change the model rather than its speed:
``OnePassMoments``, whose ``centres`` centres layer norm's e − m at
independent roundings of the mean (its docstring and docs/tolerances.md
"One-pass moments"), and ``UncentredBackward``, whose ``uncentred_slopes``
gives the rounding of a backward pass that expands a·(e − m) as a·e − a·m
(docs/tolerances.md "Uncentred backward passes"). ``PerValueStep`` (``step``)
takes ReLU's derivative per lane. mypy checks the class against all four
(the end of this module).

Blocks. ``values=V`` carries V value sets of one structure side by side
(``conformance/core/blocks.py``, docs/tolerances.md "Blocks"): a number holds
V groups of lanes, each with its own lane 0 and its own perturbations, and a
lane F, unperturbed, that computes the spec in ``FLOAT``: its sums correctly
rounded (``correctly_rounded_sums``), its library functions ``FLOAT``'s own.
Branches (comparisons, softmax's maximum, ``PerValueMax``) follow lane F, so
each value set branches as it does alone; where the value sets would branch
apart, the evaluation stops (``BLOCK_SPLITS``) and the caller evaluates them
one by one. The real inputs of a block reach the spec through ``feeding``.

``tests/conformance/core/test_rounding.py`` checks that lane 0 is the binary64
computation with and without the hooks, and that the hooks give the scalar
evaluation's spreads within the sampling noise (``batched=False`` turns
them off).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from ftspec.spec.errors import SpecError

from .lanes import BLOCK_SPLITS, BlockMismatch, Lanes, _Diverged, _rows_of, lanes_array
from .mc_draws import _scale_of
from .mc_scalar import correctly_rounded_sums
from .mc_softmax import SoftmaxOps

if TYPE_CHECKING:
    from ftspec.spec.numbers import (Batched, BatchedBackward, ManyNumbers, NumberSystem, OnePassMoments,
                                     PerValueMax, PerValueSign, PerValueStep, UncentredBackward)

__all__ = ["BLOCK_SPLITS", "BlockMismatch", "Lanes", "MonteCarloNumbers", "lanes_array"]


class MonteCarloNumbers(SoftmaxOps):
    """The spec's number interface, evaluated in K+1 lanes (the module docstring; the parameters:
    ``mc_draws.Perturbations``). Its parts, one module each: ``lanes`` (the numbers), ``mc_draws``
    (the random roundings), ``mc_scalar`` (conversions, sums, dot products), ``mc_functions``
    (library functions, per-value branches), ``mc_backward`` (the backward pass of the spec's
    reverse mode, level by level), ``mc_softmax`` (softmax's lines, of one vector or a batch);
    here the whole-matrix hooks and the model of one-pass moments."""

    # -- hooks: many entries per NumPy call (module docstring) -------------------
    def matmul(self, A: Sequence[Sequence[Any]], B: Sequence[Sequence[Any]]) -> list[list[Lanes]]:
        """All entries of A B at once, each rounded as ``dot`` rounds it, its fresh error drawn whole.

        Every lane sums its own products left to right in binary64 (lane 0 is ``dot``'s lane 0
        bit for bit). The rounding this product adds is, to first order, Σ_i p_i δ_i +
        Σ_{j≥2} S_j ε_j over its products p_i and partial sums S_j with δ, ε independent and
        uniform in [−u, u]: a sum of strictly sub-Gaussian terms (a uniform's variance is its
        variance proxy), so a normal draw of the same variance, u²/3·(Σ p_i² + Σ S_j²), has
        tails at least as heavy. That one draw per entry and lane replaces the 2k draws and the
        (m, k, n, lanes) arrays of drawing each term (docs/tolerances.md, "Whole products"); the
        weights p_i, S_j are each value set's lane 0 (lanes differ from it by O(u) relatively).
        Products and partial sums near the underflow threshold add η²/3 each, as ``dot``'s η
        (without its rule that keeps a zero or a sign, which only shrinks an error)."""
        if self._batch:
            raise _Diverged  # no product of batches: the caller evaluates entry by entry
        a = self._stack([x for row in A for x in row]).reshape(len(A), len(A[0]), -1)  # (m, k, L)
        b = self._stack([x for row in B for x in row]).reshape(len(B), len(B[0]), -1)  # (k, n, L)
        k = a.shape[1]
        total = a[:, 0, None, :] * b[None, 0, :, :]  # (m, n, L): left to right, each lane alone
        for i in range(1, k):
            total += a[:, i, None, :] * b[None, i, :, :]
        # lane 0 of each value set (lane F in a block: the same numbers up to the sums' last bits)
        a0, b0 = self._sets(a)[..., 0], self._sets(b)[..., 0]  # (m, k, V), (k, n, V)
        p = a0[:, :, None, :] * b0[None, :, :, :]  # (m, k, n, V)
        sums = np.cumsum(p, axis=1)
        self._note(p)
        self._note(sums)
        partial = sums[:, 1:]
        c = _scale_of(p, sums, axis=1)  # (m, n, V)
        with np.errstate(all="ignore"):
            x, y = p / c[:, None], partial / c[:, None]
            var = (np.sum(x * x, axis=1) + np.sum(y * y, axis=1)) * (self.mu * self.mu / 3.0)
            near = (np.abs(p) < self.zone) & (p != 0)
            t0 = self._sets(total)[..., 0]
            near_total = (np.abs(t0) < self.zone) & (t0 != 0)
            eta_c = self.eta / c  # η in units of the scale (c·c can underflow where c is subnormal)
            var += (eta_c * eta_c / 3.0) * (near.sum(axis=1) + np.where(near_total, k - 1, 0))
            sd = c * np.sqrt(var)
        self._add_drawn(total, sd)
        sets = self._sets(total)
        if self.f:  # lane F: each entry's correctly rounded sum, as ``FLOAT.dot``
            pf = self._sets(a)[..., self.f][:, :, None, :] * self._sets(b)[..., self.f][None, :, :, :]
            sets[..., self.f] = correctly_rounded_sums(np.moveaxis(pf, 1, 0))
        if self.acc is not None:  # accumulated in a wider format, stored in the dtype
            total = self._stored(total)
        return _rows_of(total, self)

    def map_matrix(self, f: Callable[..., Any], *Ms: Sequence[Sequence[Any]]) -> list[list[Any]]:
        """[[f(A[i][j], B[i][j], ...)]] for matrices of one shape, f run once on a batch of all entries."""
        m, n = len(Ms[0]), len(Ms[0][0]) if Ms[0] else 0
        if self._batch or m * n < 2:
            return [[f(*(M[i][j] for M in Ms)) for j in range(n)] for i in range(m)]
        args = [self._stack([x for row in M for x in row]) for M in Ms]  # each (m n, K+1)
        out = self._in_batch(m * n, lambda: f(*(Lanes(a, self) for a in args)))
        if out is None:
            return [[f(*(M[i][j] for M in Ms)) for j in range(n)] for i in range(m)]
        return _rows_of(out.reshape(m, n, -1), self)

    def map_columns(self, f: Callable[[list], list], X: Sequence[Sequence[Any]]) -> list[list[Any]]:
        """The matrix whose column t is f(column t of X), f run once on a batch of all columns."""
        d, ell = len(X), len(X[0]) if X else 0
        if self._batch or ell < 2 or d == 0:
            cols = [f([row[t] for row in X]) for t in range(ell)]
            return [[c[i] for c in cols] for i in range(len(cols[0]))] if cols else []
        rows = [Lanes(self._stack(row), self) for row in X]  # row i: entry i of every column, (ℓ, K+1)
        out = self._in_batch(ell, lambda: list(f(rows)))  # (d', ℓ, K+1): entry i of column t at [i, t]
        if out is None:
            cols = [f([row[t] for row in X]) for t in range(ell)]
            return [[c[i] for c in cols] for i in range(len(cols[0]))] if cols else []
        return _rows_of(out, self)

    def _in_batch(self, size: int, run: Callable[[], Any]) -> np.ndarray | None:
        """Lanes of ``run()`` evaluated as a batch of ``size`` numbers (stacked if a list),
        or None where the batch diverges or is refused (the caller goes entry by entry)."""
        self._batch = size
        try:
            out = run()
            if isinstance(out, list):
                return np.array([self._broadcast(v, size) for v in out]) if out else None
            return self._broadcast(out, size)
        except (_Diverged, SpecError):
            return None
        finally:
            self._batch = 0

    def _broadcast(self, v: Any, size: int) -> np.ndarray:
        x = v.x if type(v) is Lanes else np.full(self.total, float(v))
        if x.ndim == 1:
            return np.tile(x, (size, 1))  # an exact value: the same for every number of the batch
        if x.shape != (size, self.total):
            raise _Diverged
        return x

    def centres(self, e: Sequence[Any], m: Any, line: int) -> list[Lanes]:
        """Line 1 of layer norm rounded afresh for each term e[i] − m (``OnePassMoments``, through
        spec/numbers.py ``centred``, called for line 2 and again for line 3; both are rounded alike).

        Centre i is e's left-to-right sum with its own perturbations, divided by d_e and rounded:
        d_e independent draws of the mean's rounding error. One shared centre per lane models
        only the paper's order, whose variance errs by about u and whose line 3 errs by about
        u·|e − m|. Welford's one-pass update centres each term at a running mean (its variance
        errs by about u·|m|/√v), and a fused e·(γ/σ) + (β − mγ/σ) errs by about u·|e| (ATen's
        CPU layer norm does both, and its backward sums Σ dy·e uncentred); independent centres
        make the spread cover those orders too. Lane 0 is ``m`` itself, so it stays the
        binary64 computation.
        """
        d = len(e)
        terms = self._stack(e)  # (d, K+1), or (d, B, K+1) in a batch
        wider = self.acc is not None and self.acc < self.u and d > 1  # the sum accumulated wider, then stored
        unit = self.acc if wider and self.acc is not None else self.u
        # every centre is the same left-to-right sum of the lanes' own terms plus its own fresh
        # rounding: the terms' (if d > 1), the partial sums', the division's (twice if wider), to
        # first order a sum of independent uniforms, drawn whole as a normal of its variance
        # (``matmul``: the normal's tails are at least as heavy); weights from lane 0
        partial = np.cumsum(terms, axis=0)
        lane0 = self._sets(partial)[..., 0]  # (d, ..., V)
        self._note(lane0)
        mean = partial[-1] / float(d)
        t0 = self._sets(terms)[..., 0]
        m0 = lane0[-1] / float(d)
        c = _scale_of(t0, lane0, axis=0)
        with np.errstate(all="ignore"):
            t, q, mc = t0 / c, lane0[1:] / c, m0 / c
            var = (np.sum(t * t, axis=0) if d > 1 else 0.0) + np.sum(q * q, axis=0)
            var = var * (unit * unit / 3.0) / float(d * d) + (self.u * self.u / 3.0) * (2 if wider else 1) * mc * mc
            near = (np.abs(lane0[-1]) < self.zone) & (t0 != 0).any(axis=0)
            eta_c = self.eta / c  # η in units of the scale (c·c can underflow where c is subnormal)
            var = var + np.where(near, (eta_c * eta_c / 3.0) * (d - 1) / float(d * d), 0.0)
            sd = c * np.sqrt(var)
        centres = np.repeat(mean[None], d, axis=0)  # (d, ..., L)
        self._add_drawn(centres, np.broadcast_to(sd, centres.shape[:-1] + (self.v,)))
        sets = self._sets(centres)
        exact = self._sets(m.x) if type(m) is Lanes else np.full((self.v, self.width), float(m))
        sets[..., 0] = exact[..., 0]
        if self.f:
            sets[..., self.f] = exact[..., self.f]
        return [Lanes(c, self) for c in centres]

    def uncentred_slopes(self, e: Sequence[Any], m: Any) -> list[Lanes]:
        """∂centre_i/∂e[i] for a backward pass (spec/autodiff.py ``GradNumbers.centres``): 0 in
        lane 0; in lane k, u·ξ·(|e[i]| + |m|)/|e[i] − m| with ξ uniform in [−1, 1], so that an
        adjoint a·(e[i] − m) reaching e[i] errs by u·|a|·(|e[i]| + |m|), the rounding of the
        expanded a·e[i] − a·m. A term at the mean exactly (lane 0) gets 0: its adjoint is 0.
        """
        stacked = self._stack(e)
        x = self._sets(stacked)[..., :1]  # lane 0: (d, V, 1), or (d, B, V, 1) in a batch
        c = self._sets(m.x)[..., :1] if type(m) is Lanes else np.array([float(m)])  # (V, 1), (B, V, 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(x != c, (np.abs(x) + np.abs(c)) / np.abs(x - c), 0.0)
        xi = self.rng.uniform(-1.0, 1.0, size=ratio.shape[:-1] + (self.width,))
        xi[..., 0] = 0.0
        xi[..., self.f] = 0.0  # lane F too, where there is one (else lane 0 again)
        slopes = ((self.u * ratio) * xi).reshape(stacked.shape)
        return [Lanes(s, self) for s in slopes]  # (K+1,) or (B, K+1) each


if TYPE_CHECKING:  # mypy checks the class against the spec's protocol and the optional interfaces it offers
    _system: type[NumberSystem] = MonteCarloNumbers
    _batched: type[Batched] = MonteCarloNumbers
    _moments: type[OnePassMoments] = MonteCarloNumbers
    _backward: type[UncentredBackward] = MonteCarloNumbers
    _step: type[PerValueStep] = MonteCarloNumbers
    _most: type[PerValueMax] = MonteCarloNumbers
    _sign: type[PerValueSign] = MonteCarloNumbers
    _adjoints: type[BatchedBackward] = MonteCarloNumbers
    _many: type[ManyNumbers] = MonteCarloNumbers
