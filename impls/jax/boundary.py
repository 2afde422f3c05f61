"""The one place where the spec's canonical layout meets the internal one.

Canonical (the spec, ALGORITHMS.md): tokens are COLUMNS, X: (d, ℓ); Mask:
(ℓ_z, ℓ_x) indexed [t_z, t_x]; parameters flat, e.g.
``layers.0.attn.heads.1.W_q``. Internal (components.py): tokens are ROWS,
X: (ℓ, d); mask [t_x, t_z]; parameters a nested tree with heads stacked on
a leading axis and embedding tables as rows (W_eᵀ, W_pᵀ).

Every canonical 2-D array (sequence, mask, position table) becomes its
transpose; 0-D and 1-D arrays (token IDs, vectors) are unchanged. The
conversion is applied per example, inside ``jax.vmap`` when ``ctx.batched``
(params are never batched: ``in_axes=(0, None)``), and is itself
differentiable, so ``jax.grad`` of a loss taken through ``run`` yields
gradients named like the flat parameters.
"""

from __future__ import annotations

import gc
import os
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from ftspec.spec.variants import VariantSet

from . import architectures as A
from . import components as C
from . import layers as Lyr

Flat = Mapping[str, Any]


def to_rows(a: Any) -> Any:
    """Canonical ↔ internal for one example: a 2-D array is transposed (an involution)."""
    return a.T if a.ndim == 2 else a


# --------------------------------------------------------------------------
# flat parameter names → nested trees
# --------------------------------------------------------------------------


def _count(flat: Flat, prefix: str) -> int:
    """How many indexed members ``{prefix}{i}.…`` there are (layers, heads)."""
    n = 0
    while any(k.startswith(f"{prefix}{n}.") for k in flat):
        n += 1
    return n


def _norm(flat: Flat, gamma: str, beta: str) -> dict:
    return {"gamma": flat.get(gamma), "beta": flat.get(beta)}


def _single(flat: Flat, prefix: str = "") -> dict:
    """W_q, b_q, W_k, b_k, W_v, b_v of one head (biases None under attn_bias=False)."""
    return {k: flat.get(prefix + k) for k in ("W_q", "b_q", "W_k", "b_k", "W_v", "b_v")}


def _stacked(members: list[dict], names: tuple[str, ...]) -> dict:
    return {k: (None if members[0][k] is None else jnp.stack([m[k] for m in members])) for k in names}


def _mha(flat: Flat, prefix: str = "") -> dict:
    """Heads stacked on a leading axis: W_q (H, d_attn, d_x), b_q, then W_k (H_kv, d_attn, d_z),
    b_k, W_v (H_kv, d_mid, d_z), b_v, plus W_o, b_o. Without grouping the key/value maps are the
    heads' own (H_kv = H); under ``kv_group`` = G > 1 they are ``kv_heads.{g}.*`` (H_kv = H/G;
    which query head reads which is ``components.kv_index``'s, from the variant)."""
    heads = [_single(flat, f"{prefix}heads.{h}.") for h in range(_count(flat, prefix + "heads."))]
    kv = [_single(flat, f"{prefix}kv_heads.{g}.") for g in range(_count(flat, prefix + "kv_heads."))]
    out = _stacked(heads, ("W_q", "b_q"))
    out.update(_stacked(kv or heads, ("W_k", "b_k", "W_v", "b_v")))
    out["W_o"], out["b_o"] = flat[prefix + "W_o"], flat.get(prefix + "b_o")
    # QK-norm's gains (a layer's attention or, spec 2.12, a causal self-attention entry's, under qk_norm="rms"),
    # one pair shared by the heads; None elsewhere
    out["gamma_q"], out["gamma_k"] = flat.get(prefix + "gamma_q"), flat.get(prefix + "gamma_k")
    out["rel_bias"] = flat.get(prefix + "rel_bias")  # T5's (rel_buckets, H) table (spec 2.13); None elsewhere
    # LongRoPE's factors (rope_factors="longrope", Phi-3): the attention's own, or a decoder-only model's, which
    # every layer shares (Phi3Model's one rotary_emb: ``layers.{l}.attn.`` holds none); None elsewhere
    for name in ("rope_ext", "rope_mscale"):
        out[name] = flat.get(prefix + name, flat.get(name))
    return out


