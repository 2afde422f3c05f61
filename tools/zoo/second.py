"""A second zoo of mutants, mostly bugs no catalogue switch describes (``ftspec bench diagnosis``).

The first zoo (``mutants.py``) was written alongside the diagnosis and the
first-divergence walk; this one is the held-out yardstick for both (a
diagnosis must never name a convention that is not the bug). Its bugs are
the slips real transformer code makes: index slips, wrong axes, a dropped or
reordered head, swapped parameters, off-by-one or transposed masks, missing or
doubled residuals, reversed concatenations, layout bugs, a loss off by one
position. A handful are catalogue conventions written differently from the
first zoo (a source edit where the first zoo swaps the variant, a different
helper, one layer kind only), so that "named right" is measured on code the
diagnosis was not tuned on.

Every bug is injected into the bundled NumPy plugin with the machinery of
``injection.py`` (mostly ``source_edit``: one exact piece of the plugin's own
code replaced, so everything built on it inherits the bug). The expectations
below are written by hand from each bug's description, never from running
the code under test:

- ``EXPECTED[id]``: the catalogue change the failure must be said to match
  (the syntax of ``CONVENTIONS`` in tools/bench/diagnosis.py), or ``None``
  for a bug no variant set describes: then no convention may be named;
- ``PLACES[id]``: for a bug inside a whole model, (model searched, where it
  first departs) in the syntax of ``DIVERGES`` (``divergence.expected_matches``:
  "layer 0/norm", "decoder layer 0/cross-attention", "final norm", "a|b" for
  either); ``{last}`` stands for the model's last layer (L − 1 of the case).

This zoo is separate from ``MUTANTS`` (``ftspec bench power`` and the first
zoo's tests do not see it).
"""

from __future__ import annotations

from typing import Any, Optional

from .groups import (
    ATTENTION_USERS, C, D, E, ED, EPS, L, LAYERS, MODELS, NEXT_TOKEN, NORM_USERS, SELF_ATTENTION, SOFTMAX_P, TR,
    W_LN, A,
)
from .injection import Edit, Mutant, Witness, source_edit

__all__ = ["EXPECTED", "PLACES", "SECOND", "second_mutant"]

#: entries built on layers.gather_mha / mh_attention_fwd (every multi-head user)
MHA_USERS = ("mh_attention",) + SELF_ATTENTION + LAYERS + MODELS
#: entries whose self-attention takes the layers' causal mask
CAUSAL_LAYERS = ("gpt2_layer", "decoder_layer") + ED + D
#: entries built on RMSnorm or layer norm (the norm switch reaches every layer)
ANY_NORM = ("layer_norm", "rms_norm") + LAYERS + MODELS
#: entries whose unembedding goes through architectures.unembed_logits_fwd
UNEMBED_USERS = SOFTMAX_P + ("ed_loss", "e_loss", "d_loss", "ed_gradient", "e_gradient", "d_gradient",
                             "ed_sgd_step", "e_sgd_step", "d_sgd_step", "ed_training", "e_training", "d_training")

def _m(id: str, description: str, breaks: tuple[str, ...], *edits: Edit, source: str,
       bench: tuple[str, ...] = (), witness: Optional[Witness] = None, note: str = "",
       equivalence: str = "") -> Mutant:
    """One source-edit mutant of the NumPy plugin (numerics, float64 and float32)."""
    return Mutant(id, description, breaks, source_edit(*edits), source=source, bench=bench,
                  witness=witness or Witness(), note=note, equivalence=equivalence)


