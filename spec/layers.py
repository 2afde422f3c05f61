"""The body of each architecture's layer loop, as functions of their own:
the encoder and decoder layers of Algorithm 8, the BERT layer of Algorithm 9
and the GPT-2 layer of Algorithm 10.

Norm placement: "post" (the paper's for encoder-decoder and BERT) normalises
after each residual sum; "pre" (the paper's for GPT-2; Xiong et al. 2020)
normalises the sublayer's input and adds the sublayer's output to the
*un-normalised* X; "res_post" normalises the sublayer's output before it is
added, X ← X + LN(f(X)) (Swin Transformer v2's res-post-norm, Liu et al. 2022;
seed 000 (compact definition) lists it as "LayerNorm-ing only the changes");
"sandwich" does both, X ← X + LN'(f(LN(X))), each sublayer with a second norm of
its own on its output (Gemma 2: transformers 5.24 ``Gemma2DecoderLayer.forward``,
``residual + post_attention_layernorm(self_attn(input_layernorm(x)))``, then
``residual + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h)))``).

The MLP is the paper's one hidden layer unless ``mlp_depth`` adds more
(seed 000: "a larger number of layers") or ``mlp="gated"`` multiplies the
activation by a linear branch (Shazeer 2020, "GLU Variants Improve
Transformer": FFN_SwiGLU(x) = (Swish(xW) ⊗ xV) W₂, here in columns).
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from .attention import bidirectional_mask, mh_attention, unidirectional_mask
from .errors import SpecError
from .functions import apply
from .intermediates import Names, algorithm
from .linalg import Matrix, Vector, add, add_bias, hadamard, matmul, shape
from .normalization import norm_columns
from .params import DecoderLayerParams, Dense, LayerParams, MHAttentionParams
from .variants import PAPER, VariantSet

__all__ = ["bert_layer", "decoder_layer", "encoder_layer", "gpt2_layer", "mlp", "padded"]


def _mlp_names(X: Matrix, W1: Matrix, b1: Optional[Vector], W2: Optional[Matrix], b2: Optional[Vector],
               activation: str, *, lin: Optional[tuple[Matrix, Optional[Vector]]] = None,
               hidden: tuple[Dense, ...] = ()) -> Names:
    """``mlp``'s intermediates (``spec/intermediates.py``): pre (W1 X + b1 1ᵀ), act and lin (gated
    only: act(pre) and V X + c 1ᵀ), hidden (the first hidden layer H), hidden_layer.{k}.pre and
    hidden_layer.{k} (each further one); the last W2 H + b2 1ᵀ is the MLP's own result."""
    gated, further = lin is not None, range(len(hidden))
    return {add_bias: ("pre",) + (("lin",) if gated else ()) + tuple(f"hidden_layer.{k}.pre" for k in further),
            apply: ("act" if gated else "hidden",) + tuple(f"hidden_layer.{k}" for k in further),
            hadamard: ("hidden",)}


@algorithm(None, names=_mlp_names)
def mlp(X: Matrix, W1: Matrix, b1: Optional[Vector], W2: Optional[Matrix], b2: Optional[Vector],
        activation: str, *, lin: Optional[tuple[Matrix, Optional[Vector]]] = None,
        hidden: tuple[Dense, ...] = ()) -> Matrix:
    """W2 act(W1 X + b1 1ᵀ) + b2 1ᵀ (line 7 of Algorithms 8 and 9, line 8 of Algorithm 10).

    ``lin`` = (V, c): the gated form, H = act(W1 X + b1 1ᵀ) ⊙ (V X + c 1ᵀ) (Shazeer 2020).
    ``hidden``: each further hidden layer H ← act(W H + b 1ᵀ), in order (``mlp_depth``).
    ``W2`` None: ``mlp="one_layer"`` (seed 004's FFN, ReLU(A W_L + b_L)): the last H is the output.

    Intermediates: ``_mlp_names``.
    """
    H = apply(activation, add_bias(matmul(W1, X), b1))  # (d_mlp, ℓ)
    if lin is not None:
        V, c = lin
        H = hadamard(H, add_bias(matmul(V, X), c))
    for layer in hidden:
        H = apply(activation, add_bias(matmul(layer.W, H), layer.b))
    if W2 is None:  # mlp="one_layer": d_mlp = d_e, checked with the other sizes
        return H
    return add_bias(matmul(W2, H), b2)