def _mlp(flat: Flat, prefix: str, first: int, second: int) -> dict:
    """W1, b1, W2, b2; under ``mlp="gated"`` the linear branch V, c (``W_mlp{first}_lin``); under
    ``mlp_depth`` > 1 the further hidden layers ``hidden`` = [{W, b}, ...] (``mlp_hidden.{k}.*``);
    under ``mlp="one_layer"`` no W2, b2 (None: ``layers.mlp`` reads the variant, not the tree)."""
    hidden = [{"W": flat[f"{prefix}mlp_hidden.{k}.W"], "b": flat.get(f"{prefix}mlp_hidden.{k}.b")}
              for k in range(_count(flat, prefix + "mlp_hidden."))]
    return {"W1": flat[f"{prefix}W_mlp{first}"], "b1": flat.get(f"{prefix}b_mlp{first}"),
            "V": flat.get(f"{prefix}W_mlp{first}_lin"), "c": flat.get(f"{prefix}b_mlp{first}_lin"),
            "hidden": hidden,
            "W2": flat.get(f"{prefix}W_mlp{second}"), "b2": flat.get(f"{prefix}b_mlp{second}")}


def _out_norms(flat: Flat, prefix: str, blocks: tuple[int, ...]) -> dict:
    """``norm{k}_out``: each block's output norm under ``norm_placement="sandwich"`` (γ{k}_out,
    β{k}_out; None where absent: only the sandwich placement reads them)."""
    return {f"norm{k}_out": _norm(flat, f"{prefix}gamma{k}_out", f"{prefix}beta{k}_out") for k in blocks}


def _layer(flat: Flat, prefix: str = "") -> dict:
    return {"attn": _mha(flat, prefix + "attn."), "norm1": _norm(flat, prefix + "gamma1", prefix + "beta1"),
            "mlp": _mlp(flat, prefix, 1, 2), "norm2": _norm(flat, prefix + "gamma2", prefix + "beta2"),
            **_out_norms(flat, prefix, (1, 2))}


def _decoder_layer(flat: Flat, prefix: str = "") -> dict:
    return {"self_attn": _mha(flat, prefix + "self_attn."),
            "norm3": _norm(flat, prefix + "gamma3", prefix + "beta3"),
            "cross_attn": _mha(flat, prefix + "cross_attn."),
            "norm4": _norm(flat, prefix + "gamma4", prefix + "beta4"),
            "mlp": _mlp(flat, prefix, 3, 4), "norm5": _norm(flat, prefix + "gamma5", prefix + "beta5"),
            **_out_norms(flat, prefix, (3, 4, 5))}


def _tables(flat: Flat) -> dict:
    """Embedding tables as rows (Flax's nn.Embed layout), and the unembedding."""
    def t(name: str) -> Any:
        return None if flat.get(name) is None else flat[name].T

    return {"tok": t("W_e"), "pos": t("W_p"), "unembed": {"W_u": flat.get("W_u"), "b_u": flat.get("b_u")}}


def _ed_theta(flat: Flat) -> dict:
    # "pos_dec": the target's own learned table under ed_positions="separate" (BART), rows as "pos"
    return {**_tables(flat), "pos_dec": None if flat.get("W_p_dec") is None else flat["W_p_dec"].T,
            "norm_emb_enc": _norm(flat, "gamma_emb_enc", "beta_emb_enc"),
            "norm_emb_dec": _norm(flat, "gamma_emb_dec", "beta_emb_dec"),
            "enc_layers": [_layer(flat, f"enc_layers.{l}.") for l in range(_count(flat, "enc_layers."))],
            "dec_layers": [_decoder_layer(flat, f"dec_layers.{l}.") for l in range(_count(flat, "dec_layers."))],
            "norm_enc": _norm(flat, "gamma_enc", "beta_enc"), "norm_dec": _norm(flat, "gamma_dec", "beta_dec"),
            # T5 (rel_bias="t5_buckets"): each stack's one bias table, held by its first layer, as stack-level
            # entries that every layer of the stack reads (architectures.ed_encode / ed_decode_logits)
            "rel_enc": flat.get("enc_layers.0.attn.rel_bias"), "rel_dec": flat.get("dec_layers.0.self_attn.rel_bias")}


def _e_theta(flat: Flat) -> dict:
    return {**_tables(flat), "norm_emb": _norm(flat, "gamma_emb", "beta_emb"),
            "layers": [_layer(flat, f"layers.{l}.") for l in range(_count(flat, "layers."))],
            "norm_final": _norm(flat, "gamma_final", "beta_final"),
            "W_f": flat["W_f"], "b_f": flat["b_f"], "norm_head": _norm(flat, "gamma", "beta")}


