"""Hyperparameters: every name of ``entry.hyper``, within a budget.

Constraints come from the entry's fields and the variant, so every draw
passes ``entry.check``:

- normalised widths are ≥ 2 where a layer norm needs it (``width_minimum``;
  with ``dtype`` given, an ε that rounds to 0 there counts as no ε: a
  one-row layer norm would divide 0 by √0 in that dtype);
- a tied unembedding copies the width it forces equal (``equal_widths``);
- with ``ell_max`` among the names, every sequence length is ≤ ``ell_max``:
  lengths are drawn first and ``ell_max`` adds room to the smallest value
  the entry's check accepts (the longest length, or more where the check
  asks for it, e.g. DInference's ℓ + ℓ_gen − 1; no room in about a third of
  draws, so the tightest ℓ_max is common);
- with two sequence lengths (ℓ_x, ℓ_z) the second equals the first unless a
  coin says otherwise (cross-attention shapes with ℓ_z ≠ ℓ_x);
- an implementation's ``Limits`` (impls/api.py), when given, narrow every
  draw: minima raise and maxima lower each size's range (to a multiple of
  k where ``multiple_of`` asks for one), equalities, inequalities and
  multiples are settled by raising sizes (``Limits.settle``),
  ``cross_lengths`` off ties the lengths, and a draw the limits still
  refuse (a settled size above its maximum) is discarded, so no case
  outside them is ever drawn.

Each size is ``st.integers(low, bound)``, shrinking towards its smallest value,
except that the sizes that carry order (sequence lengths, head counts; not in
the training and inference budgets, whose examples are whole models) have a
*structural* simplest value (``STRUCTURAL``): their simplest draw is the
smallest size at which order shows (ℓ = 2: a key before and after a query,
so a causal mask masks one and RoPE rotates one position; H = 2, or two kv
heads, H = 2·``kv_group`` (at most ``MOST_SHOWN_HEADS``, else one: H = G),
under grouped-query attention; ℓ = W + 2 under a sliding window W, whose bound
it raises too: a key W places back shows the window and its off-by-one,
``_shows_window``; L = k under local and global layers every k (``global_every``; 2 for k
above ``MOST_SHOWN_LAYERS``), as its least value, so that a global layer follows a local one
(``_alternation_layers``); under ALiBi the least head count that is not a power of
two, with two kv heads or more, H = 3 or 2·``kv_group`` or 3·``kv_group`` (G
above 4: H = G), whose bound it raises too: ALiBi's slopes follow another
rule there, ``_alibi_heads``; under T5's relative bias with a small pair of bucket parameters the least
length whose farthest key lies in the second logarithmic bucket, ``values.sizes.bucket_length``: ℓ = 5
causally and 4 bidirectionally at 6 buckets and max_distance 5). The draw is the
plain one with the smallest value and the structural one swapped, so every
size is drawn as often as before, but Hypothesis's first example (the
simplest choices, and the simplest extension of every early prefix: its
first examples are mostly those: a wrong mask went unseen so, 2026-12-05) is structural, and so is
the shrink target of a failure that shows at every size (a mixture of experts: E = 3 experts with
k = 2 chosen, so that one is left out and the chosen weights' renormalisation shows; k is drawn at
most the E drawn, ``AT_MOST``). A failure that
shows only at the smallest size (ℓ = 1) still shrinks there: it is one step
from the structural value.
Where the budget's ``often`` bounds a kind (layer counts of the training and
inference budgets), the bound is the usual one except in one draw of
``RARE``; kinds in the budget's ``uniform`` (a dataset's shape) are drawn
uniformly (``uniform_integer``, shrinking to the smallest).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional

import numpy as np

from hypothesis import assume
from hypothesis import strategies as st

from ftspec.impls.api import Limits
from ftspec.spec.entry import implied_multiples, rotary_multiple
from ftspec.spec.errors import SpecError
from ftspec.spec.variants import PAPER, VariantSet

from ..value_flow import equal_widths, width_minimum
from ..values.sizes import bucket_length as _bucket_length
from ..dtypes import round_to
from ._budgets import AT_MOST, MODEL_FAMILIES, RARE, hyper_kind, resolve_budget, resolve_dtype, resolve_entry
from ._draws import uniform_integer

__all__ = ["MOST_SHOWN_HEADS", "MOST_SHOWN_LAYERS", "STRUCTURAL", "TIE_WIDTH", "hyperparameters", "structural_size"]

#: the structural simplest value of each kind of size that carries order (see the module docstring)
STRUCTURAL = {"length": 2, "heads": 2, "experts": 3, "chosen": 2}
#: the most heads a structural head count raises H to (grouped-query attention, ALiBi): a larger group
#: (kv_group 8) is drawn at H = G, so that no example pays for 16 or 24 heads
MOST_SHOWN_HEADS = 12
#: the most layers a stack of local and global layers raises L to (``_alternation_layers``)
MOST_SHOWN_LAYERS = 3

#: Smallest width of a zero-variance-singular norm per dtype (see ``hyperparameters``):
#: exact ties of all d entries then have probability ≤ 2^-32 per column.
TIE_WIDTH = {"float64": 2, "float32": 3, "bfloat16": 5, "float16": 4}


@st.composite
def hyperparameters(draw: st.DrawFn, entry: Any, *, variant: VariantSet = PAPER,
                    budget: Any = "default", dtype: Optional[str] = None,
                    limits: Optional[Limits] = None) -> dict[str, int]:
    """{hyperparameter: int} for ``entry`` (Entry or name) under ``variant``, in ``entry.hyper`` order;
    within ``limits`` when given."""
    e = resolve_entry(entry)
    b = resolve_budget(budget, e)
    if not isinstance(variant, VariantSet):
        raise ValueError(f"variant: expected a VariantSet, given {variant!r}")
    for name in e.hyper:
        hyper_kind(name)  # unknown names fail here, before any draw
    if limits is not None and not isinstance(limits, Limits):
        raise ValueError(f"limits: expected a Limits or None, given {limits!r}")
    lim = limits if limits is not None else Limits()
    implied = implied_multiples(e, variant)
    if implied:  # RoPE's even d_attn, GQA's H a multiple of G: drawn so, like a plugin's multiple_of
        multiple = dict(lim.multiple_of)
        for n, k in implied.items():
            multiple[n] = math.lcm(int(multiple.get(n, 1)), k)
        lim = dataclasses.replace(lim, multiple_of=multiple)
    low = {n: max(e.minimum.get(n, 1), int(lim.minimum.get(n, 1))) for n in e.hyper}
    effective = variant
    if dtype is not None and variant.epsilon_placement != "none" and \
            round_to(np.array(variant.epsilon), resolve_dtype(dtype)) == 0:
        effective = variant.replace(epsilon_placement="none", epsilon=0.0)
    # A norm that is singular at zero variance (no ε; or ε outside the root, for gradients) is
    # refused by the spec when a column is constant. In binary64 that never happens by chance, but
    # in a low-precision implementation a column of d nearly equal values ties exactly with
    # probability about 2^-(p(d-1)) per evaluation (p = mantissa bits), which the binary64
    # reference cannot foresee. Wider columns make such ties negligible.
    ties = TIE_WIDTH.get(dtype or "float64", 2) if effective.epsilon_placement in ("none", "outside_root") else 2
    for n, m in width_minimum(e, effective).items():
        if n in low:
            low[n] = max(low[n], m, ties)
    if variant.rotary != "none" and "rotary" in e.switches and "d_attn" in low and \
            int(lim.maximum.get("d_attn", 4)) >= 4:
        low["d_attn"] = max(low["d_attn"], 4)  # two pairs, so that the pairing shows (one pair: no order)
    if variant.rotary != "none" and "rotary" in e.switches and "d_attn" in low and variant.rotary_fraction < 1:
        # partial rotary: d_attn a multiple of k (k ≥ 4) leaves rows unrotated; 2k rotates two pairs, so
        # that the pairing shows in the rotated part as well (k alone where a plugin's limit is below 2k)
        k = rotary_multiple(variant.rotary_fraction)
        low["d_attn"] = max(low["d_attn"], 2 * k if int(lim.maximum.get("d_attn", 2 * k)) >= 2 * k else k)
    shown = _alternation_layers(e, variant)
    if shown and "L" in low and int(lim.maximum.get("L", shown)) >= shown:
        low["L"] = max(low["L"], shown)  # a global layer after a local one: the alternation shows
    followers = dict(equal_widths(e, variant))
    lengths = [n for n in e.hyper if hyper_kind(n) == "length"]

    hyper: dict[str, int] = {}
    for name in e.hyper:
        if name == "ell_max" or name in followers:
            continue
        bound = b.bound(name)
        if b.usual(name) < bound and uniform_integer(draw, "rare " + name, 1, RARE) < RARE:
            bound = b.usual(name)
        if name == "H" and variant.kv_group > 1 and "kv_group" in e.switches:
            bound = max(bound, _grouped_heads(variant.kv_group))  # room for two kv heads: kv_order shows
        if name == "d_attn" and variant.rotary != "none" and "rotary" in e.switches:
            bound = max(bound, 4, low[name])  # room for two pairs: the pairing (half, interleaved) shows
        if name == "H" and _shows_alibi(e, variant):
            bound = max(bound, _alibi_heads(e, variant))  # room for H not a power of two: its slope rule shows
        if hyper_kind(name) == "length" and _shows_window(e, variant, b.context):
            bound = max(bound, variant.window + 2)  # room for the first key past the window, and one more
        if hyper_kind(name) == "length" and _bucket_length(e, variant, b.context):
            bound = max(bound, _bucket_length(e, variant, b.context))  # room for T5's logarithmic buckets
        bound = min(bound, _most(lim, name, lengths))
        if AT_MOST.get(name) in hyper:  # k ≤ E: within the size drawn before it
            bound = min(bound, hyper[AT_MOST[name]])
        if name in lengths[1:] and (not lim.cross_lengths or not draw(st.booleans())):
            hyper[name] = hyper[lengths[0]]  # the same length as the first sequence
            continue
        top = max(low[name], bound)
        if hyper_kind(name) in b.uniform:
            drawn = uniform_integer(draw, name, low[name], top)
        else:
            drawn = draw(st.integers(low[name], top))
        aim = structural_size(e, name, variant) if e.family not in MODEL_FAMILIES else None
        hyper[name] = _swapped(drawn, low[name], aim, top)
    for _ in range(2 if lim.relations(list(e.hyper)) or lim.multiples(list(e.hyper)) else 1):
        hyper = lim.settle(hyper)
        for name, leader in followers.items():
            hyper[name] = max(hyper[leader], hyper.get(name, 0), low[name])
            hyper[leader] = hyper[name]
    if "ell_max" in e.hyper:
        longest = max((hyper[n] for n in lengths), default=low["ell_max"])
        tightest = _tightest_context(e, hyper, variant, max(longest, low["ell_max"]))
        room = 0
        most = min(b.context, int(lim.maximum.get("ell_max", b.context)))
        if draw(st.integers(0, 2)) and tightest < most:
            room = draw(st.integers(0, most - tightest))
        hyper["ell_max"] = tightest + room
    hyper = {n: int(hyper[n]) for n in e.hyper}
    assume(lim.admits(hyper))  # a settled size above its maximum (tests count these)
    if e.check is not None:
        try:
            e.check(hyper, variant)
        except SpecError:  # a constraint this module does not know: discard (tests count these)
            assume(False)
    return hyper


def structural_size(e: Any, name: str, variant: VariantSet) -> Optional[int]:
    """The structural simplest value of size ``name`` of entry ``e`` under ``variant`` (None: its
    smallest): ℓ = 2 for a sequence length, H = 2 for a head count (2·``kv_group`` under grouped-query
    attention: two kv heads, so that their order shows; ``_grouped_heads``)."""
    kind = hyper_kind(name)
    if kind not in STRUCTURAL:
        return None
    if name == "H" and _shows_alibi(e, variant):
        return _alibi_heads(e, variant)
    if name == "H" and variant.kv_group > 1 and "kv_group" in e.switches:
        return _grouped_heads(variant.kv_group)
    if kind == "length" and _shows_window(e, variant, None):
        return max(STRUCTURAL[kind], variant.window + 2)  # a key W places back, and one W + 1 back
    if kind == "length" and _bucket_length(e, variant, None):
        return max(STRUCTURAL[kind], _bucket_length(e, variant, None))
    return STRUCTURAL[kind]


def _shows_window(e: Any, variant: VariantSet, context: Optional[int]) -> bool:
    """Whether lengths are raised so that a sliding window W drops keys: ℓ = W + 2 keeps a key W
    places back (which W + 1 keys, the classic off-by-one, would read) and one more. Only for a
    window the budget's context holds (``context`` None: any): a declared W of thousands is shown
    by a configuration with a small one, not by sequences of thousands."""
    return bool(variant.window) and "window" in e.switches and (context is None or variant.window + 2 <= context)


def _alternation_layers(e: Any, variant: VariantSet) -> int:
    """The least layer count at which local and global layers (``global_every`` k ≥ 2 with a window)
    both appear, k (layer k − 1 is the first global one), for k up to ``MOST_SHOWN_LAYERS``; 2 above
    it (Gemma 3's k = 6: two local layers, whose window and base show, not six layers per example);
    0 where nothing alternates (k = 0 or 1, no window, an entry that does not read it)."""
    k = variant.global_every
    if "global_every" not in e.switches or not variant.window or k < 2:
        return 0
    return k if k <= MOST_SHOWN_LAYERS else 2


def _shows_alibi(e: Any, variant: VariantSet) -> bool:
    return variant.position_bias == "alibi" and "position_bias" in e.switches


def _alibi_heads(e: Any, variant: VariantSet) -> int:
    """The least head count at which ALiBi's slopes for H not a power of two show (Press et al. 2022:
    the first 2^⌊log₂ H⌋ heads, then every other slope of twice as many; computing 2^(−8(h+1)/H)
    instead is the classic slip), with two key/value heads or more under grouped-query attention so
    that their order shows too: 2·G when that is not a power of two, else 3·G (G = 1: H = 3); above
    ``MOST_SHOWN_HEADS`` the least multiple of G (G = 8: H = 8, the rule shown by the smaller groups)."""
    G = variant.kv_group if "kv_group" in e.switches else 1
    H = 2 * G if (2 * G) & (2 * G - 1) else 3 * G
    return H if H <= MOST_SHOWN_HEADS else G


def _grouped_heads(G: int) -> int:
    """The least head count at which grouped-query attention with G query heads per kv head shows
    the order of its kv heads (two kv heads: H = 2·G), or G itself (one kv head, H = G: multi-query)
    where 2·G is above ``MOST_SHOWN_HEADS``: a 70B Llama's G = 8 is drawn at H = 8 (the size is then
    shown, and the order by the groups of 2 to 4 drawn beside it), not at 16 heads per example."""
    return 2 * G if 2 * G <= MOST_SHOWN_HEADS else G


def _swapped(drawn: int, low: int, aim: Optional[int], top: int) -> int:
    """``drawn`` with ``low`` and the structural value ``aim`` swapped (when ``aim`` lies above ``low``
    and within ``top``): the same distribution of sizes, with the structural one simplest."""
    if aim is None or not low < aim <= top:
        return drawn
    return aim if drawn == low else low if drawn == aim else drawn


def _most(limits: Limits, name: str, lengths: list[str]) -> int:
    """The largest value ``limits`` allow ``name`` before settling (a length is also bounded by an
    ℓ_max maximum; a size that must be a multiple of k, by the largest multiple of k within its
    maximum, so that rounding up does not leave it)."""
    most = int(limits.maximum.get(name, 1 << 30))
    if name in lengths and "ell_max" in limits.maximum:
        most = min(most, int(limits.maximum["ell_max"]))
    k = int(limits.multiple_of.get(name, 1))
    return most // k * k if most >= k else most


def _tightest_context(e: Any, hyper: dict[str, int], variant: VariantSet, start: int) -> int:
    """The smallest ℓ_max ≥ ``start`` that the entry's check accepts with the
    other sizes (``start`` itself when none within reach: the caller's final
    check then discards the draw)."""
    if e.check is None:
        return start
    for ell_max in range(start, start + sum(hyper.values()) + 1):
        try:
            e.check({**hyper, "ell_max": ell_max}, variant)
        except SpecError:
            continue
        return ell_max
    return start
