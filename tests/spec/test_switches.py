"""No dead switches: every variant switch changes what the spec computes.

For every switch in ``SWITCHES`` and every value other than the paper's, some
registry entry that lists the switch in ``Entry.switches`` gives a different
result on some concrete input than under the paper's variant set (a refusal
with SpecError counts as a result: ``empty_query="error"`` refuses what the
other values answer). Conversely, every switch an entry lists does change
that entry (the list claims nothing it does not use).

``scale_placement`` is the exception by design: "same mathematics,
different rounding". Its theorem has two halves, both tested: in binary64
the placements differ in at least one bit on some input, and in mpmath at 40
digits they agree to 1e-25.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import pytest

from ftspec.spec import MpNumbers, SpecError, evaluate
from ftspec.spec.entry import Kind, implied_multiples
from ftspec.spec.registry import REGISTRY, Entry
from ftspec.spec.variants import PAPER, READ_WITH, SAME_MATHEMATICS, SWITCHES, VariantSet

from .helpers import FORWARD, flat_params, leaves, random_inputs, small_hyper

#: Contexts in which a switch can be observed: e.g. the norm switches act on
#: the embedding only when it has a norm (embedding_norm=True).
BASES = (PAPER, PAPER.replace(embedding_norm=True))
SEEDS = range(4)
#: A genuine (mathematical) difference is far above rounding.
MATERIAL = 1e-9


def non_paper_values(switch: str) -> list[Any]:
    if switch == "epsilon":
        return [0.25]
    return [v for v in SWITCHES[switch].choices if v != SWITCHES[switch].paper]


def _hyper(e: Entry) -> dict:
    """Small sizes with ℓ_z ≠ ℓ_x, so that the causal mask's alignment shows."""
    return small_hyper(e, ell_z=4, ell_x=3)


def with_switch(base: VariantSet, switch: str, value: Any) -> tuple[VariantSet, VariantSet]:
    """(reference, changed): the two variant sets to compare for switch=value.

    ε cannot be set alone (ε > 0 needs a placement): its non-default value is
    compared with another ε under the same placement; a placement is compared
    with the paper's no-ε norm."""
    if switch == "epsilon":
        ref = base.replace(epsilon=1.0, epsilon_placement="inside_root")
        return ref, ref.replace(epsilon=value)
    if switch == "epsilon_placement":
        return base, base.replace(epsilon=0.25, epsilon_placement=value)
    if switch in READ_WITH:  # read only when another switch is on: compare with that one on
        ref = base.replace(**READ_WITH[switch])
        return ref, ref.replace(**{switch: value})
    return base, base.replace(**{switch: value})


#: switches read only under another one (``spec.variants.READ_WITH``): RoPE's base with a pairing
#: on, the key/value head order with groups of 2 (and H = 4, so that there are two kv heads to
#: order; d_attn = 4 for the base and the local layers' base; L = 2 for local and global layers)


def hyper_for(e: Entry, switch: str, changed: VariantSet) -> dict:
    """``_hyper``, with the sizes the changed set requires (even d_attn under RoPE, H a multiple
    of the group size; H = 4 for the key/value head order)."""
    hyper = _hyper(e)
    for k, m in implied_multiples(e, changed).items():
        hyper[k] = math.lcm(hyper[k], m)
    if switch == "kv_order" and "H" in hyper:
        hyper["H"] = 4
    if switch in ("rope_base", "rope_local_base") and "d_attn" in hyper:  # with d_attn = 2 the one pair
        hyper["d_attn"] = 4  # turns by t·base⁰
    if switch in ("global_every", "rope_local_base") and "L" in hyper:  # layer 0 local, layer 1 global
        hyper["L"] = max(hyper["L"], 2)
    for n in ("ell", "ell_x"):  # T5's buckets (spec 2.13): a distance of 5, past the small pairs' exact buckets
        if switch in ("rel_buckets", "rel_max_distance") and n in hyper:
            hyper[n] = max(hyper[n], 6)
    return hyper


