"""Matrices in the paper's orientation, as plain nested lists.

A matrix ``A`` in R^{m x n} is a list of m rows, each a list of n numbers, so
``A[i][t]`` is the paper's A[i, t] (0-based). A sequence of ℓ vectors of size
d is X in R^{d x ℓ}: column t is token t. Vectors are flat lists.

Every operation checks its dimensions and raises ``SpecError`` on a mismatch
(plain ``zip`` would silently truncate). Arithmetic goes through the active
number system (``numbers.current()``).

A number system that offers ``numbers.Batched`` computes the same entries
as the plain code here all at once (``matmul``, ``map_matrix``,
``map_columns``: the harness's Monte Carlo arithmetic evaluates whole
matrices per NumPy call). The mathematics is this module's.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from . import numbers
from .errors import SpecError
from .intermediates import intermediate
from .numbers import Batched, offered

Vector = list
Matrix = list  # list of rows

__all__ = [
    "add",
    "add_bias",
    "column",
    "from_columns",
    "hadamard",
    "hadamard_columns",
    "map_columns",
    "map_matrix",
    "matmul",
    "matvec",
    "shape",
    "transpose",
    "zeros",
]


def shape(A: Matrix) -> tuple[int, int]:
    """(rows, columns) of a rectangular matrix; a 0-column matrix has rows []."""
    rows = len(A)
    cols = len(A[0]) if rows else 0
    for i, row in enumerate(A):
        if len(row) != cols:
            raise SpecError("matrix", f"rows of equal length {cols}", f"row {i} of length {len(row)}")
    return rows, cols


def zeros(m: int, n: int) -> Matrix:
    zero = numbers.current().num(0)
    return [[zero] * n for _ in range(m)]


def transpose(A: Matrix) -> Matrix:
    m, n = shape(A)
    return [[A[i][j] for i in range(m)] for j in range(n)]


def column(A: Matrix, t: int) -> Vector:
    """Column t of A (0-based)."""
    return [row[t] for row in A]


def from_columns(cols: Sequence[Vector]) -> Matrix:
    """The matrix whose column t is cols[t]."""
    if not cols:
        return []
    d = len(cols[0])
    for t, c in enumerate(cols):
        if len(c) != d:
            raise SpecError("columns", f"columns of equal length {d}", f"column {t} of length {len(c)}")
    return [[c[i] for c in cols] for i in range(d)]


def matmul(A: Matrix, B: Matrix) -> Matrix:
    """A B, each entry a correctly rounded dot product (one rounding per product).

    A number system that offers ``Batched`` computes the same entries all at
    once (the harness's Monte Carlo arithmetic does); the mathematics is this
    function's.
    """
    N = numbers.current()
    m, k = shape(A)
    k2, n = shape(B)
    if k != k2:
        raise SpecError("matmul", f"inner dimensions to agree ({m}x{k} times {k}x?)", f"{m}x{k} times {k2}x{n}")
    fast = offered(N, Batched)
    if fast is not None and m and n and k:
        return fast.matmul(A, B)
    Bt = transpose(B) if k else [[] for _ in range(n)]
    return [[N.dot(row, col) for col in Bt] for row in A]


def matvec(A: Matrix, x: Vector) -> Vector:
    N = numbers.current()
    m, k = shape(A)
    if len(x) != k:
        raise SpecError("matvec", f"a vector of length {k}", f"length {len(x)}")
    return [N.dot(row, x) for row in A]


@intermediate  # a residual sum: layers name theirs (res1, ...)
def add(A: Matrix, B: Matrix) -> Matrix:
    if shape(A) != shape(B):
        raise SpecError("add", f"matrices of shape {shape(A)}", f"{shape(B)}")
    return map_matrix(_plus, A, B)


@intermediate  # W X + b 1ᵀ: an MLP names its pre-activations (pre, lin, ...)
def add_bias(A: Matrix, b: Vector | None) -> Matrix:
    """A + b 1^T: the bias b added to every column; ``None`` means no bias."""
    if b is None:
        return A
    m, n = shape(A)
    if len(b) != m:
        raise SpecError("bias", f"a vector of length {m}", f"length {len(b)}")
    return map_matrix(_plus, A, [[bi] * n for bi in b])


def map_matrix(f: Callable[..., Any], A: Matrix, *more: Matrix) -> Matrix:
    """[[f(A[i][j], B[i][j], ...)]]: f entry by entry over matrices of one shape.

    A number system that offers ``Batched`` applies f to all entries at once
    (module docstring); f must use only the number system's operations.
    """
    for M in more:
        if shape(M) != shape(A):
            raise SpecError("matrix", f"matrices of shape {shape(A)}", f"{shape(M)}")
    fast = offered(numbers.current(), Batched)
    if fast is not None and A and A[0]:
        return fast.map_matrix(f, A, *more)
    return [[f(*args) for args in zip(*rows)] for rows in zip(A, *more)]


def map_columns(f: Callable[[Vector], Vector], X: Matrix) -> Matrix:
    """The matrix whose column t is f(X[:, t]): f acting on each column (token) separately.

    A number system that offers ``Batched`` applies f to all columns at once
    (module docstring).
    """
    fast = offered(numbers.current(), Batched)
    _, n = shape(X)
    if fast is not None and n and X:
        return fast.map_columns(f, X)
    return from_columns([f(column(X, t)) for t in range(n)])


@intermediate  # a gated MLP names its product act ⊙ lin (hidden)
def hadamard(A: Matrix, B: Matrix) -> Matrix:
    """A ⊙ B: the entrywise product of two matrices of one shape."""
    return map_matrix(_times, A, B)


def hadamard_columns(A: Matrix, g: Vector) -> Matrix:
    """A with row i multiplied by g[i] (g ⊙ each column)."""
    m, n = shape(A)
    if len(g) != m:
        raise SpecError("scale", f"a vector of length {m}", f"length {len(g)}")
    return map_matrix(_times, A, [[gi] * n for gi in g])


def _plus(a: Any, b: Any) -> Any:
    return a + b


def _times(a: Any, b: Any) -> Any:
    return a * b
