"""Hugging Face transformers as an implementation (plugins ``transformers``,
``transformers-sdpa``, ``transformers-bert``, ``transformers-bert-sdpa``).

Boundary only: tiny configs built from the case's sizes, ftspec's parameters
loaded into the library's own modules, layout and head packing
(``adapter``); nothing is downloaded and the maths is the library's. Written
against transformers 5.24.0 with torch 2.13.0, reading
models/gpt2/modeling_gpt2.py (GPT2Attention, GPT2MLP, GPT2Block, GPT2Model,
GPT2LMHeadModel), models/bert/modeling_bert.py (BertEmbeddings,
BertSelfAttention, BertLayer, BertLMPredictionHead, BertForMaskedLM),
models/gpt2/configuration_gpt2.py and models/bert/configuration_bert.py
(defaults), masking_utils.py (create_causal_mask), integrations/
sdpa_attention.py (sdpa_attention_forward), activations.py (gelu_new is
the tanh GELU, gelu the erf one) and pytorch_utils.py (Conv1D stores W
transposed).

One plugin holds both models: variant sets are declared per algorithm
(``Implementation.variants`` as a mapping), so GPT-2's entries are searched,
replayed and certified under ``hf-gpt2`` and BERT's under ``hf-bert``, in
one certificate. The registry has one ``layer_norm``, and GPT-2's LayerNorm
(ε 1e-5) and BERT's (ε 1e-12) are two configurations of it: the merged
plugins keep GPT-2's; BERT's is certified by ``transformers-bert``.

``transformers``            GPT2LMHeadModel (d_transformer), GPT2Block
                            (gpt2_layer), nn.LayerNorm at GPT-2's ε
                            (layer_norm), under hf-gpt2; BertForMaskedLM
                            (e_transformer), BertLayer (bert_layer), under
                            hf-bert; attn_implementation="eager".
``transformers-sdpa``       the same models, attn_implementation="sdpa" (no
                            layer_norm: it has no attention).
``transformers-bert``       BERT alone, as before the merge (kept so that
                            scripts naming it still run): e_transformer,
                            bert_layer and nn.LayerNorm at BERT's ε; eager.
``transformers-bert-sdpa``  BERT alone with "sdpa" (e_transformer, bert_layer).

GPT-2 alone is ``ftspec certify transformers --algorithm d_transformer
--algorithm gpt2_layer --algorithm layer_norm`` (a ``partial`` verdict: it
selects part of what the plugin declares).

Both attention paths scale the scores (eager: ``matmul(q, kᵀ) * scaling``;
sdpa: torch's CPU flash kernel, which ``torch._fused_sdp_choice`` picks for
these inputs, multiplies q·kᵀ by the scale), so eager and sdpa share the
presets unchanged. The presets leave ``empty_query`` and
``causal_alignment`` at the paper's values: no entry here has a Mask input
or unequal lengths, so neither switch is exercised (docs/libraries.md).

Shape limits: the libraries tie d_attn = d_mid (one head_dim) and d_e =
H·d_attn (hidden_size split over the heads); BERT's head transform is
hidden_size × hidden_size, so d_f = d_e (which ``unembedding="tied"``
requires anyway). ℓ ≤ ℓ_max = n_positions is the spec's own check.

Threads and precision as in the ``torch`` plugin: one intra-op thread
(``FTSPEC_TORCH_THREADS``), float32 matmul precision "highest".
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch
import transformers

from ftspec.impls.api import Implementation, Limits
from ftspec.spec.variants import preset

from .entries import bert_algorithms, gpt2_algorithms

__all__ = ["implementation", "implementation_sdpa", "implementation_bert", "implementation_bert_sdpa",
           "VARIANT_GPT2", "VARIANT_BERT", "GPT2_LIMITS", "BERT_LIMITS"]

torch.set_float32_matmul_precision("highest")
torch.set_num_threads(int(os.environ.get("FTSPEC_TORCH_THREADS", "1")))

_DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16,
           "float16": torch.float16, "int64": torch.int64, "bool": torch.bool}
#: Both models run on CPU in all four real dtypes, eager and sdpa (checked
#: with transformers 5.24.0, torch 2.13.0; tests/impls/test_hf.py).
_REAL = ("float64", "float32", "bfloat16", "float16")

#: GPT-2: gelu_new (tanh), LayerNorm ε 1e-5 inside the root, pre-LN with a
#: final LN, lm_head tied to wte, no logit bias (``lm_head`` has bias=False).
VARIANT_GPT2 = preset("hf-gpt2")
#: BERT: erf GELU, ε 1e-12, post-LN, LayerNorm after the embeddings, decoder
#: tied to the word embeddings with a bias of its own.
VARIANT_BERT = preset("hf-bert")

_TIED = (("d_attn", "d_mid"), ("d_e", "H*d_attn"))
GPT2_LIMITS = {"d_transformer": Limits(equal=_TIED), "gpt2_layer": Limits(equal=_TIED)}
BERT_LIMITS = {"e_transformer": Limits(equal=_TIED + (("d_f", "d_e"),)), "bert_layer": Limits(equal=_TIED)}


def devices() -> list[str]:
    """cpu, and each CUDA device when there is one."""
    out = ["cpu"]
    if torch.cuda.is_available():
        out += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    return out


def from_numpy(array: Any, dtype: str, device: str) -> torch.Tensor:
    """A NumPy array → a fresh tensor of ``dtype`` on ``device`` (exact: the
    harness sends values representable in ``dtype``)."""
    if dtype not in _DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {sorted(_DTYPES)}")
    return torch.from_numpy(np.array(array, copy=True, order="C")).to(dtype=_DTYPES[dtype], device=device)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A tensor → NumPy, value for value (bfloat16 upcast to float32)."""
    t = t.detach().cpu()
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


def _make(name: str, algorithms: Any, variants: Any, limits: Any, attn: str, model: str) -> Implementation:
    return Implementation(
        name=name,
        version=f"transformers{transformers.__version__}+torch{torch.__version__}",
        algorithms=algorithms,
        dtypes=_REAL,
        devices=devices,
        from_numpy=from_numpy,
        to_numpy=to_numpy,
        variants=variants,
        precision="highest",
        description=f"Hugging Face {model}, attn_implementation={attn!r}",
        extra={"transformers": transformers.__version__, "torch": torch.__version__,
               "attn_implementation": attn},
        limits=limits,
    )


def _merged(name: str, attn: str) -> Implementation:
    """GPT-2 and BERT in one plugin: each entry under its own model's preset (layer_norm: GPT-2's,
    with eager only, as before)."""
    gpt2 = gpt2_algorithms(attn, with_norm=attn == "eager")
    bert = bert_algorithms(attn, with_norm=False)
    variants = {**{a: [VARIANT_GPT2] for a in gpt2}, **{a: [VARIANT_BERT] for a in bert}}
    return _make(name, {**gpt2, **bert}, variants, {**GPT2_LIMITS, **BERT_LIMITS}, attn,
                 "GPT2LMHeadModel, GPT2Block, BertForMaskedLM, BertLayer")


implementation = _merged("transformers", "eager")
implementation_sdpa = _merged("transformers-sdpa", "sdpa")
implementation_bert = _make("transformers-bert", bert_algorithms("eager", with_norm=True), [VARIANT_BERT],
                            BERT_LIMITS, "eager", "BertForMaskedLM, BertLayer")
implementation_bert_sdpa = _make("transformers-bert-sdpa", bert_algorithms("sdpa", with_norm=False),
                                 [VARIANT_BERT], BERT_LIMITS, "sdpa", "BertForMaskedLM, BertLayer")
