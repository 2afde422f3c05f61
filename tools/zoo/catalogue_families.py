"""Mutants of the conventions of the model families after LLaMA: Mistral's sliding-window
causal attention (``window``), Gemma's RMSNorm gain 1 + γ (``norm_gain``), GPT-NeoX's parallel
residual (``residual``), BLOOM's and MPT's ALiBi (``position_bias``), GPT-NeoX's partial rotary
(``rotary_fraction``), Qwen3's and Gemma 3's QK-norm (``qk_norm``), Gemma 2's soft caps
(``attn_softcap``, ``logit_softcap``), Gemma 2 27B's query scale 1/√(d_model/H) (``attn_scale``),
Llama 3.1's and linear RoPE scaling (``rope_scaling``), Gemma 2's sandwich norms
(``norm_placement="sandwich"``) and Gemma 2's and 3's local and global layers (``global_every``,
``rope_local_base``), and a sparse mixture of experts' routing (``moe_topk_norm``: Mixtral's
renormalised weights, Qwen2-MoE's plain ones; the number of experts chosen; ties refused), BART's
two position tables (``ed_positions``: the decoder reading the encoder's), and T5's one relative-bias table
per stack (``rel_bias`` in the encoder-decoder: each layer reading a table of its own, or the decoder the
encoder's); Phi-3's LongRoPE (``rope_factors``: the factors multiplying the frequencies, the attention
factor on cos alone). Each is
a source edit of the NumPy plugin's own helper (one line, or a block moved), so every entry built on the
helper inherits it."""

from __future__ import annotations

from ftspec.spec.registry import REGISTRY

from .groups import A, C, GC, L
from .injection import Edit, Mutant, Witness, source_edit

#: the entries that build a causal mask, which the sliding window narrows
WINDOWED = tuple(name for name, e in REGISTRY.items() if "window" in e.switches)
#: the entries whose pre-LN layers may run their sublayers in parallel
PARALLEL = tuple(name for name, e in REGISTRY.items() if "residual" in e.switches)
#: the entries with a norm whose gain the switch sets (every norm with a γ)
GAINED = tuple(name for name, e in REGISTRY.items() if "norm_gain" in e.switches)
#: the padded models, whose positions the switch may count among the real tokens (``pad_positions``)
PAD_COUNTED = tuple(name for name, e in REGISTRY.items() if "pad_positions" in e.switches)
#: the count of the NumPy plugin's ``components.real_positions``: the real tokens before each position
_REAL_COUNT = "    return np.cumsum(flags, axis=-1) - flags  # exclusive count: a token does not count itself\n"
#: the encoder-decoder models that may give the target its own learned position table (``ed_positions``)
TWO_TABLES = tuple(name for name, e in REGISTRY.items() if "ed_positions" in e.switches)
#: the NumPy plugin's choice of the target's table in ``ed_logits_fwd``
_DEC_TABLE = '    dec_table = "W_p_dec" if variant.ed_positions == "separate" else "W_p"\n'
#: the encoder-decoder models whose stacks each share one T5 bias table (``rel_bias``, issue 38)
T5_STACKS = tuple(name for name, e in REGISTRY.items() if "rel_bias" in e.switches and "L_enc" in e.hyper)
#: the NumPy plugin's choice, in ``ed_logits_fwd``, of the table each stack's layers read: their first layer's
_ENC_TABLE, _DEC_TABLE_T5 = 'table="enc_layers.0.attn."', 'table="dec_layers.0.self_attn."'
#: the entries with a causal self-attention, whose scores ALiBi biases
BIASED = tuple(name for name, e in REGISTRY.items() if "position_bias" in e.switches)
#: the entries whose queries and keys RoPE may rotate in part
PARTIAL = tuple(name for name, e in REGISTRY.items() if "rotary_fraction" in e.switches)
#: the entries whose layers' attention may normalise each head's queries and keys (QK-norm)
QK_NORMED = tuple(name for name, e in REGISTRY.items() if "qk_norm" in e.switches)
#: the entries whose attention scores may be soft-capped
CAPPED = tuple(name for name, e in REGISTRY.items() if "attn_softcap" in e.switches)
#: ... of them, those with a masked key on some path (a causal or padding mask, a Mask input): without
#: one, capping after the mask is capping before it. The bidirectional unpadded ones are left out.
_UNMASKED = {"self_attention", "encoder_layer", "bert_layer", "basic_single_query_attention"} | \
    {name for name in REGISTRY if name.startswith("e_") or name == "next_token_encoder"}
CAPPED_MASKED = tuple(name for name in CAPPED if name not in _UNMASKED)
#: the entries whose RoPE frequencies may be rescaled (every attention RoPE may rotate)
ROPE_SCALED = tuple(name for name, e in REGISTRY.items() if "rope_scaling" in e.switches)
#: Llama 3.1's scaling where its bands reach the drawn widths (base 500000: d_attn 4 blends pair 1)
_LLAMA31 = {"rotary": "half", "rope_base": 500000.0, "rope_scaling": "llama3"}
#: the final lines of the NumPy plugin's ``rope_frequencies`` (llama3's three bands)
_SLOWED = "    slowed = np.where(wavelength > context / low_factor, theta / factor, blended)\n"
_KEPT = "    return np.where(wavelength < context / high_factor, theta, slowed)\n"
#: the entries with a multi-head attention (H heads) whose scores' scale the switch sets, Algorithm 5 first:
#: the per-head scale √(d_model/H) is √d_model at Algorithms 3 and 4 (one head), so they are left out
PER_HEAD_SCALED = tuple(sorted((name for name, e in REGISTRY.items() if "attn_scale" in e.switches and "H" in e.hyper),
                               key=lambda n: n != "mh_attention"))
