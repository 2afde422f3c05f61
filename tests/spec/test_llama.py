"""The LLaMA-family conventions, checked against transcriptions of their sources.

- RoPE (``rotary``): Hugging Face Llama's ``apply_rotary_pos_emb`` (q·cos +
  rotate_half(q)·sin with cos, sin of t·θ repeated over both halves) for
  "half"; Meta's reference code (adjacent pairs as complex numbers times
  e^{i t θ}) for "interleaved". Both written here from those formulas, in
  plain Python, not from spec/rotary.py.
- Grouped-query attention (``kv_group``, ``kv_order``): the same as
  multi-head attention whose heads carry copies of the kv head they read.
- Padding (``pad``): a padded key changes no unpadded position's column of a
  bidirectional model, which equals the model run on the unpadded tokens
  alone (right padding keeps their positions); all-ones padding is no padding.
- ``cached_decoding`` is Algorithm 10's columns.
"""

from __future__ import annotations

import cmath
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ftspec.spec import SpecError, evaluate
from ftspec.spec.evaluation import intermediates
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import PAPER, preset

from .helpers import flat_params, random_inputs, small_hyper

LLAMA = preset("llama").replace(kv_group=2)  # grouped: the preset fixes no size (until spec 2.4.0 it held 2)


def _hf_half(M: list[list[float]], base: float) -> list[list[float]]:
    """HF Llama: inv_freq_i = 1 / base^(2i/d); emb = cat(freqs, freqs); q·cos + rotate_half(q)·sin,
    rotate_half(q) = cat(−q[d/2:], q[:d/2]) (one column t at a time; rows are coordinates)."""
    d, ell = len(M), len(M[0])
    out = [[0.0] * ell for _ in range(d)]
    for t in range(ell):
        q = [M[r][t] for r in range(d)]
        freqs = [t / base ** (2 * i / d) for i in range(d // 2)]
        emb = freqs + freqs
        rot = [-x for x in q[d // 2:]] + q[:d // 2]
        for r in range(d):
            out[r][t] = q[r] * math.cos(emb[r]) + rot[r] * math.sin(emb[r])
    return out


def _meta_interleaved(M: list[list[float]], base: float) -> list[list[float]]:
    """Meta's LLaMA: view (q_{2i}, q_{2i+1}) as q_{2i} + i·q_{2i+1}, multiply by e^{i t θ_i}."""
    d, ell = len(M), len(M[0])
    out = [[0.0] * ell for _ in range(d)]
    for t in range(ell):
        for i in range(d // 2):
            z = complex(M[2 * i][t], M[2 * i + 1][t]) * cmath.exp(1j * t / base ** (2 * i / d))
            out[2 * i][t], out[2 * i + 1][t] = z.real, z.imag
    return out


@pytest.mark.parametrize("rotary,transcription", [("half", _hf_half), ("interleaved", _meta_interleaved)])
@pytest.mark.parametrize("base", [10000.0, 500000.0])
@given(seed=st.integers(0, 2**16))
def test_rope_is_the_sources_rotation(rotary, transcription, base, seed):
    e = REGISTRY["attention"]
    v = PAPER.replace(rotary=rotary, rope_base=base)
    hyper = small_hyper(e, d_attn=6, ell_x=5, ell_z=4)
    inputs = random_inputs(e, hyper, seed)
    inputs["Mask"] = [[1] * hyper["ell_x"] for _ in range(hyper["ell_z"])]
    got = intermediates("attention", inputs, flat_params(e, hyper, v, seed), hyper=hyper, variant=v)
    for raw, rotated in (("Q", "Q_rot"), ("K", "K_rot")):
        want = transcription(got[raw], base)
        worst = max(abs(a - b) for ra, rb in zip(got[rotated], want) for a, b in zip(ra, rb))
        assert worst < 1e-12, f"{rotated} under rotary={rotary}, base {base}: off by {worst:.3g}"
    # the other pairing is a different rotation: the test can tell them apart
    other = _meta_interleaved if transcription is _hf_half else _hf_half
    wrong = other(got["Q"], base)
    assert max(abs(a - b) for ra, rb in zip(got["Q_rot"], wrong) for a, b in zip(ra, rb)) > 1e-6


def _copied_heads(params: dict, H: int, G: int, order: str) -> dict:
    """GQA parameters rewritten as multi-head ones: head h gets a copy of the kv head it reads."""
    out = {k: v for k, v in params.items() if ".kv_heads." not in f".{k}"}
    n_kv = H // G
    for h in range(H):
        g = h // G if order == "consecutive" else h % n_kv
        for leaf in ("W_k", "b_k", "W_v", "b_v"):
            if f"kv_heads.{g}.{leaf}" in params:
                out[f"heads.{h}.{leaf}"] = params[f"kv_heads.{g}.{leaf}"]
    return out


@pytest.mark.parametrize("G,order", [(2, "consecutive"), (2, "strided"), (4, "consecutive"), (3, "strided")])
@given(seed=st.integers(0, 2**16))
def test_grouped_query_attention_is_multi_head_with_shared_copies(G, order, seed):
    e = REGISTRY["mh_attention"]
    H = 6 if G == 3 else 4
    v = PAPER.replace(kv_group=G, kv_order=order)
    hyper = small_hyper(e, H=H)
    inputs = random_inputs(e, hyper, seed)
    params = flat_params(e, hyper, v, seed)
    assert sum(".W_k" in k for k in params) == H // G
    try:
        grouped = evaluate("mh_attention", inputs, params, hyper=hyper, variant=v)["V_tilde"]
    except SpecError:  # an empty query under the paper's "error": both refuse, nothing to compare
        return
    plain = evaluate("mh_attention", inputs, _copied_heads(params, H, G, order), hyper=hyper)["V_tilde"]
    assert grouped == plain


def test_strided_and_consecutive_orders_differ():
    """With two kv heads and groups of two, the orders pair different heads: outputs differ."""
    e = REGISTRY["mh_attention"]
    hyper = small_hyper(e, H=4)
    inputs = random_inputs(e, hyper, 1)
    inputs["Mask"] = [[1] * hyper["ell_x"] for _ in range(hyper["ell_z"])]
    a, b = (evaluate("mh_attention", inputs, flat_params(e, hyper, PAPER.replace(kv_group=2, kv_order=o), 1),
                     hyper=hyper, variant=PAPER.replace(kv_group=2, kv_order=o))["V_tilde"]
            for o in ("consecutive", "strided"))
    assert max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb)) > 1e-6


@given(seed=st.integers(0, 2**16), kept=st.integers(1, 3))
def test_right_padding_is_the_shorter_sequence(seed, kept):
    """BERT with an attention mask: the unpadded columns are BERT on the unpadded tokens alone."""
    v = preset("hf-bert")
    e = REGISTRY["padded_e_transformer"]
    hyper = small_hyper(e, ell=4)
    params = flat_params(e, hyper, v, seed)
    x = random_inputs(e, hyper, seed)["x"]
    pad = [1] * kept + [0] * (hyper["ell"] - kept)
    P = evaluate("padded_e_transformer", {"x": x, "pad": pad}, params, hyper=hyper, variant=v)["P"]
    short = evaluate("e_transformer", {"x": x[:kept]}, params, hyper={**hyper, "ell": kept}, variant=v)["P"]
    worst = max(abs(P[r][t] - short[r][t]) for r in range(len(P)) for t in range(kept))
    assert worst < 1e-12
    full = evaluate("padded_e_transformer", {"x": x, "pad": [1] * hyper["ell"]}, params, hyper=hyper, variant=v)
    assert full == evaluate("e_transformer", {"x": x}, params, hyper=hyper, variant=v)
    if kept < hyper["ell"]:  # the padding is seen: unpadded BERT differs on the kept columns
        unpadded = full["P"]
        assert max(abs(P[r][t] - unpadded[r][t]) for r in range(len(P)) for t in range(kept)) > 1e-9


def test_left_padding_follows_empty_query():
    """A causal query whose only keys are padding: refused under "error" (naming ``pad``), uniform
    over every key under "uniform", and its column alone differs between conventions."""
    e = REGISTRY["padded_causal_self_attention"]
    hyper = small_hyper(e, ell=4)
    inputs = {**random_inputs(e, hyper, 3), "pad": [0, 1, 1, 1]}
    params = flat_params(e, hyper, PAPER, 3)
    with pytest.raises(Exception) as err:
        evaluate(e.name, inputs, params, hyper=hyper)
    assert getattr(err.value, "argument", None) == "pad"
    zeros = evaluate(e.name, inputs, params, hyper=hyper, variant=PAPER.replace(empty_query="zeros"))["V_tilde"]
    uniform = evaluate(e.name, inputs, params, hyper=hyper, variant=PAPER.replace(empty_query="uniform"))["V_tilde"]
    assert [row[1:] for row in zeros] == [row[1:] for row in uniform]
    assert any(abs(row[0]) > 1e-9 for row in uniform)


@given(seed=st.integers(0, 2**16), n_prefill=st.integers(1, 4))
def test_cached_decoding_is_algorithm_10(seed, n_prefill):
    e = REGISTRY["cached_decoding"]
    hyper = small_hyper(e, H=2, d_attn=2)
    params = flat_params(e, hyper, LLAMA, seed)
    x = random_inputs(e, hyper, seed)["x"]
    got = evaluate("cached_decoding", {"x": x, "n_prefill": n_prefill}, params, hyper=hyper, variant=LLAMA)
    assert got == evaluate("d_transformer", {"x": x}, params, hyper=hyper, variant=LLAMA)
