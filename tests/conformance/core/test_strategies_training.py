"""Tests of the conformance strategies on the training and inference entries
(Algorithms 11-15: the training and inference families).

Drawn cases must be accepted by the spec at every dtype and stay inside the
dtype's range (the harness's own ``reference`` says so), and the hard cases
must appear at a measured rate: padded datasets with different lengths and
length-1 sequences, masking flags none/all/some, mask tokens occurring in
the sequence, p_mask 0 and 1, η = 0, τ = 0 with ties, τ = inf, variates at
CDF boundaries (which the harness must count as ambiguous), EDInference
stopping at eos and at ℓ_max, batches only where the entry is batchable.
Inputs are read through their kinds; algorithm and output names appear only
where a test checks what one algorithm did (EDInference's stopping, the
generated tokens, the sampled-token judge on ``sample``).
"""

from __future__ import annotations

import collections
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.errors import UnsatisfiedAssumption

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.dtypes import FORMATS, round_to
from ftspec.conformance.core.strategies import MODEL_BUDGETS, cases, hyperparameters, variant_sets
from ftspec.conformance.core.value_flow import padded
from ftspec.conformance.core.strategies._datasets import rate_family
from ftspec.conformance.core.strategies._budgets import hyper_kind
from ftspec.conformance.core.strategies._sampling import (
    below_one,
    boundaries,
    distribution_family,
    neighbour,
    temperature_family,
)
from ftspec.conformance.core.tolerances import reference
from ftspec.spec import SpecError, evaluate
from ftspec.spec.entry import Kind
from ftspec.spec.registry import REGISTRY, entry
from ftspec.spec.evaluation import evaluate_trace

from ..drawing import rounded, search, share

NAMES = sorted([n for n, e in REGISTRY.items() if e.family in ("training", "inference")])
DTYPES = sorted(FORMATS)


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def spec(case: Case, dtype: str = "float64", inputs: Any = None) -> dict[str, Any]:
    """The spec's outputs on the rounded case (``inputs``: another input set of it)."""
    one = case if inputs is None else Case(case.algorithm, case.hyper, case.variant, inputs, case.params)
    i, p = rounded(one, dtype)
    return evaluate(case.algorithm, {k: v.tolist() for k, v in i.items()}, {k: v.tolist() for k, v in p.items()},
                    hyper=case.hyper, variant=case.variant)


_SAMPLES: dict[tuple, Any] = {}


def sample(name: str, dtype: str = "float32", n: int = 60, budget: str = "default") -> tuple[tuple[Case, ...], int]:
    """(up to ``n`` cases, rejected draws), deterministically; cached."""
    key = (name, dtype, n, budget)
    if key not in _SAMPLES:
        _SAMPLES[key] = _draw(*key)
    return _SAMPLES[key]


def _draw(name: str, dtype: str, n: int, budget: str) -> tuple[tuple[Case, ...], int]:
    got: list[Case] = []
    rejected = [0]

    @settings(max_examples=n, database=None, derandomize=True, deadline=None)
    @given(st.data())
    def run(data: st.DataObject) -> None:
        try:
            got.append(data.draw(cases(name, dtype=dtype, budget=budget)))
        except UnsatisfiedAssumption:
            rejected[0] += 1

    run()
    return tuple(got), rejected[0]


def near_boundary(case: Case, dtype: str) -> bool:
    """Whether a sampling step's variate lies within 4 ulps (of ``dtype``) of one of its CDF boundaries."""
    e = entry(case.algorithm)
    i, p = rounded(case, dtype)
    si, sp = {k: v.tolist() for k, v in i.items()}, {k: v.tolist() for k, v in p.items()}
    produced = evaluate(case.algorithm, si, sp, hyper=case.hyper, variant=case.variant)
    steps = evaluate_trace(case.algorithm, si, sp, produced, hyper=case.hyper, variant=case.variant)
    (u_name,) = [s.name for s in e.inputs if s.kind == Kind.VARIATE]
    u = np.ravel(i[u_name])
    for k, record in enumerate(steps):
        for c in boundaries(record):
            lo, hi = float(round_to(np.array(c), dtype)), float(round_to(np.array(c), dtype))
            for _ in range(4):
                lo, hi = neighbour(lo, -1, dtype), neighbour(hi, 1, dtype)
            if lo <= u[k] <= hi:
                return True
    return False