def _d_theta(flat: Flat) -> dict:
    return {**_tables(flat), "norm_emb": _norm(flat, "gamma_emb", "beta_emb"),
            "layers": [_layer(flat, f"layers.{l}.") for l in range(_count(flat, "layers."))],
            "norm_final": _norm(flat, "gamma", "beta")}


# --------------------------------------------------------------------------
# the registry entries, in the internal layout (one example)
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """Everything static about a call (hashable: a jit cache key)."""

    hyper: tuple  # sorted (name, value) pairs
    variant: VariantSet
    dtype: str

    def __getitem__(self, name: str) -> int:
        return dict(self.hyper)[name]


Core = Callable[[dict, dict, Config], dict]  # (internal inputs, theta, cfg) -> internal outputs


def _tied_W_u(theta: dict, v: VariantSet) -> Any:
    return theta["tok"] if v.unembedding == "tied" else theta["unembed"]["W_u"]


def _self_attention(X: Any, theta: dict, cfg: Config, causal: bool, pad: Any = None) -> Any:
    """Alg. 5 with Z = X, the mask built from ℓ: Mask ≡ 1 (Alg. 8 and 9 line 5) or the causal
    [[t_z ≤ t_x]] (Alg. 10 line 6; square, so its alignment cannot matter), ∧ pad[t_z] when a
    padding vector is given (the ``padded_`` entries). X: (ℓ, d_e) → (ℓ, d_e)."""
    ell, d_e = X.shape
    if theta["W_o"].shape[0] != d_e:  # d_out = d_e (a layer's residual sum would check it); shapes are static
        raise ValueError(f"W_o has {theta['W_o'].shape[0]} rows; self-attention returns d_e = {d_e}")
    mask = Lyr.self_mask(ell, cfg.variant, causal, pad)  # (ℓ, ℓ) [query, key], or None (≡ 1)
    return C.mh_attention(X, X, theta, mask, cfg.variant, alibi=causal, bidirectional=not causal)


