"""Algorithms 3-5: basic single-query attention, (masked) attention and
multi-head attention, plus the unidirectional mask they are used with.

Mask ∈ {0,1}^{ℓ_z×ℓ_x} is indexed [t_z, t_x] (context position first,
0-based) and 1 means "t_x may attend to t_z", as in the paper.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from . import numbers
from .errors import SpecError
from .functions import softcap, softmax
from .intermediates import Names, algorithm, intermediate, record, recording
from .linalg import (
    Matrix,
    Vector,
    add_bias,
    column,
    from_columns,
    map_columns,
    map_matrix,
    matmul,
    matvec,
    shape,
    transpose,
)
from .normalization import norm_columns
from .params import AttentionParams, MHAttentionParams, query_group
from .position_bias import alibi_slopes, t5_bias
from .rotary import rotate
from .variants import PAPER, VariantSet

__all__ = [
    "attention",
    "basic_single_query_attention",
    "mh_attention",
    "unidirectional_mask",
]


def _scale_divisor(variant: VariantSet, d_attn: int, d_model: int, heads: int = 1) -> Optional[Any]:
    """The divisor of the scores: √d_attn (paper), √d_model (= d_x), √(d_x/H) or none.

    ``sqrt_d_model_per_head``: √(d_x/H), H the heads of the multi-head attention the head belongs to
    (1 for Algorithms 3 and 4 alone), the quotient d_x/H taken as a real number (it need not be
    whole). Source: Gemma 2 (Hugging Face transformers 5.24, models/gemma2/modeling_gemma2.py,
    ``Gemma2Attention.__init__``: ``self.scaling = config.query_pre_attn_scalar**-0.5``, used as
    ``torch.matmul(query, key_states.transpose(2, 3)) * scaling`` in ``eager_attention_forward``;
    configuration_gemma2.py, ``Gemma2Config.query_pre_attn_scalar``, default 256 = head_dim). The
    released 27B config sets query_pre_attn_scalar = hidden_size / num_attention_heads = 4608/32 =
    144 with head_dim 128 (this value), and the 9B 3584/16 = 224 with head_dim 256 (this value too);
    the 2B sets it to head_dim = 256 where d_model/H is 288 (``sqrt_d_attn``). (The released values:
    AI-Hypercomputer/maxtext, MaxText/utils/ckpt_conversion/utils/hf_model_configs.py.)
    """
    N = numbers.current()
    if variant.attn_scale == "none":
        return None
    if variant.attn_scale == "sqrt_d_model_per_head":
        return N.sqrt(N.num(d_model) / N.num(heads))
    d = d_attn if variant.attn_scale == "sqrt_d_attn" else d_model
    return N.sqrt(N.num(d))


def _divide(values: list, divisor: Any) -> list:
    return values if divisor is None else [x / divisor for x in values]


@algorithm("basic_single_query_attention")
def basic_single_query_attention(e: Vector, E: Matrix, W: AttentionParams, *,
                                 variant: VariantSet = PAPER) -> Vector:
    """Algorithm 3: ṽ ← Attention(e, e_t | W_qkv), basic single-query attention.

    ``e`` ∈ R^{d_in} is the current token; column t of ``E`` ∈ R^{d_in×T} is
    the context token e_t (the paper's e_{t+1}).

    1. q ← W_q e + b_q
    2. k_t ← W_k e_t + b_k
    3. v_t ← W_v e_t + b_v
    4. α_t = exp(qᵀk_t / √d_attn) / Σ_u exp(qᵀk_u / √d_attn)
    5. return ṽ = Σ_t α_t v_t

    Variants: ``attn_scale``, ``scale_placement``, ``attn_bias`` (see Algorithm 4).
    Intermediates (``spec/intermediates.py``): q, K (column t: k_t), V (lines 1-3), scores
    (qᵀk_t), S (the scores the softmax reads), A (α, line 4).
    """
    N = numbers.current()
    d_attn = len(W.W_q)
    divisor = _scale_divisor(variant, d_attn, len(e))
    _, T = shape(E)
    if T == 0:
        raise SpecError("E", "at least one context token", "T = 0")
    q = _bias(matvec(W.W_q, e), W.b_q)  # line 1
    k = [_bias(matvec(W.W_k, column(E, t)), W.b_k) for t in range(T)]  # line 2
    v = [_bias(matvec(W.W_v, column(E, t)), W.b_v) for t in range(T)]  # line 3
    if recording():
        record("q", q)
        record("K", from_columns(k))  # column t: k_t
        record("V", from_columns(v))
    if variant.scale_placement == "query":
        q, divisor = _divide(q, divisor), None
    elif variant.scale_placement == "query_key_sqrt" and divisor is not None:
        root = N.sqrt(divisor)
        q, k, divisor = _divide(q, root), [_divide(kt, root) for kt in k], None
    raw = [N.dot(q, kt) for kt in k]
    record("scores", raw)  # qᵀk_t (of q, k_t already divided under scale_placement query*)
    scores = _divide(raw, divisor)
    record("S", scores)  # what the softmax reads
    alpha = softmax(scores)  # line 4
    record("A", alpha)
    d_out = len(W.W_v)
    return [N.dot(alpha, [v[t][i] for t in range(T)]) for i in range(d_out)]  # line 5


def _bias(x: Vector, b: Optional[Vector]) -> Vector:
    if b is None:
        return x
    if len(b) != len(x):
        raise SpecError("bias", f"a vector of length {len(x)}", f"length {len(b)}")
    return [xi + bi for xi, bi in zip(x, b)]


def _check_mask(Mask: Sequence[Sequence[Any]], ell_z: int, ell_x: int) -> None:
    if len(Mask) != ell_z or any(len(row) != ell_x for row in Mask):
        rows = len(Mask)
        cols = sorted({len(row) for row in Mask})
        raise SpecError("Mask", f"shape (ell_z, ell_x) = ({ell_z}, {ell_x})", f"{rows} rows of lengths {cols}")


def _attention_names(*_: Any, **__: Any) -> Names:
    """Algorithm 4's intermediates computed by calls (``spec/intermediates.py``): Q, K, V (lines 1-3),
    QK-norm's q_norm and k_norm (each the normalised Q, K, with its rms) and RoPE's Q_rot and K_rot.
    The scores, S and A are recorded where they are computed (``attention``)."""
    return {add_bias: ("Q", "K", "V"), norm_columns: ("q_norm", "k_norm"), rotate: ("Q_rot", "K_rot")}


@algorithm("attention", names=_attention_names)
def attention(X: Matrix, Z: Matrix, W: AttentionParams, Mask: Sequence[Sequence[Any]], *,
              variant: VariantSet = PAPER, slope: Optional[Any] = None,
              qk_gains: Optional[tuple[Vector, Vector]] = None, heads: int = 1,
              position_bias: Optional[Matrix] = None, positions: Optional[Sequence[int]] = None,
              rope_factors: Optional[tuple[Optional[Vector], Optional[Vector]]] = None) -> Matrix:
    """Algorithm 4: Ṽ ← Attention(X, Z | W_qkv, Mask).

    X ∈ R^{d_x×ℓ_x} (primary), Z ∈ R^{d_z×ℓ_z} (context).

    1. Q ← W_q X + b_q 1ᵀ            (d_attn×ℓ_x)
    2. K ← W_k Z + b_k 1ᵀ            (d_attn×ℓ_z)
    3. V ← W_v Z + b_v 1ᵀ            (d_out×ℓ_z)
    4. S ← Kᵀ Q                      (ℓ_z×ℓ_x)
    5. S[t_z, t_x] ← −∞ where Mask[t_z, t_x] = 0
    6. return Ṽ = V · softmax(S / √d_attn)   (d_out×ℓ_x)

    Decision (the paper gives 0/0): a column of Mask that is all 0 is handled
    by ``variant.empty_query``: "error" (default) raises SpecError; "nan"
    makes that output column NaN; "zeros" gives it zero attention weights
    (ṽ = 0); "uniform" gives weight 1/ℓ_z to every key.
    Variants ``attn_scale`` (√d_attn, √d_model = √d_x, √(d_x/H) with H = ``heads``, the heads
    of the multi-head attention calling it (1 alone: Gemma 2 27B's query_pre_attn_scalar), none) and
    ``scale_placement`` (divide S; divide Q before line 4; divide Q and K by
    the fourth root before line 4) change line 6; ``attn_bias`` drops b_q,
    b_k, b_v. Variant ``rotary`` (RoPE, ``spec/rotary.py``) rotates each
    column of Q and K by its position (t_x, t_z) after lines 1-2; ``rope_factors`` (e, m) (LongRoPE,
    ``rope_factors="longrope"``; given by ``mh_attention``) are its per-pair factors and attention factor.

    ``slope`` m (ALiBi, ``position_bias="alibi"``: Press et al. 2022, ``spec/position_bias.py``;
    given by ``mh_attention`` for a causal self-attention) adds the linear bias after the scale and
    before the mask: line 4' S[t_z, t_x] ← S[t_z, t_x]/√d_attn + m·(t_z − t_x), then lines 5-6 with
    no further division (the scale placements divide Q, K as before; the bias is added to KᵀQ).

    ``qk_gains`` (γ_q, γ_k) (QK-norm, ``qk_norm="rms"``; given by ``mh_attention`` for a layer's
    attention or a causal self-attention entry's): after lines 1-2 and before RoPE, every column of Q
    and of K is normalised by RMSnorm over its d_attn rows, Q[:, t] ← RMSnorm(Q[:, t] | γ_q), K[:, t] ←
    RMSnorm(K[:, t] | γ_k), with the variant's ε and its placement and the gain γ or 1 + γ
    (``norm_gain``); the gains are always applied (the norms of the reference code always have a
    weight), whatever ``affine`` says of the layer norms. Sources: Qwen3 (Hugging Face transformers
    5.24, models/qwen3/modeling_qwen3.py, ``Qwen3Attention``: ``q_norm = Qwen3RMSNorm(head_dim,
    eps=rms_norm_eps)``, ``query_states = self.q_norm(self.q_proj(hidden_states).view(hidden_shape))``,
    then ``apply_rotary_pos_emb``), Gemma 3 (models/gemma3/modeling_gemma3.py, ``Gemma3Attention``:
    ``q_norm = Gemma3RMSNorm(dim=head_dim)``, applied to the per-head states before
    ``apply_rotary_pos_emb``; Gemma3RMSNorm's gain is 1 + weight). The norm is over one head's width:
    OLMo 2 normalises all heads' H·d_attn rows at once, another convention.

    ``position_bias`` B ∈ R^{ℓ_z×ℓ_x} (T5's relative bias, ``rel_bias="t5_buckets"``: Raffel et al. 2020, §2.1,
    ``spec/position_bias.py`` ``t5_bucket``; given by ``mh_attention`` for a self-attention entry or a layer's
    self-attention) is added where ALiBi's bias is, after the scale and before the mask: line 4''' S[t_z, t_x] ←
    S[t_z, t_x]/√d_attn + B[t_z, t_x] (after ALiBi's, where both are on). T5 itself scales by nothing
    (``attn_scale="none"``: T5Attention's ``self.scaling = 1.0``) and adds the bias before the mask
    (transformers 5.24 models/t5/modeling_t5.py ``eager_attention_forward``: ``attn_weights =
    torch.matmul(query, key.transpose(2, 3)) * scaling``, ``attn_weights + position_bias``, then ``attn_weights
    + attention_mask``).

    Soft cap (``attn_softcap`` = c > 0; Gemma 2): line 4'' S[t_z, t_x] ← c·tanh((S[t_z, t_x]/√d_attn)/c)
    (``functions.softcap``) on the scaled scores, before ALiBi's bias (where present), the mask and
    the softmax, which then divides no further: Hugging Face transformers 5.24
    models/gemma2/modeling_gemma2.py, ``eager_attention_forward``: ``attn_weights =
    torch.matmul(query, key_states.transpose(2, 3)) * scaling``, then ``attn_weights / softcap``,
    ``torch.tanh``, ``* softcap``, and only then ``attn_weights + attention_mask``. A masked score
    stays −∞ (the cap is not applied to it: capped, it would be −c, and the key would get weight).

    Intermediates (``spec/intermediates.py``): Q, K, V (lines 1-3, before any
    scaling), scores (line 4: KᵀQ, of Q and K already divided under the
    ``query*`` placements), S (ℓ_z×ℓ_x: the scaled scores with −∞ where masked,
    what line 6's softmax reads), A (ℓ_z×ℓ_x: the weights, each column sums to 1).
    QK-norm adds q_norm and k_norm (each a scope: the normalised Q, K and their rms).
    """
    N = numbers.current()
    d_x, ell_x = shape(X)
    d_z, ell_z = shape(Z)
    _check_mask(Mask, ell_z, ell_x)
    divisor = _scale_divisor(variant, len(W.W_q), d_x, heads)
    Q = add_bias(matmul(W.W_q, X), W.b_q)  # line 1
    K = add_bias(matmul(W.W_k, Z), W.b_k)  # line 2
    V = add_bias(matmul(W.W_v, Z), W.b_v)  # line 3
    if qk_gains is not None:  # QK-norm: each head's q and k columns, before RoPE (Qwen3, Gemma 3)
        gained = variant.replace(affine="scale")  # its gains always apply (β: RMSnorm has none)
        Q = norm_columns(Q, qk_gains[0], None, gained, "rms_norm")
        K = norm_columns(K, qk_gains[1], None, gained, "rms_norm")
    if variant.rotary != "none":  # RoFormer eq. 34: positions t_x of Q, t_z of K
        Q, K = rotate(Q, variant, rope_factors), rotate(K, variant, rope_factors)
    if variant.scale_placement == "query" and divisor is not None:
        Q, divisor = [_divide(row, divisor) for row in Q], None
    elif variant.scale_placement == "query_key_sqrt" and divisor is not None:
        root = N.sqrt(divisor)
        Q = [_divide(row, root) for row in Q]
        K = [_divide(row, root) for row in K]
        divisor = None
    S = matmul(transpose(K), Q)  # line 4
    record("scores", S)  # KᵀQ (of Q, K already divided under scale_placement query*)
    if variant.attn_softcap:  # line 4'': c·tanh(s/c) of the scaled scores, before bias and mask
        c = variant.attn_softcap
        S = map_matrix(lambda s: softcap(_over(s, divisor), c), S)
        divisor = None
    if slope is not None:  # line 4': ALiBi's m·(t_z − t_x), added to the scaled scores
        p = positions if positions is not None else range(len(S))  # pad_positions="real": p(t), else t
        S = [[_over(s, divisor) + slope * N.num(p[tz] - p[tx]) for tx, s in enumerate(row)]
             for tz, row in enumerate(S)]
        divisor = None
    if position_bias is not None:  # line 4''': T5's bucketed bias, added to the scaled scores
        S = [[_over(s, divisor) + position_bias[tz][tx] for tx, s in enumerate(row)] for tz, row in enumerate(S)]
        divisor = None
    minus_inf = -N.inf
    S = [[s if Mask[tz][tx] else minus_inf for tx, s in enumerate(row)]
         for tz, row in enumerate(S)]  # line 5
    if divisor is not None:  # line 6's scaling, of every score at once (−∞ stays −∞)
        S = map_matrix(lambda s: s / divisor, S)
    record("S", S)  # scaled and masked: what the softmax reads
    keyless = [tx for tx in range(ell_x) if not any(Mask[tz][tx] for tz in range(ell_z))]
    if not keyless:  # line 6: softmax over the context index, of every column
        A = map_columns(softmax, S)
    else:
        A = from_columns([_empty_query_weights(variant, ell_z, tx) if tx in keyless else softmax(column(S, tx))
                          for tx in range(ell_x)])
    record("A", A)  # the attention weights: column t_x sums to 1
    return matmul(V, A)


def _over(s: Any, divisor: Optional[Any]) -> Any:
    return s if divisor is None else s / divisor


def _empty_query_weights(variant: VariantSet, ell_z: int, tx: int) -> Vector:
    N = numbers.current()
    if variant.empty_query == "error":
        raise SpecError(
            "Mask", "every query (column t_x) to have a key it may attend to (empty_query='error')",
            f"column t_x={tx} all 0",
        )
    if variant.empty_query == "nan":
        return [N.nan] * ell_z
    if variant.empty_query == "zeros":
        return [N.num(0)] * ell_z
    return [N.num(1) / N.num(ell_z)] * ell_z  # uniform over all keys


@intermediate
def stacked(Ys: Sequence[Matrix]) -> Matrix:
    """[Y^1; Y^2; ...; Y^H]: the matrices stacked vertically, the first on top."""
    return [row for Yh in Ys for row in Yh]


def _mh_names(*_: Any, **__: Any) -> Names:
    """Algorithm 5's intermediates: heads.{h} (Y^h, with Algorithm 4's inside it: heads.{h}.Q, ...)
    and Y (line 3)."""
    return {attention: "heads.{}", stacked: ("Y",)}


@algorithm("mh_attention", names=_mh_names)
def mh_attention(X: Matrix, Z: Matrix, W: MHAttentionParams, Mask: Sequence[Sequence[Any]], *,
                 variant: VariantSet = PAPER, causal_self: bool = False,
                 positions: Optional[Sequence[int]] = None) -> Matrix:
    """Algorithm 5: Ṽ ← MHAttention(X, Z | W, Mask).

    1-2. Y^h ← Attention(X, Z | W^h_qkv, Mask) for h = 0..H-1 (the paper's 1..H)
    3.   Y ← [Y^1; Y^2; ...; Y^H]   (heads stacked vertically, head 1 on top: H·d_mid×ℓ_x)
    4.   return Ṽ = W_o Y + b_o 1ᵀ

    Grouped-query attention (``kv_group`` = G > 1; Ainslie et al. 2023, GQA, §2.2; G = H is
    Shazeer's multi-query attention, 2019): head h reads its own W_q, b_q and the key/value maps
    of ``kv_heads[⌊h/G⌋]``, so heads G·g .. G·g + G − 1 share kv head g (Hugging Face's
    ``repeat_kv``, torch SDPA's ``enable_gqa``); ``kv_order="strided"`` reads kv head h mod H/G
    (a tiled repeat).

    Multi-query attention (``kv_heads="one"``; Shazeer 2019, "Fast Transformer Decoding: One
    Write-Head is All You Need", §3: the heads "share a single set of keys and values") at any H:
    K = W_k Z + b_k 1ᵀ and V = W_v Z + b_v 1ᵀ of the one kv head, read by every query head,
    Y^h = Attention(X, Z | W^h_q, b^h_q, W_k, b_k, W_v, b_v, Mask). That is the rule above with
    G = H (⌊h/H⌋ = 0 for every h), and kv_group = H's parameters (``params.query_group``; at H = 1
    the head's own W_k, W_v). Falcon-7B (transformers 5.24 FalconAttention: ``num_kv_heads = 1``
    under multi_query, whatever num_attention_heads is).

    Variant ``attn_bias_at`` keeps the heads' b_q, b_k, b_v only ("qkv") or b_o only ("out"): a
    bias the variant drops is absent from W (None), as under ``attn_bias=False``.

    QK-norm (``qk_norm="rms"``; Qwen3, Gemma 3): where W holds the gains γ_q, γ_k (a layer's
    attention, and since spec 2.12 the causal self-attention entries; ``mh_attention`` and the
    bidirectional ones list no QK-norm and have none), every head normalises
    its Q and K columns with them, one pair shared by all heads (Algorithm 4's ``qk_gains``); under
    grouped-query attention a kv head's K is normalised once, with γ_k.

    Under ``attn_scale="sqrt_d_model_per_head"`` every head divides its scores by √(d_x/H), H the
    number of query heads (Gemma 2 27B: √(4608/32) = 12, not √head_dim = √128).

    ALiBi (``position_bias="alibi"``; Press et al. 2022): where the attention is a causal
    self-attention (``causal_self``: Z = X read under a causal mask, the only attention the bias is
    defined for), head h adds m_h·(t_z − t_x) to its scaled scores, m_h = ``alibi_slopes(H)[h]``
    (the non-power-of-two rule of ``spec/position_bias.py``); m_h·(p(t_z) − p(t_x)) where ``positions``
    gives p (a padded model under ``pad_positions="real"``: ``embedding.pad_positions``).

    T5's relative bias (``rel_bias="t5_buckets"``, spec 2.13): where W holds the table rel_bias ∈
    R^{rel_buckets×H} (the self-attention entries and the layers' self-attention; ``mh_attention`` and
    cross-attention have none, as T5's cross-attention has none), head h adds B^h[t_z, t_x] =
    rel_bias[bucket(t_z − t_x), h] to its scaled scores (Algorithm 4's ``position_bias``), the bucket
    unidirectional where ``causal_self`` (T5's decoder self-attention: ``bidirectional=(not self.is_decoder)``)
    and bidirectional otherwise (``t5_bucket``, with the variant's ``rel_buckets`` and ``rel_max_distance``;
    transformers 5.24 ``T5Attention.compute_bias``: the embedding of the buckets, permuted to (heads, query,
    key)). Under grouped-query attention the table still has one column per query head.

    LongRoPE (``rope_factors="longrope"``, spec 2.17; Phi-3): where W holds the factors e (``rope_ext``) and m
    (``rope_mscale``), every head's RoPE reads them (Algorithm 4's ``rope_factors``; ``spec/rotary.py``).

    Intermediates: heads.{h} (Y^h, with Algorithm 4's inside it: heads.{h}.Q, ...), Y (line 3).
    """
    if not W.heads:
        raise SpecError("heads", "at least one head (H ≥ 1)", "H = 0")
    heads = _grouped(W, query_group(len(W.heads), variant), variant.kv_order)
    slopes: list[Any] = alibi_slopes(len(heads)) if causal_self and variant.position_bias == "alibi" \
        else [None] * len(heads)
    gains = None
    if variant.qk_norm == "rms" and W.gamma_q is not None and W.gamma_k is not None:
        gains = (W.gamma_q, W.gamma_k)
    biases: list[Any] = [None] * len(heads)
    if variant.rel_bias == "t5_buckets" and W.rel_bias is not None:
        ell_z, ell_x = shape(Z)[1], shape(X)[1]
        biases = [t5_bias(W.rel_bias, ell_z, ell_x, h, not causal_self, variant.rel_buckets,
                          variant.rel_max_distance) for h in range(len(heads))]
    elif variant.rel_bias not in ("none", "t5_buckets"):
        raise SpecError("rel_bias", "'none' or 't5_buckets'", repr(variant.rel_bias))
    factors = (W.rope_ext, W.rope_mscale) if variant.rope_factors == "longrope" and W.rope_ext is not None else None
    Ys = [attention(X, Z, head, Mask, variant=variant, slope=slopes[h], qk_gains=gains, heads=len(heads),
                    position_bias=biases[h], positions=positions, rope_factors=factors)
          for h, head in enumerate(heads)]  # lines 1-2
    Y = stacked(Ys)  # line 3
    return add_bias(matmul(W.W_o, Y), W.b_o)  # line 4


def _grouped(W: MHAttentionParams, G: int, order: str) -> tuple[AttentionParams, ...]:
    """Each query head with the key/value maps it reads (GQA: kv head ⌊h/G⌋, or h mod H/G under
    ``kv_order="strided"``)."""
    H = len(W.heads)
    if G == 1:
        if W.kv_heads:
            raise SpecError("kv_heads", "no shared key/value heads under kv_group = 1",
                            f"{len(W.kv_heads)} kv heads")
        return W.heads
    if H % G or len(W.kv_heads) != H // G:
        raise SpecError("kv_heads", f"H / G = {H} / {G} key/value heads (H a multiple of G = kv_group)",
                        f"H = {H} query heads and {len(W.kv_heads)} kv heads")
    kv = [W.kv_heads[h // G] if order == "consecutive" else W.kv_heads[h % (H // G)] for h in range(H)]
    return tuple(AttentionParams(W_q=q.W_q, b_q=q.b_q, W_k=kv[h].W_k, b_k=kv[h].b_k, W_v=kv[h].W_v, b_v=kv[h].b_v)
                 for h, q in enumerate(W.heads))


@algorithm("unidirectional_mask")
def unidirectional_mask(ell_z: int, ell_x: int, *, variant: VariantSet = PAPER) -> list[list[int]]:
    """The unidirectional (causal) mask of Algorithm 4: Mask[t_z, t_x] = [[t_z ≤ t_x]].

    Decision for ℓ_z ≠ ℓ_x (``causal_alignment``): "top_left" keeps
    [[t_z ≤ t_x]] (PyTorch SDPA ``is_causal``); "bottom_right" aligns the last
    query with the last key, [[t_z ≤ t_x + ℓ_z − ℓ_x]] (Hugging Face). They
    agree when ℓ_z = ℓ_x, the only case the architectures use.

    Sliding window (``window`` = W ≥ 1; Mistral, Jiang et al. 2023, "Mistral 7B", §2; Beltagy et
    al. 2020, Longformer): query t_x keeps only the W most recent keys, itself counted,
    Mask[t_z, t_x] = [[t_x − W < t_z ≤ t_x]] (shifted by ℓ_z − ℓ_x when bottom-right). This is
    Hugging Face's convention (transformers 5.24 ``masking_utils.sliding_window_overlay``:
    ``kv_idx > q_idx - sliding_window``, and-ed with the causal ``kv_idx <= q_idx``), so W = 1
    leaves each query its own key alone and W ≥ ℓ_z changes nothing. W = 0 is no window.
    """
    for name, value in (("ell_z", ell_z), ("ell_x", ell_x)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SpecError(name, "a positive integer", repr(value))
    offset = ell_z - ell_x if variant.causal_alignment == "bottom_right" else 0
    W = variant.window
    return [[1 if tz <= tx + offset and (W == 0 or tz > tx + offset - W) else 0 for tx in range(ell_x)]
            for tz in range(ell_z)]


def bidirectional_mask(ell_z: int, ell_x: int) -> list[list[int]]:
    """Mask ≡ 1."""
    return [[1] * ell_x for _ in range(ell_z)]