#: the per-head branch of the NumPy plugin's ``components._divisor``
_PER_HEAD = "        return d_model / heads\n"
#: the entries whose final logits may be soft-capped (the unembedding and every model)
LOGIT_CAPPED = tuple(name for name, e in REGISTRY.items() if "logit_softcap" in e.switches)
#: the entries whose layers may wrap each sublayer in two norms (Gemma 2's sandwich), the GPT-2 layer
#: first (its default search is the bench's and the test's)
SANDWICHED = tuple(sorted((name for name, e in REGISTRY.items() if "norm_placement" in e.switches),
                          key=lambda n: n != "gpt2_layer"))
#: the output norm of the NumPy plugin's sandwich block (``layers._residual_fwd``) and its residual sum
_OUT_NORM = '            y, out_cache = norm_fwd(y, params, gamma + "_out", beta + "_out", variant)\n'
_OUT_SUM = "        out = X + y\n"
#: the decoder-only models, whose stacks may take local and global layers in turn (Algorithm 10 first: its
#: default search is the bench's and the test's)
ALTERNATING = tuple(sorted((name for name, e in REGISTRY.items() if "global_every" in e.switches),
                           key=lambda n: n != "d_transformer"))
#: Gemma 2's alternation with Gemma 3's two bases: the least window that drops a key, layer 0 local (its
#: base 10000), layer 1 global (base 1000000); d_attn 4 so that a second RoPE pair turns by a base
_GEMMA3_LAYERS = {"rotary": "half", "rope_base": 1000000.0, "window": 2, "global_every": 2,
                  "rope_local_base": 10000.0}
_GLOBAL_RULE = "    is_global = (l + 1) % k == 0\n"
_GLOBAL_SET = "        return variant.replace(window=0)\n"

#: QK-norm's block in ``components.attention_fwd`` and the rotation after it: the mutant moves the block
_QK_BLOCK = (
    '    if qk_gains is not None:  # QK-norm: RMSnorm over each head\'s width, before RoPE\n'
    '        Q, q_cache = norm_fwd(Q, qk_gains[0], None, variant, "rms_norm")\n'
    '        K, k_cache = norm_fwd(K, qk_gains[1], None, variant, "rms_norm")\n'
    '        qk_norms = (q_cache, k_cache)\n')
#: QK-norm over all heads' rows at once (OLMo 2's q_norm of width H·d_attn): each (..., heads, d_attn, ℓ)
#: stack flattened to (..., heads·d_attn, ℓ) around the norm, the gain tiled over the heads, forward and
#: backward alike (the tiled gain's gradient, reshaped per head, is summed over the heads as before)
_FLAT_FWD = [Edit(C, "attention_fwd",
                  f'        {M}, {m}_cache = norm_fwd({M}, qk_gains[{i}], None, variant, "rms_norm")\n',
                  f"        {M}, {m}_cache = norm_fwd({M}.reshape({M}.shape[:-3] + (-1, {M}.shape[-1])), "
                  f'np.tile(qk_gains[{i}], {M}.shape[-3]), None, variant, "rms_norm")\n'
                  f"        {M} = {M}.reshape({M}.shape[:-2] + (-1, d_attn, {M}.shape[-1]))\n")
             for i, (M, m) in enumerate((("Q", "q"), ("K", "k")))]
_FLAT_BWD = [Edit(GC, "attention_bwd", f"        d{M}, dgamma_{m}, _ = norm_bwd(d{M}, c.qk_norms[{i}])\n",
                  f"        d{M}, dgamma_{m}, _ = norm_bwd(d{M}.reshape(d{M}.shape[:-3] + (-1, d{M}.shape[-1])), "
                  f"c.qk_norms[{i}])\n"
                  f"        d{M} = d{M}.reshape(d{M}.shape[:-2] + (-1, c.K.shape[-2], d{M}.shape[-1]))\n"
                  f"        dgamma_{m} = dgamma_{m}.reshape(dgamma_{m}.shape[:-1] + (-1, c.K.shape[-2]))\n")
             for i, (M, m) in enumerate((("Q", "q"), ("K", "k")))]
_ROTATED = ('        K = rotate(K, pos_k, rotary, variant.rope_base, rows=rows, scaling=variant.rope_scaling, '
            'longrope=longrope)\n'
            '    if kv_cache is not None:')
#: the entries that hold LongRoPE's factors (``rope_factors``, spec 2.17), and the lines of the NumPy plugin's
#: ``rope_tables`` its mutants edit: the frequencies 1/(e_i·base^(2i/r)), the attention factor on both tables
LONGROPE = tuple(name for name, e in REGISTRY.items() if "rope_factors" in e.switches)
_LONGROPE_THETA = ("        theta = 1.0 / (ext * np.power(float(base), np.arange(0, d, 2, dtype=np.float64) "
                   "/ float(d)))\n")
