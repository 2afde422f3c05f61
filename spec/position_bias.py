"""Position biases on the attention scores: ALiBi (``position_bias="alibi"``) and T5's buckets
(``rel_bias="t5_buckets"``, spec 2.13: ``t5_bucket`` below).

ALiBi: attention with linear biases (variant ``position_bias="alibi"``).

Press, Smith, Lewis, *Train Short, Test Long: Attention with Linear Biases Enables Input Length
Extrapolation* (ICLR 2022), §3: no position is added to the embeddings; instead each head h adds
to its scaled scores a penalty linear in the distance from the query to the key,

    softmax(q_iᵀ k_j / √d + m_h · (j − i)),  j ≤ i,

with a fixed, head-specific slope m_h. Here, in the paper's [t_z, t_x] layout, line 4 of
Algorithm 4 becomes S[t_z, t_x] ← S[t_z, t_x]/√d_attn + m_h·(t_z − t_x), before the mask.

The slopes are a geometric sequence. For H a power of two, m_h = 2^(−8(h+1)/H), h = 0 .. H − 1
(H = 8: 1/2, 1/4, ..., 1/256). For other H (Press et al.'s reference code, ``get_slopes`` in
ofirpress/attention_with_linear_biases; Hugging Face transformers 5.24
``models/bloom/modeling_bloom.py::_get_alibi_slopes``, which ``build_alibi_tensor`` uses), with
n = 2^⌊log₂ H⌋ the largest power of two below H: the first n heads take the power-of-two slopes
of n heads, 2^(−8(h+1)/n), and the other H − n heads take every other slope of 2n heads,
starting with the first, 2^(−8(2i+1)/(2n)) = 2^(−4(2i+1)/n), i = 0 .. H − n − 1. (MPT's
``build_mpt_alibi_tensor``, transformers 5.24 ``models/mpt``, reaches the same list from the next
power of two 2n: the odd-numbered then the even-numbered of its 2n slopes, the first H of them.)
The classic slip computes 2^(−8(h+1)/H) for every H, which agrees only when H is a power of two.

BLOOM adds m_h·(position of the key) for every query (the per-query constant −m_h·t_x cancels in
the softmax, "a translation invariance of softmax", its docstring says), with positions counted
among the real tokens (``attention_mask.cumsum(-1) − 1``); MPT adds m_h·(t_z − (ℓ − 1)). The
spec states the bias on index distances, t_z − t_x: the same weights as BLOOM's wherever no
padding lies between two of a query's keys (no padding, or padding on the left only), and as MPT's
always; in the padded models under ``pad_positions="real"`` on BLOOM's positions, p(t_z) − p(t_x) with
p(t) the real tokens before t (``embedding.pad_positions``).
Both add it after the 1/√d scale (BLOOM's ``alibi.baddbmm(..., alpha=inv_norm_factor)``,
MPT's ``attn_weight * softmax_scale + attn_bias``). The bias is defined where queries and keys are
positions of one sequence, read causally: the causal self-attentions (Press et al. §3), not the
bidirectional or cross-attentions.
"""

from __future__ import annotations

from typing import Any

from . import numbers
from .errors import SpecError

__all__ = ["alibi_slopes", "alibi_exponents", "t5_bias", "t5_bucket"]


def alibi_exponents(H: int) -> list[float]:
    """The slopes' exponents e_h (m_h = 2^e_h), exact dyadic rationals: −8(h+1)/n for the first
    n = 2^⌊log₂ H⌋ heads, then −4(2i+1)/n for the other H − n (Press et al. 2022)."""
    if isinstance(H, bool) or not isinstance(H, int) or H < 1:
        raise SpecError("H", "a positive number of heads (ALiBi gives each head a slope)", repr(H))
    n = 1 << (H.bit_length() - 1)  # the largest power of two ≤ H
    first = [-8.0 * (h + 1) / n for h in range(n)]  # exact: n is a power of two
    extra = [-4.0 * (2 * i + 1) / n for i in range(H - n)]
    return first + extra


def alibi_slopes(H: int) -> list[Any]:
    """m_0 .. m_{H−1} in the current number system: 2^e_h (``alibi_exponents``), one power each."""
    N = numbers.current()
    two = N.num(2)
    return [N.pow(two, N.num(e)) for e in alibi_exponents(H)]


# --------------------------------------------------------------------------
# T5's bucketed relative position bias (variant ``rel_bias="t5_buckets"``; spec 2.13)
# --------------------------------------------------------------------------

