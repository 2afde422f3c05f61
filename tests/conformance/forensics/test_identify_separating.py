"""``identify`` decides a switch only on cases that separate its values (issue 35, finding 2).

Both public LLaMA codes rotate interleaved pairs (2i, 2i+1); identify's merged suggestion for them
was ``rotary='half'``: its cases had head width 2 and one key/value head, where the two pairings,
the rotary bases and the two key/value head orders give the same numbers, and the merge then
picked the first of the values still possible. The stand-in here is the bundled NumPy plugin
declared and computing a LLaMA layer with interleaved pairs (karpathy/llama2.c ``model.py``'s
``apply_rotary_emb``): identify must decide ``rotary=interleaved`` on a case built on purpose
with d_attn = 4, two key/value heads and ℓ = 3, and where no case can separate the values it must
say so instead of picking one.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ftspec.conformance.core.case import Case
from ftspec.conformance.forensics.identify import (Observation, Fit, search, separates, separating_hyper)
from ftspec.conformance.session import identify
from ftspec.impls.api import Limits
from ftspec.impls.discovery import load
from ftspec.spec.registry import entry
from ftspec.spec.variants import PAPER, preset

#: a LLaMA layer with RoPE on interleaved pairs (Meta's and llama2.c's reference code)
# grouped (kv_group 2, the llama preset before presets stopped fixing sizes): kv_order matters
INTERLEAVED = preset("llama").replace(rotary="interleaved", kv_group=2)


def _plugin(declared, computes=None, limits: Limits = Limits()):
    """The NumPy plugin declaring ``declared`` and computing ``computes`` (default: the same)."""
    numpy_impl = load("numpy")
    algorithms = dict(numpy_impl.algorithms)
    if computes is not None:
        inner = numpy_impl.algorithms["self_attention"]
        algorithms["self_attention"] = lambda i, p, ctx: inner(i, p, dataclasses.replace(ctx, variant=computes))
    return dataclasses.replace(numpy_impl, name="llama-stand-in", algorithms=algorithms, variants=[declared],
                               limits=limits)


def _group(found, switch: str):
    (identity,) = found.identities
    return next(g for g in identity.groups if g.group == switch)


def test_interleaved_rotary_is_decided_on_a_case_that_separates_it():
    found = identify(("llama-stand-in", _plugin(INTERLEAVED)), algorithms=["self_attention"])
    (identity,) = found.identities
    wide = [o for o in identity.observations if o.hyper["d_attn"] >= 4 and o.hyper["H"] // 2 >= 2
            and o.hyper["ell"] > 1]
    assert wide, [o.hyper for o in identity.observations]  # a separating case, chosen on purpose
    rotary = _group(found, "rotary")
    assert rotary.status == "decided" and rotary.consistent == [{"rotary": "interleaved"}], rotary.line()
    assert {"rotary": "half"} in rotary.excluded
    assert _group(found, "kv_order").consistent == [{"kv_order": "consecutive"}]
    assert _group(found, "rope_base").consistent == [{"rope_base": 10000.0}]
    assert found.merged.rotary == "interleaved" and not found.merging.undecided
    assert found.merging.changes == {}  # the declaration is right: nothing to change


def test_a_wrong_pairing_claim_is_named_as_the_change_to_make():
    """Declared as Hugging Face's rotate_half, computing interleaved pairs: identify decides the
    pairing the code computes and says what to change in the declaration."""
    llama = preset("llama")
    found = identify(("llama-stand-in", _plugin(llama, computes=llama.replace(rotary="interleaved"))),
                     algorithms=["self_attention"])
    rotary = _group(found, "rotary")
    assert rotary.status == "decided" and rotary.chosen == {"rotary": "interleaved"}
    assert {"rotary": "half"} in rotary.excluded
    assert found.merging.changes == {"rotary": "interleaved"}


def test_where_no_case_can_separate_the_pairings_the_switch_stays_undecided():
    """Limits that allow only d_attn = 2 (one rotary pair): no case separates half from interleaved;
    identify says so, in the switch and in the merged result, and names no pairing as found."""
    found = identify(("llama-stand-in", _plugin(INTERLEAVED, limits=Limits(maximum={"d_attn": 2}))),
                     algorithms=["self_attention"])
    (identity,) = found.identities
    rotary = _group(found, "rotary")
    assert rotary.status == "undecided" and {"rotary": "half"} in rotary.consistent
    assert "no case separates" in rotary.line()
    assert any(u.startswith("rotary: no case separates") for u in found.merging.undecided)
    assert any("separates" in n and "rotary" in n for n in identity.notes)
    assert found.merging.changes == {}  # the declared pairing is not refuted: nothing to change


def test_separating_sizes_are_chosen_on_purpose():
    e = entry("self_attention")
    wide = separating_hyper(e, {"H": 2, "d_e": 4, "d_attn": 2, "d_mid": 2, "ell": 1}, INTERLEAVED)
    assert wide is not None and wide["d_attn"] == 4 and wide["H"] == 4 and wide["ell"] == 3
    assert separating_hyper(e, dict(e.sizes), INTERLEAVED, lambda h: h["d_attn"] <= 2) is None


def test_separation_needs_disjoint_intervals():
    near = Fit(True, 0.5, {"Y": np.array([1.0])}, allowance={"Y": np.array([0.1])})
    close = Fit(False, 2.0, {"Y": np.array([1.15])}, allowance={"Y": np.array([0.1])})
    far = Fit(False, 30.0, {"Y": np.array([1.5])}, allowance={"Y": np.array([0.1])})
    assert not separates(near, close) and separates(near, far)
    refused = Fit(False, math.inf, None, "refused", refused=True)
    assert separates(near, refused) and not separates(refused, refused)
    assert not separates(near, Fit(False, math.nan, None, unknown=True))


def test_a_miss_where_no_case_separates_decides_nothing():
    """The general rule, on a judge made for it: the implementation's output lies within the biased
    variance's bound and outside the others'. With loose allowances (the bounds overlap) no case
    separates the values: the misses rest on where the output happened to fall, nothing is
    excluded, the switch is undecided. With tight ones the unbiased variance's outputs lie beyond
    the bounds and it is excluded; the one-pass variance, the same mathematics, still gives the
    same outputs to within 1e-12 and stays not separated."""
    e = entry("layer_norm")
    case = Case.build(e, dict(e.sizes), PAPER, seed=0)

    def judge_with(width: float):
        def judge(ref, variant, params):
            fits = variant.variance == "biased"
            allowance = {"X_hat": np.full(np.shape(ref.outputs["X_hat"]), width)}
            return Fit(fits, 0.5 if fits else 1.5, ref.outputs, allowance=allowance)
        return judge

    unbiased, one_pass = {"variance": "unbiased"}, {"variance": "one_pass"}
    for width in (1e3, 1e-12):
        obs = Observation("edge", e, dict(case.hyper), case.inputs, case.params, {}, "float64",
                          judge=judge_with(width))
        identity = search(e, [obs], PAPER, "test", "float64")
        variance = next(g for g in identity.groups if g.group == "variance")
        assert variance.consistent == [{"variance": "biased"}] and one_pass in variance.unseparated
        assert variance.status == "undecided" and "no case separates" in variance.line(), variance.line()
        if width > 1:
            assert unbiased in variance.unseparated and not variance.excluded, variance.line()
        else:
            assert unbiased in variance.excluded, variance.line()