# ======================================================================== attention (Algorithm 4)
_ATTENTION = [
    _m("attn-qk-bias-swapped", "b_q added to the keys and b_k to the queries (the two bias names swapped)",
       ATTENTION_USERS,
       Edit(C, "attention_fwd", "Q = Q + b_q[..., None]  # + b_q 1ᵀ", "Q = Q + b_k[..., None]  # + b_q 1ᵀ"),
       Edit(C, "attention_fwd", "K = K + b_k[..., None]  # + b_k 1ᵀ", "K = K + b_q[..., None]  # + b_k 1ᵀ"),
       source="copy-paste of the q/k projection lines in a hand-written attention",
       bench=("attention",), witness=Witness("attention"),
       note="b_k cancels in the correct softmax (constant over keys); swapped, b_k acts as a query bias"),
    _m("attn-softmax-whole-matrix", "attention softmax normalised over the whole ℓ_z × ℓ_x score matrix",
       ATTENTION_USERS,
       Edit(C, "attention_fwd", "col_max = np.max(S, axis=-2, keepdims=True)",
            "col_max = np.max(S, axis=(-2, -1), keepdims=True)"),
       Edit(C, "attention_fwd", "total = np.sum(E, axis=-2, keepdims=True)",
            "total = np.sum(E, axis=(-2, -1), keepdims=True)"),
       source="softmax over a flattened score tensor (a reshape before the softmax)",
       bench=("attention",), witness=Witness("attention"), equivalence="equivalent when ℓ_x = 1"),
    _m("attn-softmax-row-max", "attention softmax subtracts each key's (row) max instead of each query's "
       "(column) max before normalising over the keys", ATTENTION_USERS,
       Edit(C, "attention_fwd", "col_max = np.max(S, axis=-2, keepdims=True)",
            "col_max = np.max(S, axis=-1, keepdims=True)"),
       source="the stabilising max taken along the other axis than the sum (half a layout fix)",
       bench=("attention",), witness=Witness("attention")),
    _m("attn-scores-transposed", "scores computed as QᵀK ([query, key], the row layout) and used as [key, query]",
       ATTENTION_USERS,
       Edit(C, "attention_fwd", "S = np.swapaxes(K, -1, -2) @ Q", "S = np.swapaxes(Q, -1, -2) @ K"),
       source="a row-layout attention (scores = q @ k.T) ported into the paper's column layout",
       bench=("gpt2_layer",), witness=Witness("gpt2_layer"),
       note="raises unless ℓ_x = ℓ_z (square scores): searched on a self-attention layer"),
    _m("attn-value-bias-missing", "b_v never added to the values (the other attention biases are)",
       ATTENTION_USERS,
       Edit(C, "attention_fwd", "V = V + b_v[..., None]  # + b_v 1ᵀ", "pass  # + b_v 1ᵀ"),
       source="a v_proj built with bias=False where the model's other projections have one",
       bench=("attention",), witness=Witness("attention")),
]

# ======================================================================== multi-head attention (Algorithm 5)
_MHA = [
    _m("mha-wq-wk-swapped", "every head's query projection uses W_k and its key projection W_q", MHA_USERS,
       Edit(L, "gather_mha", 'stack("W_q"), stack("b_q") if bias else None,',
            'stack("W_k"), stack("b_q") if bias else None,'),
       Edit(L, "gather_mha", 'stack("W_k"), stack("b_k") if bias else None,',
            'stack("W_q"), stack("b_k") if bias else None,'),
       source="checkpoint loading that maps q_proj/k_proj to the wrong slots",
       bench=("bert_layer",), witness=Witness("bert_layer"),
       note="raises in mh_attention unless d_x = d_z: searched on a self-attention layer"),
    _m("mha-last-head-dropped", "the last head left out of the output projection (W_o and Y sliced to H − 1 "
       "heads)", MHA_USERS,
       Edit(L, "mh_attention_fwd", "out = W.W_o @ Y  #",
            "out = W.W_o[:, :(H - 1) * d_mid] @ Y[..., :(H - 1) * d_mid, :]  #"),
       source="an off-by-one merge loop (for h in range(H - 1))",
       bench=("mh_attention",), witness=Witness("mh_attention")),
    _m("mha-heads-reversed", "heads concatenated in reverse order ([Y^H; …; Y^1])", MHA_USERS,
       Edit(L, "mh_attention_fwd", "Y = Y.reshape(Y.shape[:-3] + (H * d_mid, ell_x))",
            "Y = Y[..., ::-1, :, :].reshape(Y.shape[:-3] + (H * d_mid, ell_x))"),
       source="heads collected with insert(0, …) / a reversed stack",
       bench=("mh_attention",), witness=Witness("mh_attention"), equivalence="equivalent when H = 1"),
    _m("mha-heads-share-first-weights", "every head reads head 0's W_q, W_k, W_v and biases", MHA_USERS,
       Edit(L, "gather_mha", 'params[f"{prefix}heads.{h}.{leaf}"]', 'params[f"{prefix}heads.0.{leaf}"]'),
       source="a loop over heads that indexes a fixed head", bench=("mh_attention",),
       witness=Witness("mh_attention"), equivalence="equivalent when H = 1"),
    _m("mha-output-bias-missing", "b_o never added after W_o (the heads' biases are)", MHA_USERS,
       Edit(L, "mh_attention_fwd", "if W.b_o is not None:", "if False:"),
       source="an out_proj built with bias=False where q/k/v have biases",
       bench=("mh_attention",), witness=Witness("mh_attention")),
    _m("mha-value-bias-layout", "the stacked value biases (H, d_mid) filled feature-major (a transposed "
       "reshape)", MHA_USERS,
       Edit(L, "gather_mha", 'stack("b_v") if bias else None,', 'stack("b_v").T.reshape(H, -1) if bias else None,'),
       source="a fused qkv bias split with the head and feature axes in the wrong order",
       bench=("mh_attention",), witness=Witness("mh_attention"),
       equivalence="equivalent when H = 1 or d_mid = 1"),
    # -- catalogue conventions, written differently from the first zoo
    _m("mha-scale-dropped", "Algorithm 5 calls its heads without the 1/√d_attn scale (Algorithm 4 alone keeps "
       "it)", MHA_USERS,
       Edit(L, "mh_attention_fwd", "W.W_v, W.b_v, Mh, variant)",
            'W.W_v, W.b_v, Mh, variant.replace(attn_scale="none"))'),
       source="a multi-head path that calls a fused kernel with scale=1 on unscaled queries",
       bench=("mh_attention", "encoder_layer"), witness=Witness("mh_attention")),
    _m("mha-mask-inverted", "Algorithm 5 inverts the mask before its heads (True read as blocked)", MHA_USERS,
       Edit(L, "mh_attention_fwd", "Mh = None if Mask is None else Mask[..., None, :, :]",
            "Mh = None if Mask is None else ~Mask[..., None, :, :]"),
       source="a wrapper that converts SDPA's True = attend to nn.MultiheadAttention's True = blocked once too "
              "often",
       bench=("mh_attention",), witness=Witness("mh_attention", variant={"empty_query": "zeros"})),
]

