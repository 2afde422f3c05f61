"""Shared pieces of the mutant catalogue: groups of registry entries, the
plugin modules that source edits target, variant swaps, input/output changes,
misbehaviour, and witness values several mutants use."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ftspec.spec.variants import VariantSet

from .injection import Witness, on_numpy

# -- algorithm groups -----------------------------------------------------------------

ED = ("ed_transformer", "ed_loss", "ed_gradient", "ed_sgd_step", "ed_training", "ed_inference")
E = ("e_transformer", "e_loss", "e_gradient", "e_sgd_step", "e_training")
D = ("d_transformer", "d_loss", "d_gradient", "d_sgd_step", "d_training", "d_inference")
N = ("next_token_encoder",)  # the encoder read at its last position (seeds 000 and 002)
MODELS = ED + E + D + N
LAYERS = ("encoder_layer", "decoder_layer", "bert_layer", "gpt2_layer")
#: a layer's multi-head self-attention on its own (Z = X, the mask built from ℓ: ≡ 1, causal)
SELF_ATTENTION = ("self_attention", "causal_self_attention")
ATTENTION_USERS = ("basic_single_query_attention", "attention", "mh_attention") + SELF_ATTENTION + LAYERS + MODELS
#: where a Mask reaches attention (the bidirectional self-attention passes none: Mask ≡ 1)
MASKED = ("attention", "mh_attention", "causal_self_attention", "decoder_layer", "gpt2_layer") + ED + D
CAUSAL = ("unidirectional_mask", "causal_self_attention", "decoder_layer", "gpt2_layer") + ED + D
NORM_USERS = ("layer_norm",) + LAYERS + MODELS
GELU_USERS = ("bert_layer", "gpt2_layer") + E + D
RELU_USERS = ("encoder_layer", "decoder_layer") + ED + N
SOFTMAX_P = ("unembedding", "ed_transformer", "e_transformer", "d_transformer", "d_inference", "ed_inference",
             "next_token_encoder")
LOSSES = ("ed_loss", "e_loss", "d_loss")
GRADIENTS = ("ed_gradient", "e_gradient", "d_gradient")
STEPS = ("ed_sgd_step", "e_sgd_step", "d_sgd_step")
LOOPS = ("ed_training", "e_training", "d_training")
DIFFERENTIATED = GRADIENTS + STEPS + LOOPS
NEXT_TOKEN = ("ed_loss", "d_loss", "ed_gradient", "d_gradient", "ed_sgd_step", "d_sgd_step", "ed_training",
              "d_training")
SAMPLERS = ("sample", "d_inference", "ed_inference")

_ARCH = {"bert_layer": "bert", "e_transformer": "bert", "gpt2_layer": "gpt2", "d_transformer": "gpt2",
         "encoder_layer": "ed_encoder", "decoder_layer": "ed_decoder", "ed_transformer": "ed_encoder",
         "next_token_encoder": "ed_encoder"}

NP = "ftspec.impls.numpy."
C, L, A, GC, GL, TR, INF = (NP + m for m in ("components", "layers", "architectures", "grad_components",
                                             "grad_layers", "training", "inference"))
TORCH = "ftspec.impls.torch."

# -- variant swaps: the mutant follows another value of a switch ------------------------


def arch_of(algorithm: str) -> str:
    for prefix, arch in (("ed_", "ed_encoder"), ("e_", "bert"), ("d_", "gpt2")):
        if algorithm.startswith(prefix):
            return arch
    return _ARCH.get(algorithm, "bert")


def to_gelu_tanh(v: VariantSet, algorithm: str) -> VariantSet:
    if v.resolved_activation(arch_of(algorithm)) == "gelu_erf":
        return v.replace(activation="gelu_tanh")
    return v


def relu_to_gelu(v: VariantSet, algorithm: str) -> VariantSet:
    if v.resolved_activation(arch_of(algorithm)) == "relu":
        return v.replace(activation="gelu_erf")
    return v


def add_epsilon(value: float):
    def change(v: VariantSet, algorithm: str) -> VariantSet:
        if v.epsilon_placement == "none":
            return v.replace(epsilon=value, epsilon_placement="inside_root")
        return v
    change.__name__ = f"add_epsilon({value:g})"
    return change


def epsilon_outside(v: VariantSet, algorithm: str) -> VariantSet:
    if v.epsilon_placement == "inside_root":
        return v.replace(epsilon_placement="outside_root")
    return v


def epsilon_fixed_1e6(v: VariantSet, algorithm: str) -> VariantSet:
    """Flax's default ε = 1e-6 whatever the configuration says (when the model has one)."""
    if v.epsilon_placement != "none" and v.epsilon != 1e-6:
        return v.replace(epsilon=1e-6)
    return v


