"""The NumPy plugin's LLaMA-style attention (issue 27) against the spec.

RoPE (``rotary`` half and interleaved, ``rope_base``), grouped-query attention (``kv_group``,
``kv_order``, the ``kv_heads.{g}.*`` parameters), padding (``Kind.PADDING``, the ``pad`` input) and
the key/value cache decoder (``cached_decoding``), as impls/numpy implements them, forward and
in its hand-written backward passes:

- drawn cases (``conformance.core.strategies.cases``, the harness's own strategy) of the five new
  entries and of gpt2_layer, d_transformer and mh_attention under the ``llama`` preset and under
  llama with ``rotary="interleaved"``, ``kv_order="strided"``, at float64, judged by the harness's
  checks (``execute.examine``: the spec's value within the derived tolerance, determinism,
  arguments unchanged, the batched call against the single ones where the case has a batch) and
  every output element within ``RTOL`` of the spec's binary64 value (relative to the largest
  |value| of the call);
- the hand-written gradients (d_gradient, e_gradient, ed_gradient) and d_training, drawn the same
  way: the backward of the rotation is the rotation by −angle, and a shared kv head's gradient
  sums over its group; Algorithm 4's backward is also checked against central differences with
  RoPE and GQA on;
- the harness's budgets draw H ≤ 3 (so one kv head under GQA, read by both orders) and, for the
  models it trains, d_attn ≤ 3 (one RoPE pair, the same under both pairings): every entry above
  is therefore also judged on a fixed case with d_attn = 4 and H = 4 over 2 kv heads;
- the check can fail: the plugin told the other RoPE pairing or the other kv head order, on a
  case where they differ (d_attn = 4: two pairs; H = 4 over 2 kv heads), departs from the spec by
  far more than ``RTOL``, and the harness's judge fails it;
- cached_decoding really decodes with a cache: one prefill call over n_prefill tokens, then one
  call per later token, at its absolute position, reading the cache; a decoder that restarts the
  positions at every step departs from the spec;
- what the spec refuses the plugin refuses: padding only under ``empty_query="error"``, an odd
  d_attn under RoPE, H not a multiple of kv_group.
- ``attn_bias_at`` ("qkv": b_q, b_k, b_v only; "out": b_o only): drawn and fixed cases of
  mh_attention, gpt2_layer and d_gradient (no gradient for a dropped bias) judged the same way,
  and a plugin computing with all four biases under "out" is failed.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from ftspec.conformance.core.calling import outputs_to_numpy, to_native
from ftspec.conformance.core.case import Case
from ftspec.conformance.core.examining import judged_for
from ftspec.conformance.core.execute import Member, examine
from ftspec.conformance.core.strategies import cases
from ftspec.conformance.core.values import default_hyper
from ftspec.impls.api import Context
from ftspec.impls.discovery import load
from ftspec.spec import SpecError, evaluate
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import PRESETS, VariantSet

from .cases import with_all_four_biases

LLAMA = PRESETS["llama"].replace(kv_group=2)  # grouped: the preset fixes no size (until spec 2.4.0 it held 2)
VARIANTS: dict[str, VariantSet] = {
    "llama": LLAMA,
    "interleaved-strided": LLAMA.replace(rotary="interleaved", kv_order="strided"),
}
NEW = ("padded_self_attention", "padded_causal_self_attention", "padded_e_transformer", "padded_d_transformer",
       "cached_decoding")
ENTRIES = NEW + ("gpt2_layer", "d_transformer", "mh_attention")
TRAINING = ("d_gradient", "e_gradient", "ed_gradient", "d_training")
#: drawn cases per (entry, variant set); the whole file runs in ~15 s
EXAMPLES = 3
#: every output element within RTOL × (largest |spec value| of the call) at float64 (measured: at
#: most ~1e-15 on these small cases)
RTOL = 1e-12
TIMEOUT = 60.0

IMPL = load("numpy")


def _draw(entry: str, variant: VariantSet, n: int, keep: Callable[[Case], bool] = lambda case: True) -> list[Case]:
    """``n`` float64 cases of the harness's strategy (quick budget) that ``keep`` accepts, deterministic."""
    got: list[Case] = []

    @settings(max_examples=n, database=None, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(cases(entry, dtype="float64", variants=[variant], budget="quick").filter(keep))
    def collect(case: Case) -> None:
        got.append(case)

    collect()
    return got[:n]


def _worst(got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray]) -> float:
    """max |got − want| over the outputs, relative to the largest |want| (NaN: inf)."""
    assert set(got) == set(want), sorted(set(got) ^ set(want))
    scale = max((float(np.max(np.abs(w))) for w in want.values() if w.size), default=1.0) or 1.0
    worst = 0.0
    for k, w in want.items():
        g = np.asarray(got[k], dtype=np.float64)
        assert g.shape == w.shape, (k, g.shape, w.shape)
        if w.size:
            same_nan = np.isnan(g) & np.isnan(w)
            err = float(np.max(np.where(same_nan, 0.0, np.abs(g - w)))) / scale
            worst = max(worst, err) if err == err else float("inf")
    return worst


