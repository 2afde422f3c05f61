"""``ftspec identify`` (conformance/forensics/identify/): the conventions an implementation follows, found
without trusting its declaration.

Each test calls a real implementation on the designed cases of one or two cheap entries and checks
the switches found against what the implementation is known to compute: its declared set for the
bundled ones, the injected convention for a bug-zoo mutant (whose declaration says the paper's).
The merge of several entries is checked on hand-made results.
"""

from __future__ import annotations

import dataclasses

import pytest

from ftspec.conformance.core.execute import Member
from ftspec.conformance.forensics.identify import (EPSILON_CANDIDATES, GroupResult, Identity, IdentifyError,
                                                   designed_cases, expression, identify, merge, merge_all,
                                                   value_text)
from ftspec.impls.api import Implementation, Limits
from ftspec.impls.discovery import load
from ftspec.spec.registry import entry
from ftspec.spec.variants import PAPER, preset


def _run(plugin: str, algorithm: str, variant=None, dtype: str = "float64") -> Identity:
    impl = load(plugin)
    return identify(Member(plugin, impl, impl.devices()[0]), entry(algorithm), dtype, variant=variant)


def _group(identity: Identity, name: str) -> GroupResult:
    return next(g for g in identity.groups if g.group == name)


def _assert_declared_is_consistent(identity: Identity, declared) -> None:
    """The set the implementation computes is never excluded, and a decided switch is decided for it."""
    for g in identity.groups:
        want = {k: getattr(declared, k) for k in g.chosen}
        assert want in g.consistent, f"{identity.algorithm}: {g.line()}; declared {want}"
        if g.status == "decided" and len(g.consistent) == 1:
            assert g.chosen == want, g.line()
    assert identity.fits


def test_torch_nn_layer_norm_is_torch_s_epsilon_inside_the_root():
    torch_nn = pytest.importorskip("ftspec.impls.torch_nn")
    identity = _run("torch-nn", "layer_norm")
    _assert_declared_is_consistent(identity, torch_nn.VARIANT_SDPA)
    eps = _group(identity, "epsilon")
    assert eps.status == "decided" and eps.consistent == [{"epsilon": 1e-5, "epsilon_placement": "inside_root"}]
    assert _group(identity, "affine").consistent == [{"affine": "scale_shift"}]
    assert "epsilon=1e-05, epsilon_placement='inside_root'" in identity.expression()


def test_torch_nn_attention_gives_zeros_for_an_empty_query_and_cannot_show_its_scale_placement():
    torch_nn = pytest.importorskip("ftspec.impls.torch_nn")
    identity = _run("torch-nn", "attention")
    _assert_declared_is_consistent(identity, torch_nn.VARIANT_SDPA)
    assert _group(identity, "empty_query").consistent == [{"empty_query": "zeros"}]
    assert _group(identity, "attn_scale").consistent == [{"attn_scale": "sqrt_d_attn"}]
    # the placements are the same mathematics: at float64 no case tells them apart, and it says so
    placement = _group(identity, "scale_placement")
    assert placement.status == "undecided" and {"scale_placement": "query_key_sqrt"} in placement.consistent
    assert "empty_query='zeros'" in identity.expression() and identity.fits


def test_numpy_called_with_a_preset_is_identified_as_that_preset():
    """The numpy plugin implements every set: called with the Annotated Transformer's, its layer norm
    is found unbiased with ε = 1e-6 added to the standard deviation."""
    annotated = preset("annotated-transformer")
    identity = _run("numpy", "layer_norm", annotated)
    _assert_declared_is_consistent(identity, annotated)
    assert _group(identity, "variance").consistent == [{"variance": "unbiased"}]
    assert _group(identity, "epsilon").consistent == [{"epsilon": 1e-6, "epsilon_placement": "outside_root"}]
    assert "annotated-transformer" in identity.presets


def test_a_refusal_is_an_observation():
    """The paper refuses a query with no key; the numpy plugin called with the paper's set raises on
    the designed empty-query case, and that identifies empty_query = error."""
    identity = _run("numpy", "attention")
    refused = [o for o in identity.observations if o.outputs is None]
    assert [o.label for o in refused] == ["empty query column 0"]
    assert _group(identity, "empty_query").consistent == [{"empty_query": "error"}]
    assert identity.expression() == "PAPER"


def test_the_declaration_is_ignored():
    """A bug-zoo mutant declares the paper's set but adds PyTorch's ε: identify finds the ε."""
    from ftspec.tools.zoo import build, mutant

    impl = build(mutant("epsilon-added"))
    identity = identify(Member("zoo:epsilon-added", impl, "cpu"), entry("layer_norm"), "float64")
    assert identity.declared == "phuong-hutter"
    eps = _group(identity, "epsilon")
    assert eps.status == "decided" and eps.consistent == [{"epsilon": 1e-5, "epsilon_placement": "inside_root"}]
    assert eps.declared == {"epsilon": 0.0, "epsilon_placement": "none"}