# --------------------------------------------------------------------------
# validity at every dtype
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", NAMES)
def test_cases_are_accepted_by_the_spec_and_fit_the_dtype(name: str, dtype: str) -> None:
    """Every drawn case is accepted by the spec on its values rounded to the
    dtype; its real inputs are exact in the dtype and of their kind; the
    largest case is in range for the harness's reference at that dtype."""
    e = entry(name)
    fmt = FORMATS[dtype]
    got, _ = sample(name, dtype, n=4)
    assert len(got) == 4
    kinds = {s.name: s.kind for s in e.inputs}
    for case in got:
        assert case.algorithm == name and list(case.hyper) == list(e.hyper)
        assert case.style in ("well-scaled", "sparse") or not any(k == Kind.RATE for k in kinds.values())
        if not e.batchable:
            assert case.batch == []
        for one in [case.inputs, *case.batch]:
            for k, v in one.items():
                if kinds[k] in (Kind.VARIATE, Kind.PROBABILITY, Kind.DISTRIBUTION, Kind.TEMPERATURE, Kind.RATE):
                    assert np.array_equal(round_to(v, dtype), v), f"{k} is not exact in {dtype}"
                if kinds[k] == Kind.VARIATE:
                    assert ((0 <= v) & (v < 1)).all()
            out = spec(case, dtype, one)
            for o in e.output_specs(case.hyper, case.variant):
                if o.kind == Kind.REAL:
                    x = np.asarray(out[o.name], dtype=np.float64)
                    assert np.isfinite(x).all() and np.abs(x).max(initial=0) <= fmt.max / 8, o.name
        for k, v in case.params.items():
            assert np.isfinite(round_to(v, dtype)).all(), f"{k} overflows {dtype}"
    largest = max(got, key=lambda c: c.size())
    i, p = rounded(largest, dtype)
    ref = reference(e, i, p, hyper=largest.hyper, variant=largest.variant, dtype=dtype)
    assert ref.in_range, f"an intermediate reaches {ref.max_intermediate:.3g} ({largest.describe()})"


def test_rejections_are_rare() -> None:
    """Over the samples every test of this module draws (float16 quick ones if run alone)."""
    for name in NAMES:
        sample(name, "float16", n=4)
    drawn = rejected = 0
    for args in list(_SAMPLES):
        got, r = sample(*args)
        drawn, rejected = drawn + len(got), rejected + r
    rate = rejected / (drawn + rejected)
    print(f"rejection rate {rate:.2%} of {drawn + rejected}")
    assert rate < 0.01