def _judge(impl: Any, case: Case) -> tuple[list[str], bool]:
    """The harness's findings for ``impl`` on ``case`` at float64 (as ``ftspec replay`` judges one case),
    plus a finding when an output is off the spec's binary64 value by more than ``RTOL``; ([], False)
    when the spec refuses the case (nothing to judge)."""
    try:
        judged = judged_for(impl, case, "float64")
    except SpecError:
        return [], False
    ref = judged.reference
    outcome = examine(Member(impl.name, impl, "cpu"), case, judged.prepared.inputs, judged.prepared.params, ref,
                      dtype="float64", timeout=TIMEOUT, batch=judged.batch)
    findings = [f"{f.check}: {f.message}" for f in outcome.judgement.findings]
    if outcome.outputs is not None:
        worst = _worst(outcome.outputs, {k: np.asarray(v, dtype=np.float64) for k, v in ref.outputs.items()})
        if not worst <= RTOL:
            findings.append(f"binary64: off the spec by {worst:.3g} (relative), more than {RTOL}")
    return findings, True


@pytest.mark.parametrize("label", VARIANTS)
@pytest.mark.parametrize("entry", ENTRIES)
def test_agrees_with_the_spec_on_drawn_cases(entry: str, label: str) -> None:
    variant = VARIANTS[label]
    judged, failures = 0, []
    for case in _draw(entry, variant, EXAMPLES):
        findings, ran = _judge(IMPL, case)
        judged += ran
        failures += [f"{case.describe()}: {f}" for f in findings[:1]]
    assert not failures, "\n".join(failures)
    assert judged >= 1, "no drawn case was judged"


def _learns(case: Case) -> bool:
    """A training case whose gradient need not be 0: two tokens at least (N_V ≥ 2; the first draws
    have N_V = 1, where every log-probability is 0) and a sequence of two at least."""
    lengths = case.inputs.get("x_len", np.asarray([case.hyper.get("ell", case.hyper.get("ell_x", 0))]))
    return case.hyper["N_V"] >= 2 and int(np.max(lengths)) >= 2


@pytest.mark.parametrize("label", VARIANTS)
def test_hand_written_gradients_follow_rope_and_shared_kv_heads(label: str) -> None:
    """The backward passes of grad_*.py: kv_heads.{g}.* gradients (the sum over the group's query
    heads) and the rotation's transpose, through every model and one training loop."""
    variant = VARIANTS[label]
    failures, kv = [], 0
    for entry in TRAINING:
        for case in _draw(entry, variant, 2 if entry.endswith("_gradient") else 1, keep=_learns):
            kv += any(".kv_heads." in k for k in case.params)
            findings, _ = _judge(IMPL, case)
            failures += [f"{entry} {case.describe()}: {f}" for f in findings[:1]]
    assert not failures, "\n".join(failures)
    assert kv, "no drawn case had shared key/value heads"


