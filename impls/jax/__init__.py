"""The JAX implementation of ftspec (Phuong & Hutter, "Formal Algorithms for Transformers").

Global JAX settings made when this plugin is imported (they affect the whole
process, which is the point: the harness compares float64 and full-float32
results):

- ``jax_enable_x64 = True``: float64 arrays are real float64 (JAX otherwise
  silently truncates them to float32), and token IDs stay int64.
- ``jax_default_matmul_precision = "highest"``: float32 matrix products in
  full float32 (no TF32 or bf16 passes on GPUs/TPUs). Every einsum also
  passes ``precision=jax.lax.Precision.HIGHEST`` explicitly, so the
  declaration ``precision="highest"`` holds even if a caller changes the
  global default later.

Design:

- ``components.py`` (Algorithms 1-7), ``layers.py`` (the layers of 8-10),
  ``architectures.py`` (8-10) are written for ONE unbatched example with
  tokens as rows (Flax/equinox style); ``ctx.batched`` is ``jax.vmap`` on
  top, params unbatched. On CPU a forward entry always runs as a vmapped
  batch of at least ``BATCH_PAD`` (a single example is a batch of one,
  filled up with copies), so one compiled program per structure serves the
  single call and the harness's batches. ``boundary.py`` converts the spec's canonical
  layout (tokens as columns, Mask [t_z, t_x], flat parameter names) in one
  place.
- Computation happens in the dtype of the call (bfloat16/float16 stay in
  that dtype; JAX's reductions accumulate low-precision sums in float32
  internally, as they always do). The fixed sinusoid tables are constants,
  built in float64 and rounded once.
- Devices: every ``jax.devices()`` entry as ``"{platform}:{id}"`` (plus CPU
  devices when the default backend is an accelerator), each listed once; a
  bare ``"cpu"`` is accepted as the first CPU device. Constants are created under ``jax.default_device`` of the
  call's device, so results stay on it.
- jit by default: one ``jax.jit`` program per (entry, hyperparameters,
  variant, dtype, batched, platform), cached (bounded LRU), compiled on CPU
  with ``xla_backend_optimization_level=0`` (compile time dominates tiny
  shapes; like jit's fusion itself, this moves results by units in the last
  place only, with the same error against the spec as eager). Eager JAX is not compile-free: every
  primitive is compiled for every new shape, so a new shape costs dozens of
  small compiles instead of one. Measured (CPU seconds, jax 0.10.2, float64,
  ~50 random shapes with d_e ≤ 16, ℓ ≤ 8, L ≤ 2, each called once): eager /
  jit / jit at O0 = mh_attention 1.24 / 0.36 / 0.26 s, gpt2_layer 1.44 / 0.62
  / 0.45 s, ed_transformer 2.08 / 1.93 / 1.40 s per call; a harness-like mix
  (random entry, variant and shape): eager ≈ 1.0 s, jit at O0 ≈ 0.29 s per
  call. A repeated call: eager 4-24 ms, jit 0.3-1.4 ms. Eager wins only when
  the shape stays fixed while the variant changes (op caches are shared
  across variants: 20-30 ms against 0.2-0.45 s per call), so
  ``FTSPEC_JAX_JIT=0`` switches to eager (the plain path beside the fast one).
- LLaMA-style switches: RoPE and grouped-query attention live in
  ``components.attention_heads`` and so reach every multi-head attention,
  layer, model, training entry (``jax.grad`` differentiates through the
  rotation and the kv-head gather, whose gradient sums over the sharing
  heads) and inference entry. ``kv_heads.{g}.*`` parameters are stacked on
  their own axis (``boundary._mha``). The ``padded_*`` entries mask padding
  positions as keys (``layers.self_mask``); ``cached_decoding`` is a real
  key/value-cache decoder (``architectures.cached_decoding``: a padded prefill
  then one-token steps in a static-bound ``fori_loop``, so one compiled
  program serves every n_prefill and ``jax.vmap`` batches it per example).
- ``empty_query="error"`` is checked on the concrete mask (or padding vector) before any tracing
  and raises ``ValueError``; so are input values out of range (tokens,
  positions, lengths, variates, probabilities, τ: ``boundary.check_values``;
  JAX's gathers would clamp an out-of-range index silently). A norm without
  ε that meets a token of zero variance raises too, from inside the compiled
  program: every program runs under ``jax.experimental.checkify``
  (``boundary.jitted``).
"""

from __future__ import annotations

from typing import Any, Mapping

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_default_matmul_precision", "highest")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from ftspec.impls.api import Context, Implementation  # noqa: E402

from . import inference as _inference  # noqa: E402
from .architectures import windowed_layers  # noqa: E402
from . import moe as _moe  # noqa: E402
from . import training as _training  # noqa: E402
from .boundary import (  # noqa: E402
    ENTRIES,
    PADDED,
    Config,
    check_empty_queries,
    check_heads,
    check_padding,
    check_values,
    runner,
)

__all__ = ["implementation", "devices", "from_numpy", "to_numpy"]

_NP_DTYPES = {"float64": np.float64, "float32": np.float32, "bfloat16": jnp.bfloat16,
              "float16": np.float16, "int64": np.int64, "bool": np.bool_}


def _all_devices() -> list:
    devs = list(jax.devices())
    if all(d.platform != "cpu" for d in devs):
        devs += jax.devices("cpu")
    return devs


def devices() -> list[str]:
    """``"{platform}:{id}"`` for every device, each once (``device()`` also accepts a bare
    platform name such as ``"cpu"`` for its first device)."""
    return [f"{d.platform}:{d.id}" for d in _all_devices()]