# ======================================================================== norms (Algorithm 6)
_NORMS = [
    _m("ln-gamma-beta-swapped", "the norm's scale and shift swapped (β multiplies, γ is added)", ANY_NORM,
       Edit(L, "norm_fwd", "params[g_name] if g_name else None, params[b_name] if b_name else None,",
            "params[b_name] if b_name else None, params[g_name] if g_name else None,"),
       source="LayerNorm(weight, bias) called with positional arguments in the wrong order",
       bench=("layer_norm", "bert_layer"), witness=Witness("layer_norm")),
    _m("ln-divides-by-variance", "the norm divides by the variance instead of its square root", ANY_NORM,
       Edit(C, "norm_fwd", "root = sigma = np.sqrt(v)", "root = sigma = v"),
       Edit(C, "norm_fwd", "root = sigma = np.sqrt(v + eps)", "root = sigma = v + eps"),
       source="a forgotten sqrt (var used where std is meant)",
       bench=("layer_norm", "rms_norm"), witness=Witness("layer_norm")),
    _m("rms-norm-over-tokens", "RMSnorm's mean square taken over the tokens instead of the features",
       ("rms_norm",) + LAYERS + MODELS,
       Edit(C, "norm_fwd", "v = np.sum(X * X, axis=-2, keepdims=True) / _const(d, X)",
            "v = np.sum(X * X, axis=-1, keepdims=True) / _const(X.shape[-1], X)"),
       source="the row layout's mean(-1) applied to the paper's column layout",
       bench=("rms_norm",), witness=Witness("rms_norm")),
    _m("rms-norm-gamma-plus-one", "RMSnorm scales by 1 + γ (a checkpoint that stores γ − 1) where the model "
       "stores γ", ("rms_norm",) + LAYERS + MODELS,
       Edit(C, "norm_fwd", "out = out * gamma[:, None]",
            'out = out * (gamma[:, None] + _const(1.0 if kind == "rms_norm" else 0.0, X))'),
       source="Gemma-style RMSnorm code (x · (1 + w)) run on weights stored as w",
       bench=("rms_norm",), witness=Witness("rms_norm")),
    # -- catalogue conventions, written differently from the first zoo
    _m("ln-unbiased-via-np-var", "layer norm's variance from np.var(ddof=1) (torch.var's unbiased default)",
       NORM_USERS,
       Edit(C, "norm_fwd", "v = np.sum(centred * centred, axis=-2, keepdims=True) / _const(denom, X)",
            "v = np.var(X, axis=-2, ddof=1, keepdims=True)"),
       source="torch.var / torch.std default to the unbiased estimator",
       bench=("layer_norm", "decoder_layer"), witness=Witness("layer_norm")),
    _m("ln-epsilon-1e-6-source", "ε = 1e-6 added inside the root where the model has none (a literal in the "
       "code)", ANY_NORM,
       Edit(C, "norm_fwd", "root = sigma = np.sqrt(v)", "root = sigma = np.sqrt(v + _const(1e-6, X))"),
       source="Flax/T5 default ε = 1e-6 hard-coded in a port",
       bench=("layer_norm", "gpt2_layer"), witness=W_LN,
       note="a relative change of about 5e-7 on well-scaled columns: float32 sees it on small variances only"),
    _m("ln-epsilon-outside-via-std", "σ = std + ε where ε belongs inside the root (written as sqrt(v) + eps)",
       ANY_NORM,
       Edit(C, "norm_fwd", "root = sigma = np.sqrt(v + eps)", "root = np.sqrt(v); sigma = root + eps"),
       source="x.std() + eps in hand-written norms (the Annotated Transformer's form)",
       bench=("layer_norm",), witness=Witness("layer_norm", hyper=W_LN.hyper, inputs=W_LN.inputs, variant=EPS),
       note="differs only where the variant asked for puts ε inside the root"),
    _m("ln-shift-dropped", "layer norm without its shift β (LayerNorm(bias=False)) where the model has one",
       NORM_USERS,
       Edit(L, "norm_fwd", 'b_name = beta if variant.affine == "scale_shift" and kind == "layer_norm" else None',
            "b_name = None"),
       source="nn.LayerNorm(bias=False) (PyTorch ≥ 2.1) in a port of a model with β",
       bench=("layer_norm", "encoder_layer"), witness=Witness("layer_norm")),
]

