"""ALiBi: attention with linear biases (variant ``position_bias="alibi"``).

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
always. Both add it after the 1/√d scale (BLOOM's ``alibi.baddbmm(..., alpha=inv_norm_factor)``,
MPT's ``attn_weight * softmax_scale + attn_bias``). The bias is defined where queries and keys are
positions of one sequence, read causally: the causal self-attentions (Press et al. §3), not the
bidirectional or cross-attentions.
"""

from __future__ import annotations

from typing import Any

from . import numbers
from .errors import SpecError

__all__ = ["alibi_slopes", "alibi_exponents"]


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