_LONGROPE_GAIN = "    return (gain * np.cos(angle)).astype(dtype), (gain * np.sin(angle)).astype(dtype)\n"
_PHI3 = {"rotary": "half", "rope_factors": "longrope"}

#: the entries with a sparse mixture of experts (spec 2.11), and the NumPy plugin's module of it
EXPERTS = tuple(name for name, e in REGISTRY.items() if "moe_topk_norm" in e.switches)
MOE = "ftspec.impls.numpy.moe"
#: the lines of ``moe.router_weights`` the mixture-of-experts mutants edit
_RENORMALISED = ("        weights = weights / np.sum(weights, axis=-2, keepdims=True)"
                 "  # Mixtral: Σ over the chosen = 1\n")
_CHOSEN_WEIGHTS = "    weights = np.where(chosen, P, np.zeros_like(P))\n"
_CHOSEN = "    np.put_along_axis(chosen, order[..., :k, :], True, axis=-2)\n"
_TIE_CHECK = "    if k < E and np.any((ranked[..., k - 1, :] == ranked[..., k, :]) & (ranked[..., k, :] > 0)):\n"

MUTANTS = [
    Mutant("window-off-by-one", "the sliding window keeps W + 1 keys, t_x − W ≤ t_z ≤ t_x, instead of W "
           "(t_x − W < t_z ≤ t_x: Hugging Face's kv_idx > q_idx − sliding_window)", WINDOWED,
           source_edit(Edit(C, "unidirectional_mask", "(t_z > last - window)", "(t_z >= last - window)")),
           source="the inclusive bound q_idx − kv_idx ≤ W of public flex_attention sliding-window masks "
                  "(e.g. zinccat/flaxattention masks/sliding_window.py) against Hugging Face's exclusive "
                  "kv_idx > q_idx − sliding_window (transformers masking_utils.sliding_window_overlay)",
           equivalence="equivalent under window = 0 (no window) and when no query has a key W places back "
                       "(ℓ ≤ W for self-attention: the extra key does not exist)",
           witness=Witness("causal_self_attention", hyper={"ell": 4}, variant={"window": 2}),
           bench=("causal_self_attention", "cached_decoding")),
    Mutant("norm-gain-one-missing", "the norm multiplies by γ where Gemma's 1 + γ is declared: a Gemma "
           "checkpoint run through a Llama RMSNorm", GAINED,
           source_edit(Edit(C, "norm_fwd", "gamma = 1 + gamma", "gamma = gamma")),
           source="Hugging Face's GemmaRMSNorm computes output * (1.0 + weight) where LlamaRMSNorm computes "
                  "weight * output; converters that reuse a Llama norm must add 1 to Gemma's norm weights, and "
                  "a port that forgets it scales every normalised column by γ ≈ 0",
           equivalence="equivalent under norm_gain = 'gamma' and affine = 'none' (no γ to offset)",
           witness=Witness("rms_norm", variant={"norm_gain": "one_plus_gamma"}),
           bench=("rms_norm", "d_transformer")),
    Mutant("parallel-residual-ignored", "GPT-NeoX's parallel residual computed sequentially, X + Attn(N₁X) then "
           "+ MLP(N₂(·)), where X + (Attn(N₁X) + MLP(N₂X)) is declared (GPT-J's shared-norm form kept)", PARALLEL,
           source_edit(Edit(L, "stack_layer_fwd", 'if variant.residual != "sequential" and',
                            'if variant.residual == "parallel_shared" and')),
           source="GPTNeoXConfig.use_parallel_residual (True for Pythia and GPT-NeoX-20B) dropped by a port that "
                  "builds every layer the Llama way; Hugging Face's GPTNeoXLayer branches on it",
           equivalence="equivalent under residual = 'sequential' or 'parallel_shared'",
           witness=Witness("gpt2_layer", variant={"residual": "parallel"}),
           bench=("gpt2_layer", "d_transformer")),
    Mutant("alibi-slopes-power-of-two", "ALiBi's slopes computed as 2^(−8(h+1)/H) for every H, where Press et "
           "al.'s rule for H not a power of two takes the slopes of n = 2^⌊log₂ H⌋ heads, then every other "
           "slope of 2n heads", BIASED,
           source_edit(Edit(C, "alibi_slopes", "n = 2 ** int(math.floor(math.log2(H)))", "n = H")),
           source="MLX's nn.ALiBi computed (2**8)**(−k/num_heads) for every head count until ml-explore/mlx "
                  "PR #3071 (issue #343: wrong for non-power-of-two heads); Press et al.'s text (p. 5: 'for n "
                  "heads ... the geometric sequence that starts at 2^(−8/n)') reads as that formula, their code, "
                  "BLOOM's and MPT's do not (baichuan-inc/Baichuan2 issue #225)",
           equivalence="equivalent under position_bias = 'none' and for H a power of two (1, 2, 4, 8, ...)",
           witness=Witness("causal_self_attention", hyper={"H": 3}, variant={"position_bias": "alibi"}),
           bench=("causal_self_attention", "d_transformer")),
    Mutant("partial-rotary-wrong-slice", "partial rotary applied to the last r = ⌊f·d_attn⌋ rows of each head's "
           "query and key instead of the first (GPT-NeoX's q[..., :rotary_ndims])", PARTIAL,
           source_edit(Edit(C, "rotate", "lead = slice(0, d)", "lead = slice(width - d, width)")),
           source="Hugging Face's GPT-NeoX, Phi and GPT-J rotate q[..., :rotary_ndims] and pass q[..., rotary_ndims:]; "
                  "the rotated and passed parts are easily swapped when a port splits the head with one "
                  "slice and concatenates them back in the other order",
           equivalence="equivalent under rotary = 'none' and rotary_fraction = 1 (r = d_attn: every row)",
           witness=Witness("causal_self_attention", hyper={"d_attn": 4},
                           variant={"rotary": "half", "rotary_fraction": 0.5}),
           bench=("causal_self_attention", "d_transformer")),
    # bench: the entry whose default search kills it (a whole model's 40 examples draw the convention
    # too rarely: ``ftspec bench power`` of 2026-12-07 left d_transformer and d_loss alive)
    Mutant("qk-norm-after-rotary", "QK-norm applied to the rotated query and key, RoPE first, where Qwen3 and "
           "Gemma 3 normalise the projections and rotate the result: the per-dimension gains γ_q, γ_k then act "
           "on rotated coordinates", QK_NORMED,
           source_edit(Edit(C, "attention_fwd", _QK_BLOCK, ""),
                       Edit(C, "attention_fwd", _ROTATED, _ROTATED.replace(
                           "    if kv_cache", _QK_BLOCK.replace("before", "after") + "    if kv_cache"))),
           source="karpathy/nanochat's gpt.py rotates, then normalises q and k (issue #743, 2026: 'In Qwen3, they "
                  "apply QRMSNorm and KRMSNorm before rotation'); with its parameter-free norm the orders agree, "
                  "with Qwen3's learned gains they do not (Hugging Face transformers 5.24 Qwen3Attention: "
                  "q_norm(q_proj(·)), then apply_rotary_pos_emb)",
           equivalence="equivalent under qk_norm = 'none' or rotary = 'none', and where γ_q and γ_k are constant "
                       "vectors (a rotation keeps each pair's length, so the root mean square is unchanged; "
                       "Qwen3's gains start at ones)",
           witness=Witness("gpt2_layer", variant={"qk_norm": "rms", "rotary": "half"}),
           bench=("gpt2_layer",)),
    Mutant("qk-norm-over-all-heads", "QK-norm of each query and key over all heads' H·d_attn rows at once, "
           "the gain tiled over the heads, where Qwen3 and Gemma 3 normalise each head's d_attn rows on their "
           "own", QK_NORMED,
           source_edit(*_FLAT_FWD, *_FLAT_BWD),
           source="OLMo 2's convention carried into a Qwen3 port: Hugging Face transformers 5.24 Olmo2Attention "
                  "normalises q_proj's whole output (Olmo2RMSNorm(num_attention_heads * head_dim)) before the "
                  "head split, where Qwen3Attention's q_norm = Qwen3RMSNorm(head_dim) is applied after it (its "
                  "source's comment: 'unlike olmo, only on the head dim!')",
           equivalence="equivalent under qk_norm = 'none', and where every head's query (and key) columns "
                       "have the same root mean square (H = 1, or kv_group = H for the keys)",
           witness=Witness("gpt2_layer", variant={"qk_norm": "rms"}),
           bench=("gpt2_layer",)),
    Mutant("attn-softcap-after-mask", "the attention cap c·tanh(s/c) applied after the mask, where Gemma 2 caps "
           "the scaled scores and then masks: a masked score −∞ becomes −c, so every masked key gets weight",
           CAPPED_MASKED,
           source_edit(Edit(C, "attention_fwd", "        S = c * capped\n", "        S = S  # capped below\n"),
                       Edit(C, "attention_fwd", "        S = S / _const(math.sqrt(divisor), S)  # line 6: S / √d\n",
                            "        S = S / _const(math.sqrt(divisor), S)  # line 6: S / √d\n"
                            "    if cap:\n        S = c * np.tanh(S / c)  # after the mask\n")),
           source="a port that folds the mask into the scores as an additive bias first (the form attention "
                  "kernels take it in) and caps the sum; Hugging Face transformers 5.24 eager Gemma 2 "
                  "attention caps (attn_weights / softcap, tanh, * softcap) and only then adds attention_mask",
           equivalence="equivalent under attn_softcap = 0 and where no key is masked (bidirectional attention "
                       "without padding)",
           witness=Witness("causal_self_attention", variant={"attn_softcap": 2.0}),
           bench=("causal_self_attention",)),
    Mutant("attn-softcap-missing-outer-c", "the attention scores replaced by tanh(s/c), the outer factor c of "
           "c·tanh(s/c) left out: scores squeezed into (−1, 1) rather than capped at ±c", CAPPED,
           source_edit(Edit(C, "attention_fwd", "        S = c * capped\n", "        S = capped\n")),
           source="the three steps of Gemma 2's cap (Hugging Face transformers 5.24: / softcap, tanh, * softcap) "
                  "written as one tanh(s / softcap), the last multiplication dropped; constructed from the "
                  "definition, not seen in a public thread",
           equivalence="equivalent under attn_softcap = 0, and at a cap c = 1",
           witness=Witness("attention", variant={"attn_softcap": 2.0}),
           bench=("attention", "gpt2_layer")),
    Mutant("final-logit-softcap-missing", "the final logits left uncapped where Gemma 2's c·tanh(z/c) "
           "(final_logit_softcapping) is declared", LOGIT_CAPPED,
           source_edit(Edit(A, "unembed_logits_fwd", "    if variant.logit_softcap:\n", "    if False:\n")),
           source="llama.cpp's first Gemma 2 support (ggml-org/llama.cpp PR #8156) had neither cap, added by PR "
                  "#8197 ('adds the missing attention layer and final logit soft-capping'); vLLM's Transformers "
                  "backend applied the final cap only from PR #52173; NVIDIA-NeMo/Megatron-Bridge issue #4610 "
                  "(Gemma 4 dense models without the final cap)",
           equivalence="equivalent under logit_softcap = 0",
           witness=Witness("unembedding", variant={"logit_softcap": 2.0}),
           bench=("unembedding",)),
    Mutant("query-scale-head-dim", "the scores divided by √d_attn (head_dim) where Gemma 2 27B's "
           "1/√(d_model/H) is declared (query_pre_attn_scalar = hidden_size/num_attention_heads = 144 with "
           "head_dim 128)", PER_HEAD_SCALED,
           source_edit(Edit(C, "_divisor", _PER_HEAD, "        return float(d_attn)\n")),
           source="ports that scale by head_dim**-0.5 as for Gemma 2 2B (query_pre_attn_scalar = head_dim = "
                  "256) and for most families, where transformers 5.24 Gemma2Attention uses "
                  "query_pre_attn_scalar**-0.5; constructed from the released configs, not seen in a public thread",
           equivalence="equivalent under attn_scale other than 'sqrt_d_model_per_head', and wherever d_model = "
                       "H·d_attn",
           witness=Witness("mh_attention", hyper={"d_attn": 3}, variant={"attn_scale": "sqrt_d_model_per_head"}),
           bench=("mh_attention",)),
    Mutant("query-scale-heads-forgotten", "the scores divided by √d_model, the heads' count left out of "
           "Gemma 2 27B's 1/√(d_model/H)", PER_HEAD_SCALED,
           source_edit(Edit(C, "_divisor", _PER_HEAD, "        return float(d_model)\n")),
           source="query_pre_attn_scalar read as the model width (hidden_size) rather than hidden_size / "
                  "num_attention_heads; constructed from the definition, not seen in a public thread",
           equivalence="equivalent under attn_scale other than 'sqrt_d_model_per_head', and at H = 1",
           witness=Witness("mh_attention", variant={"attn_scale": "sqrt_d_model_per_head"}),
           bench=("mh_attention",)),
    Mutant("llama3-rope-smoothing-missing", "Llama 3.1's RoPE scaling without its middle band: frequencies "
           "whose wavelength lies between 2048 and 8192 left unscaled, where the published rule blends θ/8 and θ "
           "by (1 − γ)·θ/8 + γ·θ, γ = (8192/λ − 1)/3", ROPE_SCALED,
           source_edit(Edit(C, "rope_frequencies", _SLOWED, _SLOWED.replace("blended)", "theta)"))),
           source="a two-band reading of rope_type 'llama3' (divide by factor above original_max_position_embeddings "
                  "/ low_freq_factor, keep the rest) against transformers 5.24 _compute_llama3_parameters, whose "
                  "is_medium_freq band is smoothed; constructed from the definition, not seen in a public thread",
           equivalence="equivalent under rope_scaling other than 'llama3', and where no rotated pair's wavelength "
                       "2π·base^(2i/r) lies in [2048, 8192] (base 10000 at r ≤ 4; base 500000 at r = 6)",
           witness=Witness("causal_self_attention", hyper={"d_attn": 4}, variant=_LLAMA31),
           bench=("causal_self_attention",)),
    Mutant("llama3-rope-factor-on-high-frequencies", "Llama 3.1's factor 8 applied to the high frequencies too: "
           "θ/8 for wavelengths below 2048, which the published rule keeps (so every position's fastest "
           "rotations are slowed as by linear scaling)", ROPE_SCALED,
           source_edit(Edit(C, "rope_frequencies", _KEPT, _KEPT.replace("theta, slowed", "theta / factor, slowed"))),
           source="linear scaling's inv_freq /= factor carried into a llama3 port for every band; transformers 5.24 "
                  "_compute_llama3_parameters keeps inv_freq where wavelen < high_freq_wavelen ('do nothing'); "
                  "constructed from the definition",
           equivalence="equivalent under rope_scaling other than 'llama3' (pair 0, θ = 1, wavelength 2π, is always "
                       "in the kept band, so it differs under llama3 at every width and base)",
           witness=Witness("causal_self_attention", hyper={"d_attn": 4}, variant=_LLAMA31),
           bench=("causal_self_attention",)),
    Mutant("linear-rope-scaling-inverted", "linear RoPE scaling applied the wrong way: positions multiplied by the "
           "factor 2 (θ·2) where position interpolation divides them (θ/2)", ROPE_SCALED,
           source_edit(Edit(C, "rope_frequencies", "        return theta / 2.0  # the angles of positions t/2\n",
                            "        return theta * 2.0  # the angles of positions 2·t\n")),
           source="Chen et al. 2023 (position interpolation) scale positions by L/L' < 1, transformers 5.24 "
                  "_compute_linear_scaling_rope_parameters divides inv_freq by factor; a port that multiplies "
                  "(reading 'factor' as a position multiplier) extrapolates instead; constructed from the definition",
           equivalence="equivalent under rope_scaling other than 'linear-2'",
           witness=Witness("causal_self_attention", hyper={"d_attn": 4},
                           variant={"rotary": "half", "rope_scaling": "linear-2"}),
           bench=("causal_self_attention",)),
    Mutant("sandwich-output-norm-after-residual", "Gemma 2's output norm applied to the residual sum, "
           "N'(X + f(N X)), where the sublayer's output is normalised before it is added, X + N'(f(N X)): "
           "the residual stream itself normalised, as in post-LN", SANDWICHED,
           source_edit(Edit(L, "_residual_fwd", _OUT_NORM, _OUT_NORM.replace("norm_fwd(y,", "norm_fwd(X + y,")),
                       Edit(L, "_residual_fwd", _OUT_SUM, _OUT_SUM.replace(
                           "X + y", "y if placement == 'sandwich' else X + y"))),
           source="Gemma 2's names read with post-LN's meaning: a 'post_attention_layernorm' is, in BERT and "
                  "the paper's post-LN layers, the norm of the residual sum; transformers 5.24 "
                  "Gemma2DecoderLayer.forward normalises the attention's output and then adds the residual "
                  "(hidden_states = residual + post_attention_layernorm(hidden_states)); constructed from "
                  "the definition, not seen in a public thread",
           equivalence="equivalent under every norm_placement other than 'sandwich'",
           witness=Witness("gpt2_layer", variant={"norm_placement": "sandwich"}),
           bench=("gpt2_layer",)),
    Mutant("sandwich-output-norm-gain-reused", "each sublayer's output norm computed with its input norm's "
           "γ and β (one norm module called twice), where Gemma 2 gives it its own "
           "(post_attention_layernorm, post_feedforward_layernorm)", SANDWICHED,
           source_edit(Edit(L, "_residual_fwd", _OUT_NORM, _OUT_NORM.replace('gamma + "_out", beta + "_out"',
                                                                             "gamma, beta"))),
           source="a port that keeps Llama's two norms per layer and applies each twice; transformers 5.24 "
                  "Gemma2DecoderLayer holds four RMSNorms (input_layernorm, post_attention_layernorm, "
                  "pre_feedforward_layernorm, post_feedforward_layernorm) with their own weights; constructed "
                  "from the definition, not seen in a public thread",
           equivalence="equivalent under every norm_placement other than 'sandwich', under affine = 'none', "
                       "and where each output norm's γ and β equal its input norm's (Gemma 2's norms all start "
                       "at weight 0, a gain of 1 + 0: a freshly initialised model cannot show it)",
           witness=Witness("gpt2_layer", variant={"norm_placement": "sandwich"}),
           bench=("gpt2_layer",)),
    Mutant("global-layers-off-by-one", "the global layers of a local/global stack counted from layer 0, "
           "l mod k = 0, where Gemma 2 and 3 make layer l global when (l + 1) mod k = 0: under Gemma 2's k = 2 "
           "the even layers attend to everything and the odd ones slide, the reverse of the checkpoint's",
           ALTERNATING,
           source_edit(Edit(A, "local_or_global", _GLOBAL_RULE, _GLOBAL_RULE.replace("(l + 1) % k", "l % k"))),
           source="transformers 5.24 Gemma2Config and Gemma3TextConfig: layer_types[i] = 'sliding_attention' if "
                  "bool((i + 1) % k) else 'full_attention' (k = 2; sliding_window_pattern 6), a 1-based count "
                  "over 0-based layer indices that a port easily reads as i % k; constructed from the "
                  "definition, not seen in a public thread",
           equivalence="equivalent under global_every = 0 or 1 and window = 0 (every layer alike)",
           witness=Witness("d_transformer", variant={"window": 2, "global_every": 2}),
           bench=("d_transformer",)),
    Mutant("local-rope-base-on-global-layers", "the local layers' RoPE base (Gemma 3's rope_local_base_freq "
           "10000) used by the global layers too, where they rotate with rope_theta (1000000): one rotary "
           "table for the whole stack", ALTERNATING,
           source_edit(Edit(A, "local_or_global", _GLOBAL_SET, _GLOBAL_SET.replace(
               "window=0)", "window=0, rope_base=variant.rope_local_base or variant.rope_base)"))),
           source="transformers 5.24 Gemma3TextModel builds a rotary embedding per layer type "
                  "(rope_parameters['sliding_attention'] and ['full_attention']) and passes each layer its "
                  "type's; a port that builds one table, as for Gemma 2 (one rope_theta for all layers), from "
                  "the local base; constructed from the definition, not seen in a public thread",
           equivalence="equivalent under rope_local_base = 0 or equal to rope_base, rotary = 'none', and where "
                       "no layer is global (global_every = 0, window = 0, or fewer than global_every layers)",
           witness=Witness("d_transformer", hyper={"d_attn": 4}, variant=_GEMMA3_LAYERS),
           bench=("d_transformer",)),
    Mutant("moe-topk-not-renormalised", "a mixture of experts' chosen weights left as the router's p_i where "
           "Mixtral's renormalised p_i / Σ_chosen p_j is declared (moe_topk_norm): the output shrinks by the "
           "chosen experts' share of the probability", EXPERTS,
           source_edit(Edit(MOE, "router_weights", _RENORMALISED, "        weights = weights\n")),
           source="transformers 5.24: MixtralTopKRouter always renormalises (router_top_value /= "
                  "router_top_value.sum()), Qwen2MoeTopKRouter only under norm_topk_prob, False by default: a "
                  "Mixtral checkpoint run through Qwen2-MoE's block with the default config computes this",
           equivalence="equivalent under moe_topk_norm = False, and where k = E (every expert chosen: the "
                       "weights already sum to 1)",
           witness=Witness("moe_mlp", variant={"moe_topk_norm": True}),
           bench=("moe_mlp",)),
    Mutant("moe-softmax-over-chosen", "a mixture of experts' router softmax taken over the k chosen logits "
           "alone, where the softmax over all E experts is declared (moe_topk_norm = False, Qwen2-MoE's "
           "default): the chosen weights then sum to 1", EXPERTS,
           source_edit(Edit(MOE, "router_weights", _CHOSEN_WEIGHTS, _CHOSEN_WEIGHTS.replace(
               "np.where(chosen, P,", "np.where(chosen, C.softmax_columns(np.where(chosen, R, -np.inf)),"))),
           source="Mistral's reference code (mistralai/mistral-src moe.py, MoeLayer.forward: torch.topk of the gate "
                  "logits, then F.softmax over the k chosen) and Shazeer et al. 2017's softmax(KeepTopK(H(x), k)): "
                  "routing copied from them into a block declared as Qwen2-MoE's (norm_topk_prob=False)",
           equivalence="equivalent under moe_topk_norm = True (the same weights: Mixtral's renormalisation), "
                       "and where k = E",
           witness=Witness("moe_mlp"),
           bench=("moe_mlp",)),
    Mutant("moe-top-k-off-by-one", "a mixture of experts routes each token to its k − 1 largest experts "
           "instead of k (an exclusive bound read as inclusive)", EXPERTS,
           source_edit(Edit(MOE, "router_weights", _CHOSEN, _CHOSEN.replace(":k,", ":k - 1,"))),
           source="constructed from the definition (top_k = num_experts_per_tok, a count, against an index "
                  "bound), not seen in a public thread",
           equivalence="never equivalent: every token loses its k-th expert's share",
           witness=Witness("moe_mlp"),
           bench=("moe_mlp",)),
    Mutant("moe-tie-picked", "a router tie across the top-k boundary settled by expert index instead of "
           "refused: the chosen experts are then the implementation's choice, not the mathematics'", EXPERTS,
           source_edit(Edit(MOE, "router_weights", _TIE_CHECK, _TIE_CHECK.replace("if k < E and", "if False and"))),
           kind="behaviour",
           source="transformers 5.24 MixtralTopKRouter and Qwen2MoeTopKRouter call torch.topk, whose order among "
                  "equal values is unspecified (torch.topk documentation), and neither checks for ties",
           equivalence="equivalent on every case without a tie across the boundary (k = E, or distinct "
                       "logits): caught by the refusal check",
           witness=Witness("moe_mlp", params={"W_g": 0.0}),
           bench=("moe_mlp",)),
    Mutant("pad-positions-by-index", "positions counted by the column's index where the padded model declares "
           "them counted among the real tokens (pad_positions = 'real'): W_p[:, t] and ALiBi's t_z − t_x "
           "read through the padding", PAD_COUNTED,
           source_edit(Edit(C, "real_positions", _REAL_COUNT, "    return np.cumsum(np.ones_like(flags), axis=-1) - 1"
                                                              "  # the index\n")),
           source="transformers 5.24: OPTLearnedPositionalEmbedding and BLOOM's build_alibi_tensor count positions "
                  "with attention_mask.cumsum, Llama's forward with arange (cache_position); an OPT or BLOOM port "
                  "that takes the Llama path, or left-pads for generate, meets the difference",
           equivalence="equivalent under pad_positions = 'index', without padding, with trailing padding alone "
                       "(every real token's count is its index), and under ALiBi without a learned or sinusoidal "
                       "position where no padding lies between two real tokens (a shift that cancels)",
           witness=Witness("padded_d_transformer", variant={"pad_positions": "real", "empty_query": "uniform"},
                           inputs={"pad": [False, True, True, True]}),
           bench=("padded_d_transformer",)),
    Mutant("decoder-reads-encoder-positions", "the target embedded with the encoder's learned position table W_p "
           "where the model declares a table of its own for it (ed_positions = 'separate': W_p_dec)", TWO_TABLES,
           source_edit(Edit(A, "ed_logits_fwd", _DEC_TABLE, '    dec_table = "W_p"  # the encoder\'s table\n')),
           source="transformers 5.24: BartEncoder.embed_positions and BartDecoder.embed_positions are two "
                  "BartLearnedPositionalEmbedding; a port that builds one table and hands it to both stacks "
                  "(as the paper's Algorithm 8 does) meets the difference when loading BART's checkpoints",
           equivalence="equivalent under ed_positions = 'shared', under a sinusoid (one fixed table), and where "
                       "W_p_dec equals W_p",
           witness=Witness("ed_transformer", variant={"ed_positions": "separate"}),
           bench=("ed_transformer",)),
    Mutant("longrope-factors-multiplied", "Phi-3's LongRoPE factors multiplying RoPE's frequencies (θ_i·e_i, "
           "positions stretched) where they divide them (θ_i/e_i: inv_freq = 1/(ext_factors·base^(2i/r)), "
           "positions interpolated)", LONGROPE,
           source_edit(Edit(C, "rope_tables", _LONGROPE_THETA,
                            "        theta = ext / np.power(float(base), np.arange(0, d, 2, dtype=np.float64) "
                            "/ float(d))\n")),
           source="LongRoPE (Ding et al. 2024) calls its per-dimension factors rescale factors λ_i of the "
                  "positions (θ_i/λ_i); transformers 5.24 _compute_longrope_parameters divides: inv_freq = 1.0 / "
                  "(ext_factors * base**inv_freq_shape); a port that reads them as frequency multipliers "
                  "computes the reciprocal scaling; constructed from the definition",
           equivalence="equivalent under rope_factors = 'none' or rotary = 'none', and where every factor is 1",
           witness=Witness("causal_self_attention", hyper={"d_attn": 4}, variant=_PHI3),
           bench=("causal_self_attention",)),
    Mutant("longrope-attention-factor-on-cos-only", "LongRoPE's attention factor m applied to the cosine table "
           "alone, where Phi3RotaryEmbedding multiplies cos and sin alike (a rotated pair then (m·a cos − b sin, "
           "m·b cos + a sin): no longer m times a rotation)", LONGROPE,
           source_edit(Edit(C, "rope_tables", _LONGROPE_GAIN,
                            "    return (gain * np.cos(angle)).astype(dtype), np.sin(angle).astype(dtype)\n")),
           source="transformers 5.24 models/phi3/modeling_phi3.py Phi3RotaryEmbedding.forward: cos = emb.cos() * "
                  "self.attention_scaling, sin = emb.sin() * self.attention_scaling; constructed from the "
                  "definition",
           equivalence="equivalent under rope_factors = 'none' or rotary = 'none', and where m = 1 (at position 0, "
                       "sin = 0, so a one-token sequence shows nothing)",
           witness=Witness("causal_self_attention", hyper={"d_attn": 4}, variant=_PHI3),
           bench=("causal_self_attention",)),
    Mutant("t5-table-per-layer", "each layer of a T5 stack reading a relative-bias table of its own where the "
           "stack has one, its first layer's (rel_bias = 't5_buckets' in the encoder-decoder): the later layers, "
           "holding none, add no bias", T5_STACKS,
           source_edit(Edit(A, "ed_logits_fwd", _ENC_TABLE, 'table=f"enc_layers.{l}.attn."'),
                       Edit(A, "ed_logits_fwd", _DEC_TABLE_T5, 'table=f"dec_layers.{l}.self_attn."')),
           source="transformers 5.24 T5Stack: only block 0 is built with has_relative_attention_bias, and "
                  "'We share the position biases between the layers - the first layer stores them'; a port that "
                  "composes T5Block's forward per layer without handing on position_bias adds the bias in the "
                  "first layer alone",
           equivalence="equivalent under rel_bias = 'none' and with one layer a stack",
           witness=Witness("ed_transformer", variant={"rel_bias": "t5_buckets", "rel_buckets": 6,
                                                      "rel_max_distance": 5}),
           bench=("ed_transformer",)),
    Mutant("t5-decoder-reads-encoder-table", "the decoder's self-attention biased from the encoder's relative-bias "
           "table (with causal buckets) where each stack has its own (rel_bias = 't5_buckets' in the "
           "encoder-decoder)", T5_STACKS,
           source_edit(Edit(A, "ed_logits_fwd", _DEC_TABLE_T5, _ENC_TABLE)),
           source="transformers 5.24: T5ForConditionalGeneration's encoder and decoder are two T5Stacks, each "
                  "block 0 holding its own relative_attention_bias; a port that builds one table for the model "
                  "meets the difference when loading a checkpoint",
           equivalence="equivalent under rel_bias = 'none' and where the two tables are equal",
           witness=Witness("ed_transformer", variant={"rel_bias": "t5_buckets", "rel_buckets": 6,
                                                      "rel_max_distance": 5}),
           bench=("ed_transformer",)),
]
