"""Rotary position embedding (RoPE), applied to the queries and keys of Algorithm 4.

Su, Lu, Pan, Murtadha, Wen, Liu, *RoFormer: Enhanced Transformer with Rotary
Position Embedding* (2021), eqs. 13-15 and 34: column t of Q (or K) is
rotated, pair by pair, by the angles t·θ_i with θ_i = base^(−2i/d) for
i = 0 .. d/2 − 1 (d = d_attn, even). Which coordinates form pair i is where
real code disagrees (variant ``rotary``):

- ``interleaved``: (2i, 2i + 1), as RoFormer writes R^d_{Θ,t} and Meta's
  LLaMA reference code computes it (``torch.view_as_complex`` on adjacent
  pairs), and GPT-J;
- ``half``: (i, i + d/2), GPT-NeoX's and Hugging Face Llama's
  ``rotate_half`` (q·cos + rotate_half(q)·sin with cos, sin repeated over
  both halves).

Both rotate the pair (a, b) to (a cos − b sin, b cos + a sin). Positions are
0-based column indexes (the key at column t_z of Z has position t_z). The
base is ``rope_base`` (10000 in RoFormer and LLaMA 1-2).

Partial rotary (``rotary_fraction`` f < 1): only the first r = ⌊f·d⌋ rows
are rotated, as a RoPE of width r (θ_i = base^(−2i/r), pairs (i, i + r/2) or
(2i, 2i + 1) among those rows), and rows r .. d − 1 pass unchanged. GPT-NeoX
and Pythia (``rotary_pct`` 0.25: Hugging Face transformers 5.24
``GPTNeoXAttention``, ``q[..., :rotary_ndims]`` rotated, ``q[..., rotary_ndims:]``
passed; the rope's dim ``int(head_dim * partial_rotary_factor)``), Phi
(``partial_rotary_factor`` 0.5 and 0.4) with half pairs; GPT-J (``rotary_dim`` 64
of 256: ``k[:, :, :, :rotary_dim]``, ``rotate_every_two``) with adjacent pairs.

Scaling (``rope_scaling``) replaces each θ_i by θ'_i before the angles t·θ'_i are taken
(``frequencies``), with r the rotated width and λ_i = 2π/θ_i pair i's wavelength:

- ``none``: θ'_i = θ_i.
- ``linear-2``: θ'_i = θ_i / 2, the angles of positions t/2 (position interpolation, Chen et al.
  2023; Hugging Face transformers 5.24 ``modeling_rope_utils._compute_linear_scaling_rope_parameters``
  with ``factor`` 2: ``inv_freq /= factor``, "originally, scaling was applied to the position_ids").
- ``linear-8``: θ'_i = θ_i / 8, the angles of positions t/8: the same function with ``factor`` 8, Gemma 3
  4B's, 12B's and 27B's ``rope_scaling={"rope_type": "linear", "factor": 8.0}`` (their released configs;
  Google's gemma_pytorch ``precompute_freqs_cis``: ``freqs = freqs/rope_scaling_factor``, with
  ``rope_scaling_factor=8`` in ``config.get_config_for_27b_v3``). Gemma 3 scales its global layers only:
  transformers 5.24 ``Gemma3TextConfig.convert_rope_params_to_dict`` updates ``rope_parameters["full_attention"]``
  alone with ``rope_scaling``, and gemma_pytorch passes the factor to ``global_freqs_cis`` alone; in the
  spec a local layer under ``rope_local_base`` > 0 is unscaled (``architectures.layer_variant``).
- ``llama3``: Llama 3.1's, with s = 8 (``factor``), l = 1 (``low_freq_factor``), h = 4
  (``high_freq_factor``) and L = 8192 (``original_max_position_embeddings``), the published
  constants of Llama 3.1's ``rope_scaling`` (transformers 5.24
  ``modeling_rope_utils._compute_llama3_parameters``; Meta's llama-models ``apply_scaling``)::

      θ'_i = θ_i                              if λ_i < L/h   (= 2048: high frequencies kept)
      θ'_i = θ_i / s                          if λ_i > L/l   (= 8192: low frequencies slowed s-fold)
      θ'_i = (1 − γ_i)·θ_i/s + γ_i·θ_i        otherwise, γ_i = (L/λ_i − l)/(h − l)

  γ_i is 1 at λ_i = L/h and 0 at λ_i = L/l, so θ' is continuous in λ: which band a boundary value
  falls in does not matter. The bands depend on base and r only: at base 10000 and r ≤ 4 every
  λ_i is below 2048 and llama3 changes nothing (r = 6 blends pair 2, λ ≈ 2916); at base 500000
  (Llama 3's) r = 4 puts pair 1 (λ ≈ 4443) in the middle band and r = 6 pair 2 (λ ≈ 39584) in
  the slowed one.

Per-pair factors (``rope_factors``, spec 2.17) replace ``rope_scaling`` (unread under them):

- ``longrope``: Phi-3's and Phi-3.5's LongRoPE (Ding et al. 2024; the 128k Phi-3 and Phi-3.5 configs'
  ``rope_scaling={"type"/"rope_type": "longrope", "short_factor": [...], "long_factor": [...]}``), with the
  r/2 factors e = ``rope_ext`` and the attention factor m = ``rope_mscale[0]``, parameters of the attention::

      θ'_i = θ_i / e_i = 1 / (e_i · base^(2i/r))
      cos(t·θ'_i), sin(t·θ'_i) each multiplied by m before the rotation

  so a rotated pair is (m·(a cos − b sin), m·(b cos + a sin)): the rotated rows of Q and of K both grow by
  m (the scores of two rotated rows by m²), the rows partial rotary leaves unrotated do not. Source:
  Hugging Face transformers 5.24 ``modeling_rope_utils._compute_longrope_parameters`` (``inv_freq = 1.0 /
  (ext_factors * base**inv_freq_shape)``, ``inv_freq_shape = arange(0, dim, 2) / dim``; ``ext_factors`` the
  long_factor when the sequence is longer than ``original_max_position_embeddings``, the short_factor
  otherwise: ``dynamic_rope_update``'s ``longrope_frequency_update`` picks by ``max(position_ids) + 1``;
  ``attention_factor`` the config's, else √(1 + ln s / ln L) for s = max_position_embeddings / L > 1, L the
  original_max_position_embeddings, else 1) and models/phi3/modeling_phi3.py ``Phi3RotaryEmbedding.forward``
  (``cos = emb.cos() * self.attention_scaling``, ``sin = emb.sin() * self.attention_scaling``).

  Decision (the factors are per-pair data of a configuration): e and m are parameters, drawn like any
  other, not a table of the spec; which list is in effect (short or long) is a property of the call, not
  of the mathematics, and the plugin of a library loads the drawn e into the list its configuration makes
  the library pick. m is a parameter too (a config may give ``attention_factor``; Phi-3's 128k configs
  derive it from 131072/4096: √(1 + ln 32 / ln 4096) ≈ 1.190). Where they are (``params``): a causal
  self-attention entry's ``rope_ext`` (r/2) and ``rope_mscale`` (1), last; a layer's ``attn.rope_ext``,
  ``attn.rope_mscale``, last; a decoder-only model's ``rope_ext``, ``rope_mscale``, last, shared by every
  layer (Phi3Model's one ``rotary_emb``). Without rotary there are none.
"""

