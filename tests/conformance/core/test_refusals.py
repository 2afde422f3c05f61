"""Every plugin refuses what the spec refuses (conformance/core/refusals.py).

Each registry entry lists what its spec refuses (``Entry.refusals``;
tests/spec/test_refusals.py checks that list against the spec). Here the
check runs on the plugins: the bundled NumPy, PyTorch and JAX ones under
variant sets that switch every conditional refusal on, and the library
plugins (torch.nn, Flax, transformers, where installed) under the variant
sets they declare; every refusal a plugin is asked for must raise. JAX
compiles a program for the refusal it meets inside the computation (a
zero-variance column): the fast tier takes a sample of entries for it, the
``slow`` test all of them.

The check itself must be able to fail, and say why: planted plugins that
return zeros, NaN, exit, warn or hang where the spec refuses are caught; one
that raises passes; limits, variant sets and the spec's own verdict at the
dtype decide what is asked.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from collections import Counter

import numpy as np
import pytest

from tests.impls.cases import first_accepted
from ftspec.conformance.core.case import Case
from ftspec.conformance.core.execute import Member, Outcome
from ftspec.conformance.core.findings import Finding
from ftspec.conformance.core.judge import Judgement
from ftspec.conformance.core.refusals import (
    REFUSED,
    RETURNED,
    SKIPPED,
    TIMEOUT,
    _check_one,
    check_refusals,
    check_refusals_into,
    refusal_findings,
)
from ftspec.impls.api import Implementation, Limits
from ftspec.impls.discovery import load
from ftspec.spec import PAPER
from ftspec.spec.refusals import Refusal, Refused
from ftspec.spec.registry import REGISTRY, Entry
from ftspec.spec.variants import VariantSet

TIMEOUT_S = 120.0

#: variant sets that, together, switch on every conditional refusal and move the parameter a
#: shape refusal lengthens (the paper's: no ε, empty_query="error")
VARIANTS = (
    PAPER,
    PAPER.replace(variance="unbiased", embedding_norm=True, embedding_scale="sqrt_d_e"),
    PAPER.replace(norm="rms_norm", norm_placement="post", embedding_norm=True, positions="none"),
    PAPER.replace(attn_bias=False, mlp_bias=False, affine="none", positions="sinusoidal_paper", variance="one_pass",
                  norm_placement="pre", unembedding="tied", logit_bias=True, final_norm="final"),
)

#: JAX meets a zero-variance column inside a compiled program: these entries in the fast tier
JAX_COMPILED_SAMPLE = ("layer_norm", "rms_norm", "gpt2_layer", "decoder_layer", "d_transformer")


def _accepted(entry: Entry, variant: VariantSet, impl: Implementation | None = None) -> Case:
    """A case the spec accepts, at the entry's default sizes raised into ``impl``'s limits (the
    check leaves it unchanged, so the plugins share it)."""
    hyper = dict(entry.sizes)
    if impl is not None:
        hyper = impl.limits_for(entry.name).settle(hyper)
    return _accepted_at(entry.name, variant, tuple(sorted(hyper.items())))


@functools.lru_cache(maxsize=None)
def _accepted_at(name: str, variant: VariantSet, hyper: tuple) -> Case:
    entry = REGISTRY[name]
    return first_accepted(entry, variant, (Case.build(entry, dict(hyper), variant=variant, seed=seed)
                                           for seed in range(20)))


def _sweep(name: str, impl: Implementation, variants, *, dtype: str, keep=lambda entry, refusal: True,
           once: bool = False):
    """check_refusals on every entry the plugin has, under each variant set it declares of ``variants``
    (all of its own when None); ``once``: each refusal of an entry under the first of them where it
    applies only. Returns (statuses counted, the failures as lines)."""
    member = Member(name, impl, impl.devices()[0])
    counts: Counter = Counter()
    failures = []
    for entry in REGISTRY.values():
        if entry.name not in impl.algorithms or not entry.refusals:
            continue
        done: set[str] = set()
        for variant in (variants if variants is not None else impl.variants_for(entry.name)):
            wanted = [r for r in entry.refusals if r.applies(variant) and keep(entry, r)
                      and not (once and r.name in done)]
            if not impl.supports(variant, entry.name) or not wanted:
                continue
            done.update(r.name for r in wanted)
            case = _accepted(entry, variant, impl)
            for refusal in wanted:
                r = _check_one(member, entry, case, refusal, dtype, TIMEOUT_S, case.spec_inputs(), case.spec_params())
                counts[r.status] += 1
                if r.finding is not None:
                    failures.append(f"{entry.name} [{variant.describe()}] {refusal.name}: {r.detail}")
    return counts, failures


# --------------------------------------------------------------------------
# the bundled plugins
# --------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["numpy", "torch"])
def test_bundled_plugins_refuse_what_the_spec_refuses(name):
    impl = load(name)
    counts, failures = _sweep(name, impl, VARIANTS, dtype="float64")
    assert not failures, "\n".join(failures)
    assert counts[REFUSED] > 400, counts  # the sweep asked for them: nothing vanished into skips
    low, lows = _sweep(name, impl, (PAPER,), dtype="float16")  # the refused cases survive rounding
    assert not lows, "\n".join(lows)
    assert low[REFUSED] > 100, low


def test_jax_refuses_what_the_spec_refuses():
    impl = load("jax")

    def sample(entry, refusal):
        return "zero-variance" not in refusal.name or entry.name in JAX_COMPILED_SAMPLE

    counts, failures = _sweep("jax", impl, VARIANTS, dtype="float64", keep=sample, once=True)
    assert not failures, "\n".join(failures)
    assert counts[REFUSED] > 100, counts


def _twin(entry) -> bool:
    """A padded entry whose unpadded twin is in the registry: the same JAX program and host check
    with a padding mask added, so its zero-variance refusal is the twin's (each entry a compile:
    the five padded layers and models were 8 CPU-seconds)."""
    return entry.name.startswith("padded_") and entry.name.removeprefix("padded_") in REGISTRY


@pytest.mark.slow
def test_jax_refuses_every_zero_variance_column():
    impl = load("jax")
    counts, failures = _sweep("jax", impl, (PAPER,), dtype="float32",
                              keep=lambda entry, refusal: "zero-variance" in refusal.name and not _twin(entry))
    assert not failures, "\n".join(failures)
    assert counts[REFUSED] == sum(1 for e in REGISTRY.values() for r in e.refusals
                                  if "zero-variance" in r.name and r.applies(PAPER) and not _twin(e)), counts


LIBRARY_PLUGINS = {
    "torch-nn": "torch", "torch-nn-weights": "torch", "torch-nn-rms-default": "torch",
    "torch-nn-rms-default-f64": "torch", "torch-nn-layers": "torch", "torch-nn-layers-pre": "torch",
    "torch-nn-layers-fast": "torch", "torch-nn-layers-fast-pre": "torch", "flax": "flax",
    "transformers": "transformers", "transformers-sdpa": "transformers", "transformers-bert": "transformers",
    "transformers-bert-sdpa": "transformers",
}


@pytest.mark.parametrize("name", sorted(LIBRARY_PLUGINS))
def test_library_plugins_refuse_what_the_spec_refuses(name):
    """Under the variant sets a library plugin declares (ε inside the root, empty queries answered),
    what is left to refuse is mostly a mismatched parameter; it must raise too."""
    pytest.importorskip(LIBRARY_PLUGINS[name])
    impl = load(name)
    counts, failures = _sweep(name, impl, None, dtype=impl.dtypes[0])
    assert not failures, "\n".join(failures)
    assert counts[REFUSED] >= 1, counts


# --------------------------------------------------------------------------
# the check itself: planted plugins
# --------------------------------------------------------------------------

def _planted(fn, name: str = "planted", limits=None, algorithms=None) -> Implementation:
    """A plugin whose every algorithm is ``fn(entry, inputs, params, ctx)``."""
    names = algorithms or list(REGISTRY)
    return Implementation(
        name=name, version="0", dtypes=("float64", "float32"), devices=lambda: ["cpu"],
        algorithms={n: (lambda e: lambda i, p, ctx: fn(e, i, p, ctx))(REGISTRY[n]) for n in names},
        from_numpy=lambda array, dtype, device: np.array(array, copy=True),
        to_numpy=lambda value: np.asarray(value), limits=limits if limits is not None else Limits())


def _zeros(entry, i, p, ctx):
    return {k: np.zeros(shape) for k, shape in entry.output_shapes(ctx.hyper, ctx.variant).items()}


def _nans(entry, i, p, ctx):
    return {k: np.full(v.shape, np.nan) for k, v in _zeros(entry, i, p, ctx).items()}


def _raises(entry, i, p, ctx):
    raise ValueError("refused")


def _member(fn, **kw) -> Member:
    return Member("planted", _planted(fn, **kw), "cpu")


@pytest.mark.parametrize("answer", [_zeros, _nans], ids=["zeros", "nan"])
@pytest.mark.parametrize("name", ["layer_norm", "attention", "d_transformer", "ed_training", "sample"])
def test_a_plugin_that_answers_a_refused_case_is_caught(name, answer):
    entry = REGISTRY[name]
    case = _accepted(entry, PAPER)
    results = check_refusals(_member(answer), case, "float64", timeout=TIMEOUT_S)
    asked = [r for r in results if r.status != SKIPPED]
    assert asked and all(r.status == RETURNED for r in asked), [(r.refusal, r.status, r.detail) for r in results]
    findings = refusal_findings(_member(answer), case, "float64", timeout=TIMEOUT_S)
    assert len(findings) == len(asked) and all(f.check == "refusal" for f in findings)
    for r in asked:
        assert r.refusal in r.finding.message and "the implementation must raise" in r.finding.message
        assert "SpecError" not in r.finding.message and "the spec:" in r.finding.message
    # each refusal of the paper's variant set was asked for, except one this case cannot make
    expected = {r.name for r in entry.refusals if r.applies(PAPER)}
    assert {r.refusal for r in asked} == expected


def test_a_plugin_that_raises_passes():
    entry = REGISTRY["ed_training"]
    results = check_refusals(_member(_raises), _accepted(entry, PAPER), "float64", timeout=TIMEOUT_S)
    assert results and all(r.status in (REFUSED, SKIPPED) for r in results)
    assert any(r.status == REFUSED for r in results)
    assert all("ValueError: refused" in r.detail for r in results if r.status == REFUSED)


def test_ending_the_process_is_no_refusal():
    def exits(entry, i, p, ctx):
        raise SystemExit(3)

    results = check_refusals(_member(exits), _accepted(REGISTRY["layer_norm"], PAPER), "float64", timeout=TIMEOUT_S)
    asked = [r for r in results if r.status != SKIPPED]
    assert asked and all(r.finding is not None and "ordinary exception" in r.finding.message for r in asked)


def test_a_warning_made_an_error_is_no_refusal():
    """Under ``-W error`` (pytest's filterwarnings here) NumPy's "invalid value encountered in divide"
    is raised: the plugin computed on, and must not pass for refusing."""
    def warns(entry, i, p, ctx):
        raise RuntimeWarning("invalid value encountered in divide")

    results = check_refusals(_member(warns), _accepted(REGISTRY["rms_norm"], PAPER), "float64", timeout=TIMEOUT_S)
    asked = [r for r in results if r.status != SKIPPED]
    assert asked and all(r.status == RETURNED and "warnings filter" in r.detail for r in asked)


def test_a_hang_is_a_timeout_and_ends_the_check():
    def hangs(entry, i, p, ctx):
        time.sleep(5)

    results = check_refusals(_member(hangs), _accepted(REGISTRY["token_embedding"], PAPER), "float64", timeout=0.2)
    assert [r.status for r in results] == [TIMEOUT]  # the first one: the others would wait for the same hang
    assert results[0].finding.check == "timeout"


def test_a_refusal_outside_its_switches_is_not_asked():
    variant = PAPER.replace(epsilon=1e-5, epsilon_placement="inside_root", empty_query="zeros")
    for name in ("layer_norm", "mh_attention"):
        results = check_refusals(_member(_zeros), _accepted(REGISTRY[name], variant), "float64", timeout=TIMEOUT_S)
        conditional = [r for r in results if "zero-variance" in r.refusal or "no key" in r.refusal]
        assert conditional and all(r.status == SKIPPED and "applies only where" in r.detail for r in conditional)


def test_limits_that_exclude_the_refused_case_are_respected():
    """d_e = 1 under unbiased variance: a plugin whose limits say d_e ≥ 2 is not asked."""
    variant = PAPER.replace(variance="unbiased")
    case = _accepted(REGISTRY["layer_norm"], variant)
    narrow = "d_e = 1 under unbiased variance"
    free = {r.refusal: r for r in check_refusals(_member(_zeros), case, "float64", timeout=TIMEOUT_S)}
    assert free[narrow].status == RETURNED
    limited = {r.refusal: r for r in check_refusals(_member(_zeros, limits=Limits(minimum={"d_e": 2})), case,
                                                    "float64", timeout=TIMEOUT_S)}
    assert limited[narrow].status == SKIPPED and "limits" in limited[narrow].detail
    assert limited["a zero-variance column into a norm without ε"].status == RETURNED  # the others still asked


def test_undeclared_variant_sets_algorithms_and_dtypes_are_not_asked():
    case = _accepted(REGISTRY["layer_norm"], PAPER)
    only_other = Member("planted", Implementation(
        name="p", version="0", algorithms={"layer_norm": lambda i, p, c: _zeros(REGISTRY["layer_norm"], i, p, c)},
        dtypes=("float64",), devices=lambda: ["cpu"], from_numpy=lambda a, d, v: np.array(a),
        to_numpy=np.asarray, variants=[PAPER.replace(epsilon=1e-5, epsilon_placement="inside_root")]), "cpu")
    results = check_refusals(only_other, case, "float64", timeout=TIMEOUT_S)
    assert results and all(r.status == SKIPPED for r in results)
    assert all("does not declare" in r.detail for r in results if "applies only" not in r.detail)
    assert check_refusals(_member(_zeros), case, "float16", timeout=TIMEOUT_S) == []  # not a declared dtype
    assert check_refusals(_member(_zeros, algorithms=["rms_norm"]), case, "float64", timeout=TIMEOUT_S) == []


def test_a_case_the_spec_accepts_at_the_dtype_is_not_asked():
    """The spec has the last word, on the case as rounded to the call's dtype."""
    entry = REGISTRY["layer_norm"]
    case = _accepted(entry, PAPER)
    unchanged = Refusal(name="nothing at all", argument="X",
                        transform=lambda e, h, v, i, p: Refused(h, i, p, "X"))
    r = _check_one(_member(_zeros), entry, case, unchanged, "float64", TIMEOUT_S, case.spec_inputs(),
                   case.spec_params())
    assert r.status == SKIPPED and "the spec accepts" in r.detail


def _outcome() -> Outcome:
    return Outcome(Judgement())


def test_the_runner_hook_checks_once_per_variant_set_and_never_forgets_a_failure():
    entry = REGISTRY["token_embedding"]
    case = _accepted(entry, PAPER)
    good = _member(_raises)
    first = _outcome()
    check_refusals_into(first, good, case, "float64", timeout=TIMEOUT_S)
    assert first.judgement.ok and first.checks.count("refusal") == 2  # token ID −1 and N_V
    again = _outcome()
    check_refusals_into(again, good, case, "float64", timeout=TIMEOUT_S)
    assert again.judgement.ok and "refusal" not in again.checks  # passed before in this search

    calls = {"n": 0}

    def first_answers(entry, i, p, ctx):  # answers the first refused case, raises afterwards
        calls["n"] += 1
        if calls["n"] == 1:
            return _zeros(entry, i, p, ctx)
        raise ValueError("refused")

    flaky = _member(first_answers)
    failing = _outcome()
    check_refusals_into(failing, flaky, case, "float64", timeout=TIMEOUT_S)
    assert [f.check for f in failing.judgement.findings] == ["refusal"]
    later = _outcome()
    check_refusals_into(later, flaky, case, "float64", timeout=TIMEOUT_S)  # the failed one is asked again,
    assert later.checks.count("refusal") == 1 and later.judgement.ok  # the passed one is not
    assert calls["n"] == 3
    assert sorted(flaky.refusals.values()) == [False, True]  # refused now, yet its failure is remembered


def test_the_runner_hook_leaves_a_failed_outcome_alone():
    outcome = _outcome()
    outcome.judgement.findings.append(Finding("spec", "off"))
    check_refusals_into(outcome, _member(_zeros), _accepted(REGISTRY["token_embedding"], PAPER), "float64",
                        timeout=TIMEOUT_S)
    assert [f.check for f in outcome.judgement.findings] == ["spec"] and not outcome.checks


# --------------------------------------------------------------------------
# one run reports every refusal a plugin answers (issue 35, finding 12)
# --------------------------------------------------------------------------

_NUMPY_D = load("numpy").algorithms["d_transformer"]


def _three_gaps(inputs, params, ctx):
    """NumPy's decoder-only transformer with three refusal gaps: a token −1 read as the last row, a
    sequence longer than ℓ_max given the last position's embedding, NaN for a constant column."""
    hyper = dict(ctx.hyper)
    x = np.asarray(inputs["x"])
    inputs = {**inputs, "x": np.where(x == -1, hyper["N_V"] - 1, x)}
    if hyper["ell"] > hyper["ell_max"]:
        W_p = np.asarray(params["W_p"])
        extra = np.repeat(W_p[:, -1:], hyper["ell"] - hyper["ell_max"], axis=1)
        params = {**params, "W_p": np.concatenate([W_p, extra], axis=1)}
        hyper["ell_max"] = hyper["ell"]
        ctx = dataclasses.replace(ctx, hyper=hyper)
    try:
        return _NUMPY_D(inputs, params, ctx)
    except ValueError as exc:
        if "variance" not in str(exc):
            raise
        return np.full((hyper["N_V"], hyper["ell"]), np.nan)


#: the refusals the stand-in answers, by construction (spec/refusals.py names them)
THREE_GAPS = {"x: token ID −1", "a sequence longer than ℓ_max", "a zero-variance column into a norm without ε"}


def test_one_run_reports_every_refusal_a_plugin_answers_without_diagnosis(tmp_path):
    """A cell's refusal failure names each refusal the plugin answers once, one line each (not one per
    certify round), and no value diagnosis, first divergence or further-failure search is made
    around it: the values are not in question (before: one refusal per round, with "no neighbouring
    variant set fits" and "first divergence: not located" around it)."""
    from tests.conformance.support import run

    impl = dataclasses.replace(load("numpy"), name="three-gaps", variants=[PAPER],
                               algorithms={"d_transformer": _three_gaps})
    result = run([("three-gaps", impl)], ["d_transformer"], ["float64"], tmp_path, examples=20, distinct=2)
    (cell,) = result.cells
    failure = cell.failure
    assert cell.status == "fail" and failure is not None and failure.check == "refusal"
    assert {r["refusal"] for r in failure.refusals} == THREE_GAPS
    lines = failure.report.splitlines()
    for name in THREE_GAPS:
        assert sum(line.strip() == f"- {name}" for line in lines) == 1, failure.report
    assert failure.diagnosis is None and cell.more_failures == []
    for noise in ("likely cause", "diagnosed on", "first divergence", "not located", "gave up", "vacuous"):
        assert noise not in failure.report, failure.report
    # a worker sends the list back to the parent (conformance/running/wire.py)
    from ftspec.conformance.running.wire import cell_from_plain, cell_to_plain

    back = cell_from_plain(json.loads(json.dumps(cell_to_plain(cell))))
    assert back.failure is not None and back.failure.refusals == failure.refusals
