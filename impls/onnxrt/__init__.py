"""ONNX Runtime and the ONNX reference evaluator as implementations (plugins ``onnxruntime``,
``onnxruntime-fused``, ``onnx-reference``).

Written against onnx 1.23.2, onnxruntime 1.32.0, onnxscript 0.7.2, torch 2.13.0 and
transformers 5.24.0.

``onnxruntime``        torch.nn modules a user would export (LayerNorm, Linear + SDPA,
                       MultiheadAttention, TransformerEncoderLayer post-LN ReLU/GELU and pre-LN
                       GELU with a causal mask) and Hugging Face ``GPT2LMHeadModel``
                       (d_transformer) and ``BertForMaskedLM`` (e_transformer) with the
                       softmax over their logits, and Hugging Face Llama as the
                       ``transformers`` plugin builds it: ``LlamaRMSNorm`` (rms_norm),
                       ``LlamaAttention`` (padded_causal_self_attention),
                       ``LlamaDecoderLayer`` (padded_gpt2_layer) and ``LlamaForCausalLM``
                       with its softmax (padded_d_transformer), given a padding mask,
                       and decoded with a key/value cache (cached_decoding);
                       exported with
                       ``torch.onnx.export(dynamo=True)`` at opset 20 and run by
                       ``onnxruntime.InferenceSession`` on the CPU execution provider
                       (``graphs``, ``entries``). The batch axis is symbolic
                       (``entries._run``); float64 where the graph runs in float64
                       (``ORT_DTYPES``).
``onnxruntime-fused``  the same graphs after ``onnxruntime.transformers.optimizer.optimize_model``
                       (model type "bert", Llama "gpt2", the head count and width given,
                       ``OPTIMIZE_MODEL``), which fuses
                       SkipLayerNormalization, Gelu, BiasGelu and FastGelu, and Llama's
                       SimplifiedLayerNormalization and SkipSimplifiedLayerNormalization
                       (``FUSED_OPERATORS``, per entry and dtype; docs/libraries.md).
``onnx-reference``     graphs written here from the standard's operators (LayerNormalization,
                       RMSNormalization, MatMul, Softmax, Gelu, the opset-23 Attention) in the
                       spec's column layout, run by ``onnx.reference.ReferenceEvaluator``: the
                       ONNX standard's own executable semantics, a second specification
                       (``reference``).

Variant sets (docs/libraries.md, "ONNX Runtime", says why, switch by switch): see
``VARIANT_ORT``, ``VARIANT_FUSED``, ``LLAMA_SETS`` and ``VARIANT_REFERENCE`` below.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnxruntime  # type: ignore[import-untyped]  # ships no type information
import torch

from ftspec.impls.api import Implementation, Limits
from ftspec.spec.variants import PAPER, preset

from .entries import E_TRANSFORMER_OPT_LEVEL, LAYER_EPS, algorithms
from .graphs import OPSET
from .reference import REFERENCE_ALGORITHMS, REFERENCE_EPS, REFERENCE_OPSET

__all__ = ["implementation", "implementation_fused", "implementation_reference", "VARIANT_ORT",
           "VARIANT_ORT_SDPA", "VARIANT_FUSED", "VARIANT_FUSED_SDPA", "VARIANT_GPT2", "VARIANT_BERT",
           "VARIANT_LLAMA", "LLAMA_SETS", "LLAMA_PADDED", "LLAMA_MODELS", "FUSED_OPERATORS", "OPTIMIZE_MODEL",
           "VARIANT_REFERENCE", "VARIANT_REFERENCE_QK", "ORT_DTYPES", "FUSED_DTYPES",
           "VARIANT_ORT_EPS32", "REFERENCE_DTYPES", "REFERENCE_EPSILON", "OPSET",
           "REFERENCE_OPSET"]

_NP = {"float64": np.float64, "float32": np.float32, "float16": np.float16, "int64": np.int64, "bool": np.bool_}

_NORM = dict(epsilon=LAYER_EPS, epsilon_placement="inside_root", variance="biased", affine="scale_shift")
#: The exported graphs: LayerNormalization(ε = 1e-5, inside the root, biased variance); SDPA
#: exported by torchlib as √scale multiplied into q and into k before q·kᵀ (``query_key_sqrt``);
#: MultiheadAttention's boolean attn_mask becomes an additive −inf mask before SDPA's float-mask
#: path, so a query whose every key is masked is 0/0 in Softmax: NaN (``empty_query="nan"``).
VARIANT_ORT = PAPER.replace(empty_query="nan", scale_placement="query_key_sqrt", **_NORM)
#: ``attention`` (SDPA called with a boolean mask): torchlib's bool-mask SDPA fills masked scores
#: with the dtype's minimum, not −inf (onnxscript 0.7.2 function_libs/torch_lib/ops/nn.py
#: ``_aten_scaled_dot_product_attention_bool_mask_onnx``), so a query with no key gets equal
#: scores and uniform weights, where torch itself gives zeros; its IsNaN guard never fires.
VARIANT_ORT_SDPA = VARIANT_ORT.replace(empty_query="uniform")
#: Llama: the ``transformers`` plugin's sets (``ftspec.impls.hf.LLAMA_EAGER``: the ``llama`` preset,
#: ε 1e-6, SwiGLU, rotate_half RoPE at base 10000, no biases, a separate lm_head; kv_group 2 and
#: 1), written out here so that loading this plugin does not import transformers. rms_norm reads
#: ε and affine only: one set. The exported sdpa path keeps every convention of the eager one,
#: including an empty query's uniform weights (a left-padded position 0: torchlib fills the
#: boolean mask with the dtype's minimum, as for ``attention``), where torch's own sdpa gives
#: zeros: the eager sets, not ``transformers-sdpa``'s (measured, docs/libraries.md).
VARIANT_LLAMA = preset("llama").replace(kv_group=2)
LLAMA_SETS = (VARIANT_LLAMA, VARIANT_LLAMA.replace(kv_group=1))
#: LlamaAttention, LlamaDecoderLayer (Alg. 10 lines 5-8 under the llama set) and LlamaForCausalLM,
#: each given the 2-D padding mask
LLAMA_PADDED = ("padded_causal_self_attention", "padded_gpt2_layer", "padded_d_transformer")
#: LlamaForCausalLM decoded with a key/value cache (``entries._LlamaStep``), under the same sets
LLAMA_MODELS = LLAMA_PADDED + ("cached_decoding",)
#: At float16 that minimum is −65504, where the spacing is 32: s − 65504 rounds to one value only
#: while |s| < 16, so larger scores make an empty query's weights non-uniform (found by the
#: search: error/bound 15 on a one-key case with large logits). ``attention`` and the padded
#: Llama entries (the same fill: a left-padded query's weights are off at float16, checked) are
#: not declared at float16; at float64 the minimum's spacing (~2e292) absorbs any score, and
#: ``attention`` is declared there too (``ORT_DTYPES``).
#: layer_norm and encoder_layer, also declared at float64: LayerNormalization's ε is an ONNX
#: float attribute (AttributeProto.f, a float32), so the graph's ε is float32(1e-5) =
#: 9.99999974737875e-06, which float64 arithmetic tells from 1e-5 (error/bound 114 for layer_norm,
#: 19 for encoder_layer under 1e-5; the same value at float32 and float16, so true at every dtype).
#: The other torch.nn graphs keep 1e-5: not run at float64, and the golden fixtures made under
#: 1e-5 still replay on them.
VARIANT_ORT_EPS32 = VARIANT_ORT.replace(epsilon=float(np.float32(LAYER_EPS)))
#: What ONNX Runtime 1.32.0's CPU provider runs at float64 (checked per entry, docs/libraries.md):
#: no double Erf kernel (bert_layer, gpt2_layer, e_transformer: the session is not created);
#: GPT-2's tanh GELU is exported with float32-rounded constants (0.044715 and √(2/π) become
#: ``scalar_tensor`` float32 values cast to double: error/bound ~5e5), and the Llama modules
#: compute in float32 inside (LlamaRMSNorm casts to float32, RoPE's cos/sin are float32), so
#: those are not declared at float64; the graphs that do run in float64 are.
_ORT64 = ("float64", "float32", "float16")
_NO64 = ("float32", "float16")
ORT_DTYPES = {"layer_norm": _ORT64, "attention": ("float64", "float32"), "mh_attention": _ORT64,
              "encoder_layer": _ORT64, **{a: _NO64 for a in ("bert_layer", "gpt2_layer", "d_transformer",
                                                              "e_transformer", "rms_norm")},
              **{a: ("float32",) for a in LLAMA_PADDED}, "cached_decoding": ("float32", "float16")}
#: Fused: ``optimize_model`` writes SkipLayerNormalization into the float64 encoder layer too,
#: whose contrib schema takes float and float16 only, so the session refuses the graph
#: ("Type 'tensor(double)' of input parameter (x) of operator (SkipLayerNormalization) ... is
#: invalid"): encoder_layer is fused at float32 and float16 only.
FUSED_DTYPES = {**ORT_DTYPES, "encoder_layer": _NO64}
#: The fused graphs: the fusions that fire (SkipLayerNormalization, BiasGelu) keep every
#: convention of the unfused graph (docs/libraries.md).
VARIANT_FUSED = VARIANT_ORT
VARIANT_FUSED_SDPA = VARIANT_ORT_SDPA
_LN, _SLN, _SIM, _SKIPSIM = ("LayerNormalization", "SkipLayerNormalization", "SimplifiedLayerNormalization",
                              "SkipSimplifiedLayerNormalization")
#: What ``optimize_model`` reports fused (``OnnxModel.get_fused_operator_statistics``, the operator
#: types with a count above zero), per entry and dtype, measured on one case each with onnxruntime
#: 1.32.0 (tests/impls/test_onnxrt.py checks it with ``FTSPEC_ALL_LIBRARIES=1``).
#: LayerNormalization is the exporter's own node, counted by the optimizer all the same. No
#: Attention, MultiHeadAttention, GroupQueryAttention or RotaryEmbedding fires on any of these
#: dynamo exports; at float16 the CPU graphs get Cast nodes from ORT's basic pass, which break the
#: skip and GELU patterns.
#: With the symbolic batch axis (``entries._run``) the float32 layers' GELU fuses with its bias
#: (BiasGelu), where the fixed-batch exports gave Gelu; cached_decoding fuses the norms only.
FUSED_OPERATORS: dict[str, dict[str, tuple[str, ...]]] = {
    "layer_norm": {"float64": (_LN,), "float32": (_LN,), "float16": (_LN,)},
    "attention": {"float64": (), "float32": ()},
    "mh_attention": {"float64": (), "float32": (), "float16": ()},
    "encoder_layer": {"float32": (_SLN,), "float16": (_LN,)},
    "bert_layer": {"float32": ("BiasGelu", _SLN), "float16": (_LN,)},
    "gpt2_layer": {"float32": ("BiasGelu", _LN, _SLN), "float16": (_LN,)},
    "d_transformer": {"float32": ("FastGelu", _LN, _SLN), "float16": (_LN,)},
    "e_transformer": {"float32": ("BiasGelu", _LN, _SLN), "float16": (_LN,)},
    "rms_norm": {"float32": (_SIM,), "float16": (_SIM,)},
    "padded_causal_self_attention": {"float32": ()},
    "padded_gpt2_layer": {"float32": (_SIM, _SKIPSIM)},
    "padded_d_transformer": {"float32": (_SIM, _SKIPSIM)},
    "cached_decoding": {"float32": (_SIM, _SKIPSIM), "float16": (_SIM,)},
}
#: How each entry is fused: ``optimize_model(model_type, num_heads=H, hidden_size=d_e)``; opt_level
#: its default for the model type (1), e_transformer's too (``E_TRANSFORMER_OPT_LEVEL``: with a
#: fixed batch axis ONNX Runtime 1.32.0 cannot load that graph; docs/libraries.md)
OPTIMIZE_MODEL = {"*": {"model_type": "bert", "opt_level": None},
                  **{a: {"model_type": "gpt2", "opt_level": None} for a in ("rms_norm",) + LLAMA_MODELS},
                  "e_transformer": {"model_type": "bert", "opt_level": E_TRANSFORMER_OPT_LEVEL}}
#: ``d_transformer``: Hugging Face GPT-2 (tanh GELU, ε 1e-5, pre-LN with a final LN, tied
#: unembedding); fused, its tanh GELU becomes FastGelu, the same approximation.
VARIANT_GPT2 = preset("hf-gpt2")
#: ``e_transformer``: Hugging Face BERT (erf GELU, ε 1e-12, post-LN, LayerNorm after the
#: embeddings, tied decoder with a bias of its own).
VARIANT_BERT = preset("hf-bert")
#: ONNX attributes are float32 (AttributeProto.f): LayerNormalization's and RMSNormalization's
#: default ε is float32(1e-5) = 9.99999974737875e-06, visible at float64.
REFERENCE_EPSILON = float(np.float32(REFERENCE_EPS))
#: layer_norm, rms_norm, attention (Softmax over an all −inf column: 0/0, NaN)
VARIANT_REFERENCE = PAPER.replace(empty_query="nan", epsilon=REFERENCE_EPSILON, epsilon_placement="inside_root")
#: mh_attention and the layers, through the opset-23 Attention operator: q and k each multiplied
#: by √scale, and a fully masked query row gives a zero output row (the operator's text and
#: onnx/reference/ops/op_attention.py ``_softmax``)
VARIANT_REFERENCE_QK = VARIANT_REFERENCE.replace(scale_placement="query_key_sqrt", empty_query="zeros")
#: The reference's Erf rounds through float32 (``np.vectorize(erf, otypes=["f"])``,
#: onnx/reference/ops/op_erf.py), and Gelu runs as its function body (Erf): the GELU layers are
#: float32-accurate at float64, so they are declared at float32 and float16 only.
REFERENCE_DTYPES = {"bert_layer": ("float32", "float16"), "gpt2_layer": ("float32", "float16")}


def from_numpy(array: Any, dtype: str, device: str) -> np.ndarray:
    """A NumPy array → a fresh NumPy array of ``dtype`` (exact: the harness sends values
    representable in ``dtype``); ONNX Runtime and the reference evaluator take NumPy."""
    if dtype not in _NP:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {sorted(_NP)}")
    return np.array(array, dtype=_NP[dtype], copy=True)


def to_numpy(value: Any) -> np.ndarray:
    return np.asarray(value)


_TIED = (("d_attn", "d_mid"), ("d_e", "H*d_attn"))
#: ORT: MultiheadAttention and the layers tie their head sizes (as ``torch-nn``). Batched calls
#: run one graph whose batch axis is symbolic (``entries._run``): the export an unbatched call made
#: serves every batch size. cached_decoding is not batched: each sequence has its own n_prefill,
#: hence its own prefill length and positions; one graph for a batch would need left padding and
#: an attention mask, another computation (``generate`` pads; the entry has no padding input).
_LIMITS = {"mh_attention": Limits(equal=(("d_attn", "d_mid"), ("d_x", "H*d_attn"), ("d_out", "d_x"))),
           **{a: Limits(equal=_TIED) for a in ("encoder_layer", "bert_layer", "gpt2_layer", "d_transformer")},
           "e_transformer": Limits(equal=_TIED + (("d_f", "d_e"),)),
           **{a: Limits(equal=_TIED) for a in LLAMA_PADDED},
           "cached_decoding": Limits(equal=_TIED, batching=False)}

_VERSION = f"onnxruntime{onnxruntime.__version__}+onnx{onnx.__version__}+torch{torch.__version__}"


def _ort(name: str, fused: bool, variants: Any, description: str) -> Implementation:
    fusion = {"optimize_model": OPTIMIZE_MODEL, "fused_operators": FUSED_OPERATORS} if fused else {}
    return Implementation(
        name=name, version=_VERSION, algorithms=algorithms(fused), dtypes=_ORT64,
        devices=lambda: ["cpu"], from_numpy=from_numpy, to_numpy=to_numpy, variants=variants,
        description=description, limits=_LIMITS, dtypes_by_algorithm=FUSED_DTYPES if fused else ORT_DTYPES,
        extra={"onnxruntime": onnxruntime.__version__, "onnx": onnx.__version__, "torch": torch.__version__,
               "opset": OPSET, "exporter": "torch.onnx.export(dynamo=True)", "provider": "CPUExecutionProvider",
               "shapes_per_search": 2, **fusion})


def _sets(layers: Any, sdpa: Any) -> dict[str, list]:
    """{algorithm: sets}: the torch.nn graphs' set, SDPA's, and the Hugging Face models' presets."""
    return {"*": [layers], "layer_norm": [layers.replace(epsilon=VARIANT_ORT_EPS32.epsilon)],
            "encoder_layer": [layers.replace(epsilon=VARIANT_ORT_EPS32.epsilon)],
            "attention": [sdpa], "d_transformer": [VARIANT_GPT2], "e_transformer": [VARIANT_BERT],
            "rms_norm": [VARIANT_LLAMA], **{a: list(LLAMA_SETS) for a in LLAMA_MODELS}}