def t5_bucket(relative: int, bidirectional: bool, num_buckets: int, max_distance: int) -> int:
    """The bucket of the relative position ``relative`` = t_z − t_x (key minus query: Hugging Face's
    ``memory_position - context_position``) in T5's relative attention bias (Raffel et al. 2020,
    *Exploring the Limits of Transfer Learning with a Unified Text-to-Text Transformer*, §2.1; Hugging
    Face transformers 5.24, models/t5/modeling_t5.py, ``T5Attention._relative_position_bucket``, from
    Mesh TensorFlow's ``_relative_position_bucket``):

    1. bidirectional (an encoder's self-attention): n ← num_buckets // 2 buckets per direction, keys
       after the query (t_z − t_x > 0) take buckets n .. 2n − 1, the others 0 .. n − 1, and
       r ← |t_z − t_x|; unidirectional (a decoder's causal self-attention): n ← num_buckets and
       r ← max(t_x − t_z, 0) (a key after the query, masked anyway, shares bucket 0 with the query's own);
    2. e ← n // 2 (``max_exact``): r < e is its own bucket r;
    3. r ≥ e: bucket e + ⌊(n − e)·ln(r/e) / ln(D/e)⌋, D = max_distance, at most n − 1.

    Decision (float32 rounding at a whole number): the spec states line 3 over the real numbers,
    ⌊x⌋ of the real x = (n − e)·ln(r/e)/ln(D/e), and computes it exactly with integers, x ≥ k ⇔
    r^(n−e)·e^k ≥ D^k·e^(n−e) (r > 0, D > e ≥ 1), so no rounding enters a bucket. The library
    computes x in float32 (``torch.log(relative_position.float() / max_exact) / math.log(max_distance
    / max_exact) * (num_buckets - max_exact)``, then ``.to(torch.long)``): where the real x is a whole
    number k ≥ 1 (a rational power coincidence, (r/e)^(n−e) = (D/e)^k) its float32 x may fall just
    below k, one bucket lower than the spec's. Of num_buckets < 40, max_distance < 200 and |r| ≤ 300,
    transformers 5.24 differs from the real-number bucket at 21 such points, each one bucket lower at
    a whole x (num_buckets 17, max_distance 27, causal r = 12: x = 9·ln 1.5/ln 3.375 = 3, the library 2),
    and nowhere else; at T5's own 32 and 128 it agrees everywhere (its whole x, bidirectional
    |r| = 16, 32, 64, come out exact in float32). So the real-number value is the convention: it is
    the one definition free of a float format, T5's parameters meet no disagreement, and the values
    the strategies draw (``SWITCHES["rel_buckets"]``, ``["rel_max_distance"]``) have no whole x below
    the last bucket within the drawn lengths. A plugin of other parameters whose distances reach such
    a point would differ there, as a float32 implementation differs from the real numbers, and is
    shown as a wrong bucket.
    """
    for name, value in (("relative", relative), ("num_buckets", num_buckets), ("max_distance", max_distance)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(name, "a whole number", repr(value))
    bucket = 0
    n = num_buckets
    if bidirectional:
        n //= 2
        if relative > 0:  # keys after the query: the upper half
            bucket += n
        r = abs(relative)
    else:
        r = max(-relative, 0)
    e = n // 2  # max_exact
    if e < 1 or max_distance <= e:
        raise SpecError("rel_buckets", "num_buckets with max_exact ≥ 1 below max_distance (T5: 32 and 128)",
                        f"num_buckets={num_buckets}, max_distance={max_distance}, bidirectional={bidirectional}")
    if r < e:  # line 2: exact
        return bucket + r
    width = n - e  # line 3: the logarithmic buckets, k = ⌊(n − e)·ln(r/e)/ln(D/e)⌋ by integers
    k = 0
    while e + k < n - 1 and r ** width * e ** (k + 1) >= max_distance ** (k + 1) * e ** width:
        k += 1
    return bucket + e + k


def t5_bias(table: Any, ell_z: int, ell_x: int, head: int, bidirectional: bool, num_buckets: int,
            max_distance: int) -> list[list[Any]]:
    """B[t_z][t_x] = table[bucket(t_z − t_x)][head]: head ``head``'s bias on the scores [t_z, t_x]
    (``table``: the learned (num_buckets × H) ``rel_bias``, Hugging Face's ``relative_attention_bias``
    embedding weight; ``T5Attention.compute_bias``)."""
    return [[table[t5_bucket(tz - tx, bidirectional, num_buckets, max_distance)][head] for tx in range(ell_x)]
            for tz in range(ell_z)]