def test_what_is_no_convention_is_said_to_fit_nothing():
    """An RMSnorm that centres its input follows no value of the rms_norm entry's switches: nothing
    fits, and the set shown is only the nearest."""
    from ftspec.tools.zoo import build, mutant

    impl = build(mutant("rms-norm-subtracts-mean"))
    identity = identify(Member("zoo:rms-norm-subtracts-mean", impl, "cpu"), entry("rms_norm"), "float64")
    assert not identity.fits and identity.cases_fit < len(identity.observations)
    assert all(g.status == "none fits" and not g.consistent for g in identity.groups)
    assert "nearest" in identity.groups[0].line()


def test_the_designed_cases_hold_what_separates_conventions():
    e = entry("attention")
    labels = [label for label, _ in designed_cases(e, dict(e.sizes), PAPER, "float64")]
    assert "empty query column 0" in labels
    _, empty = next(c for c in designed_cases(e, dict(e.sizes), PAPER, "float64") if c[0] == "empty query column 0")
    assert not empty.inputs["Mask"][:, 0].any() and empty.inputs["Mask"][:, 1:].any(axis=0).all()
    norm = entry("layer_norm")
    labels = [label for label, _ in designed_cases(norm, dict(norm.sizes), PAPER, "float64")]
    assert "near-constant columns" in labels and "small scale (x 2^-10)" in labels
    mask = entry("unidirectional_mask")
    cases = designed_cases(mask, dict(mask.sizes), PAPER, "float64")
    assert any(c.hyper["ell_z"] != c.hyper["ell_x"] for _, c in cases)  # where the causal alignments differ


def test_epsilon_candidates_are_a_finite_list_that_includes_the_common_defaults():
    assert {1e-5, 1e-6, 1e-12, 1e-4} <= set(EPSILON_CANDIDATES)
    assert value_text("epsilon", {"epsilon": 1e-5, "epsilon_placement": "inside_root"}) == "1e-05 inside_root"
    assert value_text("epsilon", {"epsilon": 0.0, "epsilon_placement": "none"}) == "0 (none)"


def _result(group: str, *values: dict, status: str = "decided") -> GroupResult:
    return GroupResult(group, status, values[0], consistent=list(values))


def test_merge_keeps_values_consistent_everywhere_and_names_conflicts():
    eps = {"epsilon": 1e-5, "epsilon_placement": "inside_root"}
    a = Identity("layer_norm", "x", "float64", "", PAPER, groups=[_result("epsilon", eps)])
    b = Identity("gpt2_layer", "x", "float64", "", PAPER, groups=[
        _result("epsilon", {"epsilon": 0.0, "epsilon_placement": "none"}, eps, status="undecided"),
        _result("activation", {"activation": "paper"}, {"activation": "gelu_tanh"}, status="undecided")])
    merged, conflicts = merge([a, b])
    # "paper" and gelu_tanh both fit gpt2_layer: the default stays, never written as a change (issue 35)
    assert merged == PAPER.replace(**eps) and conflicts == []
    other = {"epsilon": 1e-6, "epsilon_placement": "inside_root"}
    c = Identity("rms_norm", "x", "float64", "", PAPER, groups=[_result("epsilon", other)])
    merged, conflicts = merge([a, c])
    assert merged.epsilon == 0.0 and len(conflicts) == 1 and conflicts[0].startswith("epsilon: layer_norm: 1e-05")
    assert expression(PAPER) == "PAPER"
    assert expression(PAPER.replace(**eps)) == "PAPER.replace(epsilon=1e-05, epsilon_placement='inside_root')"


def test_merge_writes_no_default_and_no_declared_value_as_a_change():
    """Issue 35, finding 8: at gpt2_layer "paper" is pre-LN and exact GELU, so a plugin found pre-LN
    there is the paper's set: no ``norm_placement='pre'`` in the merged line; a declared value still
    possible everywhere is no change from the declaration; two values no case separates are reported
    undecided, the declared one kept, not the first one picked as a finding."""
    pre = {"norm_placement": "pre"}
    placement = GroupResult("norm_placement", "decided", pre, consistent=[{"norm_placement": "paper"}, pre],
                            same_as=[{"norm_placement": "paper"}], declared=pre)
    rotary = GroupResult("rotary", "undecided", {"rotary": "half"},
                         consistent=[{"rotary": "half"}, {"rotary": "interleaved"}],
                         declared={"rotary": "interleaved"})
    eps = {"epsilon": 1e-5, "epsilon_placement": "inside_root"}
    epsilon = GroupResult("epsilon", "decided", eps, consistent=[eps],
                          declared={"epsilon": 1e-6, "epsilon_placement": "inside_root"})
    m = merge_all([Identity("gpt2_layer", "x", "float64", "", PAPER, groups=[placement, rotary, epsilon])])
    assert m.variant == PAPER.replace(rotary="interleaved", **eps)  # no norm_placement: the default
    assert m.changes == eps  # only the value the cases exclude from the declaration
    assert m.undecided == ["rotary: no case separates interleaved, half"]


