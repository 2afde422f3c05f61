"""The ONNX plugins (``onnxruntime``, ``onnxruntime-fused``, ``onnx-reference``).

Always (a few seconds): the plugins load; an exported LayerNorm judged by the harness on two
cases of one structure with different weights (the export is cached per structure, so the
second passes only if its own weights reached the graph); and the ONNX reference evaluator's
three disagreements with a plain reading of the paper, each passing under the declared set and
failing under its neighbour: ε is a float32 attribute (seen at float64), Softmax over an all
−inf column is NaN while the opset-23 Attention operator gives a zero row.

Also always: the float64 cells are the graphs ONNX Runtime's CPU provider runs in float64 (no
double Erf kernel, shown on a one-node graph), an exported LayerNorm at float64 computes with
the float32 ε of its attribute, a batched call reuses the export of an unbatched one (symbolic
batch axis); without running a graph, the Llama entries and cached_decoding are declared under
the ``transformers`` plugin's Llama sets, the padded ones at float32 only, cached_decoding
unbatched.

With ``FTSPEC_ALL_LIBRARIES=1`` (the heavy-library switch of
tests/impls/test_library_certificates.py; ``make bench`` certifies them in any case): the three
plugins certified through the CLI at the quick profile, what ONNX Runtime gives a query with
no key on each exported attention path (Llama's left padding included), which fusions fire
(against the fused plugin's declaration), the fused BERT that ONNX Runtime cannot load at
``optimize_model``'s default opt_level with a fixed batch axis, cached decoding reading the
cache it returned, the float16 MultiheadAttention graph with a symbolic batch axis that crashes
ONNX Runtime (a child process), and the float32 constants of an exported float64 tanh GELU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
pytest.importorskip("torch")

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.examining import examine_case
from ftspec.conformance.core.execute import Member
from ftspec.conformance.core.findings import Judgement
from ftspec.impls.discovery import load
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import PAPER

from .cases import accepted_case, make_case

PLUGINS = ("onnxruntime", "onnxruntime-fused", "onnx-reference")
HEAVY = bool(os.environ.get("FTSPEC_ALL_LIBRARIES"))
FTSPEC = Path(sys.executable).with_name("ftspec")


def _judged(impl, case: Case, dtype: str, variant) -> Judgement:
    """The harness's judgement (the path of ``ftspec replay``) of ``impl`` on ``case`` under ``variant``."""
    case = Case(case.algorithm, case.hyper, variant, case.inputs, case.params)
    return examine_case(Member(impl.name, impl, "cpu"), case, dtype, timeout=120.0).judgement


def test_the_three_plugins_load_with_their_library_versions() -> None:
    import onnx
    import onnxruntime

    for name in PLUGINS:
        impl = load(name)
        assert impl.name == name
        assert f"onnx{onnx.__version__}" in impl.version
    assert f"onnxruntime{onnxruntime.__version__}" in load("onnxruntime").version


def test_an_exported_layer_norm_runs_each_calls_own_weights() -> None:
    """ε 1e-5 inside the root (torch.nn.LayerNorm's default, exported as LayerNormalization's
    attribute). The two cases share every shape, so the second reuses the first's export."""
    impl = load("onnxruntime")
    declared = PAPER.replace(epsilon=1e-5, epsilon_placement="inside_root")
    entry = REGISTRY["layer_norm"]
    first = accepted_case(entry, declared, seed=0)
    second = accepted_case(entry, declared, seed=1, hyper=dict(first.hyper))
    assert not np.array_equal(first.params["gamma"], second.params["gamma"])
    for case in (first, second):
        j = _judged(impl, case, "float32", declared)
        assert j.ok, [f.message for f in j.findings]


def _reference_verdicts(algorithm: str, dtype: str, variants: dict, empty_query: bool = False) -> dict[str, bool]:
    impl = load("onnx-reference")
    entry = REGISTRY[algorithm]
    out = {}
    for label, v in variants.items():
        case = make_case(entry, v, seed=3, empty_query=True) if empty_query else accepted_case(entry, v, seed=3)
        out[label] = _judged(impl, case, dtype, v).ok
    return out