# ======================================================================== embedding and unembedding
_EMBED = [
    _m("embedding-positions-right-aligned", "positions counted from the end: W_p[:, ℓ_max − ℓ + t] (left-padding "
       "code) instead of W_p[:, t]", ("embedding",) + MODELS,
       Edit(C, "embed_fwd", "X = X + table[:, :ell]", "X = X + table[:, ell_max - ell:]"),
       source="position ids computed for left-padded batches applied to unpadded sequences",
       bench=("embedding",), witness=Witness("embedding"), equivalence="equivalent when ℓ = ℓ_max"),
    _m("embedding-scale-after-positions", "the √d_e embedding scale applied after the positions are added (to "
       "both) instead of to the token embedding alone", ("embedding",) + MODELS,
       Edit(C, "embed_fwd", "X = X * _const(scale, X)  # (..., d_e, ℓ)", "pass  # scaled below"),
       Edit(C, "embed_fwd", "    norm_cache = None\n",
            "    if scale is not None:\n        X = X * _const(scale, X)\n    norm_cache = None\n"),
       source="(tok + pos) * sqrt(d) where the paper scales tok only",
       bench=("embedding",), witness=Witness("embedding", variant={"embedding_scale": "sqrt_d_e"}),
       note="differs only under embedding_scale='sqrt_d_e' with positions"),
    _m("embedding-scale-d-e", "token embeddings multiplied by d_e instead of √d_e", ("embedding",) + MODELS,
       Edit(C, "embed_fwd", "scale = math.sqrt(d_e)", "scale = float(d_e)"),
       source="a dropped ** 0.5", bench=("embedding",),
       witness=Witness("embedding", variant={"embedding_scale": "sqrt_d_e"}),
       note="differs only under embedding_scale='sqrt_d_e'"),
    _m("unembedding-log-probs", "Algorithm 7 returns log-probabilities (log softmax) instead of probabilities",
       ("unembedding",),
       Edit(A, "unembed_columns", "return softmax_columns(unembed_logits_fwd(X, params, variant)[0])",
            "return np.log(softmax_columns(unembed_logits_fwd(X, params, variant)[0]))"),
       source="an LM head that ends in log_softmax (as NLL-loss code expects)",
       bench=("unembedding",), witness=Witness("unembedding")),
    _m("unembedding-t5-rescale", "the unembedding's input multiplied by d_e^−½ (T5's tied-head rescale) where "
       "the model has none", ("unembedding",) + UNEMBED_USERS,
       Edit(A, "unembed_logits_fwd", "z = logits(X, W_u, b_u)", "z = logits(X * (X.shape[-2] ** -0.5), W_u, b_u)"),
       source="T5's sequence_output * d_model ** -0.5 carried into a model without it",
       bench=("unembedding",), witness=Witness("unembedding")),
    # -- a catalogue convention, written differently from the first zoo
    _m("unembedding-logit-bias-dropped", "b_u never added to the logits (the variable set to None in the code)",
       ("unembedding",) + UNEMBED_USERS,
       Edit(A, "unembed_logits_fwd", 'b_u = params["b_u"] if variant.logit_bias else None', "b_u = None"),
       source="BART's final_logits_bias forgotten in a port", bench=("unembedding",),
       witness=Witness("unembedding", variant={"logit_bias": True}),
       note="differs only under logit_bias=True"),
]