@pytest.mark.parametrize("budget", ["quick", "default"])  # thorough draws default's sizes
def test_hyperparameters_respect_the_model_budgets_and_checks(budget: str) -> None:
    b = MODEL_BUDGETS[budget]
    assert MODEL_BUDGETS["thorough"].bounds() == MODEL_BUDGETS["default"].bounds()
    counts: collections.Counter = collections.Counter()
    for name in NAMES:
        e = entry(name)

        @settings(max_examples=25, database=None, derandomize=True, deadline=None)
        @given(variant_sets(e).flatmap(lambda v: st.tuples(st.just(v), hyperparameters(e, variant=v,
                                                                                        budget=budget))))
        def check(drawn: tuple) -> None:
            variant, h = drawn
            # grouped-query attention makes room for two key/value heads (H up to 2·kv_group) and RoPE
            # for two pairs (d_attn up to 4), so that the head order and the pairing show; ALiBi for a
            # head count that is not a power of two (3·G, or 2·G when that is not one); partial rotary
            # rounds d_attn up to a multiple of 4 (f = 1/2) or 8 (f = 1/4), at least two of it
            G = variant.kv_group
            room = {"H": 2 * G if G > 1 else 0, "d_attn": 4 if variant.rotary != "none" else 0}
            if variant.position_bias == "alibi" and "position_bias" in e.switches:
                room["H"] = max(room["H"], 2 * G if (2 * G) & (2 * G - 1) else 3 * G)
            if variant.rotary != "none":
                k = {1.0: 2, 0.5: 4, 0.25: 8}[variant.rotary_fraction]
                room["d_attn"] = -(-max(b.bound("d_attn"), 4, 2 * k if k > 2 else 4) // k) * k
            for k, v in h.items():
                top = b.bound(k) if k != "ell_max" else max(b.context, sum(h[n] for n in h if n.startswith("ell")))
                assert e.minimum.get(k, 1) <= v <= max(top, room.get(k, 0)), (name, k, v)
            if e.check is not None:
                e.check(h, variant)
            for k in h:
                if hyper_kind(k) == "layers":
                    counts["layers"] += 1
                    counts["layers > usual"] += h[k] > b.usual(k)
                if hyper_kind(k) == "sequences":
                    counts["N"] += 1
                    counts["N > 1"] += h[k] > 1
            if "ell_max" in h:  # the tightest context the entry's check accepts is drawn
                counts[f"{name} tight"] += not _accepts(e, {**h, "ell_max": h["ell_max"] - 1}, variant)

        check()
        if "ell_max" in e.hyper:
            assert counts[f"{name} tight"] > 0, name
    deep = counts["layers > usual"] / counts["layers"]
    print(budget, dict(counts), f"deep {deep:.0%}")
    assert 0 < deep <= 0.25  # two layers reachable, but rare
    assert counts["N > 1"] / counts["N"] >= 0.25  # datasets of several sequences are common


def _accepts(e: Any, hyper: dict[str, int], variant: Any) -> bool:
    if any(v < e.minimum.get(k, 1) for k, v in hyper.items()):
        return False
    try:
        e.check(hyper, variant)
    except SpecError:
        return False
    return True


# --------------------------------------------------------------------------
# the hard cases appear
# --------------------------------------------------------------------------


def features(c: Case) -> collections.Counter:
    """The hard cases one case shows, read through the entry's input kinds."""
    e = entry(c.algorithm)
    seen: collections.Counter = collections.Counter()
    pads = padded(e)
    kinds = {s.name: s for s in e.inputs}
    seen[f"batch {1 + len(c.batch)}"] += 1
    for one in [c.inputs, *c.batch]:
        tokens: set[int] = set()
        for name, s in kinds.items():
            x = one[name]
            if s.kind == Kind.LENGTH:
                seen["length 1"] += bool((x == 1).any())
                seen["lengths differ"] += len(np.unique(x)) > 1
                seen["padding"] += bool((x < c.hyper[s.bound]).any())
            elif s.kind == Kind.TOKEN and s.shape:
                if name in pads:
                    valid = one[pads[name]]
                    for row, n in zip(x, valid):
                        tokens |= set(row[:n].tolist())
                        assert (row[n:] == 0).all(), "padding is token 0"
                else:
                    tokens |= set(x.tolist())
            elif s.kind == Kind.FLAG:
                seen["flags " + ("none" if not x.any() else "all" if x.all() else "some")] += 1
            elif s.kind == Kind.PROBABILITY:
                seen["p 0" if x == 0 else "p 1" if x == 1 else "p between"] += 1
            elif s.kind == Kind.RATE:
                seen[f"eta {rate_family(x)}"] += 1
            elif s.kind == Kind.TEMPERATURE:
                seen[f"tau {temperature_family(x)}"] += 1
            elif s.kind == Kind.DISTRIBUTION:
                for f in distribution_family(x):
                    seen[f"p {f}"] += 1
                tau = [one[n] for n, t in kinds.items() if t.kind == Kind.TEMPERATURE]
                if tau and float(tau[0]) == 0 and "ties" in distribution_family(x):
                    seen["argmax tie"] += 1
        probability = [n for n, s in kinds.items() if s.kind == Kind.PROBABILITY]
        for name, s in kinds.items():
            if s.kind == Kind.TOKEN and not s.shape and tokens:
                seen["token occurs" if int(one[name]) in tokens else "token absent"] += 1
            if s.kind == Kind.VARIATE and probability:
                seen["u = p"] += bool((one[name] == one[probability[0]]).any())
    return collections.Counter({k: 1 for k, v in seen.items() if v})


#: what each kind of input must show (the key appears when the entry has the kind)
WANTED = {
    "length": ["length 1", "lengths differ", "padding"],
    "flag": ["flags none", "flags all", "flags some"],
    "probability": ["p 0", "p 1", "p between", "u = p"],
    "rate": ["eta zero", "eta small", "eta negative", "eta large"],
    "temperature": ["tau zero", "tau inf", "tau small", "tau one", "tau large"],
    "distribution": ["p ties", "p zeros", "p flat", "argmax tie"],
}


@pytest.mark.parametrize("name", NAMES)
def test_hard_cases_are_drawn(name: str) -> None:
    e = entry(name)
    got, _ = sample(name, n=100)  # a derandomised neighbourhood: 60 held too few independent draws
    assert len(got) >= 50
    seen: collections.Counter = sum((features(c) for c in got), collections.Counter())
    print(name, {k: f"{v / len(got):.0%}" for k, v in sorted(seen.items())})
    want = [k for s in e.inputs for k in WANTED.get(s.kind, [])]
    if any(s.kind == Kind.TOKEN and not s.shape for s in e.inputs) and any(s.kind == Kind.TOKEN and s.shape
                                                                       for s in e.inputs):
        want += ["token occurs", "token absent"]
    if e.batchable:
        want += ["batch 1", "batch 2", "batch 3"]
    else:
        assert all(not c.batch for c in got), "a batch for an entry that is not batchable"
    # Hypothesis explores around each example, so a sample of 60 holds few
    # independent draws: shares are loose, and what the sample lacks is searched for
    for key in ("length 1", "lengths differ", "padding"):
        if key in want:
            assert seen[key] / len(got) >= 0.1, (key, seen[key] / len(got))
    for key in [k for k in want if seen[k] == 0]:
        search(cases(name), lambda c: features(c)[key] > 0, 300)


@pytest.mark.parametrize("name", [n for n in NAMES if entry(n).trace is not None])
def test_boundary_variates_are_drawn(name: str) -> None:
    """Sampling cases put a step's variate within 4 ulps of a CDF boundary of
    the spec's distribution at that step. Over 120 draws: Hypothesis's first draws are its simplest,
    and a change elsewhere in the strategies can leave the first 60 of ed_inference with 2 such
    cases (3%) where 120 have 20%."""
    got, _ = sample(name, n=120)
    near = share(got, lambda c: near_boundary(c, "float32"))
    print(name, f"boundary variates in {near:.0%}")
    assert near >= 0.05


def test_the_harness_counts_boundary_variates_as_ambiguous() -> None:
    """On ``sample`` cases whose variate sits at a CDF boundary (τ > 0), the
    harness accepts the spec's own token and a neighbouring one, and counts
    the step as ambiguous: it never fails a correct implementation there."""
    e = entry("sample")
    for dtype in ("float32", "float16"):
        (tau,) = [s.name for s in e.inputs if s.kind == Kind.TEMPERATURE]
        got = [c for c in sample("sample", dtype, n=150)[0] if float(c.inputs[tau]) > 0 and near_boundary(c, dtype)]
        assert len(got) >= 5, dtype
        ambiguous = 0
        for c in got:
            i, p = rounded(c, dtype)
            ref = reference(e, i, p, hyper=c.hyper, variant=c.variant, dtype=dtype)
            y = int(spec(c, dtype)["y"])
            verdict = ref.sampled({"y": np.array(y)})
            assert verdict.ok, verdict.findings
            others = [v for v in (y - 1, y + 1) if 0 <= v < c.hyper["N_V"]
                      and ref.sampled({"y": np.array(v)}).ok]
            ambiguous += verdict.ambiguous > 0 and bool(others)
        print(dtype, f"{ambiguous} of {len(got)} boundary cases ambiguous")
        assert ambiguous / len(got) >= 0.5


def test_inference_stops_at_eos_and_at_ell_max() -> None:
    """EDInference: both endings are common (the spec says which happened)."""
    got, _ = sample("ed_inference")
    endings = collections.Counter("eos" if spec(c, "float32")["eos"] else "ell_max" for c in got)
    print(dict(endings))
    assert endings["eos"] >= 0.1 * len(got) and endings["ell_max"] >= 0.1 * len(got)


def test_generated_tokens_vary() -> None:
    """DInference and EDInference do not always produce one token (of the
    cases that generate two or more)."""
    for name, output in (("d_inference", "y"), ("ed_inference", "x_hat")):
        got, _ = sample(name)
        made = [[t for t in np.ravel(spec(c, "float32")[output]) if t >= 0] for c in got]
        made = [m[1:] if name == "ed_inference" else m for m in made]  # bos is given, not generated
        varied = share([m for m in made if len(m) >= 2], lambda m: len(set(m)) > 1)
        print(name, f"more than one distinct token in {varied:.0%}")
        assert varied >= 0.3


def test_variates_stay_below_one_in_every_dtype() -> None:
    for dtype in DTYPES:
        top = below_one(dtype)
        assert top < 1 and round_to(np.array(top), dtype) == top
        assert neighbour(top, 1, dtype) == 1.0 and neighbour(0.0, -1, dtype) == 0.0
