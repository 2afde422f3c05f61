"""The catalogue of mutants. Each entry: one realistic bug, the algorithms it
breaks, and where such a bug was seen (../shared/CONVENTIONS.md lists public
threads)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ftspec.spec.variants import VariantSet

from .framework import Mutant, change_inputs, change_outputs, on_numpy, replace_function, swap_variant

__all__ = ["MUTANTS", "mutant"]

ATTENTION_USERS = ("basic_single_query_attention", "attention", "mh_attention", "encoder_layer",
                   "decoder_layer", "bert_layer", "gpt2_layer", "ed_transformer", "e_transformer",
                   "d_transformer")
LAYERS_AND_MODELS = ("encoder_layer", "decoder_layer", "bert_layer", "gpt2_layer", "ed_transformer",
                     "e_transformer", "d_transformer")
NORM_USERS = ("layer_norm",) + LAYERS_AND_MODELS
GELU_USERS = ("bert_layer", "gpt2_layer", "e_transformer", "d_transformer")
_ARCH = {"bert_layer": "bert", "e_transformer": "bert", "gpt2_layer": "gpt2", "d_transformer": "gpt2",
         "encoder_layer": "ed_encoder", "decoder_layer": "ed_decoder", "ed_transformer": "ed_encoder"}


def _gelu_tanh(v: VariantSet, algorithm: str) -> VariantSet:
    if v.resolved_activation(_ARCH.get(algorithm, "bert")) == "gelu_erf":
        return v.replace(activation="gelu_tanh")
    return v


def _add_epsilon(v: VariantSet, algorithm: str) -> VariantSet:
    if v.epsilon_placement == "none":
        return v.replace(epsilon=1e-5, epsilon_placement="inside_root")
    return v


def _epsilon_outside(v: VariantSet, algorithm: str) -> VariantSet:
    if v.epsilon_placement == "inside_root":
        return v.replace(epsilon_placement="outside_root")
    return v


def _unbiased(v: VariantSet, algorithm: str) -> VariantSet:
    return v.replace(variance="unbiased") if v.variance == "biased" else v


def _no_scale(v: VariantSet, algorithm: str) -> VariantSet:
    return v.replace(attn_scale="none") if v.attn_scale == "sqrt_d_attn" else v


def _transpose_mask(inputs: dict, params: dict, ctx: Any, base: Any) -> tuple[dict, dict]:
    inputs["Mask"] = on_numpy(base, inputs["Mask"], lambda m: np.swapaxes(m, -1, -2), ctx.dtype, ctx.device)
    return inputs, params


def _nan(out: Any, ctx: Any, base: Any) -> Any:
    return on_numpy(base, out, lambda a: np.full(a.shape, np.nan), ctx.dtype, ctx.device)


def _wrong_shape(out: Any, ctx: Any, base: Any) -> Any:
    return on_numpy(base, out, lambda a: np.swapaxes(a, -1, -2), ctx.dtype, ctx.device)


def _wrong_dtype(out: Any, ctx: Any, base: Any) -> Any:
    return on_numpy(base, out, lambda a: a, "float64" if ctx.dtype != "float64" else "float32", ctx.device)


def _mutating(fn, base):
    def buggy(inputs, params, ctx):
        out = fn(inputs, params, ctx)
        for value in inputs.values():  # the NumPy plugin's arrays: zeroed in place after use
            if isinstance(value, np.ndarray) and value.dtype.kind == "f":
                value[...] = 0
        return out
    return buggy


def _hanging(fn, base):
    def buggy(inputs, params, ctx):
        time.sleep(3600)
        return fn(inputs, params, ctx)
    return buggy


def _raising(fn, base):
    def buggy(inputs, params, ctx):
        raise RuntimeError("this plugin has a bug")
    return buggy


_LIST = [
    # --- the handful of issue 4 -------------------------------------------------
    Mutant("mask-transposed", "Mask read as [t_x, t_z] instead of [t_z, t_x]", ("attention", "mh_attention"),
           change_inputs(_transpose_mask), source="index order [query, key] vs the paper's [key, query]; "
                                                  "pytorch#86120"),
    Mutant("scale-missing", "scores not divided by √d_attn", ATTENTION_USERS, swap_variant(_no_scale),
           source="T5 folds the scale into initialisation; ports that forget it"),
    Mutant("epsilon-added", "layer norm adds ε = 1e-5 inside the root where the paper has none", NORM_USERS,
           swap_variant(_add_epsilon), source="PyTorch LayerNorm default eps=1e-5; candle PR 271"),
    Mutant("epsilon-outside-root", "ε added to the standard deviation instead of inside the root", NORM_USERS,
           swap_variant(_epsilon_outside), source="the Annotated Transformer; the fourth seed"),
    Mutant("variance-unbiased", "layer norm divides the variance by d_e − 1", NORM_USERS,
           swap_variant(_unbiased), source="torch.std default; the Annotated Transformer"),
    Mutant("gelu-tanh", "GELU tanh approximation where the exact (erf) GELU is asked for", GELU_USERS,
           swap_variant(_gelu_tanh), source="jax#4428, dfdx#804, candle PR 900"),
    Mutant("returns-nan", "layer_norm returns NaN everywhere", ("layer_norm",), change_outputs(_nan),
           kind="behaviour"),
    Mutant("wrong-shape", "layer_norm returns its output transposed", ("layer_norm",),
           change_outputs(_wrong_shape), kind="behaviour"),
    Mutant("wrong-dtype", "rms_norm returns another dtype than asked", ("rms_norm",),
           change_outputs(_wrong_dtype), kind="behaviour"),
    Mutant("mutates-input", "layer_norm zeroes its input array after use", ("layer_norm",),
           replace_function(_mutating), kind="behaviour"),
    Mutant("hangs", "rms_norm never returns", ("rms_norm",), replace_function(_hanging), kind="behaviour"),
    Mutant("raises", "unembedding raises", ("unembedding",), replace_function(_raising), kind="behaviour"),
]

MUTANTS: dict[str, Mutant] = {m.id: m for m in _LIST}


def mutant(mutant_id: str) -> Mutant:
    try:
        return MUTANTS[mutant_id]
    except KeyError:
        raise ValueError(f"unknown mutant {mutant_id!r}; known: {', '.join(MUTANTS)}") from None