# ======================================================================== layers (Algorithms 8-10)
_LAYERS = [
    _m("pre-ln-residual-added-twice", "pre-LN residual adds X twice: X ← X + (X + f(norm(X)))", LAYERS + MODELS,
       Edit(L, "_residual_fwd", "out = X + y", "out = X + (X + y)"),
       source="h = x + attn(ln(x)) followed by x = x + h", bench=("gpt2_layer",), witness=Witness("gpt2_layer")),
    _m("post-ln-residual-added-twice", "post-LN residual adds X twice: X ← norm(2X + f(X))", LAYERS + MODELS,
       Edit(L, "_residual_fwd", "norm_fwd(X + y, params, gamma, beta, variant)",
            "norm_fwd(X + X + y, params, gamma, beta, variant)"),
       source="a sublayer that returns x + f(x), added to x again by the caller",
       bench=("bert_layer",), witness=Witness("bert_layer")),
    _m("mlp-w1-used-twice", "the MLP's second projection uses W_mlp1ᵀ instead of W_mlp2", LAYERS + MODELS,
       Edit(L, "mlp_fwd", "out = params[w2] @ A1", "out = params[w1].T @ A1"),
       source="a copy-paste slip in the MLP (self.fc1 used for both projections)",
       bench=("encoder_layer",), witness=Witness("encoder_layer")),
    _m("mlp-activation-after-second", "the MLP's activation applied after the second projection instead of "
       "between the two", LAYERS + MODELS,
       Edit(L, "mlp_fwd", "A1 = activation(act_name)(H1)", "A1 = H1"),
       Edit(L, "mlp_fwd", "    return out, MLPCache(",
            "    out = activation(act_name)(out)\n    return out, MLPCache("),
       source="nn.Sequential(Linear, Linear, GELU) instead of (Linear, GELU, Linear)",
       bench=("gpt2_layer",), witness=Witness("gpt2_layer")),
    _m("causal-mask-transposed-in-layers", "the layers' causal mask built as [query, key] and used as "
       "[key, query]: each token attends to itself and the future", CAUSAL_LAYERS,
       Edit(L, "_causal", "return unidirectional_mask(ell, ell, variant.causal_alignment, variant.window)",
            "return unidirectional_mask(ell, ell, variant.causal_alignment, variant.window).T"),
       source="torch.tril(ones) (row layout: [query, key]) passed to code indexed [key, query]",
       bench=("gpt2_layer",), witness=Witness("gpt2_layer"), equivalence="equivalent when ℓ = 1"),
    _m("cross-attention-causal-mask", "decoder cross-attention masked with a causal mask over the encoder "
       "positions (the self-attention mask reused)", ("decoder_layer",) + ED,
       Edit(L, "decoder_layer_fwd", "return mh_attention_fwd(Y, Z, W_cross, cross_mask, variant,",
            "return mh_attention_fwd(Y, Z, W_cross, unidirectional_mask(Z.shape[-1], Y.shape[-1]), variant,"),
       source="one attention mask passed to both attention calls of a decoder block",
       bench=("decoder_layer",), witness=Witness("decoder_layer"), equivalence="equivalent when ℓ_z = 1"),
    _m("decoder-self-attention-unmasked", "decoder self-attention without its causal mask", ("decoder_layer",) + ED,
       Edit(L, "decoder_layer_fwd", "return mh_attention_fwd(Y, Y, W_self, self_mask, variant,",
            "return mh_attention_fwd(Y, Y, W_self, None, variant,"),
       source="tgt_mask not passed to nn.TransformerDecoderLayer",
       bench=("decoder_layer",), witness=Witness("decoder_layer"), equivalence="equivalent when ℓ_x = 1"),
    _m("decoder-cross-uses-self-weights", "decoder cross-attention uses the self-attention's weights",
       ("decoder_layer",) + ED,
       Edit(L, "decoder_layer_fwd", "return mh_attention_fwd(Y, Z, W_cross,", "return mh_attention_fwd(Y, Z, W_self,"),
       source="a copy-paste of the self-attention call (self.self_attn used twice)",
       bench=("decoder_layer",), witness=Witness("decoder_layer")),
    _m("decoder-cross-norm-index-slip", "the cross-attention block's norm reads γ3/β3 (the self-attention "
       "block's) instead of γ4/β4", ("decoder_layer",) + ED,
       Edit(L, "decoder_layer_fwd", '"cross", placement, params, *names(4), variant)',
            '"cross", placement, params, *names(3), variant)'),
       source="an index slip in per-block parameter names (norm1/norm2/norm3)",
       bench=("decoder_layer",), witness=Witness("decoder_layer")),
    _m("layer-mlp-before-attention", "a layer runs its MLP block before its attention block", LAYERS[:1]
       + LAYERS[2:] + MODELS,
       Edit(L, "stack_layer_fwd", '_residual_fwd(X, attn, "self"', '_residual_fwd(X, mlp, "self"'),
       Edit(L, "stack_layer_fwd", '_residual_fwd(X, mlp, "mlp"', '_residual_fwd(X, attn, "mlp"'),
       source="sublayers listed in the wrong order in a block's forward",
       bench=("encoder_layer",), witness=Witness("encoder_layer")),
    _m("layer-norm-params-shared", "a layer's MLP block normalises with the attention block's γ1/β1 (one "
       "LayerNorm module reused)", LAYERS[:1] + LAYERS[2:] + MODELS,
       Edit(L, "stack_layer_fwd", 'prefix + "gamma2", prefix + "beta2"', 'prefix + "gamma1", prefix + "beta1"'),
       source="self.ln used for both sublayers of a block",
       bench=("bert_layer",), witness=Witness("bert_layer")),
    _m("pre-ln-sublayer-reads-unnormalised", "pre-LN sublayers read the un-normalised X (the norm computed, "
       "its result unused): X ← X + f(X)", LAYERS + MODELS,
       Edit(L, "_residual_fwd", "y, f_cache = f(Y)", "y, f_cache = f(X)"),
       source="h = self.ln(x); x = x + self.attn(x) (the normalised h never used)",
       bench=("gpt2_layer",), witness=Witness("gpt2_layer")),
    _m("mlp-residual-missing", "post-LN MLP block without its residual: X ← norm(f(X)) for the MLP only",
       LAYERS + MODELS,
       Edit(L, "_residual_fwd", "norm_fwd(X + y, params, gamma, beta, variant)",
            'norm_fwd((X if kind != "mlp" else 0) + y, params, gamma, beta, variant)'),
       source="a forgotten skip connection around the feed-forward sublayer",
       bench=("encoder_layer",), witness=Witness("encoder_layer")),
    # -- catalogue conventions, written differently from the first zoo
    _m("gpt2-gelu-tanh-only", "GPT-2 layers use the tanh GELU where the exact GELU is asked for (other layer "
       "kinds are right)", ("gpt2_layer",) + D,
       Edit(L, "stack_layer_fwd", "act = variant.resolved_activation(arch)",
            'act = variant.resolved_activation(arch)\n    act = "gelu_tanh" if arch == "gpt2" and act == "gelu_erf" '
            "else act"),
       source="GPT-2's gelu_new hard-coded in the decoder-only block of a library",
       bench=("gpt2_layer",), witness=Witness("gpt2_layer")),
    _m("mlp-bias-dropped", "the MLP's biases never added (nn.Linear(bias=False)) where the model has them",
       LAYERS + MODELS,
       Edit(L, "mlp_fwd", 'b1 = f"{prefix}b_mlp{first}" if variant.mlp_bias else None', "b1 = None"),
       Edit(L, "mlp_fwd", 'b2 = f"{prefix}b_mlp{second}" if variant.mlp_bias and not one_layer else None',
            "b2 = None"),
       source="a LLaMA-style bias-free MLP reused for a model with biases",
       bench=("encoder_layer",), witness=Witness("encoder_layer")),
]