implementation = _ort("onnxruntime", False, _sets(VARIANT_ORT, VARIANT_ORT_SDPA),
                      "torch.nn modules and HF GPT-2/BERT/Llama exported to ONNX (dynamo, opset 20), run "
                      "by ONNX Runtime on CPU")
implementation_fused = _ort("onnxruntime-fused", True, _sets(VARIANT_FUSED, VARIANT_FUSED_SDPA),
                            "the same ONNX graphs after onnxruntime.transformers.optimizer fusion (model type "
                            "bert; Llama gpt2; default opt_level), on CPU")
implementation_reference = Implementation(
    name="onnx-reference", version=f"onnx{onnx.__version__}", algorithms=REFERENCE_ALGORITHMS,
    dtypes=("float64", "float32", "float16"), devices=lambda: ["cpu"], from_numpy=from_numpy,
    to_numpy=to_numpy,
    variants={"*": [VARIANT_REFERENCE_QK], "layer_norm": [VARIANT_REFERENCE], "rms_norm": [VARIANT_REFERENCE],
              "attention": [VARIANT_REFERENCE]}, dtypes_by_algorithm=REFERENCE_DTYPES,
    description="graphs of ONNX standard operators run by onnx.reference.ReferenceEvaluator",
    limits={a: Limits(equal=_TIED) for a in ("encoder_layer", "bert_layer", "gpt2_layer")},
    extra={"onnx": onnx.__version__, "opset": REFERENCE_OPSET, "shapes_per_search": 4})