def test_attention_backward_with_rope_and_grouped_heads() -> None:
    """Algorithm 4's hand-written backward (grad_components.attention_bwd) against central
    differences, with RoPE (both pairings, positions offset) and 4 query heads over 2 kv heads
    (both orders)."""
    from ftspec.impls.numpy.components import attention_fwd, group_heads
    from ftspec.impls.numpy.grad_components import attention_bwd

    rng = np.random.default_rng(7)
    H, H_kv, d_x, d_z, d_attn, d_out, lx, lz = 4, 2, 3, 3, 4, 2, 3, 4
    arrays = {"X": rng.normal(size=(d_x, lx)), "Z": rng.normal(size=(d_z, lz)),
              "W_q": rng.normal(size=(H, d_attn, d_x)), "b_q": rng.normal(size=(H, d_attn)),
              "W_k": rng.normal(size=(H_kv, d_attn, d_z)), "b_k": rng.normal(size=(H_kv, d_attn)),
              "W_v": rng.normal(size=(H_kv, d_out, d_z)), "b_v": rng.normal(size=(H_kv, d_out))}
    Mask = rng.random((lz, lx)) < 0.7
    Mask[0, :] = True
    R = rng.normal(size=(H, d_out, lx))  # loss = Σ R ⊙ Ṽ
    step = 1e-6
    for rotary, order in (("half", "consecutive"), ("interleaved", "strided")):
        variant = LLAMA.replace(rotary=rotary, kv_order=order, scale_placement="query_key_sqrt")
        kv_index = group_heads(2, order, H)

        def fwd(a: Mapping[str, np.ndarray]) -> tuple[np.ndarray, Any]:
            return attention_fwd(a["X"][None], a["Z"][None], a["W_q"], a["b_q"], a["W_k"], a["b_k"], a["W_v"],
                                 a["b_v"], Mask[None], variant, kv_index=kv_index, offset=2)

        _, cache = fwd(arrays)
        dX, dZ, g = attention_bwd(R, cache)
        g = {**g, "X": np.sum(dX, axis=0), "Z": np.sum(dZ, axis=0)}
        for name, a in arrays.items():
            assert g[name].shape == a.shape, (name, g[name].shape, a.shape)
            for idx in np.ndindex(a.shape):
                plus, minus = {**arrays, name: a.copy()}, {**arrays, name: a.copy()}
                plus[name][idx] += step
                minus[name][idx] -= step
                fd = (np.sum(R * fwd(plus)[0]) - np.sum(R * fwd(minus)[0])) / (2 * step)
                assert abs(fd - g[name][idx]) <= 1e-6 * (abs(fd) + 1.0), \
                    f"{rotary}/{order} {name}{list(idx)}: {g[name][idx]!r} vs {fd!r}"


# --------------------------------------------------------------------------
# the check tells a wrong pairing apart
# --------------------------------------------------------------------------


def _told(variant_change: dict[str, Any]) -> Any:
    """The NumPy plugin running every algorithm under the judged set changed by ``variant_change``."""
    def wrap(fn: Callable) -> Callable:
        def wrong(i: Any, p: Any, ctx: Context) -> Any:
            return fn(i, p, dataclasses.replace(ctx, variant=ctx.variant.replace(**variant_change)))
        return wrong
    return dataclasses.replace(IMPL, name="numpy-wrong", algorithms={k: wrap(f) for k, f in IMPL.algorithms.items()})


def _distinguishing_case(entry: str, variant: VariantSet, seed: int = 3) -> Case:
    """A case where the two RoPE pairings and the two kv head orders differ: d_attn = 4 (under
    d_attn = 2 both pairings are (0, 1)) and H = 4 over H/G = 2 kv heads (one kv head makes both
    orders read it); ℓ ≥ 3, n_prefill 1 (every later column a decoding step), every other position
    padding, the first included."""
    hyper = {**default_hyper(REGISTRY[entry], variant), "H": 4, "d_attn": 4}
    if "ell" in hyper:
        hyper["ell"] = max(hyper["ell"], 3)
    case = Case.build(entry, hyper, variant, seed=seed)
    if "pad" in case.inputs:  # padding first (a causal query with no key: empty_query) and between
        case.inputs["pad"][...] = np.arange(hyper["ell"]) % 2 == 1
    if "n_prefill" in case.inputs:
        case.inputs["n_prefill"] = np.asarray(1, dtype=np.int64)
    return case


def _run(impl: Any, case: Case, variant: VariantSet) -> dict[str, np.ndarray]:
    entry = case.entry
    ctx = Context(entry.name, "float64", "cpu", case.hyper, variant, False)
    out = impl.algorithms[entry.name](to_native(impl, entry, case.inputs, "float64", "cpu"),
                                      to_native(impl, entry, case.params, "float64", "cpu", params=True), ctx)
    return {k: np.asarray(v, dtype=np.float64) for k, v in outputs_to_numpy(impl, entry, out, case.hyper,
                                                                          variant).items()}


def _spec(case: Case, variant: VariantSet) -> dict[str, np.ndarray]:
    out = evaluate(case.entry.name, case.spec_inputs(), case.spec_params(), hyper=case.hyper, variant=variant)
    if not isinstance(out, Mapping):
        out = {case.entry.outputs[0].name: out}
    return {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}


