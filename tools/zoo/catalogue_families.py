"""Mutants of the conventions of the model families after LLaMA (issue 38): Mistral's sliding-window
causal attention (``window``), Gemma's RMSNorm gain 1 + γ (``norm_gain``), GPT-NeoX's parallel
residual (``residual``), BLOOM's and MPT's ALiBi (``position_bias``) and GPT-NeoX's partial rotary
(``rotary_fraction``). Each is a one-line source edit of the NumPy plugin's own helper, so every entry
built on the helper inherits it."""

from __future__ import annotations

from ftspec.spec.registry import REGISTRY

from .groups import C, L
from .injection import Edit, Mutant, Witness, source_edit

#: the entries that build a causal mask, which the sliding window narrows
WINDOWED = tuple(name for name, e in REGISTRY.items() if "window" in e.switches)
#: the entries whose pre-LN layers may run their sublayers in parallel
PARALLEL = tuple(name for name, e in REGISTRY.items() if "residual" in e.switches)
#: the entries with a norm whose gain the switch sets (every norm with a γ)
GAINED = tuple(name for name, e in REGISTRY.items() if "norm_gain" in e.switches)
#: the entries with a causal self-attention, whose scores ALiBi biases
BIASED = tuple(name for name, e in REGISTRY.items() if "position_bias" in e.switches)
#: the entries whose queries and keys RoPE may rotate in part
PARTIAL = tuple(name for name, e in REGISTRY.items() if "rotary_fraction" in e.switches)

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
]
