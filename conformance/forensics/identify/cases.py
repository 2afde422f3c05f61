"""The designed cases: chosen for what separates conventions, and sizes that separate the head switches."""

from __future__ import annotations

from typing import Callable, Mapping, Optional

import numpy as np

from ftspec.spec import SpecError
from ftspec.spec.entry import Kind
from ftspec.spec.registry import Entry
from ftspec.spec.variants import VariantSet

from ...core.case import Case


#: (label, style, seed): the values-builder cases every entry gets
_BUILT = (("well-scaled", "well-scaled", 0), ("near-constant columns", "near-constant", 1),
          ("wide-range", "wide-range", 2), ("well-scaled (seed 3)", "well-scaled", 3))


def designed_cases(entry: Entry, hyper: Mapping[str, int], variant: VariantSet, dtype: str,
                   limits_admit: Callable[[Mapping[str, int]], bool] = lambda h: True,
                   separating: Optional[Mapping[str, int]] = None) -> list[tuple[str, Case]]:
    """The cases that separate conventions, built for the call's variant set (its parameter
    structure): the builder's well-scaled, near-constant and wide-range values, for an entry
    with a mask input the first case again with query column 0 emptied (no key to attend to), and
    for one with rotary positions or grouped key/value heads a case at sizes where their values
    differ (``separating``, default ``separating_hyper``; none where ``hyper`` already does)."""
    out = []
    for label, style, seed in _BUILT:
        if style == "near-constant" and not _has_norm_or_real(entry):
            continue
        out.append((label, Case.build(entry, dict(hyper), variant, seed=seed, style=style, dtype=dtype)))
    if _has_norm_or_real(entry):
        out.append(("small scale (x 2^-10)", _small(out[0][1])))
    if entry.switches & HEAD_SWITCHES and not _separates_heads(entry, hyper, variant):
        wide = dict(separating) if separating is not None else separating_hyper(entry, hyper, variant, limits_admit)
        if wide is not None:
            out.append((f"separating heads ({_sizes_text(entry, wide, variant)})",
                        Case.build(entry, wide, variant, seed=5, dtype=dtype)))
    if {"ell_z", "ell_x"} <= set(hyper) and hyper["ell_z"] == hyper["ell_x"] and limits_admit(
            {**hyper, "ell_x": hyper["ell_z"] + 2}):
        # ℓ_z ≠ ℓ_x: the only place the causal alignments differ
        unequal = {**hyper, "ell_x": hyper["ell_z"] + 2}
        out.append(("unequal lengths (ell_x = ell_z + 2)", Case.build(entry, unequal, variant, seed=4, dtype=dtype)))
    masks = [s.name for s in entry.inputs if s.kind == Kind.MASK]
    if masks:
        base = out[0][1]
        inputs = dict(base.inputs)
        for name in masks:
            m = np.array(inputs[name], dtype=bool)  # [t_z, t_x]
            if m.ndim == 2 and m.shape[1] >= 1:
                m[:, 0] = False
                inputs[name] = m
        out.append(("empty query column 0", Case(base.algorithm, dict(base.hyper), variant, inputs,
                                                 dict(base.params), style=base.style)))
    return out


#: the switches whose values give the same numbers at one rotary pair, one key/value head or one
#: position: RoPE's pairing, base and scaling (llama3 keeps pair 0's frequency 1), the key/value
#: head order
HEAD_SWITCHES = frozenset({"rotary", "rope_base", "rope_scaling", "kv_order"})
#: the least sizes at which they differ: two rotary pairs (half-split pairs (0, 2), (1, 3) against
#: interleaved (0, 1), (2, 3); a second frequency base^(-2/4), the first is 1 for every base), two
#: key/value heads (⌊h/G⌋ against h mod H/G), and a third position (rotation by t = 0, 1, 2)
SEPARATING_WIDTH, SEPARATING_KV_HEADS, SEPARATING_LENGTH = 4, 2, 3


def _kv_group(entry: Entry, variant: VariantSet) -> int:
    return variant.kv_group if "kv_group" in entry.switches else 1


