"""The registry entries, each a call into Hugging Face's own modules.

Nothing here computes the algorithm: ``adapter`` builds a tiny config,
loads ftspec's parameters into the library's module, and the library does
the maths. The one operation added at the boundary is the final softmax of
the architectures (the models return logits; Algorithms 9 and 10 return
P = softmax(logits)), done with ``torch.softmax`` at the call's dtype, as a
user of the logits would.

The configuration follows the case's sizes; a module built for one set of
sizes is reused for the next case with the same sizes, every parameter
loaded again (``adapter.loaded``): ~4 ms a call instead of ~11 ms.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Callable, Mapping

import torch
from torch import nn

from ftspec.impls.api import Context

from . import adapter as A

__all__ = ["gpt2_algorithms", "bert_algorithms"]

In = Mapping[str, torch.Tensor]
Fn = Callable[[In, In, Context], Any]


def _dtype(ctx: Context) -> torch.dtype:
    return getattr(torch, ctx.dtype)


def _key(name: str, attn: str, hyper: Mapping[str, int]) -> tuple:
    """What a module's construction depends on: its class, attention path and
    config sizes (not the sequence length)."""
    return (name, attn) + tuple(hyper.get(k, 0) for k in ("N_V", "ell_max", "L", "H", "d_e", "d_mlp"))


def _probabilities(logits: torch.Tensor, batched: bool) -> torch.Tensor:
    """Logits (B, ℓ, N_V) → P (…, N_V, ℓ): softmax over the vocabulary."""
    return A.rows_to_cols(A.unbatch(torch.softmax(logits, dim=-1), batched))


def _layer_norm(default_epsilon: Callable[[], float]) -> Fn:
    def layer_norm(i: In, p: In, ctx: Context) -> Any:
        d_e = ctx.hyper["d_e"]
        with A.loaded(("layer_norm", default_epsilon(), d_e), lambda: nn.LayerNorm(d_e, eps=default_epsilon()),
                      {"weight": p["gamma"], "bias": p["beta"]}, _dtype(ctx), ctx.device) as ln:
            return A.rows_to_cols(ln(A.cols_to_rows(i["X"])))  # (…, ℓ, d_e) → (…, d_e, ℓ)
    return layer_norm


@cache
def _gpt2_epsilon() -> float:
    from transformers import GPT2Config

    return float(GPT2Config().layer_norm_epsilon)


@cache
def _bert_epsilon() -> float:
    from transformers import BertConfig

    return float(BertConfig().layer_norm_eps)


def gpt2_algorithms(attn: str, with_norm: bool) -> dict[str, Fn]:
    """d_transformer (``GPT2LMHeadModel``) and gpt2_layer (``GPT2Block``) with
    ``attn_implementation=attn``; layer_norm is ``nn.LayerNorm`` at GPT-2's
    ``layer_norm_epsilon`` (what ``GPT2Block.ln_1`` is)."""

    def d_transformer(i: In, p: In, ctx: Context) -> Any:
        """Alg. 10 via ``GPT2LMHeadModel(config)(input_ids).logits``."""
        from transformers import GPT2LMHeadModel

        h = ctx.hyper
        A.check_tokens(i["x"], h)
        x = A.batch(i["x"], ctx.batched)  # (B, ℓ) token IDs
        with A.loaded(_key("gpt2_lm", attn, h), lambda: GPT2LMHeadModel(A.gpt2_config(h, attn)),
                      A.gpt2_lm_weights(p, h["L"], h["H"]), _dtype(ctx), ctx.device) as model:
            logits = model(input_ids=x, use_cache=False).logits  # (B, ℓ, N_V)
        return _probabilities(logits, ctx.batched)

    def gpt2_layer(i: In, p: In, ctx: Context) -> Any:
        """Alg. 10 lines 5-8 via ``GPT2Block``, with the causal mask from
        ``masking_utils.create_causal_mask``, the call ``GPT2Model.forward``
        makes: a 4-D additive mask for eager, None (SDPA's is_causal) for
        sdpa. A block called with no mask would attend both ways in eager."""
        from transformers.masking_utils import create_causal_mask
        from transformers.models.gpt2.modeling_gpt2 import GPT2Block

        h = ctx.hyper
        config = A.gpt2_config(h, attn)
        X = A.batch(A.cols_to_rows(i["X"]), ctx.batched)  # (B, ℓ, d_e)
        positions = torch.arange(X.shape[1], device=X.device).unsqueeze(0)  # (1, ℓ)
        with A.loaded(_key("gpt2_block", attn, h), lambda: GPT2Block(config, layer_idx=0),
                      A.gpt2_block_weights(p, h["H"]), _dtype(ctx), ctx.device) as block:
            mask = create_causal_mask(config=config, inputs_embeds=X, attention_mask=None, cache=None,
                                      position_ids=positions)
            Y = block(X, attention_mask=mask)  # (B, ℓ, d_e)
        return A.rows_to_cols(A.unbatch(Y, ctx.batched))

    out: dict[str, Fn] = {"d_transformer": d_transformer, "gpt2_layer": gpt2_layer}
    if with_norm:
        out["layer_norm"] = _layer_norm(_gpt2_epsilon)
    return out


def bert_algorithms(attn: str, with_norm: bool) -> dict[str, Fn]:
    """e_transformer (``BertForMaskedLM``) and bert_layer (``BertLayer``) with
    ``attn_implementation=attn``; layer_norm is ``nn.LayerNorm`` at BERT's
    ``layer_norm_eps`` (what every BERT LayerNorm is)."""

    def e_transformer(i: In, p: In, ctx: Context) -> Any:
        """Alg. 9 via ``BertForMaskedLM(config)(input_ids).logits``: the MLM
        head's transform (dense, GELU, LayerNorm) is lines 10-11, its tied
        decoder with bias is line 12 under ``logit_bias``."""
        from transformers import BertForMaskedLM

        h = ctx.hyper
        A.check_tokens(i["x"], h)  # at ℓ_max = 1 BERT would answer a longer sequence
        x = A.batch(i["x"], ctx.batched)  # (B, ℓ)
        with A.loaded(_key("bert_mlm", attn, h), lambda: BertForMaskedLM(A.bert_config(h, attn)),
                      A.bert_mlm_weights(p, h["L"], h["H"]), _dtype(ctx), ctx.device) as model:
            logits = model(input_ids=x).logits  # (B, ℓ, N_V)
        return _probabilities(logits, ctx.batched)

    def bert_layer(i: In, p: In, ctx: Context) -> Any:
        """Alg. 9 lines 5-8 via ``BertLayer`` with no attention mask (Mask ≡ 1,
        what ``BertModel`` passes when every token is real)."""
        from transformers.models.bert.modeling_bert import BertLayer

        h = ctx.hyper
        X = A.batch(A.cols_to_rows(i["X"]), ctx.batched)  # (B, ℓ, d_e)
        with A.loaded(_key("bert_layer", attn, h), lambda: BertLayer(A.bert_config(h, attn), layer_idx=0),
                      A.bert_layer_weights(p, h["H"]), _dtype(ctx), ctx.device) as layer:
            Y = layer(X, attention_mask=None)  # (B, ℓ, d_e)
        return A.rows_to_cols(A.unbatch(Y, ctx.batched))

    out: dict[str, Fn] = {"e_transformer": e_transformer, "bert_layer": bert_layer}
    if with_norm:
        out["layer_norm"] = _layer_norm(_bert_epsilon)
    return out