@pytest.mark.parametrize("algorithm", ["layer_norm", "rms_norm"])
def test_the_reference_epsilon_is_float32_1e_5_visible_at_float64(algorithm: str) -> None:
    """An ONNX float attribute is a float32 (AttributeProto.f): LayerNormalization's and
    RMSNormalization's default ε is 1e-5 rounded to float32, 9.99999974737875e-06, which float64
    arithmetic tells apart from 1e-5 (relative 2.5e-8 of ε)."""
    stored = float(np.float32(1e-5))
    assert stored != 1e-5
    verdicts = _reference_verdicts(algorithm, "float64", {
        "float32(1e-5)": PAPER.replace(epsilon=stored, epsilon_placement="inside_root"),
        "1e-5": PAPER.replace(epsilon=1e-5, epsilon_placement="inside_root")})
    assert verdicts == {"float32(1e-5)": True, "1e-5": False}


def test_softmax_over_a_fully_masked_column_is_nan_the_attention_operator_gives_zeros() -> None:
    """A query with no key: the standard's Softmax is exp(x − max)/Σ, so an all −inf column is
    −inf − (−inf) = NaN; the opset-23 Attention operator states a zero output row instead."""
    eps = dict(epsilon=float(np.float32(1e-5)), epsilon_placement="inside_root")
    softmax = _reference_verdicts("attention", "float32", {
        q: PAPER.replace(empty_query=q, **eps) for q in ("nan", "zeros")}, empty_query=True)
    operator = _reference_verdicts("mh_attention", "float32", {
        q: PAPER.replace(empty_query=q, scale_placement="query_key_sqrt", **eps) for q in ("nan", "zeros")},
        empty_query=True)
    assert softmax == {"nan": True, "zeros": False}
    assert operator == {"nan": False, "zeros": True}


def test_onnx_runtime_gather_reads_a_negative_token_id_from_the_back() -> None:
    """Why the d_transformer entries check token IDs at the boundary: the exported embedding is a
    Gather, and ONNX Gather (ONNX Runtime with it) takes index −1 as the last row where
    torch.nn.Embedding raises, so an exported GPT-2 embeds token −1 as token N_V − 1."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    node = helper.make_node("Gather", ["W", "x"], ["y"], axis=0)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("W", TensorProto.FLOAT, [3, 2]),
                                            helper.make_tensor_value_info("x", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    W = np.arange(6, dtype=np.float32).reshape(3, 2)
    (y,) = session.run(None, {"W": W, "x": np.array([-1], dtype=np.int64)})
    assert y.tolist() == [[4.0, 5.0]]
    torch = pytest.importorskip("torch")
    with pytest.raises(IndexError):
        torch.nn.functional.embedding(torch.tensor([-1]), torch.from_numpy(W))


def test_the_llama_entries_are_declared_under_the_transformers_plugins_llama_sets() -> None:
    """The exported Llama modules are the ``transformers`` plugin's (its config, its weights'
    layout), so they are declared under its sets (kv_group 2 and 1); the padded ones at float32
    only: at float16 a left-padded query's min-filled scores are not equal (checked with
    ``FTSPEC_ALL_LIBRARIES=1`` below)."""
    from ftspec.impls.hf import LLAMA_EAGER, VARIANT_LLAMA

    for name in ("onnxruntime", "onnxruntime-fused"):
        impl = load(name)
        assert [v.hash for v in impl.variants_for("rms_norm")] == [VARIANT_LLAMA.hash]
        for algorithm in ("padded_causal_self_attention", "padded_gpt2_layer", "padded_d_transformer"):
            assert [v.hash for v in impl.variants_for(algorithm)] == [v.hash for v in LLAMA_EAGER], algorithm
            assert impl.dtypes_for(algorithm) == ("float32",), algorithm
        assert impl.dtypes_for("rms_norm") == ("float32", "float16")


def test_the_float64_cells_are_the_graphs_that_run_in_float64() -> None:
    """float64 is declared where ONNX Runtime's CPU provider runs the exported graph in float64:
    the layer norm, both attentions and the ReLU encoder layer (not fused: the optimizer's
    SkipLayerNormalization has no double kernel); not the GELU graphs, GPT-2 or Llama."""
    f64 = {name: {a for a in load(name).algorithms if "float64" in load(name).dtypes_for(a)}
           for name in ("onnxruntime", "onnxruntime-fused")}
    assert f64 == {"onnxruntime": {"layer_norm", "attention", "mh_attention", "encoder_layer"},
                   "onnxruntime-fused": {"layer_norm", "attention", "mh_attention"}}


def test_onnx_runtime_has_no_float64_erf_kernel() -> None:
    """Why no exported erf GELU is declared at float64: the CPU provider has an Erf kernel for
    float but none for double, so the session is not created (onnxruntime 1.32.0)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    def session(elem: int) -> object:
        node = helper.make_node("Erf", ["x"], ["y"])
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", elem, [2])],
                                  [helper.make_tensor_value_info("y", elem, [2])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])

    (y,) = session(TensorProto.FLOAT).run(None, {"x": np.array([0.0, 1.0], dtype=np.float32)})  # type: ignore[attr-defined]
    assert y[0] == 0.0 and abs(y[1] - 0.8427007929497149) < 1e-6  # erf(1), Abramowitz & Stegun 7.1
    with pytest.raises(Exception, match="NOT_IMPLEMENTED.*Erf"):
        session(TensorProto.DOUBLE)


