"""A LLaMA-style plugin that declares one RoPE pairing or key/value head order and computes the
other is caught at float32, and the diagnosis names the convention it computes (issue 27).

The wrong plugin is the bundled NumPy one run under the other convention: what a port that
copied Meta's interleaved rotation into a Hugging Face (rotate_half) checkpoint, or tiled its
key/value heads, computes.
"""

from __future__ import annotations

import pytest

from ftspec.conformance.core.calling import call
from ftspec.conformance.core.case import Case
from ftspec.conformance.core.examining import rounded
from ftspec.conformance.core.judge import judge
from ftspec.conformance.core.tolerances import reference
from ftspec.conformance.forensics.diagnosis import diagnose
from ftspec.impls.discovery import load
from ftspec.spec.variants import preset

NUMPY = load("numpy")
LLAMA = preset("llama").replace(kv_group=2)  # grouped: the preset fixes no size (until spec 2.4.0 it held 2)
#: four query heads over two kv heads and two RoPE pairs: both conventions can show
HYPER = {"H": 4, "d_e": 8, "d_attn": 4, "d_mid": 4, "d_mlp": 6, "ell": 4}


@pytest.mark.parametrize("switch,value", [("rotary", "interleaved"), ("kv_order", "strided")])
def test_a_wrong_llama_convention_is_caught_and_named_at_float32(switch, value):
    case = Case.build("gpt2_layer", HYPER, LLAMA, seed=2)
    p = rounded(case, "float32")
    wrong = call(NUMPY, case.entry, p.inputs, p.params, hyper=case.hyper,
                 variant=LLAMA.replace(**{switch: value}), dtype="float32", device="cpu")
    ref = reference(case.entry, p.inputs, p.params, hyper=case.hyper, variant=LLAMA, dtype="float32")
    assert not judge(case.entry, wrong, ref).ok  # caught
    d = diagnose(case.entry, case, wrong, "float32", evaluations=80)
    assert any(m["changes"].get(switch) == value for m in d.matches), d.summary()