def inputs_for(e: Entry, hyper: dict, seed: int) -> list[dict]:
    """Random inputs, plus (for entries with a mask) the same with query 0 empty."""
    inputs = random_inputs(e, hyper, seed)
    out = [inputs]
    if any(spec.kind == Kind.MASK for spec in e.inputs):
        empty = {k: ([[0] + row[1:] for row in v] if k == "Mask" else v) for k, v in inputs.items()}
        out.append(empty)
    pads = {spec.name for spec in e.inputs if spec.kind == Kind.PADDING}
    if pads:  # position 0 padded (pad, the decoder's pad_x): a causal query with no key
        out.append({k: ([0] + v[1:] if k in pads else v) for k, v in inputs.items()})
    return out


def outcome(e: Entry, inputs: dict, hyper: dict, variant: VariantSet, seed: int, numbers=None) -> Any:
    params = flat_params(e, hyper, variant, seed)
    try:
        out = evaluate(e.name, inputs, params, hyper=hyper, variant=variant, numbers=numbers)
    except SpecError as err:
        return ("refused", err.argument)
    return [x for name in sorted(out) for x in leaves(out[name])]


def difference(a: Any, b: Any) -> float:
    """How far apart two outcomes are (inf for a refusal against a value)."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        return 0.0 if a == b else math.inf
    if len(a) != len(b):
        return math.inf
    worst = 0.0
    for x, y in zip(a, b):
        x, y = float(x), float(y)
        if math.isnan(x) or math.isnan(y):
            if not (math.isnan(x) and math.isnan(y)):
                return math.inf
            continue
        worst = max(worst, abs(x - y))
    return worst


def witness(e: Entry, switch: str, value: Any) -> Optional[str]:
    """A description of an input on which switch=value changes e, or None."""
    for base in BASES:  # a switch the entry reads only with another's value (Entry.read_with): with it
        ref, changed = with_switch(base.replace(**e.read_with.get(switch, {})), switch, value)
        for seed in SEEDS:
            hyper = hyper_for(e, switch, changed)
            for inputs in inputs_for(e, hyper, seed):
                a = outcome(e, inputs, hyper, ref, seed)
                b = outcome(e, inputs, hyper, changed, seed)
                if difference(a, b) > MATERIAL:
                    return f"{e.name}, seed {seed}, base {base.describe()}"
    return None


MATHEMATICAL = [(s, v) for s in SWITCHES if s != "scale_placement" for v in non_paper_values(s)
                if (s, v) not in SAME_MATHEMATICS]  # rounding only: tests/spec/test_one_pass_variance.py


@pytest.mark.parametrize("switch,value", MATHEMATICAL, ids=[f"{s}={v}" for s, v in MATHEMATICAL])
def test_every_switch_value_changes_some_entry(switch, value):
    entries = [e for e in FORWARD.values() if switch in e.switches]
    assert entries, f"no registry entry lists the switch {switch!r}"
    found = [w for e in entries if (w := witness(e, switch, value))]
    assert found, f"{switch}={value!r} changes none of {[e.name for e in entries]}"


def test_epsilon_placements_differ_from_each_other():
    """√(v + ε) and √v + ε are different norms."""
    e = REGISTRY["layer_norm"]
    hyper = _hyper(e)
    inputs = random_inputs(e, hyper, 0)
    a = outcome(e, inputs, hyper, PAPER.replace(epsilon=0.25, epsilon_placement="inside_root"), 0)
    b = outcome(e, inputs, hyper, PAPER.replace(epsilon=0.25, epsilon_placement="outside_root"), 0)
    assert difference(a, b) > MATERIAL


ENTRY_SWITCHES = [(e.name, s) for e in FORWARD.values() for s in sorted(e.switches)]


@pytest.mark.parametrize("name,switch", ENTRY_SWITCHES, ids=[f"{n}:{s}" for n, s in ENTRY_SWITCHES])
def test_every_listed_switch_affects_its_entry(name, switch):
    """Entry.switches lists only switches that can change that entry's result."""
    e = REGISTRY[name]
    if switch == "scale_placement":
        assert _rounding_witness(e) is not None, f"scale_placement changes no bit of {name}"
        return
    assert any(witness(e, switch, v) for v in non_paper_values(switch)), (
        f"{name} lists {switch!r}, but no value of it changes the result")