# ======================================================================== whole models and the loss
_MODELS = [
    _m("d-last-layer-skipped", "DTransformer runs layers 0..L−2: the last layer is skipped", D,
       Edit(A, "d_logits_fwd", 'for l in range(hyper["L"]):', 'for l in range(hyper["L"] - 1):'),
       source="an off-by-one layer loop", bench=("d_transformer",), witness=Witness("d_transformer")),
    _m("e-layers-reversed", "ETransformer runs its layers in reverse order (layer L−1 first)", E,
       Edit(A, "e_logits_fwd", 'for l in range(hyper["L"]):', 'for l in reversed(range(hyper["L"])):'),
       source="layers popped from a stack / iterated with reversed()",
       bench=("e_transformer",), witness=Witness("e_transformer"), equivalence="equivalent when L = 1"),
    _m("d-final-norm-twice", "DTransformer applies its final norm twice", D,
       Edit(A, "d_logits_fwd", 'X, final = _final_norm(X, params, variant, "gpt2", "gamma", "beta")',
            'X = _final_norm(X, params, variant, "gpt2", "gamma", "beta")[0]\n'
            '    X, final = _final_norm(X, params, variant, "gpt2", "gamma", "beta")'),
       source="ln_f applied in the model body and again in the LM head",
       bench=("d_transformer",), witness=Witness("d_transformer")),
    _m("e-head-norm-skipped", "ETransformer's head skips its norm (line 11): X ← act(W_f X + b_f 1ᵀ)", E,
       Edit(A, "e_logits_fwd", 'Xf, head_norm = norm_fwd(activation(act)(pre), params, "gamma", "beta", variant)',
            'head_norm = norm_fwd(activation(act)(pre), params, "gamma", "beta", variant)[1]\n'
            "    Xf = activation(act)(pre)"),
       source="BERT's MLM head transform without its LayerNorm",
       bench=("e_transformer",), witness=Witness("e_transformer")),
    _m("e-head-bias-missing", "ETransformer's head omits b_f (line 10: W_f X without + b_f 1ᵀ)", E,
       Edit(A, "e_logits_fwd", 'pre = params["W_f"] @ X + params["b_f"][:, None]', 'pre = params["W_f"] @ X'),
       source="the MLM head's dense layer built without bias",
       bench=("e_transformer",), witness=Witness("e_transformer")),
    _m("ed-cross-reads-encoder-embedding", "the decoder cross-attends to the encoder's embedding (the encoder "
       "stack's input) instead of its output", ED,
       Edit(A, "ed_logits_fwd", 'Z, enc_embed = embed_tokens_fwd(z, params, variant, ell_max, "emb_enc")',
            'Z, enc_embed = embed_tokens_fwd(z, params, variant, ell_max, "emb_enc"); Z_emb = Z'),
       Edit(A, "ed_logits_fwd", "X, c = decoder_layer_fwd(X, Z, params", "X, c = decoder_layer_fwd(X, Z_emb, params"),
       source="a shadowed variable: the encoder's output assigned to a new name, the old one passed on",
       bench=("ed_transformer",), witness=Witness("ed_transformer"), equivalence="equivalent when L_enc = 0"),
    _m("d-transformer-returns-logits", "DTransformer returns the logits instead of the probabilities (no final "
       "softmax)", ("d_transformer",),
       Edit(A, "d_transformer", "return softmax_columns(d_logits_fwd(x, params, variant, hyper)[0])",
            "return d_logits_fwd(x, params, variant, hyper)[0]"),
       source="a forward() that returns logits (as Hugging Face models do) wrapped as the paper's P",
       bench=("d_transformer",), witness=Witness("d_transformer")),
    _m("ed-softmax-over-positions", "EDTransformer's final softmax over the positions (a transposed softmax) "
       "instead of the vocabulary", ("ed_transformer",),
       Edit(A, "ed_transformer", "return softmax_columns(ed_logits_fwd(z, x, params, variant, hyper)[0])",
            "return np.swapaxes(softmax_columns(np.swapaxes(ed_logits_fwd(z, x, params, variant, hyper)[0], -1, "
            "-2)), -1, -2)"),
       source="softmax(dim=0) on a [vocab, positions] array that a transpose made [positions, vocab]",
       bench=("ed_transformer",), witness=Witness("ed_transformer")),
    _m("d-loss-skips-first-position", "next-token loss sums over t = 1..ℓ−2: the first position's term is "
       "dropped", NEXT_TOKEN,
       Edit(TR, "_next_token_targets", "weights = np.broadcast_to(np.arange(ell) < ell - 1, x.shape)",
            "weights = np.broadcast_to((np.arange(ell) > 0) & (np.arange(ell) < ell - 1), x.shape)"),
       source="a 1-based loop bound (for t in range(1, ℓ − 1)) in a 0-based loss",
       bench=("d_loss",), witness=Witness("d_loss"), equivalence="equivalent when ℓ ≤ 1"),
]