def test_an_exported_layer_norm_at_float64_has_the_float32_epsilon() -> None:
    """LayerNormalization's ε is a float attribute, a float32: at float64 the exported
    ``nn.LayerNorm(eps=1e-5)`` computes with 9.99999974737875e-06. The declared set passes; the
    same set with ε = 1e-5 fails (error/bound about 100)."""
    impl = load("onnxruntime")
    (declared,) = impl.variants_for("layer_norm")
    assert declared.epsilon == float(np.float32(1e-5)) != 1e-5
    case = accepted_case(REGISTRY["layer_norm"], declared, seed=2)
    verdicts = {eps: _judged(impl, case, "float64", declared.replace(epsilon=eps)).ok
                for eps in (declared.epsilon, 1e-5)}
    assert verdicts == {declared.epsilon: True, 1e-5: False}


def test_a_batched_call_runs_the_export_an_unbatched_call_made() -> None:
    """The batch axis of the exported graph is symbolic: the harness's batch check (a batch of
    three against per-example calls) passes, and the structure was exported once for both."""
    from ftspec.impls.onnxrt import graphs

    impl = load("onnxruntime")
    (declared,) = impl.variants_for("layer_norm")
    entry = REGISTRY["layer_norm"]
    hyper = dict(d_e=3, ell=2)  # a structure no other test here uses
    case = accepted_case(entry, declared, seed=4, hyper=hyper)
    case.batch = [accepted_case(entry, declared, seed=s, hyper=hyper).inputs for s in (5, 6)]
    outcome = examine_case(Member(impl.name, impl, "cpu"), case, "float32", timeout=120.0)
    assert outcome.judgement.ok and "batch" in outcome.checks, [f.message for f in outcome.judgement.findings]
    exports = [k for k in graphs.EXPORT_SECONDS if k[:3] == ("layer_norm", "float32", (("d_e", 3), ("ell", 2)))]
    assert len(exports) == 1, exports


def test_cached_decoding_is_declared_under_the_llama_sets_unbatched() -> None:
    """LlamaForCausalLM decoded with a key/value cache: the ``transformers`` plugin's Llama sets,
    float32 and float16 (no padding, so no empty query), never batched (each sequence has its own
    prefill length); the other entries are batched."""
    from ftspec.impls.hf import LLAMA_EAGER

    for name in ("onnxruntime", "onnxruntime-fused"):
        impl = load(name)
        assert [v.hash for v in impl.variants_for("cached_decoding")] == [v.hash for v in LLAMA_EAGER]
        assert impl.dtypes_for("cached_decoding") == ("float32", "float16")
        assert not impl.limits_for("cached_decoding").batching
        assert all(impl.limits_for(a).batching for a in impl.algorithms if a != "cached_decoding")


# -- heavy: behind FTSPEC_ALL_LIBRARIES ------------------------------------------------------

heavy = pytest.mark.skipif(not HEAVY, reason="ONNX certifications: FTSPEC_ALL_LIBRARIES=1 (make bench runs them)")


@heavy
@pytest.mark.slow
@pytest.mark.parametrize("name", PLUGINS)
def test_certified_conformant_at_the_quick_profile(name: str, tmp_path: Path) -> None:
    out = tmp_path / "cert"
    proc = subprocess.run([str(FTSPEC), "certify", name, "--profile", "quick", "--jobs", "1", "--quiet",
                           "--out", str(out), "--case-dir", str(tmp_path / "cases")],
                          capture_output=True, text=True, timeout=1800, cwd=tmp_path)
    doc = json.loads((out / "certificate.json").read_text()) if (out / "certificate.json").exists() else {}
    impl = load(name)
    assert proc.returncode == 0 and doc.get("verdict") == "conformant", (
        f"{name}: exit {proc.returncode}, {doc.get('verdict')}: {doc.get('reasons')}\n{proc.stdout[-2000:]}")
    cells = {(c["algorithm"], c["dtype"]) for c in doc["results"] if c["status"] == "pass"}
    assert cells == {(a, d) for a in impl.algorithms for d in impl.dtypes_for(a)}