#: name → (flat params → theta, core)
ENTRIES: dict[str, tuple[Callable[[Flat], Any], Core]] = {
    "token_embedding": (_tables, lambda i, th, c: {"e": th["tok"][i["v"]]}),
    "positional_embedding": (_tables, lambda i, th, c: {"e": th["pos"][i["t"]]}),
    "sinusoidal_paper": (lambda f: {}, lambda i, th, c: {
        "W_p": C.sinusoid_table(c["d_e"], c["ell_max"], "sinusoidal_paper", c.dtype)}),
    "sinusoidal_vaswani": (lambda f: {}, lambda i, th, c: {
        "W_p": C.sinusoid_table(c["d_e"], c["ell_max"], "sinusoidal_vaswani", c.dtype)}),
    "embedding": (lambda f: {**_tables(f), "norm_emb": _norm(f, "gamma_emb", "beta_emb")},
                  lambda i, th, c: {"X": C.embed(i["x"], th, c["ell_max"], c.variant, th["norm_emb"])}),
    "basic_single_query_attention": (_single, lambda i, th, c: {
        "v_tilde": C.basic_single_query_attention(i["e"], i["E"], th, c.variant)}),
    "attention": (_single, lambda i, th, c: {
        "V_tilde": C.attention(i["X"], i["Z"], th, i["Mask"], c.variant)}),
    "mh_attention": (_mha, lambda i, th, c: {
        "V_tilde": C.mh_attention(i["X"], i["Z"], th, i["Mask"], c.variant)}),
    "self_attention": (_mha, lambda i, th, c: {"V_tilde": _self_attention(i["X"], th, c, causal=False)}),
    "causal_self_attention": (_mha, lambda i, th, c: {"V_tilde": _self_attention(i["X"], th, c, causal=True)}),
    "padded_self_attention": (_mha, lambda i, th, c: {
        "V_tilde": _self_attention(i["X"], th, c, causal=False, pad=i["pad"])}),
    "padded_causal_self_attention": (_mha, lambda i, th, c: {
        "V_tilde": _self_attention(i["X"], th, c, causal=True, pad=i["pad"])}),
    "unidirectional_mask": (lambda f: {}, lambda i, th, c: {
        "Mask": C.unidirectional_mask(c["ell_z"], c["ell_x"], c.variant)}),
    "layer_norm": (lambda f: _norm(f, "gamma", "beta"), lambda i, th, c: {
        "X_hat": C.norm(i["X"], th, c.variant, kind="layer_norm")}),
    "rms_norm": (lambda f: _norm(f, "gamma", "beta"), lambda i, th, c: {
        "X_hat": C.norm(i["X"], th, c.variant, kind="rms_norm")}),
    "unembedding": (_tables, lambda i, th, c: {
        "P": C.unembed(i["X"], _tied_W_u(th, c.variant), th["unembed"]["b_u"], c.variant)}),
    "encoder_layer": (_layer, lambda i, th, c: {"Z": Lyr.encoder_block(i["Z"], th, c.variant, "ed_encoder")}),
    "decoder_layer": (_decoder_layer, lambda i, th, c: {"X": Lyr.decoder_block(i["X"], i["Z"], th, c.variant)}),
    "bert_layer": (_layer, lambda i, th, c: {"X": Lyr.encoder_block(i["X"], th, c.variant, "bert")}),
    "gpt2_layer": (_layer, lambda i, th, c: {"X": Lyr.encoder_block(i["X"], th, c.variant, "gpt2")}),
    "ed_transformer": (_ed_theta, lambda i, th, c: {
        "P": A.ed_transformer(i["z"], i["x"], th, c["ell_max"], c.variant)}),
    "e_transformer": (_e_theta, lambda i, th, c: {"P": A.e_transformer(i["x"], th, c["ell_max"], c.variant)}),
    "d_transformer": (_d_theta, lambda i, th, c: {"P": A.d_transformer(i["x"], th, c["ell_max"], c.variant)}),
    "padded_e_transformer": (_e_theta, lambda i, th, c: {
        "P": A.e_transformer(i["x"], th, c["ell_max"], c.variant, pad=i["pad"])}),
    "padded_d_transformer": (_d_theta, lambda i, th, c: {
        "P": A.d_transformer(i["x"], th, c["ell_max"], c.variant, pad=i["pad"])}),
    "padded_encoder_layer": (_layer, lambda i, th, c: {
        "Z": Lyr.encoder_block(i["Z"], th, c.variant, "ed_encoder", pad=i["pad"])}),
    "padded_bert_layer": (_layer, lambda i, th, c: {
        "X": Lyr.encoder_block(i["X"], th, c.variant, "bert", pad=i["pad"])}),
    "padded_gpt2_layer": (_layer, lambda i, th, c: {
        "X": Lyr.encoder_block(i["X"], th, c.variant, "gpt2", pad=i["pad"])}),
    "padded_decoder_layer": (_decoder_layer, lambda i, th, c: {
        "X": Lyr.decoder_block(i["X"], i["Z"], th, c.variant, pad_x=i["pad_x"], pad_z=i["pad_z"])}),
    "padded_ed_transformer": (_ed_theta, lambda i, th, c: {
        "P": A.ed_transformer(i["z"], i["x"], th, c["ell_max"], c.variant, pad_z=i["pad_z"], pad_x=i["pad_x"])}),
    "cached_decoding": (_d_theta, lambda i, th, c: {
        "P": A.cached_decoding(i["x"], i["n_prefill"], th, c["ell_max"], c.variant)}),
    "next_token_encoder": (_d_theta, lambda i, th, c: {  # the flat names of d_transformer's schema
        "p": A.next_token_encoder(i["x"], th, c["ell_max"], c.variant)}),
}


def check_widths(params: Flat) -> None:
    """Refuse parameters whose lengths disagree where JAX would broadcast them silently (a
    length-1 axis against a longer one, as at d_e = 1): every bias has one entry per row of its
    weight (b_q and W_q, b_mlp1 and W_mlp1, b_u and W_u, mlp_hidden.0.b and mlp_hidden.0.W, ...), and
    W_p as many rows as W_e."""
    def shape(name: str) -> tuple:
        return tuple(params[name].shape)

    for name in params:
        head, sep, tail = name.rpartition("b_")
        weight = f"{head}W_{tail}"
        if name.endswith(".b"):  # an indexed dense layer: mlp_hidden.{k}.b beside mlp_hidden.{k}.W
            head, sep, weight = name[:-1], "b", name[:-1] + "W"
        if sep and (not head or head.endswith(".")) and weight in params and params[name] is not None \
                and params[weight] is not None and shape(name) != shape(weight)[:1]:
            raise ValueError(f"{name} has shape {shape(name)}; {weight} has {shape(weight)}: one bias entry per row")
    if params.get("W_e") is not None and params.get("W_p") is not None and shape("W_p")[:1] != shape("W_e")[:1]:
        raise ValueError(f"W_p has shape {shape('W_p')} and W_e {shape('W_e')}: both need d_e rows")


