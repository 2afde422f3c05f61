"""The boundary between ftspec's canonical layout and Hugging Face's modules.

Re-indexing, configuration, weight loading and a check of the token IDs
(``check_tokens``: what the spec refuses and the library need not) only, no
arithmetic on the activations, so a layout bug cannot hide as a rounding
difference:

- Canonical sequences are columns, X (…, d, ℓ); Hugging Face wants rows with
  a batch axis, (B, ℓ, d), and token IDs as (B, ℓ). An unbatched call gets
  B = 1 added here and removed again on the way out.
- ftspec's W is out × in. ``nn.Linear.weight`` (BERT) is out × in as well;
  GPT-2's ``Conv1D.weight`` (pytorch_utils.py) is in × out, so it receives Wᵀ.
- Heads: ``heads.h.W_q`` (d_attn, d_e) are stacked head-major into one
  (H·d_attn, d_e) projection. Both models split a projection with
  ``view(…, -1, head_dim)`` (modeling_gpt2.py GPT2Attention.forward,
  modeling_bert.py BertSelfAttention.forward), so rows h·d_attn … (h+1)·d_attn
  are head h. GPT-2 packs q, k and v into one ``c_attn`` (split with
  ``split(embed_dim, dim=2)``): its weight is [W_q; W_k; W_v]ᵀ.
- Embeddings: ``nn.Embedding.weight`` is (N_V, d_e) = W_eᵀ, and (ℓ_max, d_e) =
  W_pᵀ. The unembedding is tied by the library itself
  (``_tied_weights_keys``), so W_u = W_eᵀ needs no copy of its own.
- BERT's token-type embedding has no counterpart in Algorithm 9: the config
  has one token type and its row is set to exact zeros, so adding it changes
  no bit.

Every library parameter must be loaded from ftspec's (``load``), so no
random initialisation survives into a result.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping

import torch
from torch import Tensor, nn

__all__ = ["cols_to_rows", "rows_to_cols", "batch", "unbatch", "check_tokens", "pack_heads", "gpt2_config",
           "bert_config", "gpt2_block_weights", "bert_layer_weights", "gpt2_lm_weights", "bert_mlm_weights", "load",
           "loaded"]

In = Mapping[str, Tensor]


def cols_to_rows(X: Tensor) -> Tensor:
    """Canonical (…, d, ℓ) → native (…, ℓ, d)."""
    return X.transpose(-1, -2)


def rows_to_cols(X: Tensor) -> Tensor:
    """Native (…, ℓ, d) → canonical (…, d, ℓ)."""
    return X.transpose(-1, -2)


def batch(x: Tensor, batched: bool) -> Tensor:
    """Add the leading batch axis Hugging Face needs when the call has none."""
    return x if batched else x.unsqueeze(0)


def unbatch(x: Tensor, batched: bool) -> Tensor:
    return x if batched else x.squeeze(0)


def check_tokens(x: Tensor, hyper: Mapping[str, int]) -> None:
    """Refuse, before the model runs, token IDs (…, ℓ) the spec refuses and the library may not:
    ℓ > ℓ_max (``BertEmbeddings`` slices its position ids to ℓ_max, and at ℓ_max = 1 broadcasts
    that one position over every token instead of raising) and an ID outside [0, N_V) (an
    IndexError on the CPU, a device-side assert on CUDA)."""
    ell, ell_max, n_v = x.shape[-1], hyper["ell_max"], hyper["N_V"]
    if ell > ell_max:
        raise ValueError(f"x: a sequence of length {ell} exceeds ell_max = {ell_max}")
    if x.numel() and (int(x.min()) < 0 or int(x.max()) >= n_v):
        raise ValueError(f"x: token IDs must lie in [0, {n_v}); given min {int(x.min())}, max {int(x.max())}")


def pack_heads(p: In, prefix: str, name: str, H: int) -> Tensor:
    """``{prefix}heads.0.<name>`` … ``heads.{H-1}.<name>`` stacked head-major on axis 0:
    (H·d_attn, d_e) for a weight, (H·d_attn,) for a bias."""
    return torch.cat([p[f"{prefix}heads.{h}.{name}"] for h in range(H)], dim=0)


# --------------------------------------------------------------------------
# configurations: tiny, no dropout, nothing downloaded
# --------------------------------------------------------------------------

def gpt2_config(hyper: Mapping[str, int], attn: str) -> Any:
    """A ``GPT2Config`` for these sizes: n_embd = d_e, n_head = H, n_inner = d_mlp,
    n_layer = L, n_positions = ℓ_max, vocab_size = N_V; the library's defaults
    otherwise (gelu_new, layer_norm_epsilon 1e-5, scale_attn_weights, no
    inverse-layer scaling, no reorder-and-upcast), dropout off. bos/eos ids
    are cleared: their default 50256 lies outside a tiny vocabulary and the
    config would warn."""
    from transformers import GPT2Config

    return GPT2Config(
        vocab_size=hyper.get("N_V", 1), n_positions=hyper.get("ell_max", hyper.get("ell", 1)),
        n_embd=hyper["d_e"], n_layer=hyper.get("L", 1), n_head=hyper["H"], n_inner=hyper["d_mlp"],
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        bos_token_id=None, eos_token_id=None, attn_implementation=attn)


def bert_config(hyper: Mapping[str, int], attn: str) -> Any:
    """A ``BertConfig``: hidden_size = d_e, num_attention_heads = H,
    intermediate_size = d_mlp, num_hidden_layers = L, max_position_embeddings =
    ℓ_max, vocab_size = N_V, one token type; the library's defaults otherwise
    (hidden_act "gelu" = erf GELU, layer_norm_eps 1e-12, absolute positions,
    an encoder: is_decoder False), dropout off, no padding index (the default
    0 only zeroes a row at initialisation, which ``load`` overwrites anyway,
    and makes the model warn about padding)."""
    from transformers import BertConfig

    return BertConfig(
        vocab_size=hyper.get("N_V", 1), hidden_size=hyper["d_e"], num_hidden_layers=hyper.get("L", 1),
        num_attention_heads=hyper["H"], intermediate_size=hyper["d_mlp"],
        max_position_embeddings=hyper.get("ell_max", hyper.get("ell", 1)), type_vocab_size=1,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        pad_token_id=None, is_decoder=False, attn_implementation=attn)


# --------------------------------------------------------------------------
# weights: {library parameter name: tensor}
# --------------------------------------------------------------------------

def gpt2_block_weights(p: In, H: int, src: str = "", dst: str = "") -> dict[str, Tensor]:
    """One ``GPT2Block``: ftspec names under ``src`` (e.g. ``layers.0.``) →
    library names under ``dst`` (e.g. ``transformer.h.0.``). Conv1D takes Wᵀ."""
    a = src + "attn."
    Wqkv = torch.cat([pack_heads(p, a, n, H) for n in ("W_q", "W_k", "W_v")], dim=0)  # (3·d_e, d_e)
    bqkv = torch.cat([pack_heads(p, a, n, H) for n in ("b_q", "b_k", "b_v")], dim=0)  # (3·d_e,)
    return {
        dst + "ln_1.weight": p[src + "gamma1"], dst + "ln_1.bias": p[src + "beta1"],
        dst + "attn.c_attn.weight": Wqkv.T, dst + "attn.c_attn.bias": bqkv,  # (d_e, 3·d_e)
        dst + "attn.c_proj.weight": p[a + "W_o"].T, dst + "attn.c_proj.bias": p[a + "b_o"],
        dst + "ln_2.weight": p[src + "gamma2"], dst + "ln_2.bias": p[src + "beta2"],
        dst + "mlp.c_fc.weight": p[src + "W_mlp1"].T, dst + "mlp.c_fc.bias": p[src + "b_mlp1"],  # (d_e, d_mlp)
        dst + "mlp.c_proj.weight": p[src + "W_mlp2"].T, dst + "mlp.c_proj.bias": p[src + "b_mlp2"],
    }


def bert_layer_weights(p: In, H: int, src: str = "", dst: str = "") -> dict[str, Tensor]:
    """One ``BertLayer`` (post-LN: attention.output.LayerNorm is γ¹/β¹,
    output.LayerNorm is γ²/β²). nn.Linear takes W as it stands."""
    a = src + "attn."
    out = {}
    for mine, theirs in (("q", "query"), ("k", "key"), ("v", "value")):
        out[f"{dst}attention.self.{theirs}.weight"] = pack_heads(p, a, f"W_{mine}", H)  # (H·d_attn, d_e)
        out[f"{dst}attention.self.{theirs}.bias"] = pack_heads(p, a, f"b_{mine}", H)
    return out | {
        dst + "attention.output.dense.weight": p[a + "W_o"], dst + "attention.output.dense.bias": p[a + "b_o"],
        dst + "attention.output.LayerNorm.weight": p[src + "gamma1"],
        dst + "attention.output.LayerNorm.bias": p[src + "beta1"],
        dst + "intermediate.dense.weight": p[src + "W_mlp1"], dst + "intermediate.dense.bias": p[src + "b_mlp1"],
        dst + "output.dense.weight": p[src + "W_mlp2"], dst + "output.dense.bias": p[src + "b_mlp2"],
        dst + "output.LayerNorm.weight": p[src + "gamma2"], dst + "output.LayerNorm.bias": p[src + "beta2"],
    }


def gpt2_lm_weights(p: In, L: int, H: int) -> dict[str, Tensor]:
    """``GPT2LMHeadModel``: wte = W_eᵀ (lm_head.weight is the same tensor),
    wpe = W_pᵀ, the blocks, ln_f = γ/β."""
    out = {"transformer.wte.weight": p["W_e"].T, "transformer.wpe.weight": p["W_p"].T,  # (N_V | ℓ_max, d_e)
           "transformer.ln_f.weight": p["gamma"], "transformer.ln_f.bias": p["beta"]}
    for l in range(L):
        out |= gpt2_block_weights(p, H, f"layers.{l}.", f"transformer.h.{l}.")
    return out


def bert_mlm_weights(p: In, L: int, H: int) -> dict[str, Tensor]:
    """``BertForMaskedLM``: word embeddings = W_eᵀ (the decoder's weight is the
    same tensor), positions = W_pᵀ, token type row 0 = zeros, embedding
    LayerNorm = γ/β_emb, the layers, the head's transform = W_f, b_f, γ, β
    (Algorithm 9 lines 10-11) and its bias = b_u."""
    W_e = p["W_e"]  # (d_e, N_V)
    out = {"bert.embeddings.word_embeddings.weight": W_e.T, "bert.embeddings.position_embeddings.weight": p["W_p"].T,
           "bert.embeddings.token_type_embeddings.weight": torch.zeros_like(W_e[:, :1].T),  # (1, d_e)
           "bert.embeddings.LayerNorm.weight": p["gamma_emb"], "bert.embeddings.LayerNorm.bias": p["beta_emb"],
           "cls.predictions.transform.dense.weight": p["W_f"], "cls.predictions.transform.dense.bias": p["b_f"],
           "cls.predictions.transform.LayerNorm.weight": p["gamma"],
           "cls.predictions.transform.LayerNorm.bias": p["beta"],
           "cls.predictions.bias": p["b_u"]}
    for l in range(L):
        out |= bert_layer_weights(p, H, f"layers.{l}.", f"bert.encoder.layer.{l}.")
    return out


def load(module: nn.Module, weights: Mapping[str, Tensor], dtype: torch.dtype, device: str) -> nn.Module:
    """``module`` in ``dtype`` on ``device``, inference mode, every parameter
    copied from ``weights``. ``named_parameters`` lists a tied tensor once, so
    lm_head/decoder weights are covered by the embedding they share. A
    parameter left unloaded, or a name the module lacks, is an adapter bug
    and raises."""
    return _fill(module.to(dtype=dtype, device=device), weights)


def _fill(module: nn.Module, weights: Mapping[str, Tensor]) -> nn.Module:
    """``load`` for a module already in the call's dtype and on its device."""
    params = dict(module.named_parameters())
    missing = sorted(set(params) - set(weights))
    unknown = sorted(set(weights) - set(params))
    if missing or unknown:
        raise RuntimeError(f"hf adapter: weights do not match {type(module).__name__}'s parameters: "
                           f"unloaded {missing}, unknown {unknown}")
    with torch.no_grad():
        for name, value in weights.items():
            target = params[name]
            if tuple(target.shape) != tuple(value.shape):
                raise RuntimeError(f"hf adapter: {name} is {tuple(target.shape)} in the library, "
                                   f"{tuple(value.shape)} from ftspec")
            target.copy_(value)
    return module.train(False)  # inference mode: dropout off


