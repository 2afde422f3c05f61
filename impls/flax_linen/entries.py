"""The registry entries, each a thin call into Flax linen's own code.

Nothing here computes the algorithm: ftspec's parameters are rearranged into
the variables of the library's modules by ``adapter`` and the modules (or
``nn.dot_product_attention``) do the maths. Read against flax 0.12.8:
linen/normalization.py (LayerNorm, RMSNorm, ``_compute_stats``,
``_normalize``), linen/attention.py (``dot_product_attention_weights``,
``dot_product_attention``, MultiHeadDotProductAttention,
``make_attention_mask``, ``make_causal_mask``, ``combine_masks``), linen/linear.py
(Dense, DenseGeneral).

Every module is built at its defaults except ``precision`` (HIGHEST, so
that float32 products are full float32 on any backend; on CPU that is
already the default) and the sizes the call needs. Each (entry,
hyperparameters) gets one ``jax.jit`` program, cached, holding the layout
change too: jit is how linen modules are used, and it keeps a new shape to
one compile (eager, every small re-indexing op compiles on its own).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping

import flax.linen as nn
import jax

from ftspec.impls.api import Context

from . import adapter as A

__all__ = ["ALGORITHMS", "CPU_COMPILER_OPTIONS", "MODULES"]

In = Mapping[str, Any]
HIGHEST = jax.lax.Precision.HIGHEST


class _Attention(nn.Module):
    """Alg. 4 wired from linen parts: three ``nn.Dense`` projections and
    ``nn.dot_product_attention`` with one head (it scales the query by
    1/√d_attn and fills masked scores with finfo(dtype).min)."""

    d_attn: int
    d_out: int

    @nn.compact
    def __call__(self, X: Any, Z: Any, mask: Any) -> Any:
        q = nn.Dense(self.d_attn, precision=HIGHEST, name="q")(X)  # (…, ℓ_x, d_attn)
        k = nn.Dense(self.d_attn, precision=HIGHEST, name="k")(Z)  # (…, ℓ_z, d_attn)
        v = nn.Dense(self.d_out, precision=HIGHEST, name="v")(Z)  # (…, ℓ_z, d_out)
        y = nn.dot_product_attention(q[..., None, :], k[..., None, :], v[..., None, :], mask=mask,
                                     precision=HIGHEST)  # (…, ℓ_x, 1, d_out)
        return y[..., 0, :]


def _self_attention_module(h: dict) -> nn.Module:
    return nn.MultiHeadDotProductAttention(num_heads=h["H"], qkv_features=h["H"] * h["d_attn"],
                                           out_features=h["d_e"], precision=HIGHEST)


#: entry → (hyperparameters → the linen module at its defaults)
MODULES: dict[str, Callable[[dict], nn.Module]] = {
    # nn.LayerNorm: epsilon 1e-6, use_fast_variance=True (one pass), scale and bias
    "layer_norm": lambda h: nn.LayerNorm(),
    # nn.RMSNorm: epsilon 1e-6, scale only
    "rms_norm": lambda h: nn.RMSNorm(),
    "attention": lambda h: _Attention(d_attn=h["d_attn"], d_out=h["d_out"]),
    # head_dim = qkv_features // num_heads serves q, k and v: d_attn = d_mid
    "mh_attention": lambda h: nn.MultiHeadDotProductAttention(
        num_heads=h["H"], qkv_features=h["H"] * h["d_attn"], out_features=h["d_out"], precision=HIGHEST),
    # the self-attention of a layer: d_x = d_z = d_out = d_e
    "padded_self_attention": _self_attention_module,
    "padded_causal_self_attention": _self_attention_module,
}


def _layer_norm(m: nn.Module, i: In, p: In, h: dict) -> Any:
    """Alg. 6 via ``nn.LayerNorm()`` (statistics in at least float32)."""
    Y = m.apply(A.norm_variables(p), A.cols_to_rows(i["X"]))  # (…, ℓ, d_e)
    return A.rows_to_cols(Y)  # (…, d_e, ℓ)


def _rms_norm(m: nn.Module, i: In, p: In, h: dict) -> Any:
    """Alg. 6 (RMSnorm) via ``nn.RMSNorm()``."""
    Y = m.apply(A.norm_variables({"gamma": p["gamma"]}), A.cols_to_rows(i["X"]))  # (…, ℓ, d_e)
    return A.rows_to_cols(Y)  # (…, d_e, ℓ)


def _attention(m: nn.Module, i: In, p: In, h: dict) -> Any:
    """Alg. 4: ``nn.Dense`` projections + ``nn.dot_product_attention`` (one head)."""
    variables = {"params": {"q": A.dense(p["W_q"], p["b_q"]), "k": A.dense(p["W_k"], p["b_k"]),
                            "v": A.dense(p["W_v"], p["b_v"])}}
    X, Z = A.cols_to_rows(i["X"]), A.cols_to_rows(i["Z"])  # (…, ℓ_x, d_x), (…, ℓ_z, d_z)
    return A.rows_to_cols(m.apply(variables, X, Z, A.flax_mask(i["Mask"])))  # (…, d_out, ℓ_x)


def _mh_attention(m: nn.Module, i: In, p: In, h: dict) -> Any:
    """Alg. 5 via ``nn.MultiHeadDotProductAttention`` (inputs_q = X, inputs_k = Z;
    inputs_v left out, so the module copies inputs_k: passing Z again warns
    "may have intended mask" whenever d_z = ℓ_z)."""
    X, Z = A.cols_to_rows(i["X"]), A.cols_to_rows(i["Z"])  # (…, ℓ_x, d_x), (…, ℓ_z, d_z)
    Y = m.apply(A.mha_variables(p, h["H"]), X, Z, mask=A.flax_mask(i["Mask"]))  # (…, ℓ_x, d_out)
    return A.rows_to_cols(Y)  # (…, d_out, ℓ_x)


def _padded_self_attention(m: nn.Module, i: In, p: In, h: dict) -> Any:
    """Alg. 5 with Z = X and Mask ≡ 1 ∧ pad[t_z] via ``nn.MultiHeadDotProductAttention(X,
    mask=nn.make_attention_mask(query_ok, pad))`` (inputs_k left out: the module attends X to
    itself). ``query_ok`` is all True: padding masks keys only (``adapter.padding_mask``)."""
    X = A.cols_to_rows(i["X"])  # (…, ℓ, d_e)
    Y = m.apply(A.mha_variables(p, h["H"]), X, mask=A.padding_mask(i["pad"]))  # (…, ℓ, d_e)
    return A.rows_to_cols(Y)  # (…, d_e, ℓ)


def _padded_causal_self_attention(m: nn.Module, i: In, p: In, h: dict) -> Any:
    """Alg. 5 with Z = X and Mask = [[t_z ≤ t_x]] ∧ pad[t_z] via
    ``nn.MultiHeadDotProductAttention(X, mask=nn.combine_masks(nn.make_causal_mask(pad),
    nn.make_attention_mask(query_ok, pad)))``, linen's causal-and-padding idiom."""
    X = A.cols_to_rows(i["X"])  # (…, ℓ, d_e)
    Y = m.apply(A.mha_variables(p, h["H"]), X, mask=A.padding_mask(i["pad"], causal=True))  # (…, ℓ, d_e)
    return A.rows_to_cols(Y)  # (…, d_e, ℓ)


