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
- BERT's padding: the 2-D ``attention_mask`` (1 = token, 0 = padding) is
  ftspec's ``pad`` as it stands (a bool → long cast, no re-indexing);
  ``masking_utils.create_bidirectional_mask`` builds the 4-D mask from it as
  ``BertModel`` does. The self-attention alone is ``BertSelfAttention`` (the
  heads) followed by the ``nn.Linear`` that ``BertSelfOutput.dense`` is (W_o,
  b_o); BertSelfOutput's residual and LayerNorm belong to the layer, not to
  Algorithm 5, so they are not built.
- Llama (models/llama/modeling_llama.py): every projection is an
  ``nn.Linear`` (out × in, as ftspec's W). ``q_proj`` stacks the H query heads
  head-major (``view(…, -1, head_dim)``); ``k_proj``/``v_proj`` stack the H/G
  key/value heads ``kv_heads.{g}`` the same way (G = kv_group; under G = 1 the
  heads' own ``heads.{h}.W_k``), and ``repeat_kv`` gives query head h the kv
  head ⌊h/G⌋ (``kv_order="consecutive"``). ``o_proj`` is W_o; the MLP's
  ``gate_proj`` is W_mlp1 (under the activation), ``up_proj`` W_mlp1_lin (the
  linear branch), ``down_proj`` W_mlp2; ``input_layernorm`` γ¹,
  ``post_attention_layernorm`` γ², ``model.norm`` γ; ``embed_tokens`` W_eᵀ
  and a separate ``lm_head`` W_u (tie_word_embeddings=False). Llama is built
  in the call's dtype the way ``from_pretrained(dtype=…)`` builds it
  (``_from_config(config, dtype=…)``): the RoPE ``inv_freq`` buffer stays
  float32 as the library creates it, where a ``.to(dtype)`` would round it.
- Mistral (models/mistral/modeling_mistral.py) and Qwen2 (models/qwen2/modeling_qwen2.py) name
  and lay out their parameters as Llama does (the same ``*_proj`` Linears, norms, embed_tokens,
  lm_head), so ``llama_lm_weights`` serves them; Qwen2's q/k/v projections carry biases
  (``bias=True`` on q_proj, k_proj, v_proj, ``bias=False`` on o_proj, hard-coded in
  Qwen2Attention.__init__): ``q_proj.bias`` = [b_q of heads 0 … H−1], ``k_proj``/``v_proj.bias`` =
  [b_k | b_v of kv_heads 0 … H/G−1] (``qwen2_attention_weights``).
- GPT-NeoX (models/gpt_neox/modeling_gpt_neox.py) fuses q, k and v into one ``query_key_value``
  Linear whose output is viewed as (…, H, 3·head_size) and chunked in three along the last axis
  (``GPTNeoXAttention.forward``: ``view(hidden_shape)``, ``qkv.chunk(3, dim=-1)``): the rows are
  head-major, each head's q, k, v rows in turn, [W_q⁰; W_k⁰; W_v⁰; W_q¹; …] (not GPT-2's
  [all q; all k; all v]), and the bias the same. ``dense`` is W_o, b_o; ``dense_h_to_4h`` and
  ``dense_4h_to_h`` W_mlp1, W_mlp2 with biases; ``input_layernorm`` γ¹/β¹ (before the attention),
  ``post_attention_layernorm`` γ²/β² (before the MLP, on the layer's input under
  use_parallel_residual); ``embed_in`` W_eᵀ, ``final_layer_norm`` γ/β, a separate ``lm_head`` W_u
  without bias (``embed_out`` in transformers 4).
- Gemma (models/gemma/modeling_gemma.py) has Llama's parameter names and layout but no
  ``lm_head`` of its own (tie_word_embeddings: the embedding table is the unembedding, the
  spec's ``unembedding="tied"``), so ``gemma_lm_weights`` is ``llama_lm_weights`` without it;
  GemmaRMSNorm's ``weight`` is the spec's γ of the gain 1 + γ (``norm_gain="one_plus_gamma"``).
- Gemma 2 (models/gemma2/modeling_gemma2.py) is Gemma's layout with four norms per layer, the
  spec's sandwich (``norm_placement="sandwich"``): ``input_layernorm`` γ¹, ``post_attention_layernorm``
  γ¹_out (on the attention's output, before the residual sum), ``pre_feedforward_layernorm`` γ²,
  ``post_feedforward_layernorm`` γ²_out (``gemma2_layer_weights``).
- Gemma 3 (models/gemma3/modeling_gemma3.py: Gemma3ForCausalLM, Gemma3TextModel, Gemma3DecoderLayer,
  Gemma3Attention) is Gemma 2's layout (four norms per layer, tied embedding, ``model.norm``) with
  Qwen3's QK-norm gains in the attention, ``self_attn.q_norm.weight`` = γ_q and ``k_norm.weight`` = γ_k
  (``Gemma3RMSNorm(head_dim)``: gain 1 + w, as every Gemma 3 norm) (``gemma3_layer_weights``; the whole
  model ``gemma2_lm_weights`` with ``qwen3_attention_weights``).
- Qwen3 (models/qwen3/modeling_qwen3.py) is Llama's layout plus ``self_attn.q_norm.weight`` = γ_q and
  ``self_attn.k_norm.weight`` = γ_k (``Qwen3RMSNorm(head_dim)``, one gain of width head_dim shared
  by the heads: the spec's ``attn.gamma_q``, ``attn.gamma_k``; ``qwen3_attention_weights``).
- Phi-3 (models/phi3/modeling_phi3.py) fuses q, k and v into one ``qkv_proj`` whose output is sliced
  [all q | all k | all v] (``Phi3Attention.forward``: ``qkv[..., :query_pos]``, then the
  num_key_value_heads·head_dim k rows, then the v rows), so its weight is [W_q⁰; …; W_q^{H−1};
  W_k of the kv heads; W_v of the kv heads] (GPT-2's order, not GPT-NeoX's per-head one); and
  the MLP's ``gate_up_proj`` is chunked in two along its output (``Phi3MLP.forward``:
  ``gate, up_states = up_states.chunk(2, dim=-1)``, ``up_states * act(gate)``), so its weight is
  [W_mlp1 (under the activation); W_mlp1_lin] (``phi3_attention_weights``, ``phi3_lm_weights``).
- GPT-J (models/gptj/modeling_gptj.py): ``q_proj``, ``k_proj``, ``v_proj``, ``out_proj`` without
  biases, one ``ln_1`` per block (γ¹, β¹; no γ², β² under ``residual="parallel_shared"``), ``mlp.fc_in``
  / ``fc_out`` with biases, ``transformer.wte`` W_eᵀ, ``ln_f`` γ/β and an untied ``lm_head`` with a
  bias (W_u, b_u: ``logit_bias``) (``gptj_*_weights``).
- OPT (models/opt/modeling_opt.py): biased ``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``,
  ``self_attn_layer_norm`` γ¹/β¹ (before the attention when do_layer_norm_before), ``final_layer_norm``
  γ²/β² (before the MLP, despite its name), ``fc1``/``fc2`` with biases; the decoder's own
  ``final_layer_norm`` γ/β; ``embed_tokens`` W_eᵀ, tied to ``lm_head``. Positions:
  ``OPTLearnedPositionalEmbedding`` is an (ℓ_max + 2, d_e) table read at position + 2 (``offset = 2``),
  so rows 2 … ℓ_max + 1 are W_pᵀ; rows 0 and 1 are read by no position ≥ 0 (row 1 by padding, whose
  position is −1) and are set to zeros (``opt_lm_weights``).
- Falcon (models/falcon/modeling_falcon.py), its new decoder architecture: ``query_key_value`` is
  viewed as (…, H/G, G + 2, head_dim) (``FalconAttention._split_heads``: per kv group g the G query
  heads g·G … g·G + G − 1, then k_g, then v_g), so its rows are [W_q of group 0's heads; W_k⁰;
  W_v⁰; W_q of group 1's heads; …] (G = 1: each head's q, k, v in turn, GPT-NeoX's order); ``dense``
  W_o; ``ln_attn`` γ¹/β¹, ``ln_mlp`` γ²/β² (num_ln_in_parallel_attn = 2); ``mlp.dense_h_to_4h`` /
  ``dense_4h_to_h`` W_mlp1, W_mlp2; no biases (bias False); ``word_embeddings`` W_eᵀ tied to
  ``lm_head``; ``ln_f`` γ/β (``falcon_*_weights``). Falcon-7B's old architecture with multi_query: one
  group of all H heads, [W_q⁰; …; W_q^{H−1}; W_k; W_v] (``_split_heads``: ``view(…, num_heads + 2,
  head_dim)``), the same rows ``falcon_attention_weights`` gives at G = H; one ``input_layernorm``
  γ¹/β¹ (``falcon7b_*_weights``).
- BLOOM (models/bloom/modeling_bloom.py): ``query_key_value`` is viewed as (…, H, 3, head_dim)
  (``BloomAttention._reshape``: ``view(batch, seq, num_heads, 3, head_dim)``, then ``[..., 0, :]`` q,
  ``[..., 1, :]`` k, ``[..., 2, :]`` v), so its rows are per head h in turn [W_q^h; W_k^h; W_v^h] and its
  bias [b_q^h; b_k^h; b_v^h]: GPT-NeoX's order; ``dense`` W_o, b_o; ``input_layernorm`` γ¹/β¹,
  ``post_attention_layernorm`` γ²/β²; ``mlp.dense_h_to_4h`` / ``dense_4h_to_h`` W_mlp1, b_mlp1 and W_mlp2,
  b_mlp2 (4·hidden_size wide, hard-coded: the plugin's limit d_mlp = 4·d_e); ``word_embeddings`` W_eᵀ
  tied to ``lm_head``; ``word_embeddings_layernorm`` γ_emb/β_emb; ``ln_f`` γ/β (``bloom_*_weights``).
  The embedding LayerNorm is always there: a case without γ_emb, β_emb (a set declaring
  embedding_norm=False) loads it with γ = 1, β = 0, the values the diagnosis fills in for a norm a
  declaration left out, so the library still normalises and the judgement shows it.
- MPT (models/mpt/modeling_mpt.py): ``Wqkv`` is chunked in three along its output (``MptAttention.forward``:
  ``mixed_qkv.chunk(3, dim=2)``, each part viewed (…, H, head_dim)), so its rows are [all q; all k; all v],
  each head-major: GPT-2's order; ``out_proj`` W_o; no biases anywhere (no_bias); ``norm_1`` γ¹, ``norm_2`` γ²
  and ``norm_f`` γ, LayerNorms whose bias is removed (``norm_1.bias = None``: the spec's affine=scale);
  ``ffn.up_proj`` / ``down_proj`` W_mlp1, W_mlp2 (4·d_model wide, hard-coded); ``wte`` W_eᵀ tied to
  ``lm_head`` (``mpt_*_weights``).

Every library parameter must be loaded from ftspec's (``load``), so no
random initialisation survives into a result.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping, Optional

import torch
from torch import Tensor, nn

__all__ = ["cols_to_rows", "rows_to_cols", "batch", "unbatch", "check_tokens", "pack_heads", "gpt2_config",
           "bert_config", "llama_config", "gpt2_block_weights", "bert_layer_weights", "bert_self_attention_weights",
           "BertSelfAttentionOnly", "gpt2_lm_weights", "bert_mlm_weights", "llama_attention_weights",
           "llama_lm_weights", "MISTRAL_WINDOW", "mistral_config", "qwen2_config", "qwen2_attention_weights",
           "neox_config", "neox_attention_weights", "neox_layer_weights", "neox_lm_weights",
           "gemma_config", "gemma_lm_weights", "gemma2_config", "gemma2_layer_weights", "gemma2_lm_weights",
           "GEMMA3_GLOBAL_EVERY", "gemma3_config", "gemma3_layer_weights", "GEMMA3_ROPE_SCALING",
           "gemma3_27b_config",
           "llama_layer_weights", "qwen3_config", "qwen3_attention_weights",
           "qwen3_layer_weights", "phi3_config", "longrope_of", "LONGROPE_LIST", "phi3_attention_weights",
           "phi3_layer_weights", "phi3_lm_weights",
           "GPTJ_ROTARY_SHARE",
           "gptj_config", "gptj_attention_weights", "gptj_layer_weights", "gptj_lm_weights", "OPT_POSITION_OFFSET",
           "opt_config", "opt_attention_weights", "opt_layer_weights", "opt_lm_weights", "falcon_config",
           "falcon_attention_weights", "falcon_layer_weights", "falcon_lm_weights", "falcon7b_config",
           "falcon7b_layer_weights", "falcon7b_lm_weights", "bloom_config", "bloom_attention_weights",
           "bloom_layer_weights", "bloom_lm_weights", "mpt_config", "mpt_attention_weights", "mpt_layer_weights",
           "mpt_lm_weights", "load", "loaded"]

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
    ℓ_max, vocab_size = N_V, one token type (entries without a size take 1, ℓ
    for ℓ_max: the module built does not read it); the library's defaults otherwise
    (hidden_act "gelu" = erf GELU, layer_norm_eps 1e-12, absolute positions,
    an encoder: is_decoder False), dropout off, no padding index (the default
    0 only zeroes a row at initialisation, which ``load`` overwrites anyway,
    and makes the model warn about padding)."""
    from transformers import BertConfig

    return BertConfig(
        vocab_size=hyper.get("N_V", 1), hidden_size=hyper["d_e"], num_hidden_layers=hyper.get("L", 1),
        num_attention_heads=hyper["H"], intermediate_size=hyper.get("d_mlp", 1),
        max_position_embeddings=hyper.get("ell_max", hyper.get("ell", 1)), type_vocab_size=1,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        pad_token_id=None, is_decoder=False, attn_implementation=attn)


def llama_config(hyper: Mapping[str, int], attn: str, variant: Any) -> Any:
    """A ``LlamaConfig``: hidden_size = d_e, num_attention_heads = H,
    num_key_value_heads = H / kv_group, head_dim = d_attn (= d_mid),
    intermediate_size = d_mlp, num_hidden_layers = L, max_position_embeddings
    = ℓ_max, vocab_size = N_V; from the variant set rms_norm_eps = ε and
    rope_theta = rope_base (default RoPE, no scaling); no attention or MLP
    biases, a separate lm_head, dropout off, no bos/eos/pad ids (their
    defaults lie outside a tiny vocabulary). The config requires hidden_size
    to be a multiple of num_attention_heads even with head_dim given
    (``validate_architecture``), hence the plugin's limit d_e = H·d_attn.
    Entries without a size take 1 (ℓ for ℓ_max): the module built does not
    read it."""
    from transformers import LlamaConfig

    H = hyper["H"]
    return LlamaConfig(
        vocab_size=hyper.get("N_V", 1), hidden_size=hyper["d_e"], intermediate_size=hyper.get("d_mlp", 1),
        num_hidden_layers=hyper.get("L", 1), num_attention_heads=H, num_key_value_heads=H // variant.kv_group,
        head_dim=hyper["d_attn"], max_position_embeddings=hyper.get("ell_max", hyper.get("ell", 1)),
        rms_norm_eps=variant.epsilon, rope_parameters={"rope_type": "default", "rope_theta": variant.rope_base},
        attention_bias=False, mlp_bias=False, tie_word_embeddings=False, attention_dropout=0.0,
        bos_token_id=None, eos_token_id=None, pad_token_id=None, attn_implementation=attn)


#: The ``sliding_window`` of every Mistral config built here (and of Qwen2's windowed one). The
#: plugin fixes it rather than reading the declared ``window`` into the config: a declaration fed to
#: the library would be obeyed whatever it said, and a wrong window could not be caught. The plugins
#: declare ``window = MISTRAL_WINDOW``, which holds only because transformers 5.24's mask
#: (masking_utils.py ``sliding_window_overlay``: ``kv_idx > q_idx - sliding_window``, and-ed with the
#: causal ``kv_idx <= q_idx`` by ``sliding_window_causal_mask_function``) lets query t see the keys
#: t − W < t_z ≤ t, W keys counting itself: the spec's ``window`` W (spec/attention.py). 2 is the
#: least window that drops a key; the harness draws ℓ ≥ W + 2 for a windowed set, so a key W places
#: back (in the window) and one W + 1 back (out of it) are both present.
MISTRAL_WINDOW = 2


def _decoder_kwargs(hyper: Mapping[str, int], attn: str, variant: Any) -> dict[str, Any]:
    """What ``llama_config`` gives every Llama-like config (sizes, ε, RoPE base, kv heads)."""
    H = hyper["H"]
    return dict(
        vocab_size=hyper.get("N_V", 1), hidden_size=hyper["d_e"], intermediate_size=hyper.get("d_mlp", 1),
        num_hidden_layers=hyper.get("L", 1), num_attention_heads=H, num_key_value_heads=H // variant.kv_group,
        max_position_embeddings=hyper.get("ell_max", hyper.get("ell", 1)),
        rms_norm_eps=variant.epsilon, rope_parameters={"rope_type": "default", "rope_theta": variant.rope_base},
        tie_word_embeddings=False, attention_dropout=0.0,
        bos_token_id=None, eos_token_id=None, pad_token_id=None, attn_implementation=attn)


def mistral_config(hyper: Mapping[str, int], attn: str, variant: Any) -> Any:
    """A ``MistralConfig`` as ``llama_config`` builds a LlamaConfig (MistralAttention and MistralMLP
    have no biases: no switch to set), head_dim = d_attn, and sliding_window = ``MISTRAL_WINDOW``
    (not the declared ``window``: see there). ``MistralModel.forward`` then builds every layer's
    mask with ``create_sliding_window_causal_mask``."""
    from transformers import MistralConfig

    return MistralConfig(**_decoder_kwargs(hyper, attn, variant), head_dim=hyper["d_attn"],
                         sliding_window=MISTRAL_WINDOW)


def qwen2_config(hyper: Mapping[str, int], attn: str, variant: Any, windowed: bool = False) -> Any:
    """A ``Qwen2Config`` as ``llama_config`` builds a LlamaConfig. Qwen2 has no head_dim option
    (``Qwen2Attention``: ``getattr(config, "head_dim", hidden_size // num_attention_heads)``), which
    the plugin's tie d_e = H·d_attn makes d_attn. ``windowed``: use_sliding_window with
    max_window_layers = 0, so every layer is "sliding_attention" (layer i slides when i ≥
    max_window_layers, configuration_qwen2.py) at ``MISTRAL_WINDOW``; otherwise the default, no
    window (every layer "full_attention")."""
    from transformers import Qwen2Config

    window = dict(use_sliding_window=True, sliding_window=MISTRAL_WINDOW, max_window_layers=0) if windowed else \
        dict(use_sliding_window=False)
    return Qwen2Config(**_decoder_kwargs(hyper, attn, variant), **window)


def neox_config(hyper: Mapping[str, int], attn: str, variant: Any) -> Any:
    """A ``GPTNeoXConfig``: hidden_size = d_e, num_attention_heads = H (head_size = d_e / H, the
    plugin's tie d_e = H·d_attn), intermediate_size = d_mlp, num_hidden_layers = L,
    max_position_embeddings = ℓ_max, vocab_size = N_V; from the variant set layer_norm_eps = ε and
    rope_theta = rope_base; the library's defaults otherwise (hidden_act "gelu",
    use_parallel_residual, attention_bias, a separate lm_head, and partial_rotary_factor: the
    default rotary_pct 0.25, rotary_ndims = int(head_size · 0.25), the spec's ⌊f·d_attn⌋), dropout
    off, no bos/eos ids (their defaults lie outside a tiny vocabulary). The rotary fraction is the
    library's, not the declared ``rotary_fraction``, for the reason ``MISTRAL_WINDOW`` gives: a
    declaration fed to the config would be obeyed, and a wrong one never caught."""
    from transformers import GPTNeoXConfig

    return GPTNeoXConfig(
        vocab_size=hyper.get("N_V", 1), hidden_size=hyper["d_e"], intermediate_size=hyper.get("d_mlp", 1),
        num_hidden_layers=hyper.get("L", 1), num_attention_heads=hyper["H"],
        max_position_embeddings=hyper.get("ell_max", hyper.get("ell", 1)), layer_norm_eps=variant.epsilon,
        rope_parameters={"rope_type": "default", "rope_theta": variant.rope_base},
        use_parallel_residual=True, attention_bias=True, tie_word_embeddings=False,
        hidden_dropout=0.0, attention_dropout=0.0, bos_token_id=None, eos_token_id=None, pad_token_id=None,
        attn_implementation=attn)


def gemma_config(hyper: Mapping[str, int], attn: str, variant: Any) -> Any:
    """A ``GemmaConfig`` as ``llama_config`` builds a LlamaConfig, with head_dim = d_attn free of
    d_e / H (GemmaAttention's projections are H·head_dim wide and GemmaConfig does not check
    hidden_size against the heads), and the library's defaults otherwise (hidden_act
    gelu_pytorch_tanh, gated; tie_word_embeddings; the embedding scale √hidden_size)."""
    from transformers import GemmaConfig

    return GemmaConfig(**(_decoder_kwargs(hyper, attn, variant) | {"tie_word_embeddings": True}),
                       head_dim=hyper["d_attn"])


#: Gemma 2's soft caps, Gemma2Config's defaults (transformers 5.24), in every config the plugin builds
GEMMA2_ATTN_SOFTCAP = 50.0
GEMMA2_LOGIT_SOFTCAP = 30.0


def gemma2_config(hyper: Mapping[str, int], attn: str, variant: Any, per_head_scale: bool = False) -> Any:
    """A ``Gemma2Config`` as ``gemma_config`` builds a GemmaConfig (head_dim = d_attn, tied, the
    library's gelu_pytorch_tanh and √hidden_size embedding scale), with its caps at the library's
    defaults (attn_logit_softcapping 50, final_logit_softcapping 30: Gemma2Config), the query
    scale query_pre_attn_scalar = head_dim (Gemma 2 2B's: the spec's 1/√d_attn), and
    sliding_window = ``MISTRAL_WINDOW``. A whole model (``hyper`` has L) keeps Gemma2Config's own
    ``layer_types``, sliding and full in turn from a sliding layer 0 (the spec's window =
    MISTRAL_WINDOW, global_every = 2); a lone layer (no L: gpt2_layer, the attention) is built
    "full_attention", as a global layer. The caps, the scale, the window and the layer types are
    fixed here, never read from the declared set (a declaration fed to the config would be obeyed).

    ``per_head_scale``: query_pre_attn_scalar = hidden_size / num_attention_heads instead, the released
    9B's and 27B's (3584/16 = 224 with head_dim 256, 4608/32 = 144 with head_dim 128: the spec's
    attn_scale = "sqrt_d_model_per_head", √(d_e/H)); whole, as Gemma2Config's validate_architecture
    requires hidden_size to be a multiple of the heads (the plugin's limits draw d_e so)."""
    from transformers import Gemma2Config

    types = {} if "L" in hyper else {"layer_types": ["full_attention"]}  # a model: the library's default
    scalar = hyper["d_e"] // hyper["H"] if per_head_scale else hyper["d_attn"]
    return Gemma2Config(**(_decoder_kwargs(hyper, attn, variant) | {"tie_word_embeddings": True}),
                        head_dim=hyper["d_attn"], query_pre_attn_scalar=scalar,
                        attn_logit_softcapping=GEMMA2_ATTN_SOFTCAP, final_logit_softcapping=GEMMA2_LOGIT_SOFTCAP,
                        sliding_window=MISTRAL_WINDOW, **types)


#: Every ``GEMMA3_GLOBAL_EVERY``-th layer of a Gemma 3 model the plugin builds is global: the config's
#: ``sliding_window_pattern`` (transformers 5.24 ``Gemma3TextConfig.__post_init__``: layer i is
#: "sliding_attention" if bool((i + 1) % pattern) else "full_attention", the spec's global_every rule;
#: default 6, the released checkpoints'). 2, not 6: the strategies draw L ≤ 3, and a model of fewer than 6
#: layers would be all local; at 2 a two- or three-layer model has local layers 0 (and 2) and global
#: layer 1. The library's own rule computes the layer types from it; the plugins declare global_every = 2.
GEMMA3_GLOBAL_EVERY = 2


def gemma3_config(hyper: Mapping[str, int], attn: str, variant: Any, **released: Any) -> Any:
    """A ``Gemma3TextConfig`` as ``gemma_config`` builds a GemmaConfig (head_dim = d_attn, tied,
    gelu_pytorch_tanh, the √hidden_size embedding scale of ``Gemma3TextScaledWordEmbedding``, ε from the
    set), with the query scale query_pre_attn_scalar = head_dim (the spec's 1/√d_attn; Gemma 3 1B, 4B
    and 12B: 256 = head_dim), no soft caps (the defaults None), sliding_window = ``MISTRAL_WINDOW`` and
    sliding_window_pattern = ``GEMMA3_GLOBAL_EVERY``. A whole model (``hyper`` has L) takes the layer
    types the library derives from that pattern; a lone layer (gpt2_layer) is built "full_attention",
    as a global layer. The RoPE bases are the config's own (``Gemma3TextConfig.default_theta``: 1e6 for
    "full_attention", 10000 for "sliding_attention", the released checkpoints'), not the declared
    rope_base: like the window and the pattern, a base fed to the config would be obeyed, and a wrong
    declared base (global or local) never caught. hidden_size must be a multiple of the heads
    (``validate_architecture``), hence the plugin's tie d_e = H·d_attn. ``released``: config keywords that
    replace these (``gemma3_27b_config``)."""
    from transformers import Gemma3TextConfig

    types = {} if "L" in hyper else {"layer_types": ["full_attention"]}  # a model: the library's rule
    kwargs = _decoder_kwargs(hyper, attn, variant) | {"tie_word_embeddings": True}
    del kwargs["rope_parameters"]  # the config's default_theta for both layer types
    fixed = dict(head_dim=hyper["d_attn"], query_pre_attn_scalar=hyper["d_attn"], sliding_window=MISTRAL_WINDOW,
                 sliding_window_pattern=GEMMA3_GLOBAL_EVERY)
    return Gemma3TextConfig(**kwargs, **(fixed | released), **types)


#: Gemma 3 4B's, 12B's and 27B's RoPE scaling, as their released configs state it (rope_type "linear", factor
#: 8.0; Google's gemma_pytorch config.py: rope_scaling_factor=8): the spec's rope_scaling = "linear-8"
GEMMA3_ROPE_SCALING = {"rope_type": "linear", "factor": 8.0}


def gemma3_27b_config(hyper: Mapping[str, int], attn: str, variant: Any) -> Any:
    """``gemma3_config`` with the released Gemma 3 27B's two differences: query_pre_attn_scalar =
    hidden_size / num_attention_heads (5376/32 = 168 with head_dim 128: the spec's attn_scale =
    "sqrt_d_model_per_head"; 1B, 4B and 12B keep 256 = head_dim) and ``rope_scaling`` =
    ``GEMMA3_ROPE_SCALING`` (linear, factor 8; 4B and 12B have it too). transformers 5.24
    ``Gemma3TextConfig.convert_rope_params_to_dict`` pops ``rope_scaling`` and updates
    ``rope_parameters["full_attention"]`` alone with it, so the sliding layers keep rope_type "default" at
    base 10000 and the full ones divide ``inv_freq`` by 8 (``_compute_linear_scaling_rope_parameters``): the
    spec's rope_scaling = "linear-8" with rope_local_base = 10000, whose local layers are unscaled. Both are
    fixed here, not read from the declared set (a declaration fed to the config would be obeyed).
    hidden_size must be a multiple of the heads (``validate_architecture``): the plugin's limits draw it so."""
    return gemma3_config(hyper, attn, variant, query_pre_attn_scalar=hyper["d_e"] // hyper["H"],
                         rope_scaling=dict(GEMMA3_ROPE_SCALING))


def qwen3_config(hyper: Mapping[str, int], attn: str, variant: Any) -> Any:
    """A ``Qwen3Config`` as ``llama_config`` builds a LlamaConfig, with head_dim = d_attn free of d_e / H
    (Qwen3Attention's projections are H·head_dim wide, and Qwen3Config checks no relation between
    hidden_size and the heads: Qwen3-0.6B has hidden_size 1024 and 16 heads of 128), no sliding window
    (use_sliding_window False, the default: every layer "full_attention"). Its QK-norm takes the
    layers' rms_norm_eps (``Qwen3RMSNorm(self.head_dim, eps=config.rms_norm_eps)``), which the spec's
    qk_norm states (the norm's ε as the layer norms')."""
    from transformers import Qwen3Config

    return Qwen3Config(**_decoder_kwargs(hyper, attn, variant), head_dim=hyper["d_attn"], use_sliding_window=False)


#: which of LongRoPE's two lists the plugin loads the drawn factors into ("long" or "short"), and so which
#: branch of the library it certifies (``phi3_config``); the tests certify the other one too
LONGROPE_LIST = "long"


def phi3_config(hyper: Mapping[str, int], attn: str, variant: Any,
                longrope: Optional[tuple[list[float], float]] = None) -> Any:
    """A ``Phi3Config`` as ``llama_config`` builds a LlamaConfig: Phi3Config has no head_dim
    (``Phi3Attention``: ``getattr(config, "head_dim", hidden_size // num_attention_heads)``), so the
    plugin's tie d_e = H·d_attn makes d_attn; the default RoPE over the whole head
    (partial_rotary_factor 1.0, ``Phi3Config.convert_rope_params_to_dict``), no sliding window
    (sliding_window None: ``Phi3Model`` builds ``create_causal_mask``), no biases anywhere
    (qkv_proj, o_proj, gate_up_proj, down_proj all ``bias=False``), dropout off (resid_pdrop,
    embd_pdrop, attention_dropout 0). bos/eos/pad ids: the defaults 1, 32000, 32000 lie outside a
    tiny vocabulary, cleared as for Llama.

    ``longrope`` (e, m) (``rope_factors="longrope"``: the call's ``rope_ext`` and ``rope_mscale[0]``): Phi-3
    128k's rope_scaling, ``{"rope_type": "longrope", "short_factor", "long_factor", "attention_factor": m,
    "factor": 1.0}``, with e in the list ``LONGROPE_LIST`` names and the reciprocals of e in the other (a list
    that cannot pass for e: were the library to read it, the rotation would differ). Which list the library
    reads is its own rule (transformers 5.24 ``_compute_longrope_parameters``: long_factor when the sequence,
    ``max(position_ids) + 1`` in ``dynamic_rope_update``, is longer than ``original_max_position_embeddings``):
    so that rule picks e, the config's ``original_max_position_embeddings`` (Phi3Config's own field, which
    ``standardize_rope_params`` copies into the rope parameters) is 0 for the long list (every sequence is
    longer, prefill and each decoding step alike) and ℓ_max for the short (none is). attention_factor is
    given, so neither the derived √(1 + ln s / ln L) nor ``factor`` (1, the validator's least) is read."""
    from transformers import Phi3Config

    extra: dict[str, Any] = {}
    if longrope is not None:
        ext, mscale = [float(e) for e in longrope[0]], float(longrope[1])
        other = [1.0 / e for e in ext]
        lists = {"long_factor": ext, "short_factor": other} if LONGROPE_LIST == "long" else \
            {"long_factor": other, "short_factor": ext}
        kw = _decoder_kwargs(hyper, attn, variant)
        extra = dict(rope_parameters={"rope_type": "longrope", "rope_theta": variant.rope_base, "factor": 1.0,
                                      "attention_factor": mscale, **lists},
                     original_max_position_embeddings=0 if LONGROPE_LIST == "long" else kw["max_position_embeddings"])
        return Phi3Config(**{**kw, **extra}, resid_pdrop=0.0, embd_pdrop=0.0, sliding_window=None)
    return Phi3Config(**_decoder_kwargs(hyper, attn, variant), resid_pdrop=0.0, embd_pdrop=0.0, sliding_window=None)


def longrope_of(p: Mapping[str, Tensor], prefix: str = "") -> tuple[list[float], float]:
    """LongRoPE's factors of a call (``rope_factors="longrope"``): ``<prefix>rope_ext`` as a list of floats (the
    values of the call's dtype, exactly) and ``<prefix>rope_mscale[0]``, what ``phi3_config`` writes in the
    config."""
    return ([float(e) for e in p[prefix + "rope_ext"].reshape(-1).tolist()],
            float(p[prefix + "rope_mscale"].reshape(-1)[0]))


#: GPT-J rotates the first ``rotary_dim`` rows of each head; the plugin builds every GPTJConfig with
#: rotary_dim = head_dim / GPTJ_ROTARY_SHARE, GPT-J 6B's 64 of 256, and declares rotary_fraction = 1/4
#: (not the declared fraction: a declaration fed to the config would be obeyed, as ``MISTRAL_WINDOW``
#: says). transformers 5.24 ``create_sinusoidal_positions(num_pos, dim=rotary_dim)``: inv_freq =
#: 10000^(−arange(0, dim, 2)/dim), the spec's base^(−2i/r) over the rotated width r.
GPTJ_ROTARY_SHARE = 4


def gptj_config(hyper: Mapping[str, int], attn: str, variant: Any) -> Any:
    """A ``GPTJConfig``: n_embd = d_e, n_head = H (head_dim = d_e / H: GPTJAttention refuses another
    width), rotary_dim = head_dim / ``GPTJ_ROTARY_SHARE``, n_inner = d_mlp, n_layer = L, n_positions =
    ℓ_max, vocab_size = N_V, layer_norm_epsilon = ε from the set; the library's defaults otherwise
    (activation_function gelu_new, an untied lm_head with a bias), dropout off, no bos/eos ids. The
    RoPE base is GPT-J's own 10000 (``create_sinusoidal_positions`` has no base parameter)."""
    from transformers import GPTJConfig

    H, d_e = hyper["H"], hyper["d_e"]
    return GPTJConfig(
        vocab_size=hyper.get("N_V", 1), n_positions=hyper.get("ell_max", hyper.get("ell", 1)), n_embd=d_e,
        n_layer=hyper.get("L", 1), n_head=H, rotary_dim=d_e // H // GPTJ_ROTARY_SHARE, n_inner=hyper.get("d_mlp", 1),
        layer_norm_epsilon=variant.epsilon, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        tie_word_embeddings=False, bos_token_id=None, eos_token_id=None, pad_token_id=None, attn_implementation=attn)


#: ``OPTLearnedPositionalEmbedding.offset``: position t reads row t + 2 of the table (transformers 5.24,
#: "if padding_idx is specified then offset the embedding ids by 2"). Checked against the module in
#: ``opt_lm_weights``.
OPT_POSITION_OFFSET = 2


def opt_config(hyper: Mapping[str, int], attn: str, variant: Any) -> Any:
    """An ``OPTConfig``: hidden_size = d_e (= word_embed_proj_dim: no project_in/out), num_attention_heads
    = H (head_dim = d_e / H), ffn_dim = d_mlp, num_hidden_layers = L, max_position_embeddings = ℓ_max,
    vocab_size = N_V; the library's defaults otherwise (do_layer_norm_before: pre-LN with a final
    LayerNorm, activation_function relu, enable_bias, elementwise-affine LayerNorms at nn.LayerNorm's
    own eps 1e-5, tie_word_embeddings), dropout off, no pad/bos/eos ids (pad_token_id would make
    embed_tokens' padding_idx). OPT reads no ε and no RoPE base from anywhere: nothing of the set is."""
    from transformers import OPTConfig

    return OPTConfig(
        vocab_size=hyper.get("N_V", 1), hidden_size=hyper["d_e"], num_hidden_layers=hyper.get("L", 1),
        ffn_dim=hyper.get("d_mlp", 1), max_position_embeddings=hyper.get("ell_max", hyper.get("ell", 1)),
        num_attention_heads=hyper["H"], dropout=0.0, attention_dropout=0.0, layerdrop=0.0,
        pad_token_id=None, bos_token_id=None, eos_token_id=None, attn_implementation=attn)


def falcon_config(hyper: Mapping[str, int], attn: str, variant: Any) -> Any:
    """A ``FalconConfig`` in the new decoder architecture with two norms (Falcon-40B and 180B:
    new_decoder_architecture, parallel_attn, num_ln_in_parallel_attn = 2, num_kv_heads a size): hidden_size
    = d_e, num_attention_heads = H (head_dim = d_e / H: FalconAttention refuses another width),
    num_kv_heads = H / kv_group, ffn_hidden_size = d_mlp, num_hidden_layers = L, max_position_embeddings
    = ℓ_max, vocab_size = N_V; from the set layer_norm_epsilon = ε and rope_theta = rope_base; the
    library's defaults otherwise (activation "gelu", the exact one; bias False; alibi False: rotary;
    tie_word_embeddings), dropout off, no bos/eos ids. Falcon-7B's old architecture (one shared norm,
    multi_query: one kv head for any H) is ``falcon7b_config``."""
    from transformers import FalconConfig

    H = hyper["H"]
    return FalconConfig(
        vocab_size=hyper.get("N_V", 1), hidden_size=hyper["d_e"], num_hidden_layers=hyper.get("L", 1),
        num_attention_heads=H, num_kv_heads=H // variant.kv_group, new_decoder_architecture=True,
        parallel_attn=True, num_ln_in_parallel_attn=2, bias=False, alibi=False,
        ffn_hidden_size=hyper.get("d_mlp", 1), max_position_embeddings=hyper.get("ell_max", hyper.get("ell", 1)),
        layer_norm_epsilon=variant.epsilon, rope_parameters={"rope_type": "default", "rope_theta": variant.rope_base},
        hidden_dropout=0.0, attention_dropout=0.0, bos_token_id=None, eos_token_id=None, pad_token_id=None,
        attn_implementation=attn)


def falcon7b_config(hyper: Mapping[str, int], attn: str, variant: Any) -> Any:
    """A ``FalconConfig`` in the old decoder architecture, FalconConfig's defaults (Falcon-7B:
    new_decoder_architecture False, multi_query True, parallel_attn True), as ``falcon_config`` builds
    the new one otherwise (hidden_size = d_e, num_attention_heads = H, head_dim = d_e / H, ffn_hidden_size
    = d_mlp, ε and rope_theta from the set, bias False, alibi False, tied, dropout off): one
    ``input_layernorm`` feeding attention and MLP (FalconDecoderLayer.forward: ``mlp_layernorm_out =
    attention_layernorm_out``), and one key/value head (FalconAttention: ``num_kv_heads = 1`` under
    multi_query, query_key_value (H + 2)·head_dim wide). num_kv_heads is not passed: multi_query ignores
    it, so the kv count is the library's, 1 at every H: the declared set's kv_heads="one"."""
    from transformers import FalconConfig

    return FalconConfig(
        vocab_size=hyper.get("N_V", 1), hidden_size=hyper["d_e"], num_hidden_layers=hyper.get("L", 1),
        num_attention_heads=hyper["H"], new_decoder_architecture=False, multi_query=True, parallel_attn=True,
        bias=False, alibi=False, ffn_hidden_size=hyper.get("d_mlp", 1),
        max_position_embeddings=hyper.get("ell_max", hyper.get("ell", 1)), layer_norm_epsilon=variant.epsilon,
        rope_parameters={"rope_type": "default", "rope_theta": variant.rope_base},
        hidden_dropout=0.0, attention_dropout=0.0, bos_token_id=None, eos_token_id=None, pad_token_id=None,
        attn_implementation=attn)


def bloom_config(hyper: Mapping[str, int], attn: str, variant: Any) -> Any:
    """A ``BloomConfig``: hidden_size = d_e, n_head = H (head_dim = d_e / H: BloomAttention refuses another
    width), n_layer = L, vocab_size = N_V; the library's defaults otherwise (layer_norm_epsilon 1e-5,
    apply_residual_connection_post_layernorm False: pre-LN, pretraining_tp 1 and slow_but_exact False: one
    ``dense`` call, tie_word_embeddings), dropout off, no bos/eos ids. BLOOM has no position table (ALiBi) and
    a 4·hidden_size MLP: no ℓ_max, no d_mlp. Nothing of the declared set is read, not even ε, so a wrong ε
    is caught."""
    from transformers import BloomConfig

    return BloomConfig(
        vocab_size=hyper.get("N_V", 1), hidden_size=hyper["d_e"], n_layer=hyper.get("L", 1), n_head=hyper["H"],
        hidden_dropout=0.0, attention_dropout=0.0, bos_token_id=None, eos_token_id=None, pad_token_id=None,
        attn_implementation=attn)

def mpt_config(hyper: Mapping[str, int], attn: str, variant: Any) -> Any:
    """An ``MptConfig``: d_model = d_e, n_heads = H (head_dim = d_e / H), n_layers = L, max_seq_len = ℓ_max (ℓ for
    a lone layer: the ALiBi tensor is built that long and its last ℓ columns read), vocab_size = N_V; the
    library's defaults otherwise (no_bias, layer_norm_epsilon 1e-5, the attention config's alibi with
    alibi_bias_max 8, softmax_scale None: 1/√head_dim, no clip_qkv, no qk_ln, tie_word_embeddings), dropout
    off. Nothing of the declared set is read."""
    from transformers import MptConfig

    return MptConfig(
        vocab_size=hyper.get("N_V", 1), d_model=hyper["d_e"], n_layers=hyper.get("L", 1), n_heads=hyper["H"],
        max_seq_len=hyper.get("ell_max", hyper.get("ell", 1)), resid_pdrop=0.0, emb_pdrop=0.0,
        bos_token_id=None, eos_token_id=None, pad_token_id=None, attn_implementation=attn)

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


def bert_self_attention_weights(p: In, H: int) -> dict[str, Tensor]:
    """``BertSelfAttentionOnly``: the heads' W_q, W_k, W_v and biases packed head-major into
    ``self.query``/``key``/``value`` (as ``bert_layer_weights`` does), W_o and b_o into ``dense``."""
    out = {}
    for mine, theirs in (("q", "query"), ("k", "key"), ("v", "value")):
        out[f"self.{theirs}.weight"] = pack_heads(p, "", f"W_{mine}", H)  # (H·d_attn, d_e)
        out[f"self.{theirs}.bias"] = pack_heads(p, "", f"b_{mine}", H)
    return out | {"dense.weight": p["W_o"], "dense.bias": p["b_o"]}  # (d_e, H·d_mid)


class BertSelfAttentionOnly(nn.Module):
    """Algorithm 5 out of BERT's own parts: ``BertSelfAttention`` (projections, scaled scores, the
    attention mask, softmax, the weighted values, heads concatenated) and the ``nn.Linear`` that
    ``BertSelfOutput.dense`` is (the output projection W_o, b_o). ``BertAttention`` would add
    BertSelfOutput's residual and LayerNorm (Alg. 9 line 6), which the entry does not have."""

    def __init__(self, config: Any) -> None:
        from transformers.models.bert.modeling_bert import BertSelfAttention

        super().__init__()
        self.self = BertSelfAttention(config, layer_idx=0)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)  # as in BertSelfOutput.__init__

    def forward(self, hidden_states: Tensor, attention_mask: Any) -> Tensor:
        heads, _ = self.self(hidden_states, attention_mask=attention_mask)  # (B, ℓ, H·d_mid)
        return self.dense(heads)  # (B, ℓ, d_e)


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


def llama_attention_weights(p: In, H: int, G: int, src: str = "", dst: str = "") -> dict[str, Tensor]:
    """One ``LlamaAttention`` (no biases): ``q_proj`` = [W_q of heads 0 … H−1];
    ``k_proj``/``v_proj`` = [W_k | W_v of kv_heads 0 … H/G−1] (G = 1: the heads'
    own W_k, W_v); ``o_proj`` = W_o. nn.Linear takes W as it stands."""
    kv = (lambda n: torch.cat([p[f"{src}kv_heads.{g}.{n}"] for g in range(H // G)], dim=0)) if G > 1 else \
        (lambda n: pack_heads(p, src, n, H))
    return {dst + "q_proj.weight": pack_heads(p, src, "W_q", H),  # (H·d_attn, d_e)
            dst + "k_proj.weight": kv("W_k"), dst + "v_proj.weight": kv("W_v"),  # (H/G·d_attn, d_e)
            dst + "o_proj.weight": p[src + "W_o"]}  # (d_e, H·d_mid)


def qwen2_attention_weights(p: In, H: int, G: int, src: str = "", dst: str = "") -> dict[str, Tensor]:
    """One ``Qwen2Attention``: ``llama_attention_weights`` plus the q/k/v biases, packed as their
    weights are (the heads' b_q; the kv heads' b_k, b_v, or the heads' own under G = 1). o_proj has
    no bias, which ``attn_bias_at = "qkv"`` states."""
    kv = (lambda n: torch.cat([p[f"{src}kv_heads.{g}.{n}"] for g in range(H // G)], dim=0)) if G > 1 else \
        (lambda n: pack_heads(p, src, n, H))
    return llama_attention_weights(p, H, G, src, dst) | {
        dst + "q_proj.bias": pack_heads(p, src, "b_q", H), dst + "k_proj.bias": kv("b_k"),
        dst + "v_proj.bias": kv("b_v")}  # (H·d_attn,), (H/G·d_attn,)


def neox_attention_weights(p: In, H: int, G: int = 1, src: str = "", dst: str = "") -> dict[str, Tensor]:
    """One ``GPTNeoXAttention``: ``query_key_value`` = per head h in turn [W_q^h; W_k^h; W_v^h]
    (3·H·d_attn, d_e), its bias [b_q^h; b_k^h; b_v^h]; ``dense`` = W_o, b_o. GPT-NeoX has no grouped
    kv heads (G must be 1)."""
    if G != 1:
        raise ValueError(f"GPT-NeoX has one key/value head per query head; kv_group {G}")
    head = lambda n, h: p[f"{src}heads.{h}.{n}"]  # noqa: E731
    return {dst + "query_key_value.weight": torch.cat([head(n, h) for h in range(H) for n in ("W_q", "W_k", "W_v")]),
            dst + "query_key_value.bias": torch.cat([head(n, h) for h in range(H) for n in ("b_q", "b_k", "b_v")]),
            dst + "dense.weight": p[src + "W_o"], dst + "dense.bias": p[src + "b_o"]}


def neox_layer_weights(p: In, H: int, G: int = 1, src: str = "", dst: str = "",
                       attention: str = "attention.") -> dict[str, Tensor]:
    """One ``GPTNeoXLayer``: the attention, the two LayerNorms and the MLP (see the module docstring);
    ``attention``: the attention module's name in the layer (BloomBlock's ``self_attention.``, the same
    layout)."""
    return neox_attention_weights(p, H, G, src + "attn.", dst + attention) | {
        dst + "input_layernorm.weight": p[src + "gamma1"], dst + "input_layernorm.bias": p[src + "beta1"],
        dst + "post_attention_layernorm.weight": p[src + "gamma2"],
        dst + "post_attention_layernorm.bias": p[src + "beta2"],
        dst + "mlp.dense_h_to_4h.weight": p[src + "W_mlp1"], dst + "mlp.dense_h_to_4h.bias": p[src + "b_mlp1"],
        dst + "mlp.dense_4h_to_h.weight": p[src + "W_mlp2"], dst + "mlp.dense_4h_to_h.bias": p[src + "b_mlp2"]}


def neox_lm_weights(p: In, L: int, H: int, G: int = 1, attention: Any = None) -> dict[str, Tensor]:
    """``GPTNeoXForCausalLM``: embed_in = W_eᵀ, the layers, final_layer_norm = γ/β, lm_head = W_u.
    (``G`` and ``attention``: ``llama_lm_weights``'s signature; GPT-NeoX has one layout.)"""
    out = {"gpt_neox.embed_in.weight": p["W_e"].T, "gpt_neox.final_layer_norm.weight": p["gamma"],
           "gpt_neox.final_layer_norm.bias": p["beta"], "lm_head.weight": p["W_u"]}
    for l in range(L):
        out |= neox_layer_weights(p, H, G, f"layers.{l}.", f"gpt_neox.layers.{l}.")
    return out


def llama_lm_weights(p: In, L: int, H: int, G: int,
                     attention: Callable[..., dict[str, Tensor]] = llama_attention_weights) -> dict[str, Tensor]:
    """``LlamaForCausalLM``: embed_tokens = W_eᵀ, per layer the attention,
    γ¹/γ² (input_layernorm, post_attention_layernorm) and the gated MLP
    (gate_proj = W_mlp1, up_proj = W_mlp1_lin, down_proj = W_mlp2), the final
    norm γ and lm_head = W_u (N_V, d_e). ``attention``: the layer's attention
    weights (``qwen2_attention_weights`` for Qwen2; Mistral's are Llama's)."""
    out = {"model.embed_tokens.weight": p["W_e"].T, "model.norm.weight": p["gamma"], "lm_head.weight": p["W_u"]}
    for l in range(L):
        out |= llama_layer_weights(p, H, G, f"layers.{l}.", f"model.layers.{l}.", attention)
    return out


def llama_layer_weights(p: In, H: int, G: int, src: str = "", dst: str = "",
                        attention: Callable[..., dict[str, Tensor]] = llama_attention_weights) -> dict[str, Tensor]:
    """One ``LlamaDecoderLayer`` (and Qwen3's, Mistral's …): the attention (``attention``), γ¹/γ²
    (input_layernorm, post_attention_layernorm) and the gated MLP (gate_proj = W_mlp1, up_proj =
    W_mlp1_lin, down_proj = W_mlp2)."""
    return attention(p, H, G, src + "attn.", dst + "self_attn.") | {
        dst + "input_layernorm.weight": p[src + "gamma1"], dst + "post_attention_layernorm.weight": p[src + "gamma2"],
        dst + "mlp.gate_proj.weight": p[src + "W_mlp1"], dst + "mlp.up_proj.weight": p[src + "W_mlp1_lin"],
        dst + "mlp.down_proj.weight": p[src + "W_mlp2"]}


def qwen3_attention_weights(p: In, H: int, G: int, src: str = "", dst: str = "") -> dict[str, Tensor]:
    """One ``Qwen3Attention``: ``llama_attention_weights`` (no biases: attention_bias False) plus the
    QK-norm gains, q_norm.weight = γ_q and k_norm.weight = γ_k (d_attn,), one of each for all heads."""
    return llama_attention_weights(p, H, G, src, dst) | {dst + "q_norm.weight": p[src + "gamma_q"],
                                                         dst + "k_norm.weight": p[src + "gamma_k"]}


def qwen3_layer_weights(p: In, H: int, G: int, src: str = "", dst: str = "") -> dict[str, Tensor]:
    """One ``Qwen3DecoderLayer``: ``llama_layer_weights`` with Qwen3's attention."""
    return llama_layer_weights(p, H, G, src, dst, qwen3_attention_weights)


def phi3_attention_weights(p: In, H: int, G: int, src: str = "", dst: str = "") -> dict[str, Tensor]:
    """One ``Phi3Attention``: qkv_proj = [W_q of heads 0 … H−1; W_k of kv heads 0 … H/G−1; W_v of the
    same] ((H + 2H/G)·d_attn, d_e), sliced in that order by ``Phi3Attention.forward``; o_proj = W_o.
    No biases."""
    llama = llama_attention_weights(p, H, G, src, dst)
    return {dst + "qkv_proj.weight": torch.cat([llama[dst + f"{n}_proj.weight"] for n in ("q", "k", "v")]),
            dst + "o_proj.weight": llama[dst + "o_proj.weight"]}


def phi3_layer_weights(p: In, H: int, G: int, src: str = "", dst: str = "") -> dict[str, Tensor]:
    """One ``Phi3DecoderLayer``: Llama's names with Phi-3's attention and gate_up_proj = [W_mlp1;
    W_mlp1_lin] (2·d_mlp, d_e): ``chunk(2, dim=-1)`` gives the gate (under the activation) first."""
    out = llama_layer_weights(p, H, G, src, dst, phi3_attention_weights)
    out[dst + "mlp.gate_up_proj.weight"] = torch.cat([out.pop(dst + "mlp.gate_proj.weight"),
                                                      out.pop(dst + "mlp.up_proj.weight")])
    return out


def phi3_lm_weights(p: In, L: int, H: int, G: int, attention: Any = None) -> dict[str, Tensor]:
    """``Phi3ForCausalLM``: Llama's embed_tokens, norm and lm_head (untied) with Phi-3's layers.
    (``attention``: ``llama_lm_weights``'s signature; Phi-3 has one layout.)"""
    out = {"model.embed_tokens.weight": p["W_e"].T, "model.norm.weight": p["gamma"], "lm_head.weight": p["W_u"]}
    for l in range(L):
        out |= phi3_layer_weights(p, H, G, f"layers.{l}.", f"model.layers.{l}.")
    return out


def _one_kv_head_per_head(family: str, G: int) -> None:
    if G != 1:
        raise ValueError(f"{family} has one key/value head per query head; kv_group {G}")


def gptj_attention_weights(p: In, H: int, G: int = 1, src: str = "", dst: str = "") -> dict[str, Tensor]:
    """One ``GPTJAttention``: q_proj, k_proj, v_proj = the heads' W_q, W_k, W_v stacked head-major
    (``view(…, -1, head_dim)``), out_proj = W_o; no biases anywhere (bias=False, hard-coded)."""
    _one_kv_head_per_head("GPT-J", G)
    return {dst + "q_proj.weight": pack_heads(p, src, "W_q", H), dst + "k_proj.weight": pack_heads(p, src, "W_k", H),
            dst + "v_proj.weight": pack_heads(p, src, "W_v", H), dst + "out_proj.weight": p[src + "W_o"]}


def gptj_layer_weights(p: In, H: int, G: int = 1, src: str = "", dst: str = "") -> dict[str, Tensor]:
    """One ``GPTJBlock``: ln_1 = γ¹/β¹ (shared by the attention and the MLP), the attention, the MLP
    (fc_in = W_mlp1, b_mlp1; fc_out = W_mlp2, b_mlp2)."""
    return gptj_attention_weights(p, H, G, src + "attn.", dst + "attn.") | {
        dst + "ln_1.weight": p[src + "gamma1"], dst + "ln_1.bias": p[src + "beta1"],
        dst + "mlp.fc_in.weight": p[src + "W_mlp1"], dst + "mlp.fc_in.bias": p[src + "b_mlp1"],
        dst + "mlp.fc_out.weight": p[src + "W_mlp2"], dst + "mlp.fc_out.bias": p[src + "b_mlp2"]}


def gptj_lm_weights(p: In, L: int, H: int, G: int = 1, attention: Any = None) -> dict[str, Tensor]:
    """``GPTJForCausalLM``: wte = W_eᵀ, the blocks, ln_f = γ/β, lm_head = W_u with bias b_u."""
    out = {"transformer.wte.weight": p["W_e"].T, "transformer.ln_f.weight": p["gamma"],
           "transformer.ln_f.bias": p["beta"], "lm_head.weight": p["W_u"], "lm_head.bias": p["b_u"]}
    for l in range(L):
        out |= gptj_layer_weights(p, H, G, f"layers.{l}.", f"transformer.h.{l}.")
    return out


def opt_attention_weights(p: In, H: int, G: int = 1, src: str = "", dst: str = "") -> dict[str, Tensor]:
    """One ``OPTAttention``: q_proj, k_proj, v_proj = the heads' W and b stacked head-major
    (``view(bsz, -1, num_heads, head_dim)``), out_proj = W_o, b_o."""
    _one_kv_head_per_head("OPT", G)
    out = {dst + "out_proj.weight": p[src + "W_o"], dst + "out_proj.bias": p[src + "b_o"]}
    for n in ("q", "k", "v"):
        out[f"{dst}{n}_proj.weight"] = pack_heads(p, src, f"W_{n}", H)
        out[f"{dst}{n}_proj.bias"] = pack_heads(p, src, f"b_{n}", H)
    return out


def opt_layer_weights(p: In, H: int, G: int = 1, src: str = "", dst: str = "") -> dict[str, Tensor]:
    """One ``OPTDecoderLayer``: self_attn_layer_norm = γ¹/β¹, the attention, final_layer_norm = γ²/β²
    (the norm before the MLP), fc1 = W_mlp1, b_mlp1, fc2 = W_mlp2, b_mlp2."""
    return opt_attention_weights(p, H, G, src + "attn.", dst + "self_attn.") | {
        dst + "self_attn_layer_norm.weight": p[src + "gamma1"], dst + "self_attn_layer_norm.bias": p[src + "beta1"],
        dst + "final_layer_norm.weight": p[src + "gamma2"], dst + "final_layer_norm.bias": p[src + "beta2"],
        dst + "fc1.weight": p[src + "W_mlp1"], dst + "fc1.bias": p[src + "b_mlp1"],
        dst + "fc2.weight": p[src + "W_mlp2"], dst + "fc2.bias": p[src + "b_mlp2"]}


def opt_lm_weights(p: In, L: int, H: int, G: int = 1, attention: Any = None) -> dict[str, Tensor]:
    """``OPTForCausalLM``: embed_tokens = W_eᵀ (lm_head is the same tensor), embed_positions = [0; 0;
    W_pᵀ] ((ℓ_max + 2, d_e): position t reads row t + ``OPT_POSITION_OFFSET``), the layers, the
    decoder's final_layer_norm = γ/β."""
    W_p = p["W_p"].T  # (ℓ_max, d_e)
    offset = torch.zeros((OPT_POSITION_OFFSET, W_p.shape[1]), dtype=W_p.dtype, device=W_p.device)
    out = {"model.decoder.embed_tokens.weight": p["W_e"].T,
           "model.decoder.embed_positions.weight": torch.cat([offset, W_p]),
           "model.decoder.final_layer_norm.weight": p["gamma"], "model.decoder.final_layer_norm.bias": p["beta"]}
    for l in range(L):
        out |= opt_layer_weights(p, H, G, f"layers.{l}.", f"model.decoder.layers.{l}.")
    return out


def gemma_lm_weights(p: In, L: int, H: int, G: int,
                     attention: Callable[..., dict[str, Tensor]] = llama_attention_weights) -> dict[str, Tensor]:
    """``GemmaForCausalLM``: ``llama_lm_weights`` less lm_head (tied to embed_tokens = W_eᵀ)."""
    out = llama_lm_weights({**p, "W_u": p["W_e"].T}, L, H, G, attention)
    del out["lm_head.weight"]
    return out


def gemma2_layer_weights(p: In, H: int, G: int, src: str = "", dst: str = "",
                         attention: Callable[..., dict[str, Tensor]] = llama_attention_weights) -> dict[str, Tensor]:
    """One ``Gemma2DecoderLayer``: Llama's attention and gated MLP, and its four norms, the spec's
    sandwich: input_layernorm = γ¹, post_attention_layernorm = γ¹_out, pre_feedforward_layernorm =
    γ², post_feedforward_layernorm = γ²_out (Llama's post_attention_layernorm is the MLP's input
    norm; Gemma 2's is the attention output's)."""
    out = llama_layer_weights(p, H, G, src, dst, attention)
    out[dst + "post_attention_layernorm.weight"] = p[src + "gamma1_out"]
    out[dst + "pre_feedforward_layernorm.weight"] = p[src + "gamma2"]
    out[dst + "post_feedforward_layernorm.weight"] = p[src + "gamma2_out"]
    return out


def gemma2_lm_weights(p: In, L: int, H: int, G: int,
                      attention: Callable[..., dict[str, Tensor]] = llama_attention_weights) -> dict[str, Tensor]:
    """``Gemma2ForCausalLM``: embed_tokens = W_eᵀ (lm_head tied to it), Gemma 2's layers, the final
    norm γ."""
    out = {"model.embed_tokens.weight": p["W_e"].T, "model.norm.weight": p["gamma"]}
    for l in range(L):
        out |= gemma2_layer_weights(p, H, G, f"layers.{l}.", f"model.layers.{l}.", attention)
    return out


def gemma3_layer_weights(p: In, H: int, G: int, src: str = "", dst: str = "") -> dict[str, Tensor]:
    """One ``Gemma3DecoderLayer``: Gemma 2's four norms (``gemma2_layer_weights``: the sandwich) around
    Gemma3Attention, whose parameters are Qwen3Attention's (``qwen3_attention_weights``: q_proj, k_proj,
    v_proj, o_proj and the QK-norm gains q_norm.weight = γ_q, k_norm.weight = γ_k, each
    ``Gemma3RMSNorm(head_dim)``, gain 1 + w: the spec's norm_gain, as the layer norms')."""
    return gemma2_layer_weights(p, H, G, src, dst, qwen3_attention_weights)


def falcon_attention_weights(p: In, H: int, G: int, src: str = "", dst: str = "") -> dict[str, Tensor]:
    """One ``FalconAttention`` (new decoder architecture): query_key_value = per kv group g the W_q of its
    G query heads, then W_k and W_v of kv head g (G = 1: the head's own); dense = W_o. No biases."""
    kv = (lambda n, g: p[f"{src}kv_heads.{g}.{n}"]) if G > 1 else (lambda n, g: p[f"{src}heads.{g}.{n}"])
    rows = []
    for g in range(H // G):
        rows += [p[f"{src}heads.{h}.W_q"] for h in range(g * G, (g + 1) * G)] + [kv("W_k", g), kv("W_v", g)]
    return {dst + "query_key_value.weight": torch.cat(rows), dst + "dense.weight": p[src + "W_o"]}


def falcon_layer_weights(p: In, H: int, G: int, src: str = "", dst: str = "") -> dict[str, Tensor]:
    """One ``FalconDecoderLayer`` with two norms: ln_attn = γ¹/β¹, ln_mlp = γ²/β², the attention, the MLP
    (dense_h_to_4h = W_mlp1, dense_4h_to_h = W_mlp2, no biases)."""
    return falcon_attention_weights(p, H, G, src + "attn.", dst + "self_attention.") | {
        dst + "ln_attn.weight": p[src + "gamma1"], dst + "ln_attn.bias": p[src + "beta1"],
        dst + "ln_mlp.weight": p[src + "gamma2"], dst + "ln_mlp.bias": p[src + "beta2"],
        dst + "mlp.dense_h_to_4h.weight": p[src + "W_mlp1"], dst + "mlp.dense_4h_to_h.weight": p[src + "W_mlp2"]}


def falcon_lm_weights(p: In, L: int, H: int, G: int, attention: Any = None, *,
                      layer: Callable[..., dict[str, Tensor]] | None = None) -> dict[str, Tensor]:
    """``FalconForCausalLM``: word_embeddings = W_eᵀ (lm_head is the same tensor), the layers
    (``layer``: ``falcon_layer_weights``, or the old architecture's), ln_f = γ/β."""
    weights = layer or falcon_layer_weights
    out = {"transformer.word_embeddings.weight": p["W_e"].T, "transformer.ln_f.weight": p["gamma"],
           "transformer.ln_f.bias": p["beta"]}
    for l in range(L):
        out |= weights(p, H, G, f"layers.{l}.", f"transformer.h.{l}.")
    return out


def falcon7b_layer_weights(p: In, H: int, G: int, src: str = "", dst: str = "") -> dict[str, Tensor]:
    """One ``FalconDecoderLayer`` of the old architecture: input_layernorm = γ¹/β¹ (the one norm of
    ``residual="parallel_shared"``), the attention (``falcon_attention_weights`` with G = H, kv_heads="one"'s
    group: one group,
    [W_q of heads 0 … H−1; W_k; W_v of kv head 0], the rows ``FalconAttention._split_heads`` reads under
    multi_query: ``view(…, num_heads + 2, head_dim)``, the last two k and v), the MLP."""
    if G != H:  # multi_query: one kv head whatever H is (the declared set's kv_heads="one": G = H)
        raise ValueError(f"Falcon-7B has one key/value head for any H (kv_heads='one'); given {H // G} for H = {H}")
    return falcon_attention_weights(p, H, G, src + "attn.", dst + "self_attention.") | {
        dst + "input_layernorm.weight": p[src + "gamma1"], dst + "input_layernorm.bias": p[src + "beta1"],
        dst + "mlp.dense_h_to_4h.weight": p[src + "W_mlp1"], dst + "mlp.dense_4h_to_h.weight": p[src + "W_mlp2"]}


def falcon7b_lm_weights(p: In, L: int, H: int, G: int, attention: Any = None) -> dict[str, Tensor]:
    """``FalconForCausalLM`` of the old architecture: ``falcon_lm_weights`` with its layers."""
    return falcon_lm_weights(p, L, H, G, attention, layer=falcon7b_layer_weights)


def bloom_attention_weights(p: In, H: int, G: int = 1, src: str = "", dst: str = "") -> dict[str, Tensor]:
    """One ``BloomAttention``: query_key_value = per head h in turn [W_q^h; W_k^h; W_v^h] (3·H·d_attn, d_e) with
    the bias [b_q^h; b_k^h; b_v^h] (``_reshape``'s (H, 3, head_dim) view: GPT-NeoX's rows), dense = W_o, b_o.
    BLOOM has no grouped kv heads (G must be 1)."""
    _one_kv_head_per_head("BLOOM", G)
    return neox_attention_weights(p, H, G, src, dst)


def bloom_layer_weights(p: In, H: int, G: int = 1, src: str = "", dst: str = "") -> dict[str, Tensor]:
    """One ``BloomBlock``: input_layernorm = γ¹/β¹, self_attention, post_attention_layernorm = γ²/β², the MLP
    (dense_h_to_4h = W_mlp1, b_mlp1; dense_4h_to_h = W_mlp2, b_mlp2): GPTNeoXLayer's names and layout but the
    attention's."""
    _one_kv_head_per_head("BLOOM", G)
    return neox_layer_weights(p, H, G, src, dst, attention="self_attention.")


def bloom_lm_weights(p: In, L: int, H: int, G: int = 1, attention: Any = None) -> dict[str, Tensor]:
    """``BloomForCausalLM``: word_embeddings = W_eᵀ (lm_head is the same tensor), word_embeddings_layernorm =
    γ_emb/β_emb (1 and 0 where the case has none: the module always normalises its embeddings), the blocks,
    ln_f = γ/β."""
    W_e = p["W_e"]  # (d_e, N_V)
    gamma_emb = p["gamma_emb"] if "gamma_emb" in p else torch.ones_like(W_e[:, 0])  # (d_e,)
    beta_emb = p["beta_emb"] if "beta_emb" in p else torch.zeros_like(W_e[:, 0])
    out = {"transformer.word_embeddings.weight": W_e.T, "transformer.word_embeddings_layernorm.weight": gamma_emb,
           "transformer.word_embeddings_layernorm.bias": beta_emb, "transformer.ln_f.weight": p["gamma"],
           "transformer.ln_f.bias": p["beta"]}
    for l in range(L):
        out |= bloom_layer_weights(p, H, G, f"layers.{l}.", f"transformer.h.{l}.")
    return out

def mpt_attention_weights(p: In, H: int, G: int = 1, src: str = "", dst: str = "") -> dict[str, Tensor]:
    """One ``MptAttention``: Wqkv = [W_q of heads 0 … H−1; their W_k; their W_v] (``chunk(3)``), out_proj = W_o;
    no biases. MPT's default multihead attention has no grouped kv heads (G must be 1)."""
    _one_kv_head_per_head("MPT", G)
    Wqkv = torch.cat([pack_heads(p, src, n, H) for n in ("W_q", "W_k", "W_v")], dim=0)  # (3·d_e, d_e)
    return {dst + "Wqkv.weight": Wqkv, dst + "out_proj.weight": p[src + "W_o"]}


def mpt_layer_weights(p: In, H: int, G: int = 1, src: str = "", dst: str = "") -> dict[str, Tensor]:
    """One ``MptBlock``: norm_1 = γ¹, the attention, norm_2 = γ², ffn.up_proj = W_mlp1, ffn.down_proj = W_mlp2."""
    return mpt_attention_weights(p, H, G, src + "attn.", dst + "attn.") | {
        dst + "norm_1.weight": p[src + "gamma1"], dst + "norm_2.weight": p[src + "gamma2"],
        dst + "ffn.up_proj.weight": p[src + "W_mlp1"], dst + "ffn.down_proj.weight": p[src + "W_mlp2"]}


def mpt_lm_weights(p: In, L: int, H: int, G: int = 1, attention: Any = None) -> dict[str, Tensor]:
    """``MptForCausalLM``: wte = W_eᵀ (lm_head is the same tensor), the blocks, norm_f = γ."""
    out = {"transformer.wte.weight": p["W_e"].T, "transformer.norm_f.weight": p["gamma"]}
    for l in range(L):
        out |= mpt_layer_weights(p, H, G, f"layers.{l}.", f"transformer.blocks.{l}.")
    return out

def load(module: nn.Module, weights: Mapping[str, Tensor], dtype: torch.dtype, device: str,
         cast: bool = True) -> nn.Module:
    """``module`` in ``dtype`` on ``device``, inference mode, every parameter
    copied from ``weights``. ``named_parameters`` lists a tied tensor once, so
    lm_head/decoder weights are covered by the embedding they share. A
    parameter left unloaded, or a name the module lacks, is an adapter bug
    and raises. ``cast=False``: the module was built in ``dtype`` and is only
    moved (its buffers keep the dtype the library gave them); a parameter in
    another dtype raises."""
    if cast:
        return _fill(module.to(dtype=dtype, device=device), weights)
    module = module.to(device=device)
    odd = sorted(n for n, t in module.named_parameters() if t.dtype != dtype)
    if odd:
        raise RuntimeError(f"hf adapter: {type(module).__name__} was not built in {dtype}: {odd[:3]}")
    return _fill(module, weights)


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
           device: str, cast: bool = True) -> Iterator[nn.Module]:
    """A module for ``key`` with every parameter freshly loaded (``load``).

    The module is reused across calls with the same sizes: ``load`` copies
    every parameter, the models keep no other state in inference mode
    (buffers are position indices, zero token types and RoPE frequencies fixed
    by the config, which ``key`` holds; a key/value cache is the call's own
    object), so a reused module computes what a fresh one would. ``cast``:
    as in ``load``."""
    with _LOCK:
        module = _MODULES.pop(key + (dtype, device), None)
        module = load(build(), weights, dtype, device, cast) if module is None else _fill(module, weights)
        _MODULES[key + (dtype, device)] = module
        while len(_MODULES) > _KEEP:
            _MODULES.popitem(last=False)
        with torch.no_grad():
            yield module
