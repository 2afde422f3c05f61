"""The spec's named intermediates (spec/intermediates.py, ``spec.evaluation.intermediates``; issue 26).

Four things are checked. Recording is invisible: off, nothing is kept and nothing changes; on,
every output is bit for bit what ``evaluate`` gives. The names are complete and stable: for each
component, layer and model entry, under each norm placement, norm, MLP form and final-norm
setting, the recorded names are exactly the contract's (docs/plugins.md, "Named
intermediates"), built here from its rules, in the order computed. The values are what their
names say: each column of A sums to 1, S is the scores over the divisor with −∞ where masked,
μ and σ are each column's mean and the variant's divisor, a head is V A, a layer's output is its
last residual sum (pre-LN) or last norm (post-LN), and a model's recorded logits are the
``logits`` function of its last recorded step, with P their softmax. And each recorded layer
output is what the layer entry gives on the recorded input before it, exactly.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from ftspec.conformance.core.case import Case
from ftspec.spec import MpNumbers, SpecError, evaluate
from ftspec.spec.evaluation import INTERMEDIATE_FAMILIES, intermediates, to_floats
from ftspec.spec.functions import ACTIVATIONS
from ftspec.spec.intermediates import kept, record, recorded, recording, scope, step
from ftspec.spec.linalg import matmul, transpose
from ftspec.spec.registry import REGISTRY
from ftspec.spec.unembedding import logits, unembedding_matrix
from ftspec.spec.variants import PAPER

HEAD = ("Q", "K", "V", "scores", "S", "A")
LAYER_VARIANTS = {
    "paper": PAPER,
    "post": PAPER.replace(norm_placement="post"),
    "pre": PAPER.replace(norm_placement="pre"),
    "res_post": PAPER.replace(norm_placement="res_post"),
    "sandwich": PAPER.replace(norm_placement="sandwich"),
    "rms-pre": PAPER.replace(norm="rms_norm", norm_placement="pre"),
    "swiglu-deep": PAPER.replace(norm_placement="pre", mlp="gated", activation="silu", mlp_depth=3),
}


def _case(name: str, variant=PAPER, **hyper: int) -> Case:
    c = Case.build(name, None, variant)
    return Case.build(name, {**c.hyper, **hyper}, variant) if hyper else c


def _named(c: Case) -> dict[str, Any]:
    return intermediates(c.algorithm, c.spec_inputs(), c.spec_params(), hyper=c.hyper, variant=c.variant)


# -- the contract's names, from its rules (docs/plugins.md) ---------------------------------------------

def norm_names(prefix: str, variant) -> list[str]:
    stats = ["rms"] if variant.norm == "rms_norm" else ["mu", "sigma"]
    return [f"{prefix}.{s}" for s in stats] + [prefix]


def mha_names(prefix: str, H: int) -> list[str]:
    out = []
    for h in range(H):
        out += [f"{prefix}.heads.{h}.{n}" for n in HEAD] + [f"{prefix}.heads.{h}"]
    return out + [f"{prefix}.Y", prefix]


def mlp_names(prefix: str, variant) -> list[str]:
    out = [f"{prefix}.pre"] + ([f"{prefix}.act", f"{prefix}.lin"] if variant.mlp == "gated" else [])
    out.append(f"{prefix}.hidden")
    for k in range(variant.mlp_depth - 1):
        out += [f"{prefix}.hidden_layer.{k}.pre", f"{prefix}.hidden_layer.{k}"]
    return out + [prefix]


def layer_names(p: str, arch: str, variant, H: int) -> list[str]:
    """A layer's names under prefix ``p`` ("layers.0." or ""), in the order computed."""
    subs = [("self_attn", "norm1", "res1"), ("cross_attn", "norm2", "res2"), ("mlp", "norm3", "res3")] \
        if arch == "ed_decoder" else [("attn", "norm1", "res1"), ("mlp", "norm2", "res2")]
    placement = variant.resolved_norm_placement(arch)
    out: list[str] = []
    for f, norm, res in subs:
        fn = mlp_names(p + f, variant) if f == "mlp" else mha_names(p + f, H)
        nn = norm_names(p + norm, variant)
        if placement == "post":
            out += fn + [p + res] + nn
        elif placement == "res_post":
            out += fn + nn + [p + res]
        elif placement == "sandwich":  # the input norm, the sublayer, its output norm (a scope of its own)
            out += nn + fn + norm_names(p + norm + "_out", variant) + [p + res]
        else:
            out += nn + fn + [p + res]
    return out