_CALLS = {"layer_norm": _layer_norm, "rms_norm": _rms_norm, "attention": _attention,
          "mh_attention": _mh_attention, "padded_self_attention": _padded_self_attention,
          "padded_causal_self_attention": _padded_causal_self_attention}

#: XLA CPU at optimisation level 0, as the ``jax`` plugin compiles
#: (impls/jax/boundary.py CPU_COMPILER_OPTIONS): compile time dominates these
#: tiny shapes, and the level moves results by units in the last place only.
CPU_COMPILER_OPTIONS = {"xla_backend_optimization_level": 0}


@functools.lru_cache(maxsize=256)
def _program(name: str, hyper: tuple, platform: str) -> Callable[[In, In], Any]:
    """One jitted program (layout, variables and the library call) per entry,
    hyperparameters and platform; jit retraces it per dtype and batch shape."""
    h = dict(hyper)
    module, call = MODULES[name](h), _CALLS[name]
    opts = CPU_COMPILER_OPTIONS if platform == "cpu" else None
    return jax.jit(lambda i, p: call(module, i, p, h), compiler_options=opts)


def _entry(name: str) -> Callable[[In, In, Context], Any]:
    def fn(i: In, p: In, ctx: Context) -> Any:
        platform = ctx.device.partition(":")[0]
        return _program(name, tuple(sorted(ctx.hyper.items())), platform)(dict(i), dict(p))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = _CALLS[name].__doc__
    return fn


ALGORITHMS = {name: _entry(name) for name in _CALLS}