# --------------------------------------------------------------------------
# scale_placement: same mathematics, different rounding
# --------------------------------------------------------------------------

PLACEMENTS = [v for v in SWITCHES["scale_placement"].choices if v != "scores"]
SCALE_ENTRIES = [e.name for e in FORWARD.values() if "scale_placement" in e.switches]


def _rounding_witness(e: Entry, value: Optional[str] = None, tries: int = 12) -> Optional[int]:
    values = [value] if value else PLACEMENTS
    for seed in range(tries):
        hyper = _hyper(e)
        inputs = random_inputs(e, hyper, seed)
        a = outcome(e, inputs, hyper, PAPER, seed)
        for v in values:
            b = outcome(e, inputs, hyper, PAPER.replace(scale_placement=v), seed)
            if any(float(x).hex() != float(y).hex() for x, y in zip(a, b)):
                return seed
    return None


@pytest.mark.parametrize("value", PLACEMENTS)
def test_scale_placement_changes_bits_in_float(value):
    """Dividing Q (or Q and K by the fourth root) instead of S rounds
    differently: some entry gives a different binary64 result on some input."""
    found = [(name, s) for name in SCALE_ENTRIES
             if (s := _rounding_witness(REGISTRY[name], value)) is not None]
    assert found, f"scale_placement={value} changes no bit anywhere"


@pytest.mark.parametrize("name", SCALE_ENTRIES)
@pytest.mark.parametrize("value", PLACEMENTS)
def test_scale_placement_is_the_same_mathematics(name, value):
    """In mpmath at 40 digits the three placements agree to 1e-25: they are
    the same function (KᵀQ/c = Kᵀ(Q/c) = (K/√c)ᵀ(Q/√c) for the divisor c),
    only rounded differently."""
    e = REGISTRY[name]
    N = MpNumbers(40)
    for seed in range(3):
        hyper = _hyper(e)
        inputs = random_inputs(e, hyper, seed)
        a = outcome(e, inputs, hyper, PAPER, seed, numbers=N)
        b = outcome(e, inputs, hyper, PAPER.replace(scale_placement=value), seed, numbers=N)
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert abs(x - y) <= N.const("1e-25") * (1 + abs(x)), (name, value, seed, x, y)


def test_causal_alignment_changes_the_mask_when_lengths_differ():
    """bottom_right ≠ top_left exactly when ℓ_z ≠ ℓ_x."""
    bottom = PAPER.replace(causal_alignment="bottom_right")
    for ell_z in range(1, 5):
        for ell_x in range(1, 5):
            h = {"ell_z": ell_z, "ell_x": ell_x}
            a = evaluate("unidirectional_mask", hyper=h)["Mask"]
            b = evaluate("unidirectional_mask", hyper=h, variant=bottom)["Mask"]
            assert (a == b) == (ell_z == ell_x), (ell_z, ell_x)


UNLISTED = [(e.name, s) for e in FORWARD.values() for s in sorted(set(SWITCHES) - e.switches)]


@pytest.mark.parametrize("name,switch", UNLISTED, ids=[f"{n}:{s}" for n, s in UNLISTED])
def test_unlisted_switches_change_nothing(name, switch):
    """The converse: a switch an entry does not list leaves its result
    unchanged, bit for bit (Entry.switches is complete)."""
    e = REGISTRY[name]
    for base in BASES:
        for value in non_paper_values(switch):
            ref, changed = with_switch(base, switch, value)
            for seed in range(2):
                hyper = _hyper(e)
                for inputs in inputs_for(e, hyper, seed):
                    a = outcome(e, inputs, hyper, ref, seed)
                    b = outcome(e, inputs, hyper, changed, seed)
                    same = a == b if isinstance(a, tuple) or isinstance(b, tuple) else (
                        len(a) == len(b) and all(float(x).hex() == float(y).hex() for x, y in zip(a, b)))
                    assert same, f"{name} does not list {switch!r}, but {switch}={value!r} changes it"