def embedding_names(p: str, variant) -> list[str]:
    out = [f"{p}.tokens"] + ([f"{p}.positions"] if variant.positions != "none" else [])
    if variant.embedding_norm:
        out += [f"{p}.sum"] + norm_names(f"{p}.norm", variant)
    return out + [p]


def model_names(name: str, hyper: dict[str, int], variant) -> list[str]:
    H = hyper["H"]
    if name == "ed_transformer":
        out = embedding_names("enc_embedding", variant)
        for l in range(hyper["L_enc"]):
            out += layer_names(f"enc_layers.{l}.", "ed_encoder", variant, H) + [f"enc_layers.{l}"]
        if variant.resolved_final_norm("ed_encoder"):
            out += norm_names("enc_final_norm", variant)
        out += embedding_names("dec_embedding", variant)
        for l in range(hyper["L_dec"]):
            out += layer_names(f"dec_layers.{l}.", "ed_decoder", variant, H) + [f"dec_layers.{l}"]
        if variant.resolved_final_norm("ed_decoder"):
            out += norm_names("dec_final_norm", variant)
        return out + ["logits"]
    arch = {"e_transformer": "bert", "d_transformer": "gpt2", "next_token_encoder": "ed_encoder"}[name]
    out = embedding_names("embedding", variant)
    for l in range(hyper["L"]):
        out += layer_names(f"layers.{l}.", arch, variant, H) + [f"layers.{l}"]
    if variant.resolved_final_norm(arch):
        out += norm_names("final_norm", variant)
    if name == "e_transformer":
        stats = ["rms"] if variant.norm == "rms_norm" else ["mu", "sigma"]
        out += ["head.dense", "head.act"] + [f"head.{s}" for s in stats] + ["head"]
    return out + ["logits"]


COMPONENTS = {
    "attention": list(HEAD),
    "basic_single_query_attention": ["q", "K", "V", "scores", "S", "A"],
    "layer_norm": ["mu", "sigma"],
    "rms_norm": ["rms"],
    "embedding": ["tokens", "positions"],
    "unembedding": ["logits"],
    "token_embedding": [], "positional_embedding": [], "sinusoidal_paper": [], "sinusoidal_vaswani": [],
    "unidirectional_mask": [],
}


# -- recording is invisible ---------------------------------------------------------------------------

def test_recording_off_keeps_nothing_and_changes_nothing():
    assert not recording()
    record("x", [1.0])  # no recorder: nothing happens, nothing raises
    with scope("a"):
        assert kept("y", 2.0) == 2.0 and step("z", lambda v: v + 1, 1) == 2
    c = _case("d_transformer")
    plain = evaluate(c.algorithm, c.spec_inputs(), c.spec_params(), hyper=c.hyper)
    with recorded() as values:
        again = evaluate(c.algorithm, c.spec_inputs(), c.spec_params(), hyper=c.hyper)
    assert again == plain and values and not recording()


def test_scopes_nest_a_name_twice_raises_and_an_inner_recording_is_its_own():
    with recorded() as outer:
        with scope("a"):
            record("x", [[1.0]])
            assert step("b", lambda: (record("y", 2.0), 3.0)[1]) == 3.0
            with recorded() as inner:
                record("x", 4.0)
            with pytest.raises(RuntimeError, match="'a.x' recorded twice"):
                record("x", 5.0)
    assert outer == {"a.x": [[1.0]], "a.b.y": 2.0, "a.b": 3.0} and inner == {"x": 4.0}