@heavy
@pytest.mark.slow
@pytest.mark.parametrize("name", ["onnxruntime", "onnxruntime-fused"])
def test_an_empty_query_is_uniform_through_sdpa_and_nan_through_multihead_attention(name: str) -> None:
    """torch itself gives both paths zeros (plugin ``torch-nn``). Exported: SDPA's boolean mask is
    filled with the dtype's minimum (uniform weights); MultiheadAttention's becomes −inf (NaN)."""
    impl = load(name)
    base = PAPER.replace(epsilon=1e-5, epsilon_placement="inside_root", scale_placement="query_key_sqrt")
    for algorithm, expected in (("attention", "uniform"), ("mh_attention", "nan")):
        verdicts = {}
        for q in ("zeros", "nan", "uniform"):
            v = base.replace(empty_query=q)
            case = make_case(REGISTRY[algorithm], v, seed=1, empty_query=True)
            if not impl.admits(algorithm, case.hyper):
                case = make_case(REGISTRY[algorithm], v, seed=1, empty_query=True,
                                 hyper=impl.limits_for(algorithm).settle(case.hyper))
            verdicts[q] = _judged(impl, case, "float32", v).ok
        assert verdicts == {q: q == expected for q in ("zeros", "nan", "uniform")}, (algorithm, verdicts)


@heavy
@pytest.mark.slow
def test_the_fused_float32_bert_layer_has_skip_layer_norms_and_a_gelu_kernel() -> None:
    """At float32 both residual + LayerNorm pairs become SkipLayerNormalization and the erf GELU
    one contrib Gelu (or BiasGelu); the layer still passes under the unfused graph's set."""
    from ftspec.impls.onnxrt import graphs

    impl = load("onnxruntime-fused")
    v = impl.variants_for("bert_layer")[0]
    case = accepted_case(REGISTRY["bert_layer"], v, seed=0)
    assert _judged(impl, case, "float32", v).ok
    fired = [stats for key, stats in graphs.FUSED_OPS.items() if key[:2] == ("bert_layer", "float32")]
    assert fired and all(s.get("SkipLayerNormalization", 0) == 2 and s.get("Gelu", 0) + s.get("BiasGelu", 0) == 1
                         for s in fired), fired


@heavy
@pytest.mark.slow
def test_two_structures_with_the_same_input_shapes_get_two_exports() -> None:
    """attention's graph inputs (X, Z, Mask) do not show d_attn or d_out; the parameters' shapes
    do. Two cases that differ only there must each run their own export."""
    impl = load("onnxruntime")
    v = impl.variants_for("attention")[0]
    entry = REGISTRY["attention"]
    first = accepted_case(entry, v, seed=0)
    second = accepted_case(entry, v, seed=1, hyper=dict(first.hyper, d_attn=first.hyper["d_attn"] + 1,
                                                          d_out=first.hyper["d_out"] + 1))
    for case in (first, second):
        j = _judged(impl, case, "float32", v)
        assert j.ok, [f.message for f in j.findings]


@heavy
@pytest.mark.slow
def test_a_fused_bert_with_a_fixed_batch_axis_does_not_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """At ``optimize_model``'s default opt_level (1) the fused one-layer BERT exported with a fixed
    batch axis fails at session creation (ONNX Runtime 1.32.0 cannot reload the graph its own
    basic level saved); the plugin's graph, whose batch axis is symbolic, loads at that default
    and passes, also with two layers' γ1 equal (which failed with the fixed axis)."""
    from ftspec.impls.onnxrt import entries

    fused = load("onnxruntime-fused")
    v = fused.variants_for("e_transformer")[0]
    hyper = dict(N_V=3, ell_max=3, L=1, H=2, d_e=4, d_attn=2, d_mid=2, d_mlp=5, d_f=4, ell=3)
    one = accepted_case(REGISTRY["e_transformer"], v, seed=0, hyper=hyper)
    two = accepted_case(REGISTRY["e_transformer"], v, seed=0, hyper=dict(hyper, L=2))
    two.params["layers.1.gamma1"] = two.params["layers.0.gamma1"].copy()
    assert entries.E_TRANSFORMER_OPT_LEVEL is None  # optimize_model's default
    for case in (one, two):
        j = _judged(fused, case, "float32", v)
        assert j.ok, [f.message for f in j.findings]
    monkeypatch.setattr(entries, "STATIC_BATCH", entries.STATIC_BATCH | {("e_transformer", "float32")})
    j = _judged(fused, one, "float32", v)
    assert [f.check for f in j.findings] == ["exception"]
    assert "Attempt to replace the existing tensor" in j.findings[0].message


