"""Mutants of the layers and architectures (Algorithms 8-10), the unembedding,
and bugs of precision and batching that only some dtypes or calls show."""

from __future__ import annotations

from .injection import Edit, Mutant, Witness, replace_function, source_edit, swap_variant
from .groups import (
    A, ATTENTION_USERS, C, D, DIFFERENTIATED, E, GELU_USERS, L, LAYERS, LOSSES, MODELS, N, NORM_USERS, RELU_USERS,
    SOFTMAX_P, downcast_float64, no_logit_bias, relu_to_gelu,
)

MUTANTS = [
    # ================================================================ activations and blocks
    Mutant("gelu-sigmoid", "GELU as x·σ(1.702 x) (the 'quick GELU')", GELU_USERS,
           source_edit(Edit(C, "gelu_erf", "return X * phi",
                            "return X / (_const(1.0, X) + np.exp(-_const(1.702, X) * X))")),
           source="OpenAI CLIP's QuickGELU", witness=Witness("bert_layer"), bench=("bert_layer",)),
    Mutant("relu-as-gelu", "GELU where the model's ReLU is asked for (encoder-decoder)", RELU_USERS,
           swap_variant(relu_to_gelu), source="nn.TransformerEncoderLayer(activation='gelu') in a paper port",
           bench=("encoder_layer",)),
    Mutant("pre-ln-residual-normalised", "pre-LN residual adds the normalised X: X ← norm(X) + f(norm(X))",
           LAYERS + MODELS,
           source_edit(Edit(L, "_residual_fwd", "out = X + y", "out = Y + y")),
           source="a pre-LN block that reassigns x = ln(x) before the residual", witness=Witness("gpt2_layer"),
           bench=("gpt2_layer", "d_transformer")),
    Mutant("post-ln-residual-dropped", "post-LN sublayer without its residual: X ← norm(f(X))", LAYERS + MODELS,
           source_edit(Edit(L, "_residual_fwd", "norm_fwd(X + y, params, gamma, beta, variant)",
                            "norm_fwd(y, params, gamma, beta, variant)")),
           source="a forgotten skip connection", bench=("encoder_layer",)),
    Mutant("mlp-bias-wrong-axis", "MLP bias broadcast along the token axis (b[None, :] instead of b 1ᵀ)",
           LAYERS + MODELS,
           source_edit(Edit(L, "mlp_fwd", "H1 = H1 + params[b1][:, None]", "H1 = H1 + params[b1]")),
           source="NumPy broadcasting aligns trailing axes: (d_mlp, ℓ) + (d_mlp,) works only when ℓ = d_mlp",
           witness=Witness("encoder_layer", hyper={"d_mlp": 3, "ell": 3}), bench=("encoder_layer",)),
    Mutant("final-norm-missing", "the final layer norm after the last layer skipped", MODELS,
           source_edit(Edit(A, "_final_norm", "if not variant.resolved_final_norm(arch):", "if True:")),
           source="GPT-2's ln_f forgotten in a port", witness=Witness("d_transformer"), bench=("d_transformer",)),
    Mutant("layers-share-parameters", "every layer uses layer 0's parameters", E + D,
           source_edit(Edit(A, "e_logits_fwd", 'f"layers.{l}."', '"layers.0."'),
                       Edit(A, "d_logits_fwd", 'f"layers.{l}."', '"layers.0."')),
           source="a loop that indexes the first block", equivalence="equivalent when L = 1",
           bench=("e_transformer",)),
    Mutant("post-ln-as-pre", "post-LN layers computed pre-LN (the GPT-2 block reused for BERT)",
           LAYERS + MODELS,
           source_edit(Edit(L, "stack_layer_fwd", "placement = variant.resolved_norm_placement(arch)",
                            'placement = "pre"'),
                       Edit(L, "decoder_layer_fwd", 'placement = variant.resolved_norm_placement("ed_decoder")',
                            'placement = "pre"')),
           source="nn.TransformerEncoderLayer(norm_first=True) where the model is post-LN",
           bench=("bert_layer",)),
    Mutant("bert-head-relu", "ETransformer's head (line 10) applies ReLU whatever the model's activation", E,
           source_edit(Edit(A, "e_logits_fwd", 'act = variant.resolved_activation("bert")', 'act = "relu"')),
           source="a hard-coded activation in the MLM head", bench=("e_transformer",)),

    Mutant("next-token-reads-first-position", "the encoder's next-token distribution read at the first "
           "position instead of the last", N,
           source_edit(Edit(A, "next_token_logits", "X[..., -1:]", "X[..., :1]")),
           source="BERT's pooler reads the first token ([CLS]); seed 000's G reads X_T, the last",
           bench=("next_token_encoder",)),

    # ================================================================ unembedding
    Mutant("tied-unembedding-untransposed", "tied unembedding uses W_e instead of W_eᵀ", SOFTMAX_P + LOSSES
           + DIFFERENTIATED,
           source_edit(Edit(A, "unembedding_matrix", 'params["W_e"].T if', 'params["W_e"] if')),
           source="weight tying in a column-layout port", witness=Witness(variant={"unembedding": "tied"},
                                                                             hyper={"N_V": 4, "d_e": 4}),
           bench=("unembedding",)),
    Mutant("logit-bias-ignored", "logit_bias=True ignored: P = softmax(W_u X) without b_u", SOFTMAX_P + LOSSES
           + DIFFERENTIATED, swap_variant(no_logit_bias),
           source="BERT/BART's final logits bias dropped in a port",
           witness=Witness(variant={"logit_bias": True}), bench=("unembedding",)),
    Mutant("unembedding-softmax-over-tokens", "Algorithm 7's softmax over positions instead of the vocabulary",
           SOFTMAX_P,
           source_edit(Edit(C, "softmax_columns", "E = np.exp(S - np.max(S, axis=-2, keepdims=True))",
                            "E = np.exp(S - np.max(S, axis=-1, keepdims=True))"),
                       Edit(C, "softmax_columns", "return E / np.sum(E, axis=-2, keepdims=True)",
                            "return E / np.sum(E, axis=-1, keepdims=True)")),
           source="softmax(dim=-1) on a (N_V, ℓ) column-layout matrix", bench=("unembedding", "d_inference")),
    Mutant("softmax-no-max", "Algorithm 7's softmax without subtracting the column max (overflows in float16)",
           SOFTMAX_P,
           source_edit(Edit(C, "softmax_columns", "E = np.exp(S - np.max(S, axis=-2, keepdims=True))",
                            "E = np.exp(S)")),
           source="naive softmax", dtypes=("float16", "float32", "float64"),
           note="bites wherever a logit passes exp's overflow: 11.09 in float16, 88.7 in float32, 709.8 in "
                "float64 (the harness's large-logits style reaches all three)",
           witness=Witness("unembedding", inputs={"X": [[1.0] * 3] * 4},
                           params={"W_u": [[5.0 * v] for v in range(7)]}, dtype="float16"), bench=("unembedding",)),

    # ================================================================ precision and batching
    Mutant("float64-computed-in-float32", "float64 requests computed in float32 and cast back (JAX without "
           "jax_enable_x64)", ("layer_norm", "attention", "mh_attention", "gpt2_layer", "d_transformer", "d_loss",
                               "d_gradient"),
           replace_function(downcast_float64),
           source="JAX's 'sharp bits': float64 silently becomes float32 unless jax_enable_x64 is set",
           dtypes=("float64", "float32"), equivalent=("float32",),
           equivalence="a no-op at float32 and below (only float64 requests are downcast)",
           bench=("attention", "d_gradient")),
    Mutant("attention-softmax-in-float32", "attention's exp evaluated in float32 whatever the dtype",
           ATTENTION_USERS,
           source_edit(Edit(C, "attention_fwd", "E = np.exp(S - col_max)",
                            "E = np.exp((S - col_max).astype(np.float32)).astype(S.dtype)")),
           source="jax.nn.dot_product_attention and fused kernels compute the softmax in float32",
           dtypes=("float64", "float32"), equivalent=("float32",),
           equivalence="bit for bit the correct plugin at float32 (and NumPy evaluates float16 exp in float32 "
                       "anyway)",
           bench=("mh_attention",)),
    Mutant("gelu-erf-approximation", "GELU's Φ from the Abramowitz–Stegun 7.1.26 erf (|error| ≤ 1.5e-7)",
           GELU_USERS,
           source_edit(Edit(C, "gelu_erf", "phi = _PHI(X.astype(np.float64)).astype(X.dtype) if X.size else "
                                           "np.zeros_like(X)",
                            "z = np.abs(X.astype(np.float64)) / math.sqrt(2.0)"
                            "\n    t = 1.0 / (1.0 + 0.3275911 * z)"
                            "\n    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * "
                            "(-1.453152027 + t * 1.061405429))))"
                            "\n    erf = np.sign(X.astype(np.float64)) * (1.0 - poly * np.exp(-z * z))"
                            "\n    phi = (0.5 * (1.0 + erf)).astype(X.dtype)")),
           source="hand-written kernels without an erf (Metal, WGSL, early NumPy ports) use A&S 7.1.26",
           note="its error (1.5e-7 in Φ) is below float32's tolerance on most elements: expected to be caught "
                "at float64 only",
           bench=("gpt2_layer",)),
    Mutant("layer-norm-batch-axis", "layer norm's mean over axis 0 (right for one (d_e, ℓ) matrix, the batch "
           "axis for a batch)", NORM_USERS,
           source_edit(Edit(C, "norm_fwd", "m = np.sum(X, axis=-2, keepdims=True) / _const(d, X)",
                            "m = np.sum(X, axis=0, keepdims=True) / _const(d, X)")),
           source="code written and tested unbatched, then vmapped or batched by hand",
           witness=Witness("layer_norm", batched=True), bench=("layer_norm", "bert_layer")),
    Mutant("softmax-batch-axis", "Algorithm 7's softmax over axis 0 (right unbatched, the batch axis for a "
           "batch)", SOFTMAX_P[:4],
           source_edit(Edit(C, "softmax_columns", "E = np.exp(S - np.max(S, axis=-2, keepdims=True))",
                            "E = np.exp(S - np.max(S, axis=0, keepdims=True))"),
                       Edit(C, "softmax_columns", "return E / np.sum(E, axis=-2, keepdims=True)",
                            "return E / np.sum(E, axis=0, keepdims=True)")),
           source="code written and tested unbatched", witness=Witness("unembedding", batched=True),
           bench=("e_transformer",)),
    Mutant("nondeterministic-variance", "layer norm's variance off by ±1 ulp from call to call (as with "
           "atomic-add reductions)", NORM_USERS,
           source_edit(Edit(C, "norm_fwd", "v = np.sum(centred * centred, axis=-2, keepdims=True) / _const(denom, X)",
                            "v = np.sum(centred * centred, axis=-2, keepdims=True) / _const(denom, X) * _const("
                            "1.0 + float(np.random.choice([-1.0, 0.0, 1.0])) * float(np.finfo(X.dtype).eps), X)")),
           source="GPU reductions with atomicAdd: summation order varies run to run",
           note="within tolerance on every call: only the determinism check (two identical calls) sees it",
           witness=Witness("layer_norm", repeat=True), bench=("layer_norm",)),
]