@pytest.mark.parametrize("label", VARIANTS)
def test_agrees_where_the_pairings_and_orders_differ(label: str) -> None:
    """The drawn cases above never tell the conventions apart: the harness's budgets draw H ≤ 3 (one
    kv head under kv_group ≥ 2, which both orders read) and, for the training entries, d_attn ≤ 3
    (one RoPE pair, the same under both pairings). These fixed cases do (``_distinguishing_case``)."""
    variant = VARIANTS[label]
    failures = []
    for entry in ENTRIES + TRAINING:
        case = _distinguishing_case(entry, variant)
        assert any("kv_heads.1." in k for k in case.params)
        findings, ran = _judge(IMPL, case)
        assert ran, f"{entry}: the spec refuses the fixed case"
        failures += [f"{entry}: {f}" for f in findings[:1]]
    assert not failures, "\n".join(failures)


WRONG: list[tuple[str, str, dict[str, Any]]] = [
    ("half told interleaved", "llama", {"rotary": "interleaved"}),
    ("interleaved told half", "interleaved-strided", {"rotary": "half"}),
    ("strided told consecutive", "interleaved-strided", {"kv_order": "consecutive"}),
    ("consecutive told strided", "llama", {"kv_order": "strided"}),
    ("rope_base 10000 told 500000", "llama", {"rope_base": 500000.0}),
]


@pytest.mark.parametrize("entry", ["mh_attention", "gpt2_layer", "cached_decoding", "d_gradient"])
def test_a_wrong_pairing_departs_from_the_spec(entry: str) -> None:
    for label, judged, change in WRONG:
        variant = VARIANTS[judged]
        case = _distinguishing_case(entry, variant)
        want = _spec(case, variant)
        assert _worst(_run(IMPL, case, variant), want) <= RTOL, f"{entry} under {judged}: the right plugin fails"
        worst = _worst(_run(_told(change), case, variant), want)
        assert worst > 1e3 * RTOL, f"{entry}: {label} is not told apart from the spec ({worst:.3g})"


def test_the_harness_judge_fails_a_wrong_pairing() -> None:
    """The same judge as above (``_judge``) fails the plugin told the other pairing or order."""
    for label, judged, change in WRONG[:3]:
        case = _distinguishing_case("gpt2_layer", VARIANTS[judged])
        assert _judge(IMPL, case) == ([], True)
        findings, ran = _judge(_told(change), case)
        assert ran and findings, f"{label}: the judge passes it"


# --------------------------------------------------------------------------
# cached decoding decodes with a cache
# --------------------------------------------------------------------------


def test_cached_decoding_runs_the_prompt_then_one_token_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    from ftspec.impls.numpy import architectures as A

    calls: list[tuple[int, int, tuple[int, ...]]] = []
    forward = A.d_logits_fwd

    def spy(x: np.ndarray, *args: Any, **kw: Any) -> Any:
        caches = kw.get("kv_caches")
        assert caches is not None, "a decoding call without the cache"
        calls.append((int(x.shape[-1]), int(kw.get("start", 0)), tuple(c.length for c in caches)))
        return forward(x, *args, **kw)

    monkeypatch.setattr(A, "d_logits_fwd", spy)
    variant = VARIANTS["llama"]
    case = _distinguishing_case("cached_decoding", variant)
    ell, L = case.hyper["ell"], case.hyper["L"]
    for n_prefill in (1, 2, ell):
        case.inputs["n_prefill"] = np.asarray(n_prefill, dtype=np.int64)
        calls.clear()
        assert _worst(_run(IMPL, case, variant), _spec(case, variant)) <= RTOL
        # the prefill over n_prefill tokens with an empty cache, then token t alone at position t
        assert calls == [(n_prefill, 0, (0,) * L)] + [(1, t, (t,) * L) for t in range(n_prefill, ell)]


def test_a_decoder_that_restarts_positions_departs_from_the_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each step run at position 0 (its RoPE angle and W_p column): not the spec's columns."""
    from ftspec.impls.numpy import architectures as A

    forward = A.d_logits_fwd
    monkeypatch.setattr(A, "d_logits_fwd", lambda x, *a, **kw: forward(x, *a, **{**kw, "start": 0}))
    for variant in (VARIANTS["llama"], PRESETS["nanogpt"]):  # RoPE; learned positions
        case = _distinguishing_case("cached_decoding", variant)
        assert _worst(_run(IMPL, case, variant), _spec(case, variant)) > 1e3 * RTOL


# --------------------------------------------------------------------------
# refusals
# --------------------------------------------------------------------------


