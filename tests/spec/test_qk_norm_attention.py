"""QK-norm at the causal self-attention entries (spec 2.12: Qwen3Attention and Gemma3Attention
certified alone). Checked against a hand-written computation, not another run of the spec's code:

- under qk_norm="rms" the entry's output is Algorithm 5 with every head's query and key columns divided
  by their root mean square over d_attn (with ε as epsilon/epsilon_placement say) and multiplied by the
  shared gains γ_q, γ_k (1 + γ under norm_gain="one_plus_gamma"), before the scores (transformers 5.24,
  models/qwen3/modeling_qwen3.py ``Qwen3Attention``: ``self.q_norm(self.q_proj(...).view(hidden_shape))``;
  Qwen3RMSNorm: ``x * rsqrt(mean(x²) + eps)``, times the weight; Gemma3RMSNorm: times 1 + weight);
- the gains are the last parameters, present under qk_norm="rms" alone: every other set's schema, and
  the draws of its parameters, are as before;
- ε, its placement and the gain are read there under qk_norm="rms" only (``Entry.read_with``): under
  "none" they change no bit;
- the bidirectional entries and Algorithm 5's own ``mh_attention`` do not list the switch.
"""

from __future__ import annotations

import math
import random

import pytest

from ftspec.spec import evaluate
from ftspec.spec.entry import QK_NORM
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import PAPER

from .helpers import same_bits

CAUSAL = ("causal_self_attention", "padded_causal_self_attention")
HYPER = {"H": 2, "d_e": 3, "d_attn": 3, "d_mid": 2, "ell": 4}


def _params(rng: random.Random, qk: bool) -> dict:
    H, d_e, d_attn, d_mid = HYPER["H"], HYPER["d_e"], HYPER["d_attn"], HYPER["d_mid"]

    def mat(m: int, n: int) -> list[list[float]]:
        return [[rng.uniform(-1, 1) for _ in range(n)] for _ in range(m)]

    p: dict = {}
    for h in range(H):
        p |= {f"heads.{h}.W_q": mat(d_attn, d_e), f"heads.{h}.b_q": mat(1, d_attn)[0],
              f"heads.{h}.W_k": mat(d_attn, d_e), f"heads.{h}.b_k": mat(1, d_attn)[0],
              f"heads.{h}.W_v": mat(d_mid, d_e), f"heads.{h}.b_v": mat(1, d_mid)[0]}
    p |= {"W_o": mat(d_e, H * d_mid), "b_o": mat(1, d_e)[0]}
    if qk:
        p |= {"gamma_q": mat(1, d_attn)[0], "gamma_k": mat(1, d_attn)[0]}
    return p


def _by_hand(X: list[list[float]], p: dict, eps: float, placement: str, one_plus: bool) -> list[list[float]]:
    """Algorithm 5 with Z = X, the causal mask and QK-norm, written out (columns are positions)."""
    d_e, ell = len(X), len(X[0])
    cols = [[X[r][t] for r in range(d_e)] for t in range(ell)]

    def lin(W: list[list[float]], b: list[float], x: list[float]) -> list[float]:
        return [sum(w * v for w, v in zip(row, x)) + bi for row, bi in zip(W, b)]

    def rms(v: list[float], g: list[float]) -> list[float]:
        ms = sum(x * x for x in v) / len(v)
        root = math.sqrt(ms + eps) if placement == "inside_root" else math.sqrt(ms) + eps
        return [x / root * ((1 + gi) if one_plus else gi) for x, gi in zip(v, g)]

    heads = []
    for h in range(HYPER["H"]):
        q = [rms(lin(p[f"heads.{h}.W_q"], p[f"heads.{h}.b_q"], c), p["gamma_q"]) for c in cols]
        k = [rms(lin(p[f"heads.{h}.W_k"], p[f"heads.{h}.b_k"], c), p["gamma_k"]) for c in cols]
        v = [lin(p[f"heads.{h}.W_v"], p[f"heads.{h}.b_v"], c) for c in cols]
        out = []
        for tx in range(ell):  # query tx sees keys tz ≤ tx
            s = [sum(a * b for a, b in zip(k[tz], q[tx])) / math.sqrt(HYPER["d_attn"]) for tz in range(tx + 1)]
            e = [math.exp(x - max(s)) for x in s]
            w = [x / sum(e) for x in e]
            out.append([sum(w[tz] * v[tz][r] for tz in range(tx + 1)) for r in range(HYPER["d_mid"])])
        heads.append(out)
    y = [[x for h in range(HYPER["H"]) for x in heads[h][t]] for t in range(ell)]  # stacked heads per column
    o = [lin(p["W_o"], p["b_o"], c) for c in y]
    return [[o[t][r] for t in range(ell)] for r in range(d_e)]


