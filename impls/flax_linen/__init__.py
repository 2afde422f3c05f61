"""Flax linen itself as an implementation (plugin ``flax``).

Boundary only: layout, loading ftspec's parameters into the variables of
the library's own modules, mask layout and head packing (``adapter``); the
maths is linen's (``entries``). Written against flax 0.12.8 / jax 0.10.2.

Variant set (docs/libraries.md says why, switch by switch):

- ``LayerNorm``/``RMSNorm`` at their defaults: ε = 1e-6 inside the root
  (``lax.rsqrt(var + epsilon)``), and LayerNorm's variance in one pass,
  max(0, E[x²] − E[x]²) (``use_fast_variance=True``): ``variance="one_pass"``.
- ``dot_product_attention_weights`` divides the query by √depth before
  q·kᵀ (``scale_placement="query"``) and fills masked scores with
  finfo(dtype).min, so a query that may attend to nothing gets uniform
  weights over every key (``empty_query="uniform"``). The padded
  self-attention entries meet it (a fully padded sequence; causally, a
  padded start): ``jnp.where`` puts exactly finfo(dtype).min in every masked
  score, so the weights are uniform at every dtype (measured: float64 to
  float16, docs/libraries.md "Flax").

flax.nnx's LayerNorm, RMSNorm and MultiHeadAttention run the same lines
(nnx/nn/normalization.py ``_compute_stats``/``_normalize``,
nnx/nn/attention.py ``dot_product_attention_weights``) with the same
defaults, so nnx needs no plugin of its own.

Dtypes: float64 (``jax_enable_x64``, set at import as the ``jax`` plugin
does), float32, bfloat16, float16, all on CPU. The norms compute their
statistics and the normalised value in at least float32 and round the
result to the call's dtype once (``force_float32_reductions``); the
harness's tolerance models every operation in the call's dtype, which
bounds that from above, so the declaration stays ``precision="highest"``
(no reduced matrix-product tier: every module is built with
``precision=HIGHEST``).

Shape limits: MultiHeadDotProductAttention has one head_dim =
qkv_features / num_heads for q, k and v, so d_attn = d_mid (mh_attention
and the padded self-attention entries); d_x, d_z and d_out are free
(``qkv_features``, ``out_features``).

Padding (padded_self_attention, padded_causal_self_attention): the mask is
linen's ``make_attention_mask(query_ok, pad)`` with every query allowed
(combined with ``make_causal_mask`` for the causal entry), so padding masks
keys only, as the spec states. The idiom ``make_attention_mask(pad, pad)``
also masks a padding position's own query; its output column is then the
mean of all values rather than its attention over the real tokens (a
different result on padding columns only, which the spec has no switch
for; docs/libraries.md "Flax").
"""

from __future__ import annotations

from typing import Any

import jax

jax.config.update("jax_enable_x64", True)

import flax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from ftspec.impls.api import Implementation, Limits  # noqa: E402
from ftspec.spec.variants import PAPER  # noqa: E402

from .entries import ALGORITHMS  # noqa: E402

__all__ = ["VARIANT", "devices", "from_numpy", "implementation", "to_numpy"]

#: linen's defaults, as the switches state them (module docstring).
VARIANT = PAPER.replace(epsilon=1e-6, epsilon_placement="inside_root", variance="one_pass",
                        scale_placement="query", empty_query="uniform")

_NP = {"float64": np.float64, "float32": np.float32, "bfloat16": jnp.bfloat16, "float16": np.float16,
       "int64": np.int64, "bool": np.bool_}


def _devices() -> dict[str, Any]:
    """``"{platform}:{id}"`` → device, CPU devices included when the default backend is not CPU."""
    devs = list(jax.devices())
    if all(d.platform != "cpu" for d in devs):
        devs += jax.devices("cpu")
    return {f"{d.platform}:{d.id}": d for d in devs}


def devices() -> list[str]:
    return list(_devices())


def _device(name: str) -> Any:
    """A ``"platform:id"`` name, or a bare platform for its first device."""
    found = _devices()
    if name in found:
        return found[name]
    for key, d in found.items():
        if key.partition(":")[0] == name:
            return d
    raise ValueError(f"unknown JAX device {name!r}; available: {sorted(found)}")


def from_numpy(array: Any, dtype: str, device: str) -> Any:
    """Cast on the host (values are exact in ``dtype``), then place on ``device``."""
    if dtype not in _NP:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {sorted(_NP)}")
    return jax.device_put(np.asarray(array).astype(_NP[dtype]), _device(device))


def to_numpy(x: Any) -> np.ndarray:
    """Value for value (bfloat16 upcast to float32, which holds it exactly)."""
    x = jnp.asarray(x)
    return np.asarray(x.astype(jnp.float32) if x.dtype == jnp.bfloat16 else x)


implementation = Implementation(
    name="flax",
    version=f"flax{flax.__version__}+jax{jax.__version__}",
    algorithms=ALGORITHMS,
    dtypes=("float64", "float32", "bfloat16", "float16"),
    devices=devices,
    from_numpy=from_numpy,
    to_numpy=to_numpy,
    variants=[VARIANT],
    precision="highest",
    description="Flax linen as shipped: LayerNorm, RMSNorm, dot_product_attention, "
                "MultiHeadDotProductAttention (with make_attention_mask / make_causal_mask padding)",
    # shapes_per_search: the searches reuse 4 (variant, shape) pairs, so compiled programs are reused
    extra={"flax": flax.__version__, "jax": jax.__version__, "shapes_per_search": 4},
    limits={a: Limits(equal=(("d_attn", "d_mid"),))
            for a in ("mh_attention", "padded_self_attention", "padded_causal_self_attention")},
)