def _refuses_both(case: Case, variant: VariantSet, params: Mapping[str, np.ndarray] | None = None,
                  hyper: Mapping[str, int] | None = None) -> None:
    params = dict(case.params if params is None else params)
    hyper = dict(case.hyper if hyper is None else hyper)
    with pytest.raises(SpecError):
        evaluate(case.entry.name, case.spec_inputs(), {k: v.tolist() for k, v in params.items()}, hyper=hyper,
                 variant=variant)
    entry = case.entry
    ctx = Context(entry.name, "float64", "cpu", hyper, variant, False)
    with pytest.raises(ValueError):
        IMPL.algorithms[entry.name](to_native(IMPL, entry, case.inputs, "float64", "cpu"),
                                    to_native(IMPL, entry, params, "float64", "cpu", params=True), ctx)


@pytest.mark.parametrize("entry", ["padded_causal_self_attention", "padded_d_transformer"])
def test_padding_only_is_refused_under_empty_query_error(entry: str) -> None:
    variant = VARIANTS["llama"].replace(empty_query="error")
    case = _distinguishing_case(entry, variant)
    case.inputs["pad"][...] = False
    _refuses_both(case, variant)


def test_an_odd_d_attn_and_partial_groups_are_refused() -> None:
    variant = VARIANTS["llama"]
    case = _distinguishing_case("mh_attention", variant)
    odd = {k: (v[:3] if k.endswith(("W_q", "W_k", "b_q", "b_k")) else v) for k, v in case.params.items()}
    _refuses_both(case, variant, odd, {**case.hyper, "d_attn": 3})
    three = {k: v for k, v in case.params.items() if not k.startswith("heads.3.")}
    three["W_o"] = case.params["W_o"][:, : 3 * case.hyper["d_mid"]]
    _refuses_both(case, variant, three, {**case.hyper, "H": 3})


# --------------------------------------------------------------------------
# per-projection attention biases (attn_bias_at)
# --------------------------------------------------------------------------

#: attn_bias on, the biases kept on some projections only: the paper's set and llama (GQA: the
#: kv heads' b_k, b_v) with b_q, b_k, b_v only; the paper's set with b_o only
BIASES_AT: dict[str, VariantSet] = {
    "qkv": VariantSet(attn_bias_at="qkv"),
    "llama-qkv": LLAMA.replace(attn_bias=True, attn_bias_at="qkv"),
    "out": VariantSet(attn_bias_at="out"),
}
BIAS_ENTRIES = ("mh_attention", "gpt2_layer", "d_gradient")


def _biases(names: Any) -> set[str]:
    """The attention biases among flat names (``layers.0.attn.heads.1.b_q`` → b_q)."""
    return {n.rsplit(".", 1)[-1] for n in names if n.rsplit(".", 1)[-1] in ("b_q", "b_k", "b_v", "b_o")}


@pytest.mark.parametrize("label", BIASES_AT)
@pytest.mark.parametrize("entry", BIAS_ENTRIES)
def test_attn_bias_at_agrees_with_the_spec(entry: str, label: str) -> None:
    """Drawn cases and the fixed one (H = 4, d_attn = 4) judged as above; d_gradient's outputs are
    one gradient per parameter present, so none for a dropped bias (the judge compares the names)."""
    variant = BIASES_AT[label]
    keep = _learns if entry == "d_gradient" else (lambda case: True)
    drawn = _draw(entry, variant, 2, keep=keep) + [_distinguishing_case(entry, variant)]
    failures, judged = [], 0
    for case in drawn:
        assert _biases(case.params) == ({"b_o"} if label == "out" else {"b_q", "b_k", "b_v"})
        findings, ran = _judge(IMPL, case)
        judged += ran
        failures += [f"{case.describe()}: {f}" for f in findings[:1]]
    assert not failures, "\n".join(failures)
    assert judged >= 2
    if entry == "d_gradient":
        case = drawn[-1]
        got = _run(IMPL, case, variant)
        assert _biases(got) == _biases(case.params) and len(got) == len(case.params)


@pytest.mark.parametrize("entry", ["mh_attention", "gpt2_layer"])
def test_all_four_biases_under_out_fail(entry: str) -> None:
    """Under attn_bias_at="out" the heads' b_q, b_k, b_v are absent (zero): a plugin that adds them
    is failed by the same judge."""
    case = _distinguishing_case(entry, BIASES_AT["out"])
    assert _judge(IMPL, case) == ([], True)
    findings, ran = _judge(with_all_four_biases(IMPL), case)
    assert ran and any(f.startswith("spec:") for f in findings), findings