from __future__ import annotations

from typing import Any

from . import numbers
from .errors import SpecError
from .intermediates import intermediate
from .linalg import Matrix, map_matrix
from .variants import VariantSet

__all__ = ["LLAMA3", "frequencies", "pairs", "rotate", "rope_schema"]

#: Llama 3.1's rope_scaling (its published config.json; transformers' _compute_llama3_parameters reads
#: these keys): factor s, low_freq_factor l, high_freq_factor h, original_max_position_embeddings L
LLAMA3 = {"factor": 8, "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 8192}
#: linear scaling's factor for each ``rope_scaling`` value ``linear-F``
LINEAR = {"linear-2": 2, "linear-8": 8}


def pairs(d: int, pairing: str) -> list[tuple[int, int]]:
    """Pair i of a d-vector (0-based rows): (2i, 2i+1) interleaved, (i, i + d/2) half-split."""
    if pairing == "interleaved":
        return [(2 * i, 2 * i + 1) for i in range(d // 2)]
    return [(i, i + d // 2) for i in range(d // 2)]


def rope_schema(variant: VariantSet, prefix: str = "") -> dict[str, tuple[Any, ...]]:
    """LongRoPE's parameters under ``rope_factors="longrope"`` with a pairing: ``<prefix>rope_ext`` (r/2,
    r = ⌊rotary_fraction·d_attn⌋: the symbolic ``"d_attn*f//2"`` of ``params.resolve_shape``) and
    ``<prefix>rope_mscale`` (1,); none otherwise (module docstring)."""
    if variant.rope_factors != "longrope" or variant.rotary == "none":
        return {}
    return {prefix + "rope_ext": (f"d_attn*{variant.rotary_fraction!r}//2",), prefix + "rope_mscale": (1,)}


@intermediate  # an attention head names its rotated Q and K (Q_rot, K_rot)
def rotate(M: Matrix, variant: VariantSet, factors: Any = None) -> Matrix:
    """RoFormer eq. 34: column t of M (d×ℓ) rotated by R^r_{Θ,t} on its first r rows, pairs as
    ``variant.rotary``; r = d, or ⌊f·d⌋ under ``rotary_fraction`` f (partial rotary). ``factors``
    (e, m): LongRoPE's per-pair factors and attention factor under ``rope_factors="longrope"`` (module
    docstring): θ'_i = θ_i/e_i and cos, sin multiplied by m (Phi3RotaryEmbedding). Without them (an entry
    that does not list the switch, whose parameters hold none) the rotation is plain RoPE.

    Row i of the angle matrix holds pair i's angles t·θ_i over the columns t; each line below
    acts entry by entry (``map_matrix``), so a number system that offers ``Batched`` takes a
    line in one call."""
    N = numbers.current()
    d = int(len(M) * variant.rotary_fraction)  # the rotated rows: all of them, or the first ⌊f·d_attn⌋
    if d % 2 or d < 2:
        raise SpecError("d_attn", "an even rotated width r = ⌊rotary_fraction·d_attn⌋ ≥ 2 (RoPE rotates pairs)",
                        f"d_attn = {len(M)}, r = {d}")
    ell = len(M[0]) if M else 0
    out: list[list[Any]] = [list(row) for row in M]
    P = pairs(d, variant.rotary)
    if not ell or not P:
        return out
    theta = frequencies(d, variant, factors)  # θ'_i: base^(−2i/d), rescaled as rope_scaling (or the factors) says
    angle = map_matrix(_times, [[N.num(t) for t in range(ell)] for _ in P], [[th] * ell for th in theta])
    c, s = map_matrix(N.cos, angle), map_matrix(N.sin, angle)
    if variant.rope_factors == "longrope" and factors is not None:  # LongRoPE's attention factor m on cos and sin
        m = _mscale(factors)
        c, s = map_matrix(lambda x: x * m, c), map_matrix(lambda x: x * m, s)
    x, y = [M[a] for a, _ in P], [M[b] for _, b in P]
    first = map_matrix(_first, x, y, c, s)  # x cos − y sin
    second = map_matrix(_second, x, y, c, s)  # y cos + x sin
    for i, (a, b) in enumerate(P):
        out[a], out[b] = first[i], second[i]
    return out


def frequencies(r: int, variant: VariantSet, factors: Any = None) -> list[Any]:
    """θ'_i for i = 0 .. r/2 − 1: θ_i = base^(−2i/r) (RoFormer eq. 15), then ``rope_scaling``'s
    rescaling (module docstring), in the current number system; under ``rope_factors="longrope"``
    θ_i/e_i instead, e the first of ``factors`` (e, m). The band of a llama3 pair is a
    comparison of λ_i (a system with several values per number compares the value it branches on,
    as at any comparison): θ' is continuous across the bands, so a rounding at a boundary changes
    nothing."""
    N = numbers.current()
    base = N.num(variant.rope_base)
    theta = [N.pow(base, N.num(-2 * i) / N.num(r)) for i in range(r // 2)]  # θ_i = base^(−2i/r)
    if variant.rope_factors == "longrope" and factors is not None:  # Phi-3's LongRoPE: 1/(e_i·base^(2i/r)),
        # rope_scaling unread (an entry that does not list the switch holds no factors: plain RoPE there)
        ext = list(factors[0]) if factors[0] is not None else None
        if ext is None or len(ext) != r // 2:
            raise SpecError("rope_ext", f"r/2 = {r // 2} LongRoPE factors (rope_factors='longrope')",
                            "none" if ext is None else f"{len(ext)}")
        if any(e == 0 for e in ext):  # θ_i/0: no frequency (the library's inv_freq would be inf)
            raise SpecError("rope_ext", "nonzero LongRoPE factors (θ'_i = θ_i / e_i)", "a factor 0")
        return [th / e for th, e in zip(theta, ext)]
    if variant.rope_factors not in ("none", "longrope"):
        raise SpecError("rope_factors", "'none' or 'longrope'", repr(variant.rope_factors))
    if variant.rope_scaling == "none":
        return theta
    if variant.rope_scaling in LINEAR:
        return [th / N.num(LINEAR[variant.rope_scaling]) for th in theta]
    if variant.rope_scaling != "llama3":
        raise SpecError("rope_scaling", "one of 'none', 'linear-2', 'linear-8', 'llama3'", repr(variant.rope_scaling))
    s, low, high = N.num(LLAMA3["factor"]), N.num(LLAMA3["low_freq_factor"]), N.num(LLAMA3["high_freq_factor"])
    L = N.num(LLAMA3["original_max_position_embeddings"])
    out = []
    for th in theta:
        wavelength = N.num(2) * N.pi / th  # λ_i = 2π/θ_i
        if wavelength < L / high:  # high frequency: kept
            out.append(th)
        elif wavelength > L / low:  # low frequency: slowed by s
            out.append(th / s)
        else:  # between: a blend of the two, γ = 1 at λ = L/h, 0 at λ = L/l
            gamma = (L / wavelength - low) / (high - low)
            out.append((N.num(1) - gamma) * th / s + gamma * th)
    return out


def _mscale(factors: Any) -> Any:
    """LongRoPE's attention factor m, the one value of ``rope_mscale`` (the second of ``factors``)."""
    m = factors[1] if factors is not None else None
    if m is None or len(m) != 1:
        raise SpecError("rope_mscale", "one LongRoPE attention factor (rope_factors='longrope')",
                        "none" if m is None else f"{len(m)} values")
    return m[0]


def _times(t: Any, theta: Any) -> Any:
    return t * theta


def _first(x: Any, y: Any, c: Any, s: Any) -> Any:
    return x * c - y * s


def _second(x: Any, y: Any, c: Any, s: Any) -> Any:
    return y * c + x * s