@heavy
@pytest.mark.slow
@pytest.mark.parametrize("name", ["onnxruntime", "onnxruntime-fused"])
def test_a_left_padded_llama_query_gets_uniform_weights_at_float32_only(name: str) -> None:
    """LlamaAttention exported (sdpa) with position 0 padded: query 0 has no key. torch's own sdpa
    gives it zeros (``transformers-sdpa``); the export fills the boolean mask with the dtype's
    minimum, so its weights are uniform, as eager's are, at float32; at float16 they are neither
    (−65504 has spacing 32), why the padded Llama entries are declared at float32 only."""
    from ftspec.impls.onnxrt import LLAMA_SETS

    impl = load(name)
    verdicts = {}
    for dtype, q in (("float32", "uniform"), ("float32", "zeros"), ("float16", "uniform")):
        v = LLAMA_SETS[0].replace(empty_query=q)
        entry = REGISTRY["padded_causal_self_attention"]
        case = accepted_case(entry, v, seed=0, hyper=impl.limits_for(entry.name).settle(
            dict(accepted_case(entry, v, seed=0).hyper)))
        case.inputs["pad"] = np.arange(case.inputs["pad"].shape[-1]) > 0  # position 0 padded
        verdicts[(dtype, q)] = _judged(impl, case, dtype, v).ok
    assert verdicts == {("float32", "uniform"): True, ("float32", "zeros"): False, ("float16", "uniform"): False}


@heavy
@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["layer_norm", "mh_attention", "bert_layer", "rms_norm", "padded_gpt2_layer",
                                       "padded_d_transformer", "e_transformer", "cached_decoding"])
def test_the_fusions_that_fire_are_the_ones_the_fused_plugin_declares(algorithm: str) -> None:
    """One case per dtype: ``optimize_model``'s fused operator types equal ``FUSED_OPERATORS``
    (Llama: SimplifiedLayerNormalization and SkipSimplifiedLayerNormalization, no RotaryEmbedding
    or GroupQueryAttention), and the case passes under the unfused plugin's sets."""
    from ftspec.impls.onnxrt import FUSED_OPERATORS, graphs

    impl = load("onnxruntime-fused")
    v = impl.variants_for(algorithm)[0]
    entry = REGISTRY[algorithm]
    for dtype in impl.dtypes_for(algorithm):
        case = accepted_case(entry, v, seed=0, hyper=impl.limits_for(algorithm).settle(
            dict(accepted_case(entry, v, seed=0).hyper)))
        graphs.FUSED_OPS.clear()
        j = _judged(impl, case, dtype, v)
        assert j.ok, (dtype, [f.message for f in j.findings])
        fired = [tuple(sorted(stats)) for stats in graphs.FUSED_OPS.values()]
        assert fired == [tuple(sorted(FUSED_OPERATORS[algorithm][dtype]))], (dtype, graphs.FUSED_OPS)


