"""Multi-query attention at any H (``kv_heads="one"``; Shazeer 2019, one key/value head shared by every
query head; Falcon-7B's FalconAttention under multi_query, transformers 5.24), checked against its
definition:

- under "one" at H query heads the parameters are one kv head's worth (``kv_heads.0``), the names and
  shapes of kv_group = H, and the result is kv_group = H's for H ≤ 4 (the drawn group sizes);
- for H > 4, where no drawn kv_group is H, it is defined and equals every head reading the one kv head's
  maps as its own (the paper's Algorithm 5 with W^h_k = W_k, W^h_v = W_v for every h);
- the set refuses a second spelling (kv_group or kv_order moved beside "one"), and the paper's set and
  every set at "grouped" keep their hashes (a switch added later is left out of the canonical JSON);
- the strategies draw it at the entries with grouped-query attention.
"""

from __future__ import annotations

import pytest
from hypothesis import find

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.strategies import variant_sets
from ftspec.spec import evaluate
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import PAPER, PRESETS, VariantSet

ONE = PAPER.replace(kv_heads="one")


def _case(algorithm: str, H: int, variant: VariantSet = ONE) -> Case:
    sizes = dict(Case.build(algorithm, variant=variant, seed=2).hyper) | {"H": H}
    return Case.build(algorithm, sizes, variant, seed=2)


@pytest.mark.parametrize("H", [2, 3, 4])
@pytest.mark.parametrize("algorithm", ["mh_attention", "causal_self_attention", "gpt2_layer", "decoder_layer"])
def test_one_kv_head_is_kv_group_h_where_that_is_drawn(algorithm, H):
    case = _case(algorithm, H)
    grouped = PAPER.replace(kv_group=H)
    e = REGISTRY[algorithm]
    assert e.param_schema(case.hyper, ONE) == e.param_schema(case.hyper, grouped)
    assert [k for k in e.param_schema(case.hyper, ONE) if "kv_heads." in k and ".W_k" in k] == \
        [k for k in e.param_schema(case.hyper, ONE) if k.endswith("kv_heads.0.W_k")]
    got = evaluate(algorithm, case.spec_inputs(), case.spec_params(), hyper=case.hyper, variant=ONE)
    assert got == evaluate(algorithm, case.spec_inputs(), case.spec_params(), hyper=case.hyper, variant=grouped)


@pytest.mark.parametrize("H", [5, 7])
@pytest.mark.parametrize("algorithm", ["mh_attention", "causal_self_attention"])
def test_one_kv_head_at_any_h_is_every_head_reading_it(algorithm, H):
    case = _case(algorithm, H)
    params = case.spec_params()
    assert sum(k.startswith("kv_heads.") and k.endswith("W_k") for k in params) == 1
    assert not any(k.startswith("heads.") and k.endswith(("W_k", "W_v", "b_k", "b_v")) for k in params)
    own = {k: v for k, v in params.items() if not k.startswith("kv_heads.")}
    for k, v in params.items():
        if k.startswith("kv_heads.0."):
            own.update({f"heads.{h}.{k.removeprefix('kv_heads.0.')}": v for h in range(H)})
    got = evaluate(algorithm, case.spec_inputs(), params, hyper=case.hyper, variant=ONE)
    assert got == evaluate(algorithm, case.spec_inputs(), own, hyper=case.hyper, variant=PAPER)


def test_one_head_is_its_own_kv_head():
    """At H = 1 the one kv head is the head's own (kv_group = H = 1's names): nothing is shared."""
    case = _case("mh_attention", 1)
    assert not any("kv_heads." in k for k in case.spec_params())
    assert evaluate("mh_attention", case.spec_inputs(), case.spec_params(), hyper=case.hyper, variant=ONE) == \
        evaluate("mh_attention", case.spec_inputs(), case.spec_params(), hyper=case.hyper, variant=PAPER)


@pytest.mark.parametrize("changes", [{"kv_group": 2}, {"kv_order": "strided"}])
def test_one_kv_head_refuses_a_second_spelling(changes):
    with pytest.raises(ValueError, match="kv_heads"):
        ONE.replace(**changes)


def test_the_default_leaves_every_hash_alone():
    assert "kv_heads" not in PAPER.to_json()
    assert PAPER.hash == VariantSet.from_json(PAPER.to_json()).hash == "fc2d657e21da4545"
    assert all("kv_heads" not in v.to_json() for v in PRESETS.values())
    assert ONE.hash != PAPER.hash and VariantSet.from_json(ONE.to_json()) == ONE


@pytest.mark.parametrize("entry", ["mh_attention", "gpt2_layer", "cached_decoding"])
def test_the_strategies_draw_one_kv_head_where_groups_are_drawn(entry):
    assert "kv_heads" in REGISTRY[entry].switches
    assert find(variant_sets(entry), lambda v: v.kv_heads == "one").kv_group == 1
