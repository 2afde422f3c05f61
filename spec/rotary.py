"""Rotary position embedding (RoPE), applied to the queries and keys of Algorithm 4.

Su, Lu, Pan, Murtadha, Wen, Liu, *RoFormer: Enhanced Transformer with Rotary
Position Embedding* (2021), eqs. 13-15 and 34: column t of Q (or K) is
rotated, pair by pair, by the angles t·θ_i with θ_i = base^(−2i/d) for
i = 0 .. d/2 − 1 (d = d_attn, even). Which coordinates form pair i is where
real code disagrees (variant ``rotary``):

- ``interleaved``: (2i, 2i + 1), as RoFormer writes R^d_{Θ,t} and Meta's
  LLaMA reference code computes it (``torch.view_as_complex`` on adjacent
  pairs), and GPT-J;
- ``half``: (i, i + d/2), GPT-NeoX's and Hugging Face Llama's
  ``rotate_half`` (q·cos + rotate_half(q)·sin with cos, sin repeated over
  both halves).

Both rotate the pair (a, b) to (a cos − b sin, b cos + a sin). Positions are
0-based column indexes (the key at column t_z of Z has position t_z). The
base is ``rope_base`` (10000 in RoFormer and LLaMA 1-2).

Partial rotary (``rotary_fraction`` f < 1): only the first r = ⌊f·d⌋ rows
are rotated, as a RoPE of width r (θ_i = base^(−2i/r), pairs (i, i + r/2) or
(2i, 2i + 1) among those rows), and rows r .. d − 1 pass unchanged. GPT-NeoX
and Pythia (``rotary_pct`` 0.25: Hugging Face transformers 5.24
``GPTNeoXAttention``, ``q[..., :rotary_ndims]`` rotated, ``q[..., rotary_ndims:]``
passed; the rope's dim ``int(head_dim * partial_rotary_factor)``), Phi
(``partial_rotary_factor`` 0.5 and 0.4) with half pairs; GPT-J (``rotary_dim`` 64
of 256: ``k[:, :, :, :rotary_dim]``, ``rotate_every_two``) with adjacent pairs.
"""

from __future__ import annotations

from typing import Any

from . import numbers
from .errors import SpecError
from .linalg import Matrix, map_matrix
from .variants import VariantSet

__all__ = ["pairs", "rotate"]


def pairs(d: int, pairing: str) -> list[tuple[int, int]]:
    """Pair i of a d-vector (0-based rows): (2i, 2i+1) interleaved, (i, i + d/2) half-split."""
    if pairing == "interleaved":
        return [(2 * i, 2 * i + 1) for i in range(d // 2)]
    return [(i, i + d // 2) for i in range(d // 2)]


def rotate(M: Matrix, variant: VariantSet) -> Matrix:
    """RoFormer eq. 34: column t of M (d×ℓ) rotated by R^r_{Θ,t} on its first r rows, pairs as
    ``variant.rotary``; r = d, or ⌊f·d⌋ under ``rotary_fraction`` f (partial rotary).

    Row i of the angle matrix holds pair i's angles t·θ_i over the columns t; each line below
    acts entry by entry (``map_matrix``), so a number system that offers ``Batched`` takes a
    line in one call."""
    N = numbers.current()
    d = int(len(M) * variant.rotary_fraction)  # the rotated rows: all of them, or the first ⌊f·d_attn⌋
    if d % 2 or d < 2:
        raise SpecError("d_attn", "an even rotated width r = ⌊rotary_fraction·d_attn⌋ ≥ 2 (RoPE rotates pairs)",
                        f"d_attn = {len(M)}, r = {d}")
    ell = len(M[0]) if M else 0
    out: list[list[Any]] = [list(row) for row in M]
    P = pairs(d, variant.rotary)
    if not ell or not P:
        return out
    base = N.num(variant.rope_base)
    theta = [N.pow(base, N.num(-2 * i) / N.num(d)) for i in range(len(P))]  # θ_i = base^(−2i/d)
    angle = map_matrix(_times, [[N.num(t) for t in range(ell)] for _ in P], [[th] * ell for th in theta])
    c, s = map_matrix(N.cos, angle), map_matrix(N.sin, angle)
    x, y = [M[a] for a, _ in P], [M[b] for _, b in P]
    first = map_matrix(_first, x, y, c, s)  # x cos − y sin
    second = map_matrix(_second, x, y, c, s)  # y cos + x sin
    for i, (a, b) in enumerate(P):
        out[a], out[b] = first[i], second[i]
    return out


def _times(t: Any, theta: Any) -> Any:
    return t * theta


def _first(x: Any, y: Any, c: Any, s: Any) -> Any:
    return x * c - y * s


def _second(x: Any, y: Any, c: Any, s: Any) -> Any:
    return y * c + x * s