@heavy
@pytest.mark.slow
@pytest.mark.parametrize("name", ["onnxruntime", "onnxruntime-fused"])
def test_cached_decoding_reads_the_cache_it_returned(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """LlamaForCausalLM exported once with symbolic token and cache axes: the prefill (an empty
    cache) and each step (the cache the previous run returned) give Algorithm 10's columns, under
    both Llama sets; the same case with one cached key changed between the runs fails."""
    from ftspec.impls.onnxrt import LLAMA_SETS, graphs

    impl = load(name)
    entry = REGISTRY["cached_decoding"]
    for v in LLAMA_SETS:
        case = accepted_case(entry, v, seed=0, hyper=impl.limits_for(entry.name).settle(
            dict(accepted_case(entry, v, seed=0).hyper)))
        case.inputs["n_prefill"] = np.array(2)
        assert case.inputs["x"].shape[-1] > 2  # at least one step after the prefill
        j = _judged(impl, case, "float32", v)
        assert j.ok, (v.kv_group, [f.message for f in j.findings])
    original = graphs.session

    class Corrupted:
        """The session, with the cached keys fed to each step (not the prefill) moved by 1."""

        def __init__(self, model: Any) -> None:
            self.session = original(model)

        def run(self, names: Any, feeds: dict[str, np.ndarray]) -> Any:
            if feeds["past_k"].shape[3]:
                feeds = dict(feeds, past_k=feeds["past_k"] + np.float32(1.0))
            return self.session.run(names, feeds)

    monkeypatch.setattr(graphs, "session", Corrupted)
    j = _judged(impl, case, "float32", LLAMA_SETS[-1])
    assert not j.ok and {f.check for f in j.findings} == {"spec"}, [f.message for f in j.findings]


@heavy
@pytest.mark.slow
def test_a_symbolic_batch_float16_multihead_attention_crashes_onnx_runtimes_nchwc_pass(tmp_path: Path) -> None:
    """Why mh_attention and gpt2_layer keep a fixed batch axis at float16 (``STATIC_BATCH``): the
    float16 export of MultiheadAttention with a symbolic batch axis crashes the process creating
    the session at ONNX Runtime 1.32.0's default level (SIGSEGV), and loads with NchwcTransformer
    disabled. Run in a child process; when this fails, ONNX Runtime has changed and the
    workaround can go."""
    from ftspec.impls.onnxrt import entries

    assert {("mh_attention", "float16"), ("gpt2_layer", "float16")} == entries.STATIC_BATCH
    script = tmp_path / "crash.py"
    script.write_text(
        "import sys, warnings, torch, onnxruntime as ort\n"
        "warnings.simplefilter('ignore')\n"
        "m = torch.nn.MultiheadAttention(4, 2, batch_first=True, dtype=torch.float16).eval()\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self): super().__init__(); self.m = m\n"
        "    def forward(self, x, b): return self.m(x, x, x, attn_mask=b, need_weights=False)[0]\n"
        "n = torch.export.Dim('batch', min=1, max=64)\n"
        "x = torch.randn(2, 3, 4, dtype=torch.float16); b = torch.rand(4, 3, 3) > 0.5\n"
        "p = torch.onnx.export(M(), (x, b), dynamo=True, opset_version=20, dynamic_shapes=({0: n}, {0: n * 2}))\n"
        "o = ort.SessionOptions(); o.intra_op_num_threads = 1\n"
        "off = sys.argv[1:]\n"
        "ort.InferenceSession(p.model_proto.SerializeToString(), o, providers=['CPUExecutionProvider'],\n"
        "                     disabled_optimizers=off)\n"
        "print('loaded')\n")
    runs = {label: subprocess.run([sys.executable, str(script), *off], capture_output=True, text=True, timeout=300)
            for label, off in (("default", []), ("no NchwcTransformer", ["NchwcTransformer"]))}
    assert runs["no NchwcTransformer"].returncode == 0 and "loaded" in runs["no NchwcTransformer"].stdout, (
        runs["no NchwcTransformer"].stderr[-2000:])
    assert runs["default"].returncode == -11 and "loaded" not in runs["default"].stdout, (
        runs["default"].returncode, runs["default"].stderr[-2000:])


@heavy
@pytest.mark.slow
def test_an_exported_float64_tanh_gelu_has_float32_constants() -> None:
    """Why d_transformer is not declared at float64: Hugging Face's ``NewGELUActivation`` (GPT-2's
    gelu_new) exported at float64 holds 0.044715 and √(2/π) as float32 values cast to double
    (torch.export's ``scalar_tensor``), so ONNX Runtime's float64 GELU departs from the exact
    formula by far more than float64 rounding (relative ~1e-8, against 2.2e-16)."""
    import math
    import warnings

    import onnxruntime as ort
    import torch
    from onnx import numpy_helper
    from transformers.activations import NewGELUActivation

    x = torch.linspace(-3, 3, 13, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's progress, not this test's to show
        program = torch.onnx.export(NewGELUActivation(), (x,), dynamo=True, opset_version=20)
    assert program is not None
    constants = {float(numpy_helper.to_array(i)) for i in program.model_proto.graph.initializer
                 if numpy_helper.to_array(i).size == 1}
    c, root = 0.044715, math.sqrt(2 / math.pi)
    assert {float(np.float32(c)), float(np.float32(root))} <= constants and not {c, root} & constants
    session = ort.InferenceSession(program.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    xs = x.numpy()
    exact = 0.5 * xs * (1 + np.tanh(root * (xs + c * xs ** 3)))  # Hendrycks & Gimpel 2016, eq. (tanh form)
    assert np.max(np.abs(y - exact)) > 1e3 * np.finfo(np.float64).eps