def _lin(W: Optional[Matrix], b: Optional[Vector]) -> Optional[tuple[Matrix, Optional[Vector]]]:
    return None if W is None else (W, b)


def padded(Mask: list[list[int]], pad: Optional[Sequence[Any]], variant: VariantSet = PAPER,
           name: str = "pad") -> list[list[int]]:
    """Mask[t_z, t_x] ∧ pad[t_z]: a padding position (pad[t] = 0) is no query's key.

    The paper has no padding; real code passes it as an attention mask over keys (Hugging Face's
    ``attention_mask``, torch's ``key_padding_mask``, Flax's ``make_attention_mask``). A padding
    position still computes its own column (its query attends to the real keys it may see); a query
    left with no key falls to ``empty_query``; under "error" the refusal names ``pad`` (or ``name``:
    the decoder's ``pad_x`` and ``pad_z``)."""
    if pad is None:
        return Mask
    if len(pad) != len(Mask):
        raise SpecError(name, f"one flag per position ({len(Mask)})", f"{len(pad)} flags")
    out = [[m if pad[tz] else 0 for m in row] for tz, row in enumerate(Mask)]
    if variant.empty_query == "error":
        for tx in range(len(out[0]) if out else 0):
            if not any(row[tx] for row in out):
                raise SpecError(name, "every query to keep a key it may attend to (empty_query='error')",
                                f"no unpadded key for position t_x={tx}")
    return out


def _sublayer_names(arch: str, variant: VariantSet) -> Names:
    """A layer's intermediates (``spec/intermediates.py``), each a sublayer's result with what it
    records inside (``attn.heads.0.Q``, ``norm1.mu``, ``mlp.hidden``, ...) or a residual sum:
    attn, norm1, mlp, norm2, res1 and res2 (the decoder's: self_attn, cross_attn, norm1-norm3,
    res1-res3), in the order computed; under sandwich also norm1_out, norm2_out (norm3_out): each
    sublayer's output norm. A parallel residual has norm1, (norm2), attn, mlp and res2, the
    layer's output (the branches' own sum is none)."""
    decoder = arch == "ed_decoder"
    sublayers = 3 if decoder else 2
    placement = variant.resolved_norm_placement(arch)
    norms = tuple(n for k in range(1, sublayers + 1)
                  for n in ((f"norm{k}", f"norm{k}_out") if placement == "sandwich" else (f"norm{k}",)))
    if arch == "gpt2" and variant.residual != "sequential":
        return {norm_columns: norms if variant.residual == "parallel" else norms[:1], mh_attention: ("attn",),
                mlp: ("mlp",), add: (None, "res2")}
    return {norm_columns: norms, mh_attention: ("self_attn", "cross_attn") if decoder else ("attn",), mlp: ("mlp",),
            add: tuple(f"res{k}" for k in range(1, sublayers + 1))}


def _layer_names(X: Matrix, W: LayerParams, variant: VariantSet, arch: str, causal: bool,
                 pad: Optional[Sequence[Any]] = None, positions: Optional[Sequence[int]] = None) -> Names:
    return _sublayer_names(arch, variant)