def test_a_recorded_list_is_a_copy():
    X = [[1.0, 2.0]]
    with recorded() as values:
        record("X", X)
    X[0][0] = 9.0
    assert values["X"] == [[1.0, 2.0]]


def test_every_forward_entry_records_each_name_once():
    """Every component, layer and architecture entry of the registry (one added later too) records
    without a name twice (an architecture that ran two layers without their ``layers.{l}`` scopes would
    raise here), and a model ends in its logits."""
    for name, e in REGISTRY.items():
        if e.family in INTERMEDIATE_FAMILIES:
            got = _named(_case(name))
            assert list(got)[-len(e.outputs):] == [o.name for o in e.outputs], name
            if e.family == "architecture":
                assert list(got)[-len(e.outputs) - 1] == "logits", name


def test_only_forward_entries_record():
    for name, e in REGISTRY.items():
        if e.family not in INTERMEDIATE_FAMILIES:
            with pytest.raises(SpecError, match="intermediates are recorded for forward computations"):
                intermediates(name, {}, {})


# -- the names ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(COMPONENTS))
def test_component_names(name):
    c = _case(name)
    got = _named(c)
    outputs = [o.name for o in c.entry.outputs]
    assert list(got) == COMPONENTS[name] + outputs


@pytest.mark.parametrize("name", ["mh_attention", "self_attention", "causal_self_attention"])
def test_mh_attention_names(name):
    """The self-attention entries record mh_attention's names: a layer's ``attn.*`` without the prefix."""
    c = _case(name)
    rule = [n[len("x."):] for n in mha_names("x", c.hyper["H"])[:-1]]  # without the prefix and the result
    assert list(_named(c)) == rule + ["V_tilde"]


@pytest.mark.parametrize("name, layer, scope", [("self_attention", "encoder_layer", "attn"),
                                                ("causal_self_attention", "decoder_layer", "self_attn")])
def test_self_attention_is_the_layer_s_sublayer(name, layer, scope):
    """On a post-LN layer's input X and its ``{scope}.*`` parameters, the self-attention entry records
    exactly what the layer records under ``{scope}.`` (Alg. 8 line 5; line 14, causal): the entry is the
    layer's attention, its mask built from ℓ alone; every key is seen (Mask ≡ 1) or the keys t_z ≤ t_x."""
    c = _case(layer, ell_x=4, ell_z=4) if layer == "decoder_layer" else _case(layer, ell=4)
    got = _named(c)
    X = c.spec_inputs()["Z" if layer == "encoder_layer" else "X"]
    params = {k[len(scope) + 1:]: v for k, v in c.spec_params().items() if k.startswith(scope + ".")}
    alone = intermediates(name, {"X": X}, params, variant=PAPER)
    assert {f"{scope}.{k}" if k != "V_tilde" else scope: v for k, v in alone.items()} == \
        {k: v for k, v in got.items() if k == scope or k.startswith(scope + ".")}
    for h in range(c.hyper["H"]):
        A = alone[f"heads.{h}.A"]
        assert all((A[tz][tx] > 0) == (name == "self_attention" or tz <= tx)
                   for tz in range(4) for tx in range(4)), (name, h)


LAYERS = {"encoder_layer": "ed_encoder", "bert_layer": "bert", "gpt2_layer": "gpt2", "decoder_layer": "ed_decoder"}


@pytest.mark.parametrize("variant", sorted(LAYER_VARIANTS))
@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_layer_names(layer, variant):
    v = LAYER_VARIANTS[variant]
    c = _case(layer, v)
    got = list(_named(c))
    assert got == layer_names("", LAYERS[layer], v, c.hyper["H"]) + [c.entry.outputs[0].name]


MODEL_VARIANTS = {
    "paper": PAPER,
    "pre-final-tied-embnorm": PAPER.replace(norm_placement="pre", final_norm="final", unembedding="tied",
                                            embedding_norm=True, logit_bias=True),
    "res_post-rms-gated": PAPER.replace(norm_placement="res_post", norm="rms_norm", mlp="gated",
                                        positions="sinusoidal_vaswani", final_norm="final"),
    "sandwich-rms-final": PAPER.replace(norm_placement="sandwich", norm="rms_norm", final_norm="final"),
}