# -- limits: identify works wherever certify does (issue 25) -------------------------------------

def _limited(limits: Limits, algorithm: str = "layer_norm") -> Implementation:
    """NumPy's ``algorithm`` behind a boundary that raises on any shape outside ``limits``, as a
    library with such limits does; declares them."""
    numpy_impl = load("numpy")
    inner = numpy_impl.algorithms[algorithm]

    def wrapped(inputs, params, ctx):
        if not limits.admits(dict(ctx.hyper)):
            raise ValueError(f"unsupported sizes {dict(ctx.hyper)}")
        return inner(inputs, params, ctx)

    return dataclasses.replace(numpy_impl, name="limited", algorithms={algorithm: wrapped}, dtypes=["float64"],
                               limits=limits)


@pytest.mark.parametrize("limits", [
    Limits(minimum={"d_e": 64}, maximum={"d_e": 64}),  # only d_e = 64: above the default 5
    Limits(minimum={"d_e": 8}),  # d_e ≥ 8
    Limits(maximum={"d_e": 3, "ell": 2}),  # maxima below the defaults (5, 3)
], ids=["d_e=64", "d_e>=8", "small maxima"])
def test_a_plugin_whose_limits_exclude_the_default_sizes_is_identified(limits):
    """The case reported: identify refused ("admit no case near the default sizes") a plugin that
    certify runs. Every designed case must lie within the limits (the plugin refuses nothing), and
    its layer norm, the paper's (no ε, biased variance), is identified as such."""
    impl = _limited(limits)
    identity = identify(Member("limited", impl, "cpu"), entry("layer_norm"), "float64")
    assert identity.observations and all(limits.admits(o.hyper) for o in identity.observations)
    assert all(o.outputs is not None for o in identity.observations), [o.error for o in identity.observations]
    _assert_declared_is_consistent(identity, PAPER)
    assert _group(identity, "epsilon").consistent == [{"epsilon": 0.0, "epsilon_placement": "none"}]


def test_the_session_identifies_a_plugin_with_such_limits():
    """The path of ``ftspec identify`` (conformance/session): the same plugin, by (label, Implementation)."""
    from ftspec.conformance.session import identify as session_identify

    impl = _limited(Limits(minimum={"d_e": 64}, maximum={"d_e": 64}))
    result = session_identify(("only-64", impl), algorithms=["layer_norm"])
    (identity,) = result.identities
    assert identity.fits and {o.hyper["d_e"] for o in identity.observations} == {64}


def test_limits_that_admit_no_case_are_one_line_saying_why():
    impl = _limited(Limits(minimum={"H": 4}, maximum={"H": 3}), "mh_attention")
    with pytest.raises(IdentifyError) as info:
        identify(Member("limited", impl, "cpu"), entry("mh_attention"), "float64")
    assert "\n" not in str(info.value) and "H = 4 > maximum 3" in str(info.value)


def test_limits_tying_sizes_are_settled():
    """A multi-head library's d_x = H·d_attn and d_attn = d_mid, with at most 2 query positions."""
    limits = Limits(equal=(("d_attn", "d_mid"), ("d_x", "H*d_attn")), maximum={"ell_x": 2})
    identity = identify(Member("limited", _limited(limits, "mh_attention"), "cpu"), entry("mh_attention"),
                        "float64")
    assert all(limits.admits(o.hyper) and o.outputs is not None for o in identity.observations
               if o.label != "empty query column 0")
    _assert_declared_is_consistent(identity, PAPER)


@pytest.mark.parametrize("text, scaling", [("meta-llama3+rope_scaling=llama3", "llama3"),
                                           ("llama+rope_scaling=linear-2", "linear-2")])
def test_a_rotary_scaling_is_identified(text, scaling):
    """Llama 3.1's banded scaling (at Llama 3's base) and Hugging Face's linear one are each found,
    and decided: the designed rotary cases reach a scaled frequency (known from the set the numpy
    plugin is called with)."""
    from ftspec.spec.variants import parse

    declared = parse(text)
    identity = _run("numpy", "causal_self_attention", declared)
    _assert_declared_is_consistent(identity, declared)
    group = next(g for g in identity.groups if "rope_scaling" in g.chosen)
    assert group.status == "decided" and all(c["rope_scaling"] == scaling for c in group.consistent), group.line()
    assert f"rope_scaling='{scaling}'" in identity.expression()
