"""Mutants on the PyTorch plugin: library defaults that bite a port."""

from __future__ import annotations

from .injection import Edit, Mutant, Witness, source_edit
from .groups import LAYERS, MODELS, NEXT_TOKEN, SPARSE_MASK, TORCH, W_LN

MUTANTS = [
    # ================================================================ on the PyTorch plugin
    Mutant("torch-mask-polarity", "adapter passes the mask as True = blocked (nn.MultiheadAttention's polarity)",
           ("attention", "mh_attention"), base="torch",
           wrap=source_edit(Edit(TORCH + "adapter", "mask_to_native", "return Mask.transpose(-1, -2)",
                                 "return ~Mask.transpose(-1, -2)")),
           source="transformers PR 38094 (Llama 4 with SDPA), pytorch#86120",
           witness=Witness(inputs=SPARSE_MASK, variant={"empty_query": "zeros"}), bench=("attention",)),
    Mutant("torch-sdpa-default-scale", "F.scaled_dot_product_attention called without scale=1.0 on pre-scaled "
           "queries: the scale is applied twice (or where none is wanted)",
           ("basic_single_query_attention", "attention", "mh_attention", "encoder_layer", "bert_layer",
            "decoder_layer", "ed_transformer", "e_transformer", "self_attention", "cached_decoding"), base="torch",
           wrap=source_edit(Edit(TORCH + "components", "attend", "attn_mask=mask, scale=1.0)",
                                 "attn_mask=mask)")),
           source="SDPA's default scale 1/√d; a port that also scales the query",
           equivalence="equivalent when d_attn = 1, and on the paths that do not call SDPA (scores placement "
                       "with a scale)",
           witness=Witness("attention", variant={"attn_scale": "none"}), bench=("mh_attention",)),
    Mutant("torch-layer-norm-default-eps", "F.layer_norm called without eps: PyTorch's default 1e-5 where the "
           "model has none", ("layer_norm",) + LAYERS + MODELS, base="torch",
           wrap=source_edit(Edit(TORCH + "components", "norm", "F.layer_norm(X, (d,), p.gamma, p.beta, eps)",
                                 "F.layer_norm(X, (d,), p.gamma, p.beta)")),
           source="nn.LayerNorm's eps=1e-5 default; candle PR 271", witness=W_LN, bench=("layer_norm",)),
    Mutant("torch-rms-norm-eps-none", "F.rms_norm called without eps: None means torch.finfo(dtype).eps",
           ("rms_norm",) + LAYERS + MODELS, base="torch",
           wrap=source_edit(Edit(TORCH + "components", "norm", "F.rms_norm(X, (d,), p.gamma, eps)",
                                 "F.rms_norm(X, (d,), p.gamma)")),
           source="F.rms_norm's eps=None default", dtypes=("float64", "float32", "float16"),
           equivalence="adds ε = machine epsilon of the dtype: visible only where Σe²/d is within a few hundred "
                       "ulps of ε (small-magnitude columns)",
           witness=Witness("rms_norm", hyper={"d_e": 2, "ell": 1}, inputs={"X": [1e-8, -2e-8]}),
           bench=("rms_norm",)),
    Mutant("torch-loss-mean", "next-token loss reduced with .mean() over positions instead of .sum()", NEXT_TOKEN,
           base="torch",
           wrap=source_edit(Edit(TORCH + "training", "next_token_nll", "x[..., 1:]).sum(dim=-1)",
                                 "x[..., 1:]).mean(dim=-1)")),
           source="F.cross_entropy's default reduction='mean'",
           equivalence="equivalent when ℓ = 2 (one term); NaN for ℓ = 1 (mean of nothing)",
           witness=Witness("d_loss", hyper={"ell": 4}), bench=("d_loss",)),
]