# --------------------------------------------------------------------------
# reuse: a call that builds its model took ~11 ms, one that reuses it ~4 ms
# --------------------------------------------------------------------------

#: Modules by (class, sizes, attention, dtype, device), least recently used first.
_MODULES: "OrderedDict[tuple, nn.Module]" = OrderedDict()
_KEEP = 16
#: Held for the whole load-and-call: a call the harness abandoned on a
#: timeout cannot overwrite weights under the next one.
_LOCK = threading.Lock()


@contextmanager
def loaded(key: tuple, build: Callable[[], nn.Module], weights: Mapping[str, Tensor], dtype: torch.dtype,
           device: str) -> Iterator[nn.Module]:
    """A module for ``key`` with every parameter freshly loaded (``load``).

    The module is reused across calls with the same sizes: ``load`` copies
    every parameter, the models keep no other state in inference mode
    (buffers are position indices and zero token types; ``use_cache`` off),
    so a reused module computes what a fresh one would."""
    with _LOCK:
        module = _MODULES.pop(key + (dtype, device), None)
        module = load(build(), weights, dtype, device) if module is None else _fill(module, weights)
        _MODULES[key + (dtype, device)] = module
        while len(_MODULES) > _KEEP:
            _MODULES.popitem(last=False)
        with torch.no_grad():
            yield module