def _separates_heads(entry: Entry, hyper: Mapping[str, int], variant: VariantSet) -> bool:
    """Whether sizes ``hyper`` let the ``HEAD_SWITCHES`` the entry reads differ."""
    if "d_attn" in hyper and entry.switches & {"rotary", "rope_base"} and hyper["d_attn"] < SEPARATING_WIDTH:
        return False
    if "H" in hyper and "kv_order" in entry.switches and hyper["H"] < SEPARATING_KV_HEADS * _kv_group(entry, variant):
        return False
    return all(v >= SEPARATING_LENGTH for n, v in hyper.items() if _is_length(n))


def separating_hyper(entry: Entry, hyper: Mapping[str, int], variant: VariantSet,
                     admits: Callable[[Mapping[str, int]], bool] = lambda h: True,
                     settle: Callable[[dict[str, int]], dict[str, int]] = lambda h: h) -> Optional[dict[str, int]]:
    """``hyper`` raised, on purpose, to sizes where RoPE's pairings and bases and the key/value head
    orders give different numbers (``SEPARATING_*``: an even head width of at least 4, at least two
    key/value heads under the call's ``kv_group``, every length at least 3), with ℓ_max raised to
    hold them and one layer per stack; ``settle`` then ties sizes as the implementation's limits
    require. None when the
    limits (``admits``) or the entry refuse them: no case can then separate those switches."""
    out = dict(hyper)
    if "d_attn" in out and entry.switches & {"rotary", "rope_base"}:
        out["d_attn"] = max(out["d_attn"] + out["d_attn"] % 2, SEPARATING_WIDTH)
    if "H" in out and "kv_order" in entry.switches:
        g = _kv_group(entry, variant)
        out["H"] = max(out["H"] + (-out["H"]) % g, SEPARATING_KV_HEADS * g)
    for n in list(out):
        if _is_length(n):
            out[n] = max(out[n], SEPARATING_LENGTH)
        elif n in ("L", "L_enc", "L_dec"):  # one layer shows them as well as several, at a fraction of the cost
            out[n] = max(1, int(entry.minimum.get(n, 1)))
    if "ell_max" in out:
        out["ell_max"] = max([out["ell_max"], *(v for n, v in out.items() if _is_length(n))])
    out = settle(out)
    if not (_separates_heads(entry, out, variant) and admits(out) and _accepted(entry, out, variant)):
        return None
    return out


def _sizes_text(entry: Entry, hyper: Mapping[str, int], variant: VariantSet) -> str:
    """The sizes that make a case separating, in words: ``d_attn = 4, 2 kv heads, ell = 3``."""
    parts = []
    if "d_attn" in hyper and entry.switches & {"rotary", "rope_base"}:
        parts.append(f"d_attn = {hyper['d_attn']}")
    if "H" in hyper and "kv_order" in entry.switches:
        kv = 1 if variant.kv_heads == "one" else hyper["H"] // _kv_group(entry, variant)  # multi-query: one
        parts.append(f"{kv} kv heads")
    parts += [f"{n} = {v}" for n, v in hyper.items() if _is_length(n)]
    return ", ".join(parts)


#: the factor of the small-scale case: a power of two, so that rounding to any dtype commutes with it
SMALL = 2.0 ** -10


def _small(case: Case) -> Case:
    """``case`` with its real inputs (or, with none, its embedding tables) times ``SMALL``: a norm then
    sees a variance near 1e-6, where ε = 1e-5 and 1e-6 dominate it even at bfloat16."""
    real = {s.name for s in case.entry.inputs if s.kind == Kind.REAL}
    inputs = {k: (v * SMALL if k in real else v) for k, v in case.inputs.items()}
    params = dict(case.params)
    if not real:
        params = {k: (v * SMALL if k.rsplit(".", 1)[-1] in ("W_e", "W_p") else v) for k, v in params.items()}
    return Case(case.algorithm, dict(case.hyper), case.variant, inputs, params, style=case.style)


def _has_norm_or_real(entry: Entry) -> bool:
    return bool(entry.switches & {"epsilon", "variance", "norm", "embedding_norm", "norm_placement"})


def _is_length(name: str) -> bool:
    """A sequence length (ℓ, ℓ_x, ℓ_z, ℓ_gen): at most ℓ_max."""
    return (name == "ell" or name.startswith("ell_")) and name != "ell_max"


def _accepted(entry: Entry, hyper: Mapping[str, int], variant: VariantSet) -> bool:
    if entry.check is None:
        return True
    try:
        entry.check(dict(hyper), variant)
    except SpecError:
        return False
    return True
