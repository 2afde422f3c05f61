"""The PyTorch plugin's LLaMA-style attention (issue 27) against the spec, on random draws.

RoPE (``rotary`` half and interleaved, ``rope_base``), grouped-query attention (``kv_group``,
``kv_order``, the ``kv_heads.{g}.*`` parameters), padding (``Kind.PADDING``) and the key/value
cache decoder (``cached_decoding``), as impls/torch implements them:

- drawn cases (``conformance.core.strategies.cases``, the harness's strategy) of the five new
  entries and of gpt2_layer, d_transformer and mh_attention under the ``llama`` preset and under
  llama with ``rotary="interleaved"``, ``kv_order="strided"``, judged at float64 and float32 by
  the harness's own checks (``execute.examine``: the spec's value within the derived tolerance,
  determinism, arguments unchanged, the batched call where the case has a batch), plus the
  d_transformer gradient (autograd through RoPE and the shared key/value heads) at float64;
- the check can fail: the plugin told the other RoPE pairing, or the other kv head order, on a
  case where they differ (d_attn = 4: two pairs; H = 4 over 2 kv heads), is failed by the same
  judge;
- cached_decoding really decodes with a cache: one prefill call of n_prefill tokens, then one
  call per later token whose keys and values are those cached plus its own;
- what the spec refuses the plugin refuses: a sequence of padding only under
  ``empty_query="error"``, an odd d_attn under RoPE, kv heads that do not match kv_group.
- ``attn_bias_at`` ("qkv": b_q, b_k, b_v only; "out": b_o only): drawn and fixed cases of
  mh_attention, gpt2_layer and d_gradient (no gradient for a dropped bias) judged the same way,
  and a plugin computing with all four biases under "out" is failed.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from ftspec.conformance.core.calling import to_native
from ftspec.conformance.core.case import Case
from ftspec.conformance.core.examining import examine_case
from ftspec.conformance.core.execute import Member
from ftspec.conformance.core.strategies import cases
from ftspec.conformance.core.values import default_hyper
from ftspec.impls.api import Context
from ftspec.impls.discovery import load
from ftspec.spec import SpecError, evaluate
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import PRESETS, VariantSet

from .cases import with_all_four_biases

torch = pytest.importorskip("torch")

LLAMA = PRESETS["llama"].replace(kv_group=2)  # grouped: the preset fixes no size (until spec 2.4.0 it held 2)
VARIANTS: dict[str, VariantSet] = {
    "llama": LLAMA,
    "interleaved-strided": LLAMA.replace(rotary="interleaved", kv_order="strided"),
}
NEW = ("padded_self_attention", "padded_causal_self_attention", "padded_e_transformer", "padded_d_transformer",
       "cached_decoding")
ENTRIES = NEW + ("gpt2_layer", "d_transformer", "mh_attention")
DTYPES = ("float64", "float32")
#: drawn cases per (entry, variant set, dtype): 8 entries × 2 sets × 2 dtypes; the file takes ~13 s of CPU
EXAMPLES = 3
TIMEOUT = 60.0

IMPL = load("torch")


def _draw(entry: str, variant: VariantSet, dtype: str, n: int) -> list[Case]:
    """``n`` cases of the harness's strategy (quick budget), deterministic."""
    got: list[Case] = []

    @settings(max_examples=n, database=None, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(cases(entry, dtype=dtype, variants=[variant], budget="quick"))
    def collect(case: Case) -> None:
        got.append(case)

    collect()
    return got[:n]


def _judge(impl: Any, case: Case, dtype: str) -> tuple[list[str], bool]:
    """The harness's findings for ``impl`` on ``case`` at ``dtype`` (as ``ftspec replay`` judges one
    case); ([], False) when the spec refuses the case rounded to ``dtype`` (nothing to judge)."""
    try:
        outcome = examine_case(Member(impl.name, impl, "cpu"), case, dtype, timeout=TIMEOUT)
    except SpecError:
        return [], False
    return [f"{f.check}: {f.message}" for f in outcome.judgement.findings], True


#: the plugin's own paths (its cache and its padded model); every entry at every dtype is the suite's
#: and the fixture replay's claim (tests/conformance/session/test_suite.py, tests/fixtures/test_replay.py)
DRAWN = ("cached_decoding", "padded_d_transformer")


@pytest.mark.parametrize("label", VARIANTS)
@pytest.mark.parametrize("entry", DRAWN)
def test_agrees_with_the_spec_on_drawn_cases(entry: str, label: str) -> None:
    """Drawn cases at float64 and float32, and at float32 one case with H = 4, d_attn = 4
    (``_distinguishing_case``): the strategy's head budget (H ≤ 2 quick, ≤ 3 default) leaves a
    single kv head under kv_group = 2, where both kv orders read the same head."""
    variant = VARIANTS[label]
    judged, failures = 0, []
    for dtype in DTYPES:
        drawn = _draw(entry, variant, dtype, EXAMPLES)
        if dtype == "float32":
            drawn.append(_distinguishing_case(entry, variant))
        for case in drawn:
            findings, ran = _judge(IMPL, case, dtype)
            judged += ran
            failures += [f"{dtype} {case.describe()}: {f}" for f in findings[:1]]
    assert not failures, "\n".join(failures)
    assert judged >= len(DTYPES), f"only {judged} drawn cases were judged"


@pytest.mark.parametrize("label", VARIANTS)
def test_gradients_follow_rope_and_shared_kv_heads(label: str) -> None:
    """d_gradient by autograd: the kv_heads.{g}.* gradients sum over the query heads sharing them."""
    variant = VARIANTS[label]
    failures = []
    for case in _draw("d_gradient", variant, "float64", 2):
        assert any(".kv_heads." in k for k in case.params)
        findings, _ = _judge(IMPL, case, "float64")
        failures += findings[:1]
    assert not failures, "\n".join(failures)


# --------------------------------------------------------------------------
# the judge tells a wrong pairing apart
# --------------------------------------------------------------------------


def _told(variant_change: dict[str, Any]) -> Any:
    """The torch plugin calling every algorithm under the judged set changed by ``variant_change``."""
    def wrap(fn: Callable) -> Callable:
        def wrong(i: Any, p: Any, ctx: Context) -> Any:
            return fn(i, p, dataclasses.replace(ctx, variant=ctx.variant.replace(**variant_change)))
        return wrong
    return dataclasses.replace(IMPL, name="torch-wrong",
                               algorithms={k: wrap(f) for k, f in IMPL.algorithms.items()})


def _distinguishing_case(entry: str, variant: VariantSet, seed: int = 3) -> Case:
    """A case where the two RoPE pairings and the two kv head orders differ: d_attn = 4 (two
    pairs: under d_attn = 2 both pairings are (0, 1)) and H = 4 over H/G = 2 kv heads (one kv head
    makes both orders read it)."""
    hyper = {**default_hyper(REGISTRY[entry], variant), "H": 4, "d_attn": 4}
    if "ell" in hyper:
        hyper["ell"] = max(hyper["ell"], 3)
    return Case.build(entry, hyper, variant, seed=seed)


WRONG = [
    ("half told interleaved", VARIANTS["llama"], {"rotary": "interleaved"}),
    ("interleaved told half", VARIANTS["interleaved-strided"], {"rotary": "half"}),
    ("strided told consecutive", VARIANTS["interleaved-strided"], {"kv_order": "consecutive"}),
    ("consecutive told strided", VARIANTS["llama"], {"kv_order": "strided"}),
    ("RoPE dropped", VARIANTS["llama"], {"rotary": "none"}),
    ("rope_base 500000 for 10000", VARIANTS["llama"], {"rope_base": 500000.0}),
]


#: every wrong reading on mh_attention; the pairing and the head order through the cache and padding
PAIRS = [("mh_attention", w) for w in WRONG] + [(e, w) for e in ("cached_decoding", "padded_d_transformer")
                                                 for w in WRONG[1:3]]


@pytest.mark.parametrize("entry, wrong", PAIRS, ids=[f"{e}-{w[0]}" for e, w in PAIRS])
def test_a_wrong_pairing_is_failed(entry: str, wrong: tuple[str, VariantSet, dict[str, Any]]) -> None:
    label, judged, change = wrong
    case = _distinguishing_case(entry, judged)
    right, ran = _judge(IMPL, case, "float64")
    assert ran and not right, right
    wrong_findings, _ = _judge(_told(change), case, "float64")
    assert any(f.startswith("spec:") for f in wrong_findings), f"{label} on {entry} passes: {wrong_findings}"


# --------------------------------------------------------------------------
# cached_decoding decodes with a cache
# --------------------------------------------------------------------------


def _call(impl: Any, case: Case, dtype: str = "float64") -> Any:
    entry = case.entry
    ctx = Context(case.algorithm, dtype, "cpu", case.hyper, case.variant, False)
    return impl.algorithms[case.algorithm](to_native(impl, entry, case.inputs, dtype, "cpu"),
                                           to_native(impl, entry, case.params, dtype, "cpu", params=True), ctx)


@pytest.mark.parametrize("label", VARIANTS)
def test_cached_decoding_prefills_then_steps_one_token_at_a_time(label: str, monkeypatch) -> None:
    """Each layer's self-attention is called once with the n_prefill prompt tokens and an empty
    cache, then once per later token t with that one token and a cache of the t positions before
    it, holding H/G key/value heads (shared heads stored once), keys rotated (the cached keys are
    those the full pass computes for those positions)."""
    from ftspec.impls.torch import components, layers

    variant = VARIANTS[label]
    hyper = {**default_hyper(REGISTRY["cached_decoding"], variant), "H": 4, "d_attn": 4, "ell": 5, "ell_max": 6}
    case = Case.build("cached_decoding", hyper, variant, seed=5, given={"n_prefill": np.array(2)})
    seen: list[tuple[int, int, int, int]] = []  # (new tokens, start, cached positions, kv heads)
    real = components.cached_self_attention

    def spy(X, p, v, cache, start):
        cached = cache[0].shape[-2] if cache else 0
        out = real(X, p, v, cache, start)
        seen.append((X.shape[-2], start, cached, cache[0].shape[-3]))
        return out

    monkeypatch.setattr(layers, "cached_self_attention", spy)
    P = _call(IMPL, case)
    L = hyper["L"]
    want = [(2, 0, 0, 2)] * L + [(1, t, t, 2) for t in range(2, 5) for _ in range(L)]
    assert seen == want
    full = evaluate("d_transformer", {"x": case.spec_inputs()["x"]}, case.spec_params(), hyper=case.hyper,
                    variant=variant)
    np.testing.assert_allclose(P.numpy(), np.asarray(full["P"], dtype=np.float64), rtol=0, atol=1e-13)


def test_cached_keys_are_the_full_pass_keys_rotated_at_their_positions() -> None:
    """The cache after decoding holds, per kv head, exactly K = rotate(W_k X + b_k) of a full pass
    over the same sequence (RoPE at absolute positions, not at each call's own 0 …)."""
    from ftspec.impls.torch import adapter as A, components as C

    variant = VARIANTS["interleaved-strided"].replace(attn_bias=True, attn_bias_at="qkv")  # no b_o below
    g = torch.Generator().manual_seed(0)
    ell, d_e, H, G = 5, 8, 4, 2
    params = {f"heads.{h}.{n}": torch.randn(*s, generator=g, dtype=torch.float64)
              for h in range(H) for n, s in (("W_q", (4, d_e)), ("b_q", (4,)))}
    params.update({f"kv_heads.{k}.{n}": torch.randn(*s, generator=g, dtype=torch.float64) for k in range(H // G)
                   for n, s in (("W_k", (4, d_e)), ("b_k", (4,)), ("W_v", (3, d_e)), ("b_v", (3,)))})
    params.update(W_o=torch.randn(d_e, H * 3, generator=g, dtype=torch.float64))
    p = A.attn_params(params)
    X = torch.randn(ell, d_e, generator=g, dtype=torch.float64)
    cache: list = []
    steps = [C.cached_self_attention(X[:2], p, variant, cache, 0)]
    steps += [C.cached_self_attention(X[t:t + 1], p, variant, cache, t) for t in range(2, ell)]
    _, K, V = C.project(X, X, p, variant)
    assert cache[0].shape == (H // G, ell, 4)
    torch.testing.assert_close(cache[0], K, rtol=0, atol=1e-14)
    torch.testing.assert_close(cache[1], V, rtol=0, atol=1e-14)
    full = C.mh_attention(X, X, p, variant, causal=True)
    torch.testing.assert_close(torch.cat(steps), full, rtol=0, atol=1e-13)


# --------------------------------------------------------------------------
# refusals
# --------------------------------------------------------------------------


@pytest.mark.parametrize("entry", ["padded_causal_self_attention", "padded_e_transformer"])
def test_padding_only_is_refused_under_error(entry: str) -> None:
    variant = VARIANTS["llama"].replace(empty_query="error")
    case = _distinguishing_case(entry, variant)
    case.inputs["pad"][:] = False
    with pytest.raises(SpecError):
        evaluate(entry, case.spec_inputs(), case.spec_params(), hyper=case.hyper, variant=variant)
    with pytest.raises(ValueError, match="no key"):
        _call(IMPL, case)


def test_odd_d_attn_and_mismatched_kv_heads_are_refused() -> None:
    variant = VARIANTS["llama"]
    case = _distinguishing_case("mh_attention", variant)
    odd = {k: (v[:3] if k.endswith(("W_q", "W_k")) else v[:3] if k.endswith(("b_q", "b_k")) else v)
           for k, v in case.params.items()}
    with pytest.raises(ValueError, match="even"):
        _call(IMPL, Case(case.algorithm, {**case.hyper, "d_attn": 3}, variant, case.inputs, odd))
    with pytest.raises(ValueError, match="kv_group"):  # 2 kv heads for H = 4 read under G = 4
        _call(IMPL, Case(case.algorithm, case.hyper, variant.replace(kv_group=4), case.inputs, case.params))
    per_head = Case.build("mh_attention", case.hyper, variant.replace(kv_group=1), seed=1)
    with pytest.raises(ValueError, match="kv_group"):  # per-head K, V where kv_group = 2 wants shared ones
        _call(IMPL, Case(case.algorithm, case.hyper, variant, per_head.inputs, per_head.params))


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


def _biases(names: Any) -> set[str]:
    """The attention biases among flat names (``layers.0.attn.heads.1.b_q`` → b_q)."""
    return {n.rsplit(".", 1)[-1] for n in names if n.rsplit(".", 1)[-1] in ("b_q", "b_k", "b_v", "b_o")}


@pytest.mark.parametrize("label", BIASES_AT)
@pytest.mark.parametrize("entry", ["mh_attention", "gpt2_layer", "d_gradient"])
def test_attn_bias_at_agrees_with_the_spec(entry: str, label: str) -> None:
    """Drawn cases (float64 and float32 forward, float64 gradients) and the fixed H = 4, d_attn = 4
    case, judged as above; d_gradient outputs one gradient per parameter present (none for a
    dropped bias: the judge compares the names)."""
    variant = BIASES_AT[label]
    dtypes = ("float64",) if entry == "d_gradient" else DTYPES
    failures, judged = [], 0
    for dtype in dtypes:
        for case in _draw(entry, variant, dtype, 2) + [_distinguishing_case(entry, variant)]:
            assert _biases(case.params) == ({"b_o"} if label == "out" else {"b_q", "b_k", "b_v"})
            findings, ran = _judge(IMPL, case, dtype)
            judged += ran
            failures += [f"{dtype} {case.describe()}: {f}" for f in findings[:1]]
    assert not failures, "\n".join(failures)
    assert judged >= 2


@pytest.mark.parametrize("entry", ["mh_attention", "gpt2_layer"])
def test_all_four_biases_under_out_fail(entry: str) -> None:
    """Under attn_bias_at="out" the heads' b_q, b_k, b_v are absent (zero): a plugin that adds them
    is failed by the same judge; the plugin itself refuses biases its variant drops."""
    case = _distinguishing_case(entry, BIASES_AT["out"])
    assert _judge(IMPL, case, "float64") == ([], True)
    findings, ran = _judge(with_all_four_biases(IMPL), case, "float64")
    assert ran and any(f.startswith("spec:") for f in findings), findings
    four = dict(case.params)  # all four biases given, the variant still "out"
    for name, W in case.params.items():
        if name.rsplit(".", 1)[-1] in ("W_q", "W_k", "W_v"):
            four[name[:-3] + "b_" + name[-1]] = np.full(W.shape[0], 0.5)
    with pytest.raises(ValueError, match="attn_bias_at"):
        _call(IMPL, Case(case.algorithm, case.hyper, case.variant, case.inputs, four))