def unbiased(v: VariantSet, algorithm: str) -> VariantSet:
    return v.replace(variance="unbiased") if v.variance == "biased" else v


def no_scale(v: VariantSet, algorithm: str) -> VariantSet:
    return v.replace(attn_scale="none") if v.attn_scale == "sqrt_d_attn" else v


def top_left(v: VariantSet, algorithm: str) -> VariantSet:
    return v.replace(causal_alignment="top_left")


def no_embedding_scale(v: VariantSet, algorithm: str) -> VariantSet:
    return v.replace(embedding_scale="one")


def no_logit_bias(v: VariantSet, algorithm: str) -> VariantSet:
    return v.replace(logit_bias=False) if v.logit_bias else v


# -- input/output changes and misbehaviour ----------------------------------------------


def transpose_mask(inputs: dict, params: dict, ctx: Any, base: Any) -> tuple[dict, dict]:
    inputs["Mask"] = on_numpy(base, inputs["Mask"], lambda m: np.swapaxes(m, -1, -2), ctx.dtype, ctx.device)
    return inputs, params


def all_nan(out: Any, ctx: Any, base: Any) -> Any:
    return on_numpy(base, out, lambda a: np.full(a.shape, np.nan), ctx.dtype, ctx.device)


def transposed_output(out: Any, ctx: Any, base: Any) -> Any:
    return on_numpy(base, out, lambda a: np.swapaxes(a, -1, -2), ctx.dtype, ctx.device)


def other_dtype(out: Any, ctx: Any, base: Any) -> Any:
    return on_numpy(base, out, lambda a: a, "float64" if ctx.dtype != "float64" else "float32", ctx.device)


def mutating(fn, base):
    def buggy(inputs, params, ctx):
        out = fn(inputs, params, ctx)
        for value in inputs.values():  # the NumPy plugin's arrays: zeroed in place after use
            if isinstance(value, np.ndarray) and value.dtype.kind == "f":
                value[...] = 0
        return out
    return buggy


def hanging(fn, base):
    def buggy(inputs, params, ctx):
        time.sleep(3600)
        return fn(inputs, params, ctx)
    return buggy


def raising(fn, base):
    def buggy(inputs, params, ctx):
        raise RuntimeError("this plugin has a bug")
    return buggy


def crash_when_short(fn, base):
    """Raises whenever the sequence is shorter than ℓ_max (code that assumes a full-length,
    padded input: a position table sliced to ℓ_max, a cached causal mask of size ℓ_max)."""
    def buggy(inputs, params, ctx):
        x = inputs.get("x")
        if x is not None and np.asarray(base.to_numpy(x)).shape[-1] < int(ctx.hyper["ell_max"]):
            raise ValueError("operands could not be broadcast together (sequence shorter than ell_max)")
        return fn(inputs, params, ctx)
    return buggy


def downcast_float64(fn, base):
    """Float64 requests computed in float32, the outputs cast back (NumPy plugin arrays)."""
    import dataclasses

    def down(arrays):
        return {k: (v.astype(np.float32) if isinstance(v, np.ndarray) and v.dtype == np.float64 else v)
                for k, v in arrays.items()}

    def up(v):
        return v.astype(np.float64) if isinstance(v, np.ndarray) and v.dtype == np.float32 else v

    def buggy(inputs, params, ctx):
        if ctx.dtype != "float64":
            return fn(inputs, params, ctx)
        out = fn(down(inputs), down(params), dataclasses.replace(ctx, dtype="float32"))
        return {k: up(v) for k, v in out.items()} if isinstance(out, dict) else up(out)
    return buggy


def model_of(algorithm: str) -> str:
    return algorithm.split("_", 1)[0]

# -- witness values several mutants use ----------------------------------------

EPS = {"epsilon": 1e-5, "epsilon_placement": "inside_root"}
W_LN = Witness("layer_norm", hyper={"d_e": 3, "ell": 2}, inputs={"X": [[1.0, 0.5], [1.001, 0.6], [0.999, 0.7]]})
SPARSE_MASK = {"Mask": [[1, 0, 1], [0, 0, 1], [1, 1, 0], [0, 0, 1]]}  # [t_z, t_x], ℓ_z = 4, ℓ_x = 3
ONE_HOT_ISH = {"p": [0.1, 0.2, 0.3, 0.4], "u": 0.3, "tau": 0.5}
