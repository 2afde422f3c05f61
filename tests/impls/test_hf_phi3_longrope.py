"""``transformers-phi3``'s LongRoPE set (``rope_factors="longrope"``, spec 2.17: Phi-3-mini-128k's and
Phi-3.5-mini's rope_scaling, ``Phi3RotaryEmbedding`` with the longrope rope_type of transformers 5.24).

The plugin writes the drawn factors e into one of the config's two lists and the reciprocals into the other,
and sets original_max_position_embeddings so that the library's own rule (``dynamic_rope_update``: the long
list for a sequence longer than it) reads e (``adapter.phi3_config``, ``adapter.LONGROPE_LIST``). Always on and
cheap (in-process, one case per entry):

- either list, each entry (its attention, its layer, the padded model, cached decoding) at float32: no findings;
- e loaded into the list the library does not read: caught (so the branch the plugin certifies is the one
  it says);
- a plugin declaring rope_factors="none" while its library runs LongRoPE (a 128k config), and one running
  plain RoPE under a longrope declaration: caught.
"""

from __future__ import annotations

import dataclasses
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import ftspec.impls.hf.adapter as A
from ftspec.impls.discovery import load
from ftspec.impls.hf import VARIANT_PHI3, VARIANT_PHI3_LONGROPE

from .cases import answering_as, findings_of
from .test_longrope import longrope_case

NAME = "transformers-phi3"
#: Phi3Attention and Phi3DecoderLayer certified alone, and the two ways the whole model is run
ENTRIES = ("padded_causal_self_attention", "gpt2_layer", "padded_d_transformer", "cached_decoding")
#: the plugin's ties: d_e = H·d_attn (Phi3Config has no head_dim), d_attn = d_mid
SIZES = dict(H=2, d_e=8, d_attn=4, d_mid=4)
#: a seed whose padded cases keep two real tokens or more (at a single real key the rotation changes nothing)
SEED = 2


def _findings(impl, case) -> list[str]:
    from ftspec.conformance.core.examining import examine_case
    from ftspec.conformance.core.execute import Member

    outcome = examine_case(Member(impl.name, impl, "cpu"), case, "float32", timeout=60.0, variant=case.variant,
                           batch=False)
    return [f"{f.check}: {f.message}" for f in outcome.judgement.findings]


@pytest.mark.parametrize("which", ["long", "short"])
@pytest.mark.parametrize("entry", ENTRIES)
def test_either_list_is_the_spec(entry, which, monkeypatch):
    monkeypatch.setattr(A, "LONGROPE_LIST", which)
    case = longrope_case(entry, VARIANT_PHI3_LONGROPE, seed=SEED, **SIZES)
    assert not findings_of(NAME, case, VARIANT_PHI3_LONGROPE), entry


@pytest.mark.parametrize("which", ["long", "short"])
def test_the_factors_in_the_list_the_library_does_not_read_are_caught(which, monkeypatch):
    """The config's two lists swapped after the plugin chose them: original_max_position_embeddings still
    picks the list the plugin meant, which now holds the reciprocals."""
    monkeypatch.setattr(A, "LONGROPE_LIST", which)
    case = longrope_case("cached_decoding", VARIANT_PHI3_LONGROPE, seed=SEED, **SIZES)
    assert not findings_of(NAME, case, VARIANT_PHI3_LONGROPE)  # as built: the spec
    # the module ``from transformers import Phi3Config`` reads now (the package's lazy module can be replaced in
    # sys.modules once the library has been called)
    library = sys.modules["transformers"]
    real = library.Phi3Config

    def swapped(**kw):
        rope = dict(kw["rope_parameters"])
        rope["long_factor"], rope["short_factor"] = rope["short_factor"], rope["long_factor"]
        return real(**{**kw, "rope_parameters": rope})

    monkeypatch.setattr(library, "Phi3Config", swapped)
    monkeypatch.setattr(A, "_MODULES", type(A._MODULES)())  # no module built from an unswapped config
    assert findings_of(NAME, case, VARIANT_PHI3_LONGROPE)


def test_a_none_declaration_over_a_longrope_config_is_caught():
    """The plugin declares rope_factors="none" (Phi-3-mini-4k's set) while its config is a 128k one: LongRoPE with
    factors of its own (here Phi-3-mini-128k's first long factors and its attention factor √(1 + ln 32/ln 4096))."""
    impl = load(NAME)

    def running_longrope(fn):
        def wrong(i, p, ctx):
            p = {**p, "rope_ext": p["W_e"].new_tensor([1.08, 1.11]), "rope_mscale": p["W_e"].new_tensor([1.1902])}
            return fn(i, p, dataclasses.replace(ctx, variant=ctx.variant.replace(rope_factors="longrope")))
        return wrong

    wrong = dataclasses.replace(impl, name=f"{NAME}-128k-config", algorithms={
        k: running_longrope(f) for k, f in impl.algorithms.items()})
    plain = VARIANT_PHI3.replace(kv_group=1)
    case = longrope_case("padded_d_transformer", plain.replace(rope_factors="longrope"), seed=SEED, **SIZES)
    case = dataclasses.replace(case, variant=plain, params={k: v for k, v in case.params.items() if "rope_" not in k})
    assert not _findings(impl, case)  # the plugin as it is: conformant under "none"
    assert _findings(wrong, case)


def test_plain_rope_under_a_longrope_declaration_is_caught():
    case = longrope_case("padded_d_transformer", VARIANT_PHI3_LONGROPE, seed=SEED, **SIZES)
    assert _findings(answering_as(load(NAME), "unscaled", rope_factors="none"), case)