SECOND: dict[str, Mutant] = {}
for _mut in _ATTENTION + _MHA + _NORMS + _EMBED + _LAYERS + _MODELS:
    if _mut.id in SECOND:
        raise ValueError(f"duplicate mutant id {_mut.id!r}")
    SECOND[_mut.id] = _mut
del _mut

_EPS_IN = {"epsilon_placement": "inside_root"}

#: mutant -> the catalogue change its failure must be said to match, or None: no convention may be named.
#: Written from each bug's description.
EXPECTED: dict[str, Optional[dict[str, Any]]] = {i: None for i in SECOND}
EXPECTED.update({
    "mha-scale-dropped": {"attn_scale": "none"},
    "mha-mask-inverted": {"input Mask": "inverted (True = blocked)"},
    "ln-unbiased-via-np-var": {"variance": "unbiased"},
    "ln-epsilon-1e-6-source": {"epsilon": 1e-6, **_EPS_IN},
    "ln-epsilon-outside-via-std": {"epsilon_placement": "outside_root"},
    "ln-shift-dropped": {"affine": "scale"},
    "unembedding-logit-bias-dropped": {"logit_bias": False},
    "gpt2-gelu-tanh-only": {"activation": "gelu_tanh"},
    "mlp-bias-dropped": {"mlp_bias": False},
})