@algorithm(None, names=_layer_names)
def _layer(X: Matrix, W: LayerParams, variant: VariantSet, arch: str, causal: bool,
           pad: Optional[Sequence[Any]] = None, positions: Optional[Sequence[int]] = None) -> Matrix:
    """Shared body of the encoder, BERT and GPT-2 layers (they differ only in
    the mask and in the paper's placement and activation); ``pad`` masks keys (``padded``);
    ``positions`` are ALiBi's p(t) (a padded model under ``pad_positions="real"``), else t.
    Intermediates: ``_sublayer_names``."""
    _, ell = shape(X)
    Mask = padded(unidirectional_mask(ell, ell, variant=variant) if causal else bidirectional_mask(ell, ell), pad,
                  variant)  # the causal mask narrowed by ``window`` where it is on
    act = variant.resolved_activation(arch)

    def MLP(Y: Matrix) -> Matrix:
        return mlp(Y, W.W_mlp1, W.b_mlp1, W.W_mlp2, W.b_mlp2, act, lin=_lin(W.W_mlp1_lin, W.b_mlp1_lin),
                   hidden=W.mlp_hidden)

    def MHAttention(X: Matrix, Z: Matrix) -> Matrix:
        return mh_attention(X, Z, W.attn, Mask, variant=variant, causal_self=causal, positions=positions)

    def norm(X: Matrix, gamma: Optional[Vector], beta: Optional[Vector]) -> Matrix:
        return norm_columns(X, gamma, beta, variant)

    placement = variant.resolved_norm_placement(arch)
    if variant.residual != "sequential" and arch == "gpt2":  # a decoder convention: read by GPT-2's layer alone
        return _parallel(X, W, variant, placement, MHAttention, MLP, norm)
    if placement == "post":
        X = add(X, MHAttention(X, X))  # Alg. 8/9 line 5
        X = norm(X, W.gamma1, W.beta1)  # line 6
        X = add(X, MLP(X))  # line 7
        return norm(X, W.gamma2, W.beta2)  # line 8
    if placement == "res_post":  # lines 5-8 with each norm moved onto the sublayer's output
        X = add(X, norm(MHAttention(X, X), W.gamma1, W.beta1))
        return add(X, norm(MLP(X), W.gamma2, W.beta2))
    if placement == "sandwich":  # Alg. 10 lines 5-8 with each sublayer's output normalised before it is added
        X_tilde = norm(X, W.gamma1, W.beta1)
        X = add(X, norm(MHAttention(X_tilde, X_tilde), W.gamma1_out, W.beta1_out))
        X_tilde = norm(X, W.gamma2, W.beta2)
        return add(X, norm(MLP(X_tilde), W.gamma2_out, W.beta2_out))
    X_tilde = norm(X, W.gamma1, W.beta1)  # Alg. 10 line 5
    X = add(X, MHAttention(X_tilde, X_tilde))  # line 6
    X_tilde = norm(X, W.gamma2, W.beta2)  # line 7
    return add(X, MLP(X_tilde))  # line 8


def _parallel(X: Matrix, W: LayerParams, variant: VariantSet, placement: str,
              MHAttention: Callable[[Matrix, Matrix], Matrix], MLP: Callable[[Matrix], Matrix],
              norm: Callable[[Matrix, Optional[Vector], Optional[Vector]], Matrix]) -> Matrix:
    """Lines 5-8 with the two sublayers side by side (``residual``): both read the same X,

        X ← X + (MHAttention(X̃₁, X̃₁ | W_l, Mask) + MLP(X̃₂)),  X̃ᵢ[:, t] = norm(X[:, t] | γⁱ_l, βⁱ_l),

    with X̃₂ = X̃₁ under "parallel_shared" (one norm, no γ², β²). The branches are summed first, then
    added to X, as Hugging Face's GPTNeoXLayer (``mlp_output + attn_output + hidden_states``),
    GPTJBlock (``attn_output + feed_forward_hidden_states + residual``) and Falcon do (transformers
    5.24). Every source normalises each branch's input, so the post-LN placements are refused.
    ``MHAttention`` is GPT-2's, causal.

    Intermediates: norm1, (norm2), attn, mlp, res2 (the layer's output; ``_sublayer_names``)."""
    if placement != "pre":
        raise SpecError("residual", f"the pre-LN placement (residual={variant.residual!r} normalises each "
                        "branch's input: GPT-NeoX, GPT-J, Falcon)", f"norm placement {placement!r}")
    X1 = norm(X, W.gamma1, W.beta1)
    X2 = X1 if variant.residual == "parallel_shared" else norm(X, W.gamma2, W.beta2)
    A = MHAttention(X1, X1)
    return add(X, add(A, MLP(X2)))


