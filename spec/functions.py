"""The paper's elementwise and column-wise functions: softmax, ReLU, GELU.

Softmax of a matrix acts on each column (ALGORITHMS.md, Notation):
softmax(A)[t1, t2] = exp(A[t1, t2]) / sum_t exp(A[t, t2]).
"""

from __future__ import annotations

from typing import Any, Callable

from . import numbers
from .errors import SpecError
from .intermediates import intermediate
from .linalg import Matrix, Vector, column, from_columns, map_matrix, shape
from .numbers import Batched, largest, offered

__all__ = ["gelu_erf", "gelu_tanh", "relu", "silu", "softcap", "softmax", "softmax_columns", "ACTIVATIONS"]


def softmax(z: Vector) -> Vector:
    """softmax(z)[i] = exp(z[i]) / sum_j exp(z[j]).

    Entries may be -inf (masked); at least one must be finite. Evaluated as
    exp(z[i] - max z) / sum_j exp(z[j] - max z), which is the same number in
    exact arithmetic and cannot overflow. A number system that offers
    ``numbers.Batched`` computes these lines for the whole vector at once.
    """
    N = numbers.current()
    fast = offered(N, Batched)
    if fast is not None and z:
        return fast.softmax(z)
    return softmax_lines(z)


def softmax_lines(z: Vector) -> Vector:
    """``softmax``'s lines in the current number system, one number at a time (a system that
    offers ``Batched`` and has no whole-vector form of its own calls this)."""
    N = numbers.current()
    m = N.detach(largest(z))  # max z: a constant shift (same softmax), and no gradient through it
    if not N.isfinite(m):
        raise SpecError("softmax", "at least one finite entry", f"max entry {N.to_float(m)!r}")
    ex = [N.exp(x - m) for x in z]
    s = N.fsum(ex)
    return [y / s for y in ex]


def softmax_columns(A: Matrix) -> Matrix:
    """Column-wise softmax of a matrix."""
    _, n = shape(A)
    return from_columns([softmax(column(A, t)) for t in range(n)])


def relu(x: Any) -> Any:
    """ReLU(x) = max(x, 0)."""
    return numbers.current().relu(x)


def gelu_erf(x: Any) -> Any:
    """GELU(x) = x Φ(x) with Φ(x) = (1 + erf(x / √2)) / 2: the exact form the paper uses."""
    N = numbers.current()
    return N.const("0.5") * x * (N.num(1) + N.erf(x / N.sqrt(N.num(2))))


def gelu_tanh(x: Any) -> Any:
    """The tanh approximation of GELU (Hendrycks & Gimpel 2016, eq. in sec. 2):
    x/2 (1 + tanh(√(2/π) (x + 0.044715 x³))). Used by GPT-2 (``gelu_new``), Flax."""
    N = numbers.current()
    c = N.sqrt(N.num(2) / N.pi)
    inner = c * (x + N.const("0.044715") * (x * x * x))
    return N.const("0.5") * x * (N.num(1) + N.tanh(inner))


def softcap(x: Any, c: float) -> Any:
    """Soft-capping c·tanh(x/c) for a cap c > 0 (Gemma 2: Gemma Team 2024, "Gemma 2", §2; Hugging
    Face transformers 5.24 models/gemma2: ``x / softcap``, ``torch.tanh``, ``* softcap``): x where
    |x| ≪ c, bounded by ±c, with slope 1 at 0. The division, the tanh and the product are three
    roundings, as in the reference code."""
    N = numbers.current()
    cap = N.const(repr(float(c)))
    return cap * N.tanh(x / cap)


def silu(x: Any) -> Any:
    """SiLU(x) = x σ(x) = x / (1 + exp(−x)) (Elfwing et al. 2018; "Swish" with β = 1,
    Ramachandran et al. 2017): the nonlinearity of LLaMA's SwiGLU and of seed 000's list of
    variations ("a different nonlinearity than ReLU")."""
    N = numbers.current()

    def nonnegative(x: Any) -> Any:
        return x / (N.num(1) + N.exp(-x))

    def negative(x: Any) -> Any:
        e = N.exp(x)  # the same number for x < 0, with exp of a negative argument (no overflow)
        return x * e / (N.num(1) + e)

    return numbers.by_sign(x, nonnegative, negative)


ACTIVATIONS: dict[str, Callable[[Any], Any]] = {
    "relu": relu,
    "gelu_erf": gelu_erf,
    "gelu_tanh": gelu_tanh,
    "silu": silu,
}


@intermediate  # act(W X + b 1ᵀ): an MLP names its activations (act, hidden, ...)
def apply(activation: str, X: Matrix) -> Matrix:
    """The activation ``activation`` entry by entry."""
    return map_matrix(ACTIVATIONS[activation], X)
