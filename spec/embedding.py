"""Algorithms 1 and 2: token and positional embeddings, and the sequence
embedding that opens Algorithms 8-10 (their lines 1-3).

Indices: token IDs v ∈ {0, ..., N_V - 1} are the paper's v + 1; positions
t ∈ {0, ..., ℓ_max - 1} are the paper's t + 1.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from . import numbers
from .errors import SpecError
from .intermediates import Names, algorithm, record, recording
from .linalg import Matrix, Vector, column, from_columns, shape
from .normalization import norm_columns
from .variants import PAPER, VariantSet

__all__ = [
    "embed",
    "pad_positions",
    "positional_embedding",
    "sinusoidal_halves",
    "sinusoidal_paper",
    "sinusoidal_raw_index",
    "sinusoidal_vaswani",
    "token_embedding",
]


def pad_positions(pad: Optional[Sequence[Any]], variant: VariantSet, ell: int) -> Optional[list[int]]:
    """The positions under ``pad_positions="real"``: p(t) = Σ_{s<t} pad[s], the real tokens before t
    (OPT's ``cumsum(attention_mask) · attention_mask − 1`` and BLOOM's ``(attention_mask.cumsum(-1) − 1)
    · attention_mask`` at a real token, transformers 5.24); None under "index" or without padding,
    where t is its own position. At a padding position p(t) is read by ALiBi alone, where a query's
    own position cancels in the softmax."""
    if pad is None or variant.pad_positions == "index":
        return None
    if len(pad) != ell:
        raise SpecError("pad", f"one flag per position ({ell})", f"{len(pad)} flags")
    out, seen = [], 0
    for flag in pad:
        out.append(seen)
        seen += 1 if flag else 0
    return out


@algorithm("token_embedding")
def token_embedding(v: int, W_e: Matrix) -> Vector:
    """Algorithm 1: token embedding. e ← W_e[:, v].

    Line 1 returns column v of W_e ∈ R^{d_e×N_V}; the paper's token v+1.
    """
    _, N_V = shape(W_e)
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < N_V:
        raise SpecError("v", f"a token ID in [0, {N_V})", repr(v))
    return column(W_e, v)  # line 1


@algorithm("positional_embedding")
def positional_embedding(t: int, W_p: Matrix) -> Vector:
    """Algorithm 2: positional embedding. e_p ← W_p[:, t].

    Line 1 returns column t of W_p ∈ R^{d_e×ℓ_max}; the paper's position t+1.
    """
    _, ell_max = shape(W_p)
    if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < ell_max:
        raise SpecError("t", f"a position in [0, {ell_max})", repr(t))
    return column(W_p, t)  # line 1


def _paper_entry(r: int, c: int, d_e: int, ell_max: int) -> Any:
    """W_p[r, c] of the paper's sinusoid, 0-based r and c.

    The paper (1-based row ρ = r + 1, position τ = c + 1): for 0 < i ≤ d_e/2,
    W_p[2i−1, τ] = sin(τ / ℓ_max^{2i/d_e}) and W_p[2i, τ] = cos(τ / ℓ_max^{2i/d_e}).
    So i = r // 2 + 1, sine on even r. Decision: for odd d_e the last row
    (r = d_e − 1, i = (d_e+1)/2) is the sine the same formula gives.
    """
    N = numbers.current()
    i = r // 2 + 1
    freq = N.pow(N.num(ell_max), N.num(2 * i) / N.num(d_e))
    angle = N.num(c + 1) / freq
    return N.sin(angle) if r % 2 == 0 else N.cos(angle)


def _vaswani_entry(r: int, c: int, d_e: int) -> Any:
    """W_p[r, c] of Vaswani et al. (2017, sec. 3.5), 0-based: PE[pos, 2i] =
    sin(pos / 10000^{2i/d}), PE[pos, 2i+1] = cos(pos / 10000^{2i/d}) with
    pos = c, i = r // 2. Odd d_e: the last row is a sine, as the formula gives."""
    N = numbers.current()
    two_i = 2 * (r // 2)
    freq = N.pow(N.num(10000), N.num(two_i) / N.num(d_e))
    angle = N.num(c) / freq
    return N.sin(angle) if r % 2 == 0 else N.cos(angle)


def _raw_index_entry(r: int, c: int, d_e: int) -> Any:
    """W_p[r, c] of seeds/004 (numeric tutorial, section II.E and Table II),
    0-based: sin(c / 10000^{2r/d_e}) for even r, cos(c / 10000^{2r/d_e}) for
    odd r. Vaswani's formula with its pair index i replaced by the raw row
    index r: Table II writes row 1 as cos(0/10000^(2*1/6)) and row 2 as
    sin(0/10000^(2*2/6)), where Vaswani has 2*0/6 and 2*2/6 for rows 0-1
    and 2-3. Its printed P and E (d = 6) agree with this form to their last
    printed digit, and with Vaswani's only to 1.98 (tests/spec/test_seed_004.py)."""
    N = numbers.current()
    freq = N.pow(N.num(10000), N.num(2 * r) / N.num(d_e))
    angle = N.num(c) / freq
    return N.sin(angle) if r % 2 == 0 else N.cos(angle)


def _halves_entry(r: int, c: int, d_e: int) -> Any:
    """W_p[r, c] of Marian's sinusoid (transformers 5.24.0, models/marian/modeling_marian.py,
    ``MarianSinusoidalPositionalEmbedding.create_weight``), 0-based: with h = ⌈d_e/2⌉ (its
    ``sentinel``), sin(c / 10000^{2r/d_e}) for r < h and cos(c / 10000^{2(r−h)/d_e}) for r ≥ h.
    Vaswani's pairs i = 0, 1, ... with every sine first: ``create_weight`` takes the angles
    pos / 10000^{2(j // 2)/d} of columns j = 0, 2, 4, ... for the sines and j = 1, 3, ... for the
    cosines. Odd d_e: one more sine than cosines, as ``out[:, 0:sentinel]`` gives."""
    N = numbers.current()
    h = (d_e + 1) // 2
    i = r if r < h else r - h
    freq = N.pow(N.num(10000), N.num(2 * i) / N.num(d_e))
    angle = N.num(c) / freq
    return N.sin(angle) if r < h else N.cos(angle)


def _check_sizes(d_e: int, ell_max: int) -> None:
    for name, value in (("d_e", d_e), ("ell_max", ell_max)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SpecError(name, "a positive integer", repr(value))


@algorithm("sinusoidal_paper")
def sinusoidal_paper(d_e: int, ell_max: int, ell: Optional[int] = None) -> Matrix:
    """Algorithm 2, fixed alternative as the paper states it: W_p ∈ R^{d_e×ℓ_max}
    with W_p[2i−1, t] = sin(t / ℓ_max^{2i/d_e}), W_p[2i, t] = cos(t / ℓ_max^{2i/d_e}).

    The base is ℓ_max (not 10000) and rows and positions are 1-based: the
    entry at 0-based (r, c) uses t = c + 1 and i = r // 2 + 1. Only the first
    ``ell`` columns are built when ``ell`` is given.
    """
    _check_sizes(d_e, ell_max)
    cols = ell_max if ell is None else ell
    return [[_paper_entry(r, c, d_e, ell_max) for c in range(cols)] for r in range(d_e)]


@algorithm("sinusoidal_vaswani")
def sinusoidal_vaswani(d_e: int, ell_max: int, ell: Optional[int] = None) -> Matrix:
    """Sinusoidal positions of Vaswani et al. (2017), transposed into the
    paper's orientation: W_p[2i, t] = sin(t / 10000^{2i/d_e}),
    W_p[2i+1, t] = cos(t / 10000^{2i/d_e}), rows and positions 0-based."""
    _check_sizes(d_e, ell_max)
    cols = ell_max if ell is None else ell
    return [[_vaswani_entry(r, c, d_e) for c in range(cols)] for r in range(d_e)]


@algorithm("sinusoidal_raw_index")
def sinusoidal_raw_index(d_e: int, ell_max: int, ell: Optional[int] = None) -> Matrix:
    """The sinusoid of seeds/004 (numeric tutorial, section II.E, Table II):
    W_p[r, t] = sin(t / 10000^{2r/d_e}) for even r, cos(t / 10000^{2r/d_e})
    for odd r, rows and positions 0-based. The exponent takes the raw row
    index r where Vaswani et al. take 2·(r // 2); rows 0 agree, every other
    row has a lower frequency. Only the first ``ell`` columns are built when
    ``ell`` is given."""
    _check_sizes(d_e, ell_max)
    cols = ell_max if ell is None else ell
    return [[_raw_index_entry(r, c, d_e) for c in range(cols)] for r in range(d_e)]


@algorithm("sinusoidal_halves")
def sinusoidal_halves(d_e: int, ell_max: int, ell: Optional[int] = None) -> Matrix:
    """Marian's sinusoid in halves (Hugging Face transformers 5.24.0,
    models/marian/modeling_marian.py, ``MarianSinusoidalPositionalEmbedding.create_weight``:
    "features are not interleaved. The cos features are in the 2nd half of the vector"):
    with h = ⌈d_e/2⌉, W_p[i, t] = sin(t / 10000^{2i/d_e}) for 0 ≤ i < h and
    W_p[h + i, t] = cos(t / 10000^{2i/d_e}) for 0 ≤ i < ⌊d_e/2⌋, rows and positions 0-based.
    The rows of ``sinusoidal_vaswani`` reordered: its even rows first, then its odd ones; an odd
    d_e has one more sine than cosines. Only the first ``ell`` columns are built when ``ell`` is
    given."""
    _check_sizes(d_e, ell_max)
    cols = ell_max if ell is None else ell
    return [[_halves_entry(r, c, d_e) for c in range(cols)] for r in range(d_e)]


def _embed_names(*_: Any, **__: Any) -> Names:
    return {norm_columns: ("norm",)}  # under embedding_norm


@algorithm(None, names=_embed_names)
def embed(
    x: Sequence[int],
    W_e: Matrix,
    W_p: Optional[Matrix],
    *,
    ell_max: Optional[int] = None,
    variant: VariantSet = PAPER,
    gamma: Optional[Vector] = None,
    beta: Optional[Vector] = None,
    pad: Optional[Sequence[Any]] = None,
) -> Matrix:
    """Lines 1-3 of Algorithms 8-10: X ← [W_e[:, x[t]] + W_p[:, t]] for t = 0..ℓ-1.

    Variants: ``positions`` chooses W_p (learned, one of the four sinusoids, or none);
    ``embedding_scale`` multiplies W_e[:, x[t]] by √d_e first (Vaswani et al.);
    ``embedding_norm`` normalises each column afterwards with γ, β.
    ``ell_max`` is needed when W_p is not learned (the paper's sinusoid uses it).
    ``pad`` (the padded models' flags, 0 = padding) is read under ``pad_positions="real"`` alone:
    a real token t adds W_p[:, p(t)], p(t) = Σ_{s<t} pad[s] (``pad_positions``), and a padding
    position adds no position (X[:, t] = W_e[:, x[t]], scaled): OPT's −1 + offset 2 reads
    embed_positions[1], a row outside W_p = embed_positions[2:], which the spec takes as 0. Padding
    is no query's key, so that choice reaches the padding columns' own outputs alone.

    Intermediates (``spec/intermediates.py``): tokens (d_e×ℓ: W_e[:, x[t]], scaled),
    positions (W_p[:, :ℓ], when there are positions; under ``pad_positions="real"`` the columns
    added, 0 at padding); under ``embedding_norm`` sum (before
    the norm) and norm (its output, with norm.mu and norm.sigma, or norm.rms).
    """
    N = numbers.current()
    d_e, _ = shape(W_e)
    ell = len(x)
    if variant.positions == "learned":
        if W_p is None:
            raise SpecError("W_p", "a matrix (positions='learned')", "None")
        P: Optional[Matrix] = W_p
        ell_max = shape(W_p)[1]
    elif ell_max is None:
        raise SpecError("ell_max", f"a positive integer (positions={variant.positions!r})", "None")
    if ell > ell_max:
        raise SpecError("x", f"a sequence of length at most ell_max={ell_max}", f"length {ell}")
    if variant.positions == "sinusoidal_paper":
        P = sinusoidal_paper(d_e, ell_max, ell)
    elif variant.positions == "sinusoidal_vaswani":
        P = sinusoidal_vaswani(d_e, ell_max, ell)
    elif variant.positions == "sinusoidal_raw_index":
        P = sinusoidal_raw_index(d_e, ell_max, ell)
    elif variant.positions == "sinusoidal_halves":
        P = sinusoidal_halves(d_e, ell_max, ell)
    elif variant.positions == "none":
        P = None
    scale = N.sqrt(N.num(d_e)) if variant.embedding_scale == "sqrt_d_e" else None
    real = pad_positions(pad, variant, ell)
    columns, tokens, added = [], [], []
    for t in range(ell):  # lines 1-3
        e = token_embedding(x[t], W_e)
        if scale is not None:
            e = [ei * scale for ei in e]
        tokens.append(e)
        if P is not None:
            if real is None:
                p: Optional[Vector] = column(P, t)
            else:  # pad_positions="real": the real tokens before t; a padding position adds none
                p = column(P, real[t]) if pad is not None and pad[t] else None
            if p is not None:
                e = [ei + pi for ei, pi in zip(e, p)]
            added.append(p if p is not None else [N.num(0)] * d_e)
        columns.append(e)
    X = from_columns(columns)
    if recording() and ell:
        record("tokens", from_columns(tokens))
        if P is not None:
            record("positions", [row[:ell] for row in P] if real is None else from_columns(added))
    if variant.embedding_norm:
        record("sum", X)
        X = norm_columns(X, gamma, beta, variant)
    return X