@pytest.mark.parametrize("variant", sorted(MODEL_VARIANTS))
@pytest.mark.parametrize("model", ["d_transformer", "e_transformer", "ed_transformer", "next_token_encoder"])
def test_model_names(model, variant):
    v = MODEL_VARIANTS[variant]
    c = _case(model, v)
    got = list(_named(c))
    assert got == model_names(model, c.hyper, v) + [c.entry.outputs[0].name]


# -- the values ---------------------------------------------------------------------------------------

def _col(A: list, t: int) -> list:
    return [row[t] for row in A]


def _close(a: float, b: float, rel: float = 1e-13) -> bool:
    return abs(a - b) <= rel * max(1.0, abs(a), abs(b))


@pytest.mark.parametrize("variant", ["paper", "query-scaled-d_model"])
def test_attention_values(variant):
    v = PAPER if variant == "paper" else PAPER.replace(attn_scale="sqrt_d_model", scale_placement="query")
    c = _case("gpt2_layer", v)
    got = _named(c)
    d_attn, d_x = c.hyper["d_attn"], c.hyper["d_e"]
    divisor = math.sqrt(d_attn if v.attn_scale == "sqrt_d_attn" else d_x)
    for h in range(c.hyper["H"]):
        p = f"attn.heads.{h}."
        A, S, scores, Q, K, V = (got[p + n] for n in ("A", "S", "scores", "Q", "K", "V"))
        ell = len(A)
        for t in range(ell):  # a causal layer: key t_z ≤ t_x only
            assert _close(math.fsum(_col(A, t)), 1.0, 1e-15) and min(_col(A, t)) >= 0
            for tz in range(ell):
                raw = math.fsum(K[i][tz] * Q[i][t] for i in range(d_attn)) / divisor  # KᵀQ/√d of line 1-2's Q, K
                if tz <= t:
                    assert _close(S[tz][t], raw, 1e-12)
                    assert A[tz][t] > 0
                else:
                    assert S[tz][t] == -math.inf and A[tz][t] == 0.0
            if v.scale_placement == "scores":
                assert all(S[tz][t] == scores[tz][t] / divisor for tz in range(t + 1))
        assert got[p[:-1]] == matmul(V, A)  # the head's output Ṽ = V A, as line 6 computes it
    stacked = [row for h in range(c.hyper["H"]) for row in got[f"attn.heads.{h}"]]
    assert got["attn.Y"] == stacked


@pytest.mark.parametrize("variant", ["paper-eps", "unbiased-outside", "rms"])
def test_norm_statistics(variant):
    v = {"paper-eps": PAPER.replace(epsilon=1e-5, epsilon_placement="inside_root"),
         "unbiased-outside": PAPER.replace(variance="unbiased", epsilon=1e-3, epsilon_placement="outside_root"),
         "rms": PAPER.replace(norm="rms_norm", epsilon=1e-6, epsilon_placement="inside_root")}[variant]
    c = _case("layer_norm" if v.norm == "layer_norm" else "rms_norm", v)
    got = _named(c)
    X = c.spec_inputs()["X"]
    d = len(X)
    for t in range(len(X[0])):
        e = _col(X, t)
        if v.norm == "rms_norm":
            assert _close(got["rms"][t], math.sqrt(math.fsum(x * x for x in e) / d + v.epsilon))
            continue
        m = math.fsum(e) / d
        var = math.fsum((x - m) ** 2 for x in e) / (d - (v.variance == "unbiased"))
        sigma = math.sqrt(var + v.epsilon) if v.epsilon_placement == "inside_root" else math.sqrt(var) + v.epsilon
        assert _close(got["mu"][t], m) and _close(got["sigma"][t], sigma)
        gamma, beta = c.params["gamma"], c.params["beta"]
        assert all(_close(got["X_hat"][i][t], (e[i] - got["mu"][t]) / got["sigma"][t] * gamma[i] + beta[i], 1e-12)
                   for i in range(d))