@pytest.mark.parametrize("name", CAUSAL)
@pytest.mark.parametrize("eps, placement, gain", [(0.0, "none", "gamma"), (0.25, "inside_root", "gamma"),
                                                  (0.25, "outside_root", "one_plus_gamma")])
def test_qk_norm_at_the_causal_self_attention_is_the_hand_computation(name, eps, placement, gain):
    rng = random.Random(7)
    X = [[rng.uniform(-2, 2) for _ in range(HYPER["ell"])] for _ in range(HYPER["d_e"])]
    p = _params(rng, qk=True)
    v = PAPER.replace(qk_norm="rms", epsilon=eps, epsilon_placement=placement, norm_gain=gain)
    inputs = {"X": X} | ({"pad": [1] * HYPER["ell"]} if name.startswith("padded_") else {})
    got = evaluate(name, inputs, p, hyper=HYPER, variant=v)["V_tilde"]
    want = _by_hand(X, p, eps, placement, gain == "one_plus_gamma")
    for row_g, row_w in zip(got, want):
        for a, b in zip(row_g, row_w):
            assert abs(float(a) - b) <= 1e-12 * (1 + abs(b)), (a, b)
    # and QK-norm changed the result: the same parameters without it give another output
    plain = evaluate(name, inputs, {k: x for k, x in p.items() if not k.startswith("gamma")}, hyper=HYPER,
                     variant=PAPER)["V_tilde"]
    assert max(abs(float(a) - float(b)) for ra, rb in zip(got, plain) for a, b in zip(ra, rb)) > 1e-3


@pytest.mark.parametrize("name", CAUSAL)
def test_the_gains_come_last_and_only_under_qk_norm(name):
    e = REGISTRY[name]
    for base in (PAPER, PAPER.replace(kv_group=2), PAPER.replace(attn_bias_at="qkv")):
        before = list(e.param_schema({"H": 2}, base))
        after = list(e.param_schema({"H": 2}, base.replace(qk_norm="rms")))
        assert after == before + ["gamma_q", "gamma_k"]
        assert "gamma_q" not in before


@pytest.mark.parametrize("name", CAUSAL)
@pytest.mark.parametrize("moved", [dict(epsilon=0.25, epsilon_placement="inside_root"),
                                   dict(norm_gain="one_plus_gamma")])
def test_the_norm_switches_are_read_under_qk_norm_alone(name, moved):
    e = REGISTRY[name]
    assert QK_NORM <= e.switches and QK_NORM - {"qk_norm"} <= set(e.read_with)  # with T5's (spec 2.13)
    rng = random.Random(3)
    X = [[rng.uniform(-2, 2) for _ in range(HYPER["ell"])] for _ in range(HYPER["d_e"])]
    inputs = {"X": X} | ({"pad": [1] * HYPER["ell"]} if name.startswith("padded_") else {})
    plain = _params(rng, qk=False)
    a = evaluate(name, inputs, plain, hyper=HYPER, variant=PAPER)["V_tilde"]
    b = evaluate(name, inputs, plain, hyper=HYPER, variant=PAPER.replace(**moved))["V_tilde"]
    assert same_bits(a, b)
    norms = QK_NORM - {"qk_norm"}  # (T5's bucket parameters are read_with too, spec 2.13)
    assert norms <= e.unread(PAPER.replace(**moved)) and not norms & e.unread(PAPER.replace(qk_norm="rms"))


def test_the_other_attention_entries_do_not_list_qk_norm():
    for name in ("attention", "mh_attention", "self_attention", "padded_self_attention"):
        assert "qk_norm" not in REGISTRY[name].switches, name
        assert "gamma_q" not in REGISTRY[name].param_schema({"H": 2}, PAPER.replace(qk_norm="rms"))