@algorithm("encoder_layer")
def encoder_layer(Z: Matrix, W: LayerParams, *, variant: VariantSet = PAPER,
                             pad: Optional[Sequence[Any]] = None) -> Matrix:
    """Algorithm 8, lines 5-8: one encoder layer (post-LN, ReLU, Mask ≡ 1).

    5. Z ← Z + MHAttention(Z, Z | W^enc_l, Mask ≡ 1)
    6. Z[:, t] ← layer_norm(Z[:, t] | γ^1_l, β^1_l)
    7. Z ← Z + W^l_mlp2 ReLU(W^l_mlp1 Z + b^l_mlp1 1ᵀ) + b^l_mlp2 1ᵀ
    8. Z[:, t] ← layer_norm(Z[:, t] | γ^2_l, β^2_l)
    """
    return _layer(Z, W, variant, "ed_encoder", causal=False, pad=pad)


@algorithm("bert_layer")
def bert_layer(X: Matrix, W: LayerParams, *, variant: VariantSet = PAPER,
                          pad: Optional[Sequence[Any]] = None) -> Matrix:
    """Algorithm 9, lines 5-8: one BERT layer (post-LN, exact GELU, Mask ≡ 1).

    5. X ← X + MHAttention(X, X | W_l, Mask ≡ 1)
    6. X[:, t] ← layer_norm(X[:, t] | γ^1_l, β^1_l)
    7. X ← X + W^l_mlp2 GELU(W^l_mlp1 X + b^l_mlp1 1ᵀ) + b^l_mlp2 1ᵀ
    8. X[:, t] ← layer_norm(X[:, t] | γ^2_l, β^2_l)
    """
    return _layer(X, W, variant, "bert", causal=False, pad=pad)


@algorithm("gpt2_layer")
def gpt2_layer(X: Matrix, W: LayerParams, *, variant: VariantSet = PAPER,
                          pad: Optional[Sequence[Any]] = None, positions: Optional[Sequence[int]] = None) -> Matrix:
    """Algorithm 10, lines 5-8: one GPT-2 layer (pre-LN, exact GELU, causal).

    5. X̃[:, t] ← layer_norm(X[:, t] | γ^1_l, β^1_l)
    6. X ← X + MHAttention(X̃, X̃ | W_l, Mask[t_z, t_x] = [[t_z ≤ t_x]])  (∧ t_z > t_x − W under a
       sliding ``window`` W: ``unidirectional_mask``)
    7. X̃[:, t] ← layer_norm(X[:, t] | γ^2_l, β^2_l)
    8. X ← X + W^l_mlp2 GELU(W^l_mlp1 X̃ + b^l_mlp1 1ᵀ) + b^l_mlp2 1ᵀ

    The residual adds the un-normalised X (normalising X in place is a classic bug). ``positions``:
    ALiBi's p(t) where the padded model counts them among the real tokens (``pad_positions``).
    """
    return _layer(X, W, variant, "gpt2", causal=True, pad=pad, positions=positions)


def _decoder_names(X: Matrix, Z: Matrix, W: DecoderLayerParams, *, variant: VariantSet = PAPER,
                   **_: Any) -> Names:
    return _sublayer_names("ed_decoder", variant)