@pytest.mark.parametrize("variant", sorted(LAYER_VARIANTS))
def test_a_layer_output_is_its_last_step(variant):
    v = LAYER_VARIANTS[variant]
    for layer, arch in LAYERS.items():
        c = _case(layer, v)
        got = _named(c)
        out = got[c.entry.outputs[0].name]
        last = "res3" if layer == "decoder_layer" else "res2"
        norm = "norm3" if layer == "decoder_layer" else "norm2"
        assert out == got[norm if v.resolved_norm_placement(arch) == "post" else last], (layer, variant)
        act = ACTIVATIONS[v.resolved_activation(arch)]
        if v.mlp == "plain":
            assert got["mlp.hidden"] == [[act(x) for x in row] for row in got["mlp.pre"]]
        else:
            assert got["mlp.hidden"] == [[a * g for a, g in zip(r, s)] for r, s in zip(got["mlp.act"], got["mlp.lin"])]


@pytest.mark.parametrize("variant", sorted(MODEL_VARIANTS))
@pytest.mark.parametrize("model", ["d_transformer", "e_transformer", "ed_transformer"])
def test_model_logits_and_layers(model, variant):
    """The recorded logits are the ``logits`` function of the last recorded step, P their softmax; each
    recorded layer output is the layer entry on the recorded value before it, exactly."""
    v = MODEL_VARIANTS[variant]
    c = _case(model, v)
    got = _named(c)
    p = c.spec_params()
    last = [n for n in got if n in ("final_norm", "head", "dec_final_norm") or n.split(".")[0].endswith("layers")
            and n.count(".") == 1][-1]
    W_u = unembedding_matrix(p.get("W_u"), p.get("W_e"), v)
    assert got["logits"] == logits(got[last], W_u, p.get("b_u"))
    for t, col in enumerate(transpose(got["P"])):
        z = _col(got["logits"], t)
        top = max(z)
        want = [math.exp(x - top) for x in z]
        assert all(_close(a, b / math.fsum(want), 1e-14) for a, b in zip(col, want))
    stacks = {"ed_transformer": [("enc_", "encoder_layer"), ("dec_", "decoder_layer")],
              "e_transformer": [("", "bert_layer")], "d_transformer": [("", "gpt2_layer")]}[model]
    for prefix, layer in stacks:
        before = got[f"{prefix}embedding"]
        for l in range(c.hyper["L_enc" if prefix == "enc_" else "L_dec" if prefix == "dec_" else "L"]):
            lp = {k[len(f"{prefix}layers.{l}."):]: x for k, x in p.items() if k.startswith(f"{prefix}layers.{l}.")}
            inputs = {"Z" if layer == "encoder_layer" else "X": before}
            if layer == "decoder_layer":
                encoder = f"enc_layers.{c.hyper['L_enc'] - 1}"
                inputs["Z"] = got["enc_final_norm"] if "enc_final_norm" in got else got[encoder]
            out = evaluate(layer, inputs, lp, variant=v)
            assert next(iter(out.values())) == got[f"{prefix}layers.{l}"], (prefix, l)
            before = got[f"{prefix}layers.{l}"]


def test_in_high_precision_too():
    """The same names in any number system: mpmath at 40 digits agrees with binary64 to rounding."""
    c = _case("gpt2_layer")
    fine = _named(c)
    mp = MpNumbers(40)
    high = intermediates(c.algorithm, c.spec_inputs(), c.spec_params(), hyper=c.hyper, numbers=mp)
    assert list(high) == list(fine)
    for name in ("attn.heads.0.A", "norm2.sigma", "mlp.hidden", "res2"):
        a, b = to_floats(high[name], mp), fine[name]
        flat_a = a if not isinstance(a[0], list) else [x for row in a for x in row]
        flat_b = b if not isinstance(b[0], list) else [x for row in b for x in row]
        assert all(_close(x, y, 1e-12) for x, y in zip(flat_a, flat_b)), name
