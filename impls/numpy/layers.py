"""Algorithm 5 (MHAttention) and the layers of Algorithms 8-10, in NumPy.

Parameters arrive flat (``layers.0.attn.heads.1.W_q``); ``gather_*`` read
them by name and stack the H heads into one leading axis so that all heads
run in one batched matmul (no Python loop over heads or tokens). Which
parameters exist is decided from the variant set, not from what happens to be
present, so a missing parameter is a KeyError rather than a silent default.

A layer is a list of residual blocks (attention, cross-attention, MLP), each
post-LN, X ← norm(X + f(X)), pre-LN, X ← X + f(norm(X)), or res-post-norm,
X ← X + norm(f(X)). The MLP is act(W₁X + b₁1ᵀ), optionally gated
(⊙ (V X + c 1ᵀ)) and followed by more hidden layers, then W₂(·) + b₂1ᵀ (none
under ``mlp="one_layer"``: the last hidden layer is the output). The ``*_fwd``
functions return the output and a cache (NamedTuples that also record the
flat parameter names involved); the hand-written backward passes that read
those caches are in ``grad_layers.py``. The cache-less functions are the
same computation.

Grouped-query attention (``kv_group`` > 1) stacks the H/G ``kv_heads`` instead of the heads' own
W_k, W_v (``gather_mha``); padding masks keys in every attention of a layer (``padded``: the
decoder layer's self-attention by ``pad_x``, its cross-attention by ``pad_z``); a
decoding step runs a layer on new columns only, at an ``offset`` position, its attention reading
and extending a ``KVCache`` (``stack_layer_fwd``).

Line numbers cite the restatement in ALGORITHMS.md. X is (..., d_e, ℓ).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Mapping, NamedTuple, Optional, Union

import numpy as np

from .components import (
    AttentionCache,
    KVCache,
    NormCache,
    activation,
    attention_fwd,
    group_heads,
    norm_fwd as _norm_columns_fwd,
    t5_bias,
    unidirectional_mask,
)

__all__ = [
    "DenseCache",
    "GateCache",
    "MHA",
    "MHACache",
    "MLPCache",
    "NamedNormCache",
    "ParallelCache",
    "ResidualCache",
    "decoder_layer",
    "decoder_layer_fwd",
    "gather_mha",
    "gather_variant_mha",
    "mh_attention",
    "mh_attention_fwd",
    "mlp_fwd",
    "norm",
    "norm_fwd",
    "padded",
    "stack_layer",
    "stack_layer_fwd",
]

Params = Mapping[str, Any]


class MHA(NamedTuple):
    """W of Algorithm 5 with the heads stacked on axis 0 (head 0 = the paper's head 1).

    Under grouped-query attention (``kv_group`` = G > 1) the key/value maps are the H_kv = H/G
    ``kv_heads`` and ``kv_index[h]`` names the one query head h reads; otherwise H_kv = H and
    ``kv_index`` is None (head h reads its own)."""

    W_q: np.ndarray  # (H, d_attn, d_x)
    b_q: Optional[np.ndarray]  # (H, d_attn)
    W_k: np.ndarray  # (H_kv, d_attn, d_z)
    b_k: Optional[np.ndarray]  # (H_kv, d_attn)
    W_v: np.ndarray  # (H_kv, d_mid, d_z)
    b_v: Optional[np.ndarray]  # (H_kv, d_mid)
    W_o: np.ndarray  # (d_out, H*d_mid)
    b_o: Optional[np.ndarray]  # (d_out,)
    kv_index: Optional[np.ndarray] = None  # (H,) kv head of each query head (GQA), None: its own
    gamma_q: Optional[np.ndarray] = None  # (d_attn,) QK-norm's query gain, shared by the heads
    gamma_k: Optional[np.ndarray] = None  # (d_attn,) QK-norm's key gain
    longrope: Optional[tuple[np.ndarray, np.ndarray]] = None  # LongRoPE's (ext (r/2,), mscale (1,)): Phi-3


def gather_mha(params: Params, prefix: str, H: int, bias: bool, kv_group: int = 1,
               kv_order: str = "consecutive", out_bias: Optional[bool] = None) -> MHA:
    """Stack ``{prefix}heads.{h}.*`` for h = 0..H−1 and read ``W_o``/``b_o``; under ``kv_group`` = G > 1
    the key/value maps are ``{prefix}kv_heads.{g}.W_k``, ``b_k``, ``W_v``, ``b_v`` for g < H/G.

    ``bias``: the heads' b_q, b_k, b_v are read; ``out_bias`` (default: ``bias``): b_o is read. An
    unread bias is None (absent, i.e. zero)."""
    kv_index = group_heads(kv_group, kv_order, H)
    out_bias = bias if out_bias is None else out_bias

    def stack(leaf: str) -> np.ndarray:
        if kv_index is not None and leaf[-1] in "kv":  # W_k, b_k, W_v, b_v of the shared kv heads
            return np.stack([params[f"{prefix}kv_heads.{g}.{leaf}"] for g in range(H // kv_group)])  # (H_kv, ...)
        return np.stack([params[f"{prefix}heads.{h}.{leaf}"] for h in range(H)])  # (H, ...)
    return MHA(
        stack("W_q"), stack("b_q") if bias else None,
        stack("W_k"), stack("b_k") if bias else None,
        stack("W_v"), stack("b_v") if bias else None,
        params[prefix + "W_o"], params[prefix + "b_o"] if out_bias else None,
        kv_index,
    )


def gather_variant_mha(params: Params, prefix: str, H: int, variant) -> MHA:
    """``gather_mha`` with the bias and grouped-query switches of ``variant``.

    ``attn_bias_at`` (read under ``attn_bias`` only) says which projections carry their bias: "all"
    (the paper's Algorithm 5: b_q, b_k, b_v and b_o), "qkv" (the heads' b_q, b_k, b_v, no b_o: e.g.
    Qwen2's q/k/v_proj with bias=True beside o_proj without) or "out" (b_o only: bias-free head
    projections and a biased output projection, as in Karpathy's ng-video-lecture). A bias left out
    gets no gradient (``grad_layers.mh_attention_bwd`` adds none for a None bias)."""
    qkv = variant.attn_bias and variant.attn_bias_at in ("all", "qkv")
    out = variant.attn_bias and variant.attn_bias_at in ("all", "out")
    if variant.attn_bias and variant.attn_bias_at not in ("all", "qkv", "out"):
        raise ValueError(f"unknown attn_bias_at {variant.attn_bias_at!r}")
    # multi-query attention (kv_heads="one", Shazeer 2019) is one group of all H heads: one kv head at any H
    G = H if variant.kv_heads == "one" else variant.kv_group
    W = gather_mha(params, prefix, H, qkv, G, variant.kv_order, out_bias=out)
    if variant.qk_norm == "rms" and prefix + "gamma_q" in params:  # a layer's attention, or a causal
        # self-attention entry's (spec 2.12); mh_attention and the bidirectional entries have no gains
        W = W._replace(gamma_q=params[prefix + "gamma_q"], gamma_k=params[prefix + "gamma_k"])
    elif variant.qk_norm not in ("none", "rms"):
        raise ValueError(f"unknown qk_norm {variant.qk_norm!r}")
    src = prefix if prefix + "rope_ext" in params else ""
    if variant.rope_factors == "longrope" and variant.rotary != "none" and src + "rope_ext" in params:
        # Phi-3's LongRoPE factors: the attention's own (``rope_ext``, a layer's ``attn.rope_ext``), or the
        # model's, which every layer shares (Phi3Model's one rotary_emb: ``layers.{l}.attn.`` has none); an
        # entry that does not list the switch holds none and rotates as rope_scaling says
        W = W._replace(longrope=(params[src + "rope_ext"], params[src + "rope_mscale"]))
    elif variant.rope_factors not in ("none", "longrope"):
        raise ValueError(f"unknown rope_factors {variant.rope_factors!r}")
    return W


# --------------------------------------------------------------------------
# Algorithm 5
# --------------------------------------------------------------------------


class MHACache(NamedTuple):
    prefix: str  # flat-name prefix of this MHAttention's parameters
    W: MHA
    Y: np.ndarray  # (..., H*d_mid, ℓ_x)  the stacked head outputs (line 3)
    heads: AttentionCache  # the H heads' Algorithm 4 caches, heads on axis −3


def mh_attention_fwd(X: np.ndarray, Z: np.ndarray, W: MHA, Mask: Optional[np.ndarray], variant,
                     prefix: str = "", *, offset: int = 0, kv_cache: Optional[KVCache] = None,
                     causal_self: bool = False, pos_bias: Optional[np.ndarray] = None,
                     alibi_positions: Optional[np.ndarray] = None) -> tuple[np.ndarray, MHACache]:
    """Algorithm 5: Ṽ ← W_o [Y^1; …; Y^H] + b_o 1ᵀ with Y^h = Attention(X, Z | W^h_qkv, Mask).

    X: (..., d_x, ℓ_x), Z: (..., d_z, ℓ_z), Mask: (..., ℓ_z, ℓ_x) or None (≡ 1).
    Head h reads key/value head ``W.kv_index[h]`` under GQA. ``offset``: the absolute position of
    the first column of X and Z (RoPE); ``kv_cache``: decoding, the keys and values of earlier
    positions (``attention_fwd``), Mask then (ℓ_cached + ℓ_z) × ℓ_x. ``causal_self``: a causal
    self-attention, the one attention that reads ALiBi's bias (``position_bias``). ``pos_bias``:
    T5's relative bias (H, ℓ_z, ℓ_x) (``components.t5_bias``), added to every head's scaled scores.
    """
    Xh = X[..., None, :, :]  # (..., 1, d_x, ℓ_x)  broadcast against the head axis
    Zh = Z[..., None, :, :]  # (..., 1, d_z, ℓ_z)
    Mh = None if Mask is None else Mask[..., None, :, :]  # (..., 1, ℓ_z, ℓ_x)
    gains = None if W.gamma_q is None or W.gamma_k is None else (W.gamma_q, W.gamma_k)
    heads_fwd = partial(attention_fwd, kv_index=W.kv_index, offset=offset, kv_cache=kv_cache, alibi=causal_self,
                        qk_gains=gains, heads=W.W_q.shape[0], pos_bias=pos_bias,
                        alibi_positions=alibi_positions, longrope=W.longrope)  # W_q: (H, d_attn, d_x)
    # lines 1-2, every head at once: Y (..., H, d_mid, ℓ_x)
    Y, heads = heads_fwd(Xh, Zh, W.W_q, W.b_q, W.W_k, W.b_k, W.W_v, W.b_v, Mh, variant)
    H, d_mid, ell_x = Y.shape[-3:]
    Y = Y.reshape(Y.shape[:-3] + (H * d_mid, ell_x))  # (..., H*d_mid, ℓ_x)  line 3: heads stacked, head 1 on top
    out = W.W_o @ Y  # (..., d_out, ℓ_x)  line 4
    if W.b_o is not None:
        out = out + W.b_o[:, None]  # + b_o 1ᵀ
    return out, MHACache(prefix, W, Y, heads)


def mh_attention(X: np.ndarray, Z: np.ndarray, W: MHA, Mask: Optional[np.ndarray], variant,
                 causal_self: bool = False, pos_bias: Optional[np.ndarray] = None) -> np.ndarray:
    return mh_attention_fwd(X, Z, W, Mask, variant, causal_self=causal_self, pos_bias=pos_bias)[0]


# --------------------------------------------------------------------------
# norms and the MLP
# --------------------------------------------------------------------------


class NamedNormCache(NamedTuple):
    gamma: Optional[str]  # flat name of γ, None when the variant has none
    beta: Optional[str]  # flat name of β, None when the variant has none
    cache: NormCache


def norm_fwd(X: np.ndarray, params: Params, gamma: str, beta: str, variant,
             kind: Optional[str] = None) -> tuple[np.ndarray, NamedNormCache]:
    """The norm named by ``kind`` (default ``variant.norm``) per column, with γ/β by the affine switch."""
    kind = kind or variant.norm
    g_name = gamma if variant.affine in ("scale_shift", "scale") else None
    b_name = beta if variant.affine == "scale_shift" and kind == "layer_norm" else None
    out, cache = _norm_columns_fwd(X, params[g_name] if g_name else None, params[b_name] if b_name else None,
                                   variant, kind)
    return out, NamedNormCache(g_name, b_name, cache)


def norm(X: np.ndarray, params: Params, gamma: str, beta: str, variant, kind: Optional[str] = None) -> np.ndarray:
    return norm_fwd(X, params, gamma, beta, variant, kind)[0]


class GateCache(NamedTuple):
    """The linear branch of a gated MLP (``mlp="gated"``): G = V X + c 1ᵀ."""

    names: tuple[str, Optional[str]]  # W_mlp{first}_lin, b_mlp{first}_lin (None without MLP biases)
    W: np.ndarray  # (d_mlp, d_e)  V
    G: np.ndarray  # (..., d_mlp, ℓ)  V X + c 1ᵀ


class DenseCache(NamedTuple):
    """One further hidden layer of a deeper MLP (``mlp_depth`` > 1): out = act(W inp + b 1ᵀ)."""

    names: tuple[str, Optional[str]]  # mlp_hidden.{k}.W, mlp_hidden.{k}.b (None without MLP biases)
    W: np.ndarray  # (d_mlp, d_mlp)
    inp: np.ndarray  # (..., d_mlp, ℓ)  the hidden state it reads
    pre: np.ndarray  # (..., d_mlp, ℓ)  W inp + b 1ᵀ, before the activation


class MLPCache(NamedTuple):
    #: W_mlp{first}, b_mlp{first}, W_mlp{second}, b_mlp{second} (the second pair None under mlp="one_layer")
    names: tuple[str, Optional[str], Optional[str], Optional[str]]
    act: str  # activation name
    X: np.ndarray  # (..., d_e, ℓ)  input
    H1: np.ndarray  # (..., d_mlp, ℓ)  pre-activation
    A1: np.ndarray  # (..., d_mlp, ℓ)  act(H1)
    W1: np.ndarray
    W2: Optional[np.ndarray]  # (d_e, d_mlp); None under mlp="one_layer" (no second map)
    gate: Optional[GateCache] = None  # mlp="gated"
    hidden: tuple[DenseCache, ...] = ()  # mlp_depth − 1 further layers, in the order they run
    last: Optional[np.ndarray] = None  # (..., d_mlp, ℓ)  what W_mlp{second} reads (None: A1)


def _gate_fwd(X: np.ndarray, params: Params, prefix: str, first: str, variant) -> GateCache:
    """G = V X + c 1ᵀ, the linear branch of act(W₁X + b₁1ᵀ) ⊙ (V X + c 1ᵀ) (Shazeer 2020, "GLU Variants
    Improve Transformer", FFN_GLU-family: act(xW) ⊗ xV, here with tokens as columns)."""
    w = f"{prefix}W_mlp{first}_lin"
    b = f"{prefix}b_mlp{first}_lin" if variant.mlp_bias else None
    G = params[w] @ X  # (..., d_mlp, ℓ)
    if b:
        G = G + params[b][:, None]  # + c 1ᵀ
    return GateCache((w, b), params[w], G)


def _dense_fwd(Hk: np.ndarray, params: Params, prefix: str, variant, act_name: str) -> tuple[np.ndarray, DenseCache]:
    """One further hidden layer H ← act(W H + b 1ᵀ), W ∈ R^{d_mlp×d_mlp} (``mlp_depth``)."""
    w = prefix + "W"
    b = prefix + "b" if variant.mlp_bias else None
    pre = params[w] @ Hk  # (..., d_mlp, ℓ)
    if b:
        pre = pre + params[b][:, None]
    return activation(act_name)(pre), DenseCache((w, b), params[w], Hk, pre)


def mlp_fwd(X: np.ndarray, params: Params, prefix: str, first: str, second: str, variant,
            act_name: str) -> tuple[np.ndarray, MLPCache]:
    """W_mlp{second} H + b 1ᵀ with H = act(W_mlp{first} X + b 1ᵀ) (Alg. 8 lines 7, 18; Alg. 9 line 7;
    Alg. 10 line 8), and the MLP switches:

    - ``mlp="gated"``: H = act(W_mlp{first} X + b 1ᵀ) ⊙ (W_mlp{first}_lin X + b_lin 1ᵀ) (Shazeer 2020;
      SwiGLU with ``activation="silu"``);
    - ``mlp_depth`` = k: then k − 1 further layers H ← act(W H + b 1ᵀ), ``mlp_hidden.{j}.W``/``.b``;
    - ``mlp="one_layer"``: no second map, the last H is the output, so d_mlp = d_e (seed 004, the
      numeric tutorial, II.J: "one linear layer L, and one ReLU layer R", F = ReLU(A W_L + b_L),
      here with tokens as columns: act(W_mlp{first} X + b 1ᵀ)).
    """
    one_layer = variant.mlp == "one_layer"
    w1 = f"{prefix}W_mlp{first}"
    w2 = None if one_layer else f"{prefix}W_mlp{second}"
    b1 = f"{prefix}b_mlp{first}" if variant.mlp_bias else None
    b2 = f"{prefix}b_mlp{second}" if variant.mlp_bias and not one_layer else None
    if one_layer and params[w1].shape[0] != X.shape[-2]:  # else a d_mlp of 1 would broadcast into X
        raise ValueError(f"mlp='one_layer' adds act(W_mlp{first} X) to X: d_mlp = {params[w1].shape[0]} "
                         f"must equal d_e = {X.shape[-2]}")
    H1 = params[w1] @ X  # (..., d_mlp, ℓ)
    if b1:
        H1 = H1 + params[b1][:, None]
    A1 = activation(act_name)(H1)
    act1 = A1  # (..., d_mlp, ℓ)  act(H1); A1 below is the hidden state as it runs on
    gate = _gate_fwd(X, params, prefix, first, variant) if variant.mlp == "gated" else None
    if gate is not None:
        A1 = A1 * gate.G  # (..., d_mlp, ℓ)  act(H1) ⊙ G
    hidden = []
    for k in range(variant.mlp_depth - 1):
        A1, dense = _dense_fwd(A1, params, f"{prefix}mlp_hidden.{k}.", variant, act_name)  # (..., d_mlp, ℓ)
        hidden.append(dense)
    if w2 is None:  # mlp="one_layer": the last hidden state is the output, (..., d_e, ℓ) as d_mlp = d_e
        out = A1
    else:
        out = params[w2] @ A1  # (..., d_e, ℓ)
        if b2:
            out = out + params[b2][:, None]
    return out, MLPCache((w1, b1, w2, b2), act_name, X, H1, act1, params[w1], None if w2 is None else params[w2],
                         gate, tuple(hidden), A1)


# --------------------------------------------------------------------------
# residual blocks and layers
# --------------------------------------------------------------------------


class ResidualCache(NamedTuple):
    placement: str  # "post", "pre", "res_post" or "sandwich"
    kind: str  # "self" (f(Y) = MHA(Y, Y)), "cross" (f(Y) = MHA(Y, Z)) or "mlp"
    f: Any  # MHACache or MLPCache
    norm: NamedNormCache
    norm_out: Optional[NamedNormCache] = None  # sandwich: the norm of f's output


#: one layer's caches: a ResidualCache per sublayer, or one ParallelCache (``residual`` not sequential)
LayerCache = Union[ResidualCache, "ParallelCache"]


def _residual_fwd(X: np.ndarray, f: Callable[[np.ndarray], tuple[np.ndarray, Any]], kind: str,
                  placement: str, params: Params, gamma: str, beta: str, variant) -> tuple[np.ndarray, ResidualCache]:
    """post: X ← norm(X + f(X)); pre: X ← X + f(norm(X)) (the residual adds the un-normalised X);
    res_post: X ← X + norm(f(X)) (Swin Transformer v2's res-post-norm, Liu et al. 2022: only the
    sublayer's output is normalised, the residual stream never is); sandwich: X ← X + norm'(f(norm(X)))
    with the output norm's own γ/β (``gamma`` + "_out": Gemma 2's post_attention_layernorm and
    post_feedforward_layernorm, transformers 5.24 Gemma2DecoderLayer)."""
    out_cache = None
    if placement == "post":
        y, f_cache = f(X)
        out, n_cache = norm_fwd(X + y, params, gamma, beta, variant)
    elif placement in ("pre", "sandwich"):
        Y, n_cache = norm_fwd(X, params, gamma, beta, variant)
        y, f_cache = f(Y)
        if placement == "sandwich":  # f's output normalised with its own γ/β before the sum
            y, out_cache = norm_fwd(y, params, gamma + "_out", beta + "_out", variant)
        out = X + y
    elif placement == "res_post":
        y, f_cache = f(X)
        normed, n_cache = norm_fwd(y, params, gamma, beta, variant)
        out = X + normed
    else:
        raise ValueError(f"unknown norm placement {placement!r}")
    return out, ResidualCache(placement, kind, f_cache, n_cache, out_cache)


def _causal(ell: int, variant) -> np.ndarray:
    """The self-attention mask Mask[t, t'] = [[t ≤ t']] (square, so alignment does not matter),
    narrowed to t > t' − W under a sliding ``window`` W."""
    return unidirectional_mask(ell, ell, variant.causal_alignment, variant.window)


def padded(Mask: Optional[np.ndarray], pad: Optional[np.ndarray], ell: int,
           ell_x: Optional[int] = None, name: str = "pad") -> Optional[np.ndarray]:
    """Mask[t_z, t_x] ∧ pad[t_z] (Mask None: ≡ 1): a padding position (pad[t] False) is no query's key.

    The padding mask of real code (Hugging Face's ``attention_mask``, torch's ``key_padding_mask``)
    masks keys only: a padding position still computes its own column. pad: (..., ℓ) bool over the
    ℓ keys, its leading axes a batch; ``ell_x`` the number of queries (default ℓ: self-attention;
    Alg. 8 line 16's cross-attention has ℓ_z keys and ℓ_x queries); the result (..., ℓ, ℓ_x).
    ``name`` names the flags in an error (the decoder's ``pad_x`` and ``pad_z``)."""
    if pad is None:
        return Mask
    ell_x = ell if ell_x is None else ell_x
    pad = np.asarray(pad, dtype=bool)
    if pad.shape[-1:] != (ell,):
        raise ValueError(f"{name}: one flag per position ({ell}); given shape {pad.shape}")
    base = np.ones((ell, ell_x), dtype=bool) if Mask is None else Mask  # (ℓ, ℓ_x) [t_z, t_x]
    return base & pad[..., :, None]  # (..., ℓ, ℓ_x)  key t_z kept only where pad[t_z]


def _after_cache(Mask: Optional[np.ndarray], cached: int, ell: int, window: int = 0) -> Optional[np.ndarray]:
    """A self-attention mask over ``cached`` earlier positions and X's ℓ: every query sees the cached
    keys (they precede it), then Mask among X's own columns; under a sliding ``window`` W only the
    keys t_z > t_x − W at absolute positions (the causal mask aligned bottom-right over them all)."""
    if Mask is None or cached == 0:
        return Mask
    if window:
        return unidirectional_mask(cached + ell, ell, "bottom_right", window)  # (cached + ℓ, ℓ)
    return np.concatenate([np.ones((cached, ell), dtype=bool), Mask], axis=0)  # (cached + ℓ, ℓ)


def _t5_bias(params: Params, prefix: str, ell: int, bidirectional: bool, variant) -> Optional[np.ndarray]:
    """T5's relative bias (H, ℓ, ℓ) of a layer's self-attention from its table ``<prefix>rel_bias`` under
    rel_bias="t5_buckets" (spec 2.13: a T5 stack's first layer); None where there is no table. A constant of
    the scores: the layer's backward is unchanged (the table gets no gradient: no entry trains it)."""
    if variant.rel_bias != "t5_buckets" or prefix + "rel_bias" not in params:
        return None
    return t5_bias(params[prefix + "rel_bias"], ell, ell, bidirectional, variant)


def stack_layer_fwd(X: np.ndarray, params: Params, prefix: str, variant, H: int, arch: str, *,
                    pad: Optional[np.ndarray] = None, offset: int = 0,
                    kv_cache: Optional[KVCache] = None,
                    alibi_positions: Optional[np.ndarray] = None,
                    table: Optional[str] = None) -> tuple[np.ndarray, tuple[LayerCache, ...]]:
    """One encoder (Alg. 8 lines 5-8), BERT (Alg. 9 lines 5-8) or GPT-2 (Alg. 10 lines 5-8) layer.

    arch ∈ {"ed_encoder", "bert", "gpt2"} picks the paper's norm placement and
    activation (``VariantSet.resolved_*``) and the mask: Mask ≡ 1 for the
    encoder and BERT, causal for GPT-2.
    post: X ← norm(X + f(X)) for each sublayer f (Alg. 8/9 lines 5-8);
    pre:  X ← X + f(norm(X)) (Alg. 10 lines 5-8; the residual adds the
    un-normalised X);
    res_post: X ← X + norm(f(X)), with the same γ1/β1, γ2/β2;
    sandwich: X ← X + norm(f(norm(X))), the outer norms with γ1_out/β1_out, γ2_out/β2_out.

    ``pad`` (..., ℓ): padding positions masked as keys (``padded``). Decoding: ``offset`` is the
    absolute position of X's first column and ``kv_cache`` holds the keys and values of the
    positions before it, which every query of X may read. ``alibi_positions`` (..., ℓ): ALiBi's
    positions where a padded model counts them among the real tokens (``pad_positions="real"``).
    ``table``: the prefix of the T5 bias table this layer reads (its stack's first layer's, in a T5 model;
    default its own ``<prefix>attn.``).
    """
    placement = variant.resolved_norm_placement(arch)
    act = variant.resolved_activation(arch)
    Mask = _causal(X.shape[-1], variant) if arch == "gpt2" else None
    if kv_cache is not None:
        Mask = _after_cache(Mask, kv_cache.length, X.shape[-1], variant.window if arch == "gpt2" else 0)
    Mask = padded(Mask, pad, X.shape[-1])
    W = gather_variant_mha(params, prefix + "attn.", H, variant)

    bias = _t5_bias(params, table or prefix + "attn.", X.shape[-1], arch != "gpt2", variant)

    def attn(Y: np.ndarray):
        return mh_attention_fwd(Y, Y, W, Mask, variant, prefix + "attn.", offset=offset, kv_cache=kv_cache,
                                causal_self=arch == "gpt2", pos_bias=bias, alibi_positions=alibi_positions)

    def mlp(Y: np.ndarray):
        return mlp_fwd(Y, params, prefix, "1", "2", variant, act)

    if variant.residual != "sequential" and arch == "gpt2":  # read by the decoder-only layer alone
        return _parallel_fwd(X, attn, mlp, placement, params, prefix, variant)
    X, c1 = _residual_fwd(X, attn, "self", placement, params, prefix + "gamma1", prefix + "beta1", variant)  # lines 5-6
    X, c2 = _residual_fwd(X, mlp, "mlp", placement, params, prefix + "gamma2", prefix + "beta2", variant)  # lines 7-8
    return X, (c1, c2)


class ParallelCache(NamedTuple):
    """What the backward of a parallel-residual layer needs (``grad_layers.stack_layer_bwd``)."""

    attn: Any  # MHACache of Attn(N₁X)
    mlp: Any  # MLPCache of MLP(N₂X) (N₁X under parallel_shared)
    norm1: NamedNormCache
    norm2: Optional[NamedNormCache]  # None: the one shared norm (GPT-J)


def _parallel_fwd(X: np.ndarray, attn: Callable[[np.ndarray], tuple[np.ndarray, Any]],
                  mlp: Callable[[np.ndarray], tuple[np.ndarray, Any]], placement: str, params: Params, prefix: str,
                  variant) -> tuple[np.ndarray, tuple[ParallelCache]]:
    """Lines 5-8 side by side (``residual``): X + (Attn(N₁X) + MLP(N₂X)), N₂ = N₁ under
    "parallel_shared" (GPT-J's ln_1; GPT-NeoX and Falcon-40B have two norms). Pre-LN only: every
    source normalises each branch's input."""
    if placement != "pre":
        raise ValueError(f"residual={variant.residual!r} is defined for pre-LN layers only; given {placement!r}")
    Y1, n1 = norm_fwd(X, params, prefix + "gamma1", prefix + "beta1", variant)  # (..., d_e, ℓ)
    Y2, n2 = (Y1, None) if variant.residual == "parallel_shared" else \
        norm_fwd(X, params, prefix + "gamma2", prefix + "beta2", variant)
    a, a_cache = attn(Y1)  # (..., d_e, ℓ)
    m, m_cache = mlp(Y2)  # (..., d_e, ℓ)
    return X + (a + m), (ParallelCache(a_cache, m_cache, n1, n2),)  # the branches summed first, as HF does


def stack_layer(X: np.ndarray, params: Params, prefix: str, variant, H: int, arch: str, **kw: Any) -> np.ndarray:
    return stack_layer_fwd(X, params, prefix, variant, H, arch, **kw)[0]


def decoder_layer_fwd(X: np.ndarray, Z: np.ndarray, params: Params, prefix: str, variant, H: int, *,
                      pad_x: Optional[np.ndarray] = None, pad_z: Optional[np.ndarray] = None,
                      table: Optional[str] = None) -> tuple[np.ndarray, tuple[ResidualCache, ...]]:
    """Algorithm 8 lines 14-19: causal self-attention, cross-attention to Z (Mask ≡ 1), MLP.

    X: (..., d_e, ℓ_x) decoder stream, Z: (..., d_e, ℓ_z) encoder output.
    post (paper): X ← norm(X + f(X)) after each of the three sublayers.
    pre: X += SelfAttn(LN3 X); X += CrossAttn(LN4 X, Z); X += MLP(LN5 X),
    with Z used as given (a pre-LN encoder ends in its own final norm).
    res_post: X += LN3(SelfAttn(X)); X += LN4(CrossAttn(X, Z)); X += LN5(MLP(X)).
    sandwich: X += LN3'(SelfAttn(LN3 X)); ..., the outer norms with γ3_out/β3_out ... γ5_out/β5_out.

    Padding (``padded``) masks keys: ``pad_x`` (..., ℓ_x) the decoder's own positions in line 14,
    Mask[t_z, t_x] = [[t_z ≤ t_x]] ∧ pad_x[t_z] (Hugging Face's ``decoder_attention_mask``);
    ``pad_z`` (..., ℓ_z) the encoder's positions in line 16, Mask ≡ 1 ∧ pad_z[t_z] (the encoder's
    ``attention_mask``, passed on to cross-attention). ``table``: the prefix of the T5 bias table of the
    self-attention (the decoder stack's first layer's, in a T5 model; default ``<prefix>self_attn.``).
    """
    placement = variant.resolved_norm_placement("ed_decoder")
    act = variant.resolved_activation("ed_decoder")
    ell_x, ell_z = X.shape[-1], Z.shape[-1]
    self_mask = padded(_causal(ell_x, variant), pad_x, ell_x, name="pad_x")  # (..., ℓ_x, ℓ_x)  line 14
    cross_mask = padded(None, pad_z, ell_z, ell_x, name="pad_z")  # (..., ℓ_z, ℓ_x) or None (≡ 1)  line 16
    W_self = gather_variant_mha(params, prefix + "self_attn.", H, variant)
    W_cross = gather_variant_mha(params, prefix + "cross_attn.", H, variant)

    bias = _t5_bias(params, table or prefix + "self_attn.", ell_x, False, variant)  # causal buckets; cross: none

    def self_attn(Y: np.ndarray):
        return mh_attention_fwd(Y, Y, W_self, self_mask, variant, prefix + "self_attn.", causal_self=True,
                                pos_bias=bias)

    def cross_attn(Y: np.ndarray):
        return mh_attention_fwd(Y, Z, W_cross, cross_mask, variant, prefix + "cross_attn.")

    def mlp(Y: np.ndarray):
        return mlp_fwd(Y, params, prefix, "3", "4", variant, act)

    def names(k: int) -> tuple[str, str]:
        return f"{prefix}gamma{k}", f"{prefix}beta{k}"

    X, c3 = _residual_fwd(X, self_attn, "self", placement, params, *names(3), variant)  # lines 14-15
    X, c4 = _residual_fwd(X, cross_attn, "cross", placement, params, *names(4), variant)  # lines 16-17
    X, c5 = _residual_fwd(X, mlp, "mlp", placement, params, *names(5), variant)  # lines 18-19
    return X, (c3, c4, c5)


def decoder_layer(X: np.ndarray, Z: np.ndarray, params: Params, prefix: str, variant, H: int,
                  **kw: Any) -> np.ndarray:
    """``decoder_layer_fwd`` without its cache (``pad_x``, ``pad_z`` pass through)."""
    return decoder_layer_fwd(X, Z, params, prefix, variant, H, **kw)[0]