@algorithm("decoder_layer", names=_decoder_names)
def decoder_layer(X: Matrix, Z: Matrix, W: DecoderLayerParams, *,
                  variant: VariantSet = PAPER, pad_x: Optional[Sequence[Any]] = None,
                  pad_z: Optional[Sequence[Any]] = None) -> Matrix:
    """Algorithm 8, lines 14-19: one decoder layer with cross-attention to Z.

    14. X ← X + MHAttention(X, X | W^dec_l, Mask[t_z, t_x] = [[t_z ≤ t_x]])  (∧ t_z > t_x − W
        under a sliding ``window`` W)
    15. X[:, t] ← layer_norm(X[:, t] | γ^3_l, β^3_l)
    16. X ← X + MHAttention(X, Z | W^{e/d}_l, Mask ≡ 1)
    17. X[:, t] ← layer_norm(X[:, t] | γ^4_l, β^4_l)
    18. X ← X + W^l_mlp4 ReLU(W^l_mlp3 X + b^l_mlp3 1ᵀ) + b^l_mlp4 1ᵀ
    19. X[:, t] ← layer_norm(X[:, t] | γ^5_l, β^5_l)

    Pre-LN placement normalises each sublayer's input instead (the context Z
    is used as given: a pre-LN encoder ends with its own final norm).

    Padding (``padded``) masks keys: ``pad_x`` the decoder's own positions in line 14 (Hugging
    Face's ``decoder_attention_mask``), ``pad_z`` the encoder's positions in line 16 (the encoder's
    ``attention_mask``, which BART, T5 and Marian pass on to cross-attention).

    Intermediates: self_attn, norm1 (γ3, β3), cross_attn, norm2 (γ4, β4), mlp, norm3 (γ5, β5), the
    residual sums res1-res3 (and the output norms under sandwich: ``_sublayer_names``).
    """
    _, ell_x = shape(X)
    _, ell_z = shape(Z)
    causal = padded(unidirectional_mask(ell_x, ell_x, variant=variant), pad_x, variant, "pad_x")
    full = padded(bidirectional_mask(ell_z, ell_x), pad_z, variant, "pad_z")
    act = variant.resolved_activation("ed_decoder")

    def MLP(Y: Matrix) -> Matrix:
        return mlp(Y, W.W_mlp3, W.b_mlp3, W.W_mlp4, W.b_mlp4, act, lin=_lin(W.W_mlp3_lin, W.b_mlp3_lin),
                   hidden=W.mlp_hidden)

    def MHAttention(X: Matrix, Z: Matrix, W_l: MHAttentionParams, Mask: list[list[int]]) -> Matrix:
        # causal_self (ALiBi's bias): line 14's self-attention under the causal mask, not line 16's
        return mh_attention(X, Z, W_l, Mask, variant=variant, causal_self=Mask is causal)

    def norm(X: Matrix, gamma: Optional[Vector], beta: Optional[Vector]) -> Matrix:
        return norm_columns(X, gamma, beta, variant)

    placement = variant.resolved_norm_placement("ed_decoder")
    if placement == "post":
        X = add(X, MHAttention(X, X, W.self_attn, causal))  # line 14
        X = norm(X, W.gamma3, W.beta3)  # line 15
        X = add(X, MHAttention(X, Z, W.cross_attn, full))  # line 16
        X = norm(X, W.gamma4, W.beta4)  # line 17
        X = add(X, MLP(X))  # line 18
        return norm(X, W.gamma5, W.beta5)  # line 19
    if placement == "res_post":  # lines 14-19 with each norm moved onto the sublayer's output
        X = add(X, norm(MHAttention(X, X, W.self_attn, causal), W.gamma3, W.beta3))
        X = add(X, norm(MHAttention(X, Z, W.cross_attn, full), W.gamma4, W.beta4))
        return add(X, norm(MLP(X), W.gamma5, W.beta5))
    if placement == "sandwich":  # the pre-LN lines with each sublayer's output normalised before it is added
        X_tilde = norm(X, W.gamma3, W.beta3)
        X = add(X, norm(MHAttention(X_tilde, X_tilde, W.self_attn, causal), W.gamma3_out, W.beta3_out))
        X_tilde = norm(X, W.gamma4, W.beta4)
        X = add(X, norm(MHAttention(X_tilde, Z, W.cross_attn, full), W.gamma4_out, W.beta4_out))
        X_tilde = norm(X, W.gamma5, W.beta5)
        return add(X, norm(MLP(X_tilde), W.gamma5_out, W.beta5_out))
    X_tilde = norm(X, W.gamma3, W.beta3)
    X = add(X, MHAttention(X_tilde, X_tilde, W.self_attn, causal))
    X_tilde = norm(X, W.gamma4, W.beta4)
    X = add(X, MHAttention(X_tilde, Z, W.cross_attn, full))
    X_tilde = norm(X, W.gamma5, W.beta5)
    return add(X, MLP(X_tilde))
