"""Mutants of the LLaMA-family features of the NumPy plugin: RoPE (``rotary``), grouped-query
attention (``kv_group``, ``kv_order``), padding (``pad``, ``pad_x``, ``pad_z``) and the key/value cache of decoding
(``cached_decoding``). Each is a one-line source edit of the plugin's own helper, so every entry
built on the helper inherits it."""

from __future__ import annotations

from ftspec.spec.entry import Kind
from ftspec.spec.registry import REGISTRY

from .groups import A, C, L
from .injection import Edit, Mutant, Witness, source_edit

#: the entries that have the RoPE switch (Algorithm 4 and everything built on it, Algorithm 3 aside)
ROTARY = tuple(name for name, e in REGISTRY.items() if "rotary" in e.switches)
#: the entries that have the grouped-query switches (Algorithm 5 and everything built on it)
GROUPED = tuple(name for name, e in REGISTRY.items() if "kv_group" in e.switches)
#: the entries that take a padding vector
PADDED = tuple(name for name, e in REGISTRY.items() if any(s.kind == Kind.PADDING for s in e.inputs))
#: the entries with a cross-attention over padded source positions (Algorithm 8's decoder)
SOURCE_PADDED = tuple(name for name, e in REGISTRY.items() if any(s.name == "pad_z" for s in e.inputs))

MUTANTS = [
    Mutant("rope-pairing-swapped", "RoPE pairs rows (i, i + d/2) (rotate_half) where interleaved pairs (2i, 2i+1) "
           "are declared: the classic pairing mix-up", ROTARY,
           source_edit(Edit(C, "rotate", "first, second = slice(0, d, 2), slice(1, d, 2)",
                            "first, second = slice(0, d // 2), slice(d // 2, d)")),
           source="Meta's interleaved LLaMA checkpoints run with Hugging Face's rotate_half (or the reverse) "
                  "without permuting W_q/W_k rows: the permute step of convert_llama_weights_to_hf, a frequent "
                  "porting bug (GPT-J vs GPT-NeoX rotary)",
           equivalence="equivalent when d_attn = 2 (one pair: both pairings are rows (0, 1)), and under "
                       "rotary = 'none' or 'half'",
           witness=Witness("attention", hyper={"d_attn": 4}, variant={"rotary": "interleaved"}),
           bench=("attention", "padded_d_transformer")),
    Mutant("kv-heads-tiled", "grouped-query attention: query head h reads kv head h mod H_kv (a tiled repeat) "
           "instead of ⌊h/G⌋ (repeat_interleave)", GROUPED,
           source_edit(Edit(C, "group_heads", "return h // G", "return h % (H // G)")),
           source="K.repeat(1, G, 1, 1) where Hugging Face's repeat_kv (repeat_interleave) is meant; "
                  "a frequent GQA porting bug",
           equivalence="equivalent when kv_group = 1 or H_kv = 1 (one kv head: multi-query attention), and "
                       "under kv_order = 'strided' (then the edit is a no-op)",
           witness=Witness("mh_attention", hyper={"H": 4, "d_attn": 2}, variant={"kv_group": 2}),
           bench=("mh_attention", "padded_self_attention")),
    Mutant("multi-query-read-as-kv-group", "multi-query attention (kv_heads='one') sized by kv_group alone: "
           "H key/value heads of their own expected where one is shared by every query head", GROUPED,
           source_edit(Edit(L, "gather_variant_mha", 'G = H if variant.kv_heads == "one" else variant.kv_group',
                            "G = variant.kv_group")),
           source="a Falcon-7B port that sizes its key/value heads from num_kv_heads, which FalconConfig sets to "
                  "num_attention_heads and FalconAttention reads only without multi_query (transformers 5.24: "
                  "num_kv_heads = 1 under multi_query); the checkpoint's one kv head then does not fit",
           equivalence="equivalent when H = 1 (the one kv head is the head's own) and under kv_heads = 'grouped'",
           witness=Witness("mh_attention", hyper={"H": 3, "d_attn": 2}, variant={"kv_heads": "one"}),
           bench=("causal_self_attention", "gpt2_layer")),
    Mutant("cache-position-off-by-one", "cached decoding embeds and rotates the new token at position t − 1 "
           "(the cache length minus one) instead of t", ("cached_decoding",),
           source_edit(Edit(A, "cached_decoding", "hyper, start=t, kv_caches=caches)",
                            "hyper, start=t - 1, kv_caches=caches)")),
           source="position_ids / cache_position computed as the cache length − 1 in a hand-written generate "
                  "loop (off-by-one positions after the prefill, a recurring KV-cache porting bug)",
           equivalence="equivalent when the model has no positions at all (positions = 'none' and "
                       "rotary = 'none'), and when n_prefill = ℓ (no decode step)",
           witness=Witness("cached_decoding", inputs={"n_prefill": 1}), bench=("cached_decoding",)),
    Mutant("padding-masks-queries", "the padding mask applied to queries (Mask[t_z, t_x] ∧ pad[t_x]) instead of "
           "keys (∧ pad[t_z])", PADDED,
           source_edit(Edit(L, "padded", "return base & pad[..., :, None]", "return base & pad[..., None, :]")),
           source="a [B, ℓ] attention_mask expanded on the wrong axis ([B, 1, ℓ, 1] instead of [B, 1, 1, ℓ]); "
                  "torch's key_padding_mask vs a query mask",
           equivalence="equivalent when no position is padding (pad all True)",
           witness=Witness("padded_causal_self_attention", inputs={"pad": [True, False, True]},
                           variant={"empty_query": "zeros"}),
           bench=("padded_causal_self_attention", "padded_e_transformer", "padded_encoder_layer", "padded_bert_layer",
                  "padded_gpt2_layer")),
    Mutant("cross-attention-ignores-source-padding", "the decoder's cross-attention reads every source "
           "position: the encoder's padding mask is not passed on to it (Alg. 8 line 16 without ∧ pad_z[t_z])",
           SOURCE_PADDED,
           source_edit(Edit(L, "decoder_layer_fwd", 'cross_mask = padded(None, pad_z, ell_z, ell_x, name="pad_z")',
                            "cross_mask = None")),
           source="an encoder-decoder port that masks the encoder's self-attention but calls the decoder with "
                  "encoder_attention_mask=None (the cross-attention then attends to the source's padding)",
           equivalence="equivalent when no source position is padding (pad_z all True)",
           witness=Witness("padded_decoder_layer", inputs={"pad_z": [True, False, False, True]}),
           bench=("padded_decoder_layer", "padded_ed_transformer")),
]