#: mutant -> (model searched besides its bench entries, where that model first departs).
#: Written from each bug's description; "{last}": the case's last layer.
PLACES: dict[str, tuple[str, str]] = {
    "attn-scores-transposed": ("d_transformer", "layer 0/self-attention"),
    "mha-wq-wk-swapped": ("e_transformer", "layer 0/self-attention"),
    "mha-last-head-dropped": ("d_transformer", "layer 0/self-attention"),
    "mha-heads-reversed": ("e_transformer", "layer 0/self-attention"),
    "mha-scale-dropped": ("e_transformer", "layer 0/self-attention"),
    "ln-gamma-beta-swapped": ("e_transformer", "layer 0/norm"),
    "ln-unbiased-via-np-var": ("ed_transformer", "encoder layer 0/norm"),
    "embedding-positions-right-aligned": ("d_transformer", "embedding"),
    "unembedding-t5-rescale": ("d_transformer", "unembedding"),
    "pre-ln-residual-added-twice": ("d_transformer", "layer 0/residual"),
    "post-ln-residual-added-twice": ("e_transformer", "layer 0/residual"),
    "mlp-w1-used-twice": ("ed_transformer", "encoder layer 0/MLP"),
    "mlp-activation-after-second": ("d_transformer", "layer 0/MLP|layer 0/MLP activation"),
    "causal-mask-transposed-in-layers": ("d_transformer", "layer 0/self-attention"),
    "cross-attention-causal-mask": ("ed_transformer", "decoder layer 0/cross-attention"),
    "decoder-self-attention-unmasked": ("ed_transformer", "decoder layer 0/self-attention"),
    "decoder-cross-uses-self-weights": ("ed_transformer", "decoder layer 0/cross-attention"),
    # the cross-attention block's own norm is the one that reads the wrong parameters
    # the bug is in the cross block's norm: accepting "cross-attention" would let a locator blame the
    # attention for a norm bug
    "decoder-cross-norm-index-slip": ("ed_transformer", "decoder layer 0/norm"),
    # both sublayers of the first layer run in the wrong place: the layer, any sublayer
    "layer-mlp-before-attention": ("e_transformer", "layer 0"),
    "layer-norm-params-shared": ("e_transformer", "layer 0/norm"),
    # the norm's result is unused: the norm, or the residual path that skips it
    "pre-ln-sublayer-reads-unnormalised": ("d_transformer", "layer 0/norm|layer 0/residual"),
    "mlp-residual-missing": ("ed_transformer", "encoder layer 0/residual|encoder layer 0/MLP"),
    "gpt2-gelu-tanh-only": ("d_transformer", "layer 0/MLP activation"),
    "mlp-bias-dropped": ("ed_transformer", "encoder layer 0/MLP"),
    "d-last-layer-skipped": ("d_transformer", "layer {last}"),
    # layer 0 first computes with layer L−1's parameters; a walk that cuts the model to its first layers
    # finds the last layer out of place: either names the bug
    "e-layers-reversed": ("e_transformer", "layer 0|layer {last}"),
    "d-final-norm-twice": ("d_transformer", "final norm"),
    "e-head-norm-skipped": ("e_transformer", "head norm|head"),
    "e-head-bias-missing": ("e_transformer", "head"),
    "ed-cross-reads-encoder-embedding": ("ed_transformer", "decoder layer 0/cross-attention"),
    "d-transformer-returns-logits": ("d_transformer", "unembedding"),
    "ed-softmax-over-positions": ("ed_transformer", "unembedding"),
}


def second_mutant(mutant_id: str) -> Mutant:
    """The second zoo's mutant ``mutant_id`` (one-line error for an unknown id)."""
    try:
        return SECOND[mutant_id]
    except KeyError:
        raise ValueError(f"unknown second-zoo mutant {mutant_id!r}; known: {', '.join(SECOND)}") from None