def device(name: str) -> Any:
    """The ``jax.Device`` for ``"platform:id"`` or a bare platform name (its first device)."""
    platform, sep, idx = name.partition(":")
    if not sep:
        return jax.devices(platform)[0]
    for d in _all_devices():
        if d.platform == platform and str(d.id) == idx:
            return d
    raise ValueError(f"unknown JAX device {name!r}; available: {devices()}")


def from_numpy(array: np.ndarray, dtype: str, device_name: str) -> jax.Array:
    """Cast on the host (values are exact in ``dtype``), then ``jax.device_put`` on the device."""
    return jax.device_put(np.asarray(array).astype(_NP_DTYPES[dtype]), device(device_name))


def to_numpy(x: Any) -> np.ndarray:
    if jnp.asarray(x).dtype == jnp.bfloat16:
        x = jnp.asarray(x).astype(jnp.float32)  # exact: every bfloat16 is a float32
    return np.asarray(x)


def _algorithm(name: str):
    def fn(inputs: Mapping[str, Any], params: Mapping[str, Any], ctx: Context) -> Any:
        if name in ("attention", "mh_attention") and ctx.variant.empty_query == "error":
            check_empty_queries(name, inputs["Mask"])
        if name in PADDED and ctx.variant.empty_query == "error":
            # a GPT stack of full layers alone (global_every = 1) has no window to empty a query
            window = ctx.variant.window if name != "padded_d_transformer" or windowed_layers(ctx.variant) else 0
            check_padding(name, inputs, window)
        check_values(inputs, ctx.hyper)
        cfg = Config(tuple(sorted(ctx.hyper.items())), ctx.variant, ctx.dtype)
        dev = device(ctx.device)
        with jax.default_device(dev):
            if dev.platform == "cpu" and inputs:
                return _as_padded_batch(runner(name, cfg, True, dev.platform), inputs, params, ctx.batched, dev)
            return runner(name, cfg, ctx.batched, dev.platform)(dict(inputs), dict(params))

    fn.__name__ = fn.__qualname__ = name
    return fn


#: On CPU a forward entry always runs as a batch of at least ``BATCH_PAD`` examples (a shorter batch
#: filled up with copies of its first, a single example a batch of one), so the one program compiled
#: for a structure serves the single call and every batch of up to ``BATCH_PAD``. Compiling is what
#: a call costs on CPU at these sizes (the module docstring), and a program per batch size made a
#: default search's batch checks (batches of 2 and 3) most of its time: measured on gpt2_layer
#: float32, 17 batch checks took 15.7 of 25.5 s of plugin calls. Each example of a vmapped batch is
#: computed on its own, so the copies change nothing in the others.
BATCH_PAD = 4


def _as_padded_batch(run: Any, inputs: Mapping[str, Any], params: Mapping[str, Any], batched: bool,
                     dev: Any) -> dict:
    arrays = {k: np.asarray(v) if batched else np.asarray(v)[None] for k, v in inputs.items()}
    n = len(next(iter(arrays.values())))
    if n < BATCH_PAD:  # padded on the host: an eager JAX op would compile for every new shape
        arrays = {k: np.concatenate([v, np.repeat(v[:1], BATCH_PAD - n, axis=0)]) for k, v in arrays.items()}
    out = run({k: jax.device_put(v, dev) for k, v in arrays.items()}, dict(params))
    return {k: jax.device_put(np.asarray(v)[:n] if batched else np.asarray(v)[0], dev) for k, v in out.items()}


def _training_or_inference(name: str, entry):
    """Algorithms 11-15 (training.py, inference.py): ``entry(inputs, params, ctx, device)``."""
    def fn(inputs: Mapping[str, Any], params: Mapping[str, Any], ctx: Context) -> Any:
        check_values(inputs, ctx.hyper)
        check_heads(params, ctx.variant)
        dev = device(ctx.device)
        with jax.default_device(dev):
            return entry(dict(inputs), dict(params), ctx, dev)

    fn.__name__ = fn.__qualname__ = name
    return fn


def _moe_mlp(inputs: Mapping[str, Any], params: Mapping[str, Any], ctx: Context) -> Any:
    """A sparse mixture-of-experts MLP (moe.py, spec 2.11; Mixtral, Qwen2-MoE)."""
    dev = device(ctx.device)
    with jax.default_device(dev):
        return _moe.moe_mlp(dict(inputs), dict(params), ctx, dev.platform)


_ALGORITHMS = {name: _algorithm(name) for name in ENTRIES}
_ALGORITHMS["moe_mlp"] = _moe_mlp
_ALGORITHMS.update({name: _training_or_inference(name, e)
                    for name, e in {**_training.ENTRIES, **_inference.ENTRIES}.items()})


implementation = Implementation(
    name="jax",
    version=f"0.1.0+jax{jax.__version__}",
    algorithms=_ALGORITHMS,
    dtypes=("float64", "float32", "bfloat16", "float16"),
    devices=devices,
    from_numpy=from_numpy,
    to_numpy=to_numpy,
    variants="all",
    precision="highest",
    description="JAX: unbatched layers (tokens as rows) + jax.vmap, einsum over stacked heads",
    # one compiled program per (variant, shape): a search draws at most 4 such pairs, so programs
    # are reused (conformance/running/runner.py; measured: layer_norm 62-71 examples in 3 s against 7-15)
    extra={"shapes_per_search": 4},
)