def run(name: str, inputs: Mapping[str, Any], params: Flat, cfg: Config, batched: bool) -> dict:
    """Canonical inputs and flat params → canonical outputs. Pure and differentiable in params."""
    check_widths(params)
    check_heads(params, cfg.variant)
    build, core = ENTRIES[name]
    theta = build(params)

    def one(example: dict, theta: Any) -> dict:
        out = core({k: to_rows(v) for k, v in example.items()}, theta, cfg)
        return {k: to_rows(v) for k, v in out.items()}

    if batched and inputs:  # entries without inputs have nothing to batch over
        return jax.vmap(one, in_axes=(0, None))(dict(inputs), theta)
    return one(dict(inputs), theta)


# --------------------------------------------------------------------------
# eager or jit (measurements: the package docstring)
# --------------------------------------------------------------------------

#: FTSPEC_JAX_JIT=0 runs op by op (eager); the default compiles one program per call signature.
USE_JIT = os.environ.get("FTSPEC_JAX_JIT", "1").lower() not in ("0", "false", "no")

#: On CPU, compile time dominates this workload (tiny shapes, few calls per shape):
#: LLVM optimisation level 0 cuts it by a quarter to a half. No fast-math: results
#: move by units in the last place only, as jit's fusion already moves them
#: against eager. Accelerators keep their defaults.
CPU_COMPILER_OPTIONS = {"xla_backend_optimization_level": 0}

_JIT_CACHE_SIZE = 512
#: Linux gives a process at most vm.max_map_count (65530) memory mappings, and
#: every XLA CPU executable holds its own: measured, ~6 for an elementwise
#: program and ~200 for a small model's gradient. Past the limit, mmap fails
#: inside the next compile and the process aborts (it did, after 103 of the
#: conformance tests' 136 cases, with only the function count bounded). So the
#: cache also watches the mappings themselves (every ``_MAPPING_CHECK_EVERY``
#: calls, where /proc/self/maps exists) and drops its oldest half while they
#: exceed ``MAX_MAPPINGS``; elsewhere it bounds the executables it holds.
MAX_MAPPINGS = 30_000
MAX_EXECUTABLES = 256
_MAPPING_CHECK_EVERY = 8
_jitted: "OrderedDict[tuple, Any]" = OrderedDict()  # jitted functions (their _cache_size is private API)
_calls = 0


def live_executables() -> int:
    """Compiled executables held by the cached jitted functions."""
    return sum(f._cache_size() for f in _jitted.values())


def memory_mappings() -> int | None:
    """This process's memory mappings (None where /proc/self/maps does not exist)."""
    try:
        with open("/proc/self/maps", "rb") as f:
            return f.read().count(b"\n")
    except OSError:
        return None


def _shrink() -> None:
    """Drop the oldest cached functions while the process holds too many mappings
    (dropping a jitted function frees its executables: nothing else in JAX holds them)."""
    mappings = memory_mappings()
    if mappings is None:
        live = live_executables()
        while _jitted and live >= MAX_EXECUTABLES:
            live -= _jitted.popitem(last=False)[1]._cache_size()
        return
    while _jitted and mappings > MAX_MAPPINGS:
        for _ in range(max(1, len(_jitted) // 2)):
            _jitted.popitem(last=False)
        gc.collect()
        mappings = memory_mappings() or 0


def _thrown(fn: Callable) -> Callable:
    """``fn`` (a ``checkify.checkify``'d function) returning its outputs, after raising the first
    ``checkify.check`` that failed inside it (``JaxRuntimeError``, a ``ValueError``): a norm
    without ε that met a token of zero variance (components.py) is refused, not answered with
    NaN, although the check runs inside the compiled program."""
    def call(*args: Any) -> Any:
        with C.checked():  # a first call traces fn: stage the checks, which checkify functionalises
            err, out = fn(*args)
        err.throw()
        return out
    return call


def jitted(key: tuple, make: Callable[[], Callable], platform: str = "cpu",
           use_jit: bool | None = None) -> Callable:
    """``make()`` (a pure function of arrays), eager or jitted, under ``checkify`` (``_thrown``).

    The jitted function is kept under ``key`` (everything static about it) in
    one bounded LRU shared by every entry, so that a long run over random
    configurations does not hold every executable; array shapes and dtypes
    are left to jit's own cache (a repeated shape reuses its executable).
    """
    global _calls
    if not (USE_JIT if use_jit is None else use_jit):
        return _thrown(checkify.checkify(make()))
    key = (key, platform)
    fn = _jitted.pop(key, None)
    if fn is None:
        opts = CPU_COMPILER_OPTIONS if platform == "cpu" else None
        fn = jax.jit(checkify.checkify(make()), compiler_options=opts)
    _calls += 1
    if _calls % _MAPPING_CHECK_EVERY == 0:
        _shrink()
    while len(_jitted) >= _JIT_CACHE_SIZE:
        _jitted.popitem(last=False)
    _jitted[key] = fn  # most recently used last
    return _thrown(fn)


def runner(name: str, cfg: Config, batched: bool, platform: str = "cpu",
           use_jit: bool | None = None) -> Callable[[Mapping, Flat], dict]:
    """``(inputs, params) -> outputs`` of a forward entry, eager or jitted: one
    ``jax.jit`` per (entry, static config, batched, platform)."""
    return jitted((name, cfg, batched), lambda: (lambda inputs, params: run(name, inputs, params, cfg, batched)),
                  platform, use_jit)


def check_empty_queries(name: str, mask: Any) -> None:
    """``empty_query="error"``: refuse a Mask column with no True (a query t_x with no key).

    Done on the concrete canonical mask, before any tracing, so it also works
    under vmap/jit. mask: (..., ℓ_z, ℓ_x)."""
    has_key = np.asarray(mask).any(axis=-2)  # (..., ℓ_x); NumPy: no compile for a new shape
    if not has_key.all():
        bad = sorted({int(t) for t in np.argwhere(~has_key)[:, -1]})
        raise ValueError(f"{name}: Mask has no key for query position(s) t_x = {bad} "
                         "(empty_query='error'; the paper's softmax would divide 0 by 0)")


#: the entries with padding inputs: for each, its padding vectors in the order they are checked,
#: each with whether the masks it enters are causal. The decoder layer and the encoder-decoder
#: take ``pad_x`` (the decoder's causal self-attention, line 14) and ``pad_z`` (the encoder's
#: self-attention and the cross-attention, Mask ≡ 1: bidirectional)
PADDED: dict[str, tuple[tuple[str, bool], ...]] = {
    "padded_self_attention": (("pad", False),), "padded_causal_self_attention": (("pad", True),),
    "padded_e_transformer": (("pad", False),), "padded_d_transformer": (("pad", True),),
    "padded_encoder_layer": (("pad", False),), "padded_bert_layer": (("pad", False),),
    "padded_gpt2_layer": (("pad", True),),
    "padded_decoder_layer": (("pad_x", True), ("pad_z", False)),
    "padded_ed_transformer": (("pad_z", False), ("pad_x", True)),
}


def check_padding(name: str, inputs: Mapping[str, Any], window: int = 0) -> None:
    """``empty_query="error"``: refuse a padding vector that leaves a query with no key, on the
    concrete (..., ℓ) bool arrays before any tracing (JAX cannot raise inside jit). Bidirectionally
    that is every position padding; causally, query t_x has the keys t_z ≤ t_x with pad[t_z], so a
    padded start empties the first queries (Mask[t_z, t_x] ∧ pad[t_z], Hugging Face's
    ``attention_mask``). Each of the entry's vectors (``PADDED``) is checked under its own rule:
    ``pad_z`` bidirectionally (its keys serve every decoder query in the cross-attention, so all
    padding empties them all), ``pad_x`` causally. Under a sliding ``window`` W ≥ 1 a causal query
    t_x has only the keys t_x − W < t_z ≤ t_x: W padded positions in a row empty the last of them."""
    for arg, causal in PADDED[name]:
        pad = np.asarray(inputs[arg], dtype=bool)
        if causal and window:
            ell = pad.shape[-1]
            t = np.arange(ell)
            keys = (t[:, None] <= t[None, :]) & (t[:, None] > t[None, :] - window)  # (ℓ_z, ℓ_x) [t_z, t_x]
            has_key = (pad[..., :, None] & keys).any(axis=-2)  # (..., ℓ) per query t_x
        elif causal:
            has_key = np.logical_or.accumulate(pad, axis=-1)  # (..., ℓ) per query t_x
        else:
            has_key = np.broadcast_to(pad.any(axis=-1, keepdims=True), pad.shape)  # (..., ℓ) per query t_x
        if not has_key.all():
            bad = sorted({int(t) for t in np.argwhere(~has_key)[:, -1]})
            raise ValueError(f"{name}: padding {arg} leaves query position(s) t_x = {bad} with no key "
                             "(empty_query='error'; the paper's softmax would divide 0 by 0)")


def check_heads(params: Flat, variant: VariantSet) -> None:
    """Key/value heads of their own only under grouped-query attention (kv_group > 1): with
    kv_group = 1 every head carries its W_k, W_v and ``kv_heads.*`` has no meaning (the spec refuses
    it); under kv_group > 1 the count of kv heads is checked where the heads are read
    (``components.kv_index``)."""
    if variant.kv_group == 1 and variant.kv_heads == "grouped":  # "one" shares kv_heads.0 (checked by kv_index)
        extra = sorted(k for k in params if k.startswith("kv_heads.") or ".kv_heads." in k)
        if extra:
            raise ValueError(f"kv_group=1 has no shared key/value heads; given {extra[:3]}")


#: the inputs whose values the spec restricts, by name (docs/spec.md, "What the spec refuses")
TOKEN_INPUTS = ("v", "x", "z", "mask_token", "bos_token", "eos_token")
LENGTH_INPUTS = {"x_len": "x", "z_len": "z", "n_prefill": "x"}  # length -> the sequences it measures
SEQUENCE_INPUTS = ("x", "z")


def check_values(inputs: Mapping[str, Any], hyper: Mapping[str, int]) -> None:
    """Refuse input values outside their ranges, on the concrete canonical arrays before any
    tracing (NumPy on the host: no compile for a new shape): JAX's gathers clamp an index out of
    range and its comparisons take any variate, so an out-of-range token, position, length,
    variate, probability or temperature would otherwise give a number."""
    def host(name: str) -> np.ndarray:
        return np.asarray(inputs[name])

    for name in TOKEN_INPUTS:
        if name in inputs:
            _within(name, host(name), 0, hyper["N_V"], "token IDs")
    for name in SEQUENCE_INPUTS:  # ℓ ≤ ℓ_max under every positions switch (a sinusoid never runs out)
        width = np.shape(inputs[name])[-1] if name in inputs and np.ndim(inputs[name]) else 0
        if "ell_max" in hyper and width > hyper["ell_max"]:
            raise ValueError(f"{name}: a sequence of length {width} exceeds ell_max = {hyper['ell_max']}")
    if "t" in inputs:
        _within("t", host("t"), 0, hyper["ell_max"], "positions")
    for name, of in LENGTH_INPUTS.items():
        if name in inputs:
            _within(name, host(name), 1, host(of).shape[-1] + 1, "lengths")
    if "u" in inputs:
        u = host("u").astype(np.float64)
        if u.size and not (np.all(u >= 0) and np.all(u < 1)):
            raise ValueError(f"u: variates must lie in [0, 1); given range [{u.min()}, {u.max()}]")
    if "p_mask" in inputs and not 0 <= float(host("p_mask")) <= 1:
        raise ValueError(f"p_mask: a probability in [0, 1]; given {float(host('p_mask'))}")
    if "tau" in inputs and not float(host("tau")) >= 0:  # NaN fails too
        raise ValueError(f"tau: a temperature τ ≥ 0 (0 and inf are the limits); given {float(host('tau'))}")
    if "p" in inputs:
        p = host("p").astype(np.float64)
        if not (np.all(np.isfinite(p)) and np.all(p >= 0) and np.all(np.any(p > 0, axis=-1))):
            raise ValueError("p: non-negative finite probabilities with a positive entry")


def _within(name: str, values: np.ndarray, low: int, high: int, what: str) -> None:
    if values.size and (values.min() < low or values.max() >= high):
        raise ValueError(f"{name}: {what} must lie in [{low}, {high}); given range [{values.min()}, {values.max()}]")
