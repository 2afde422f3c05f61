"""The spec's values along a model and inside a layer: the steps the walk checks.

``model_walk`` lists one forward pass as ``Step``s (embedding, each layer, the final and head
norms, the unembedding), each with the spec's value at its input; ``layer_walk`` lists one layer
as ``Block``s (norm, sublayer, residual sum) with what each reads. Every value is the one the
spec's own model or layer entry records as it runs (``spec/intermediates.py``): nothing is
recomputed here, so each step's entry fed its recorded input gives the next step's input exactly
(tests/conformance/forensics/test_divergence.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

import numpy as np

from ftspec.spec.attention import bidirectional_mask, unidirectional_mask
from ftspec.spec.evaluation import intermediates
from ftspec.spec.registry import REGISTRY
from ftspec.spec.training import masked_sequence
from ftspec.spec.variants import VariantSet

__all__ = ["MODEL_OF", "Block", "Step", "layer_walk", "model_inputs", "model_walk", "spec_intermediates"]


#: the forward model behind each entry the walk handles: (model letter, model entry)
MODEL_OF = {f"{m}{suffix}": (m, f"{m}_transformer") for m in ("ed", "e", "d")
            for suffix in ("_transformer", "_loss", "_gradient", "_sgd_step")}
_LAYERS = {"encoder_layer": "ed_encoder", "bert_layer": "bert", "gpt2_layer": "gpt2", "decoder_layer": "ed_decoder"}
_LAYER_INPUT = {"encoder_layer": "Z", "bert_layer": "X", "gpt2_layer": "X", "decoder_layer": "X"}
_LAYER_HYPER = ("H", "d_e", "d_attn", "d_mid", "d_mlp")


def _a(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _l(x: Any) -> Any:
    return np.asarray(x).tolist()


@dataclass
class Step:
    """One piece of the computation, checked through one of the implementation's entries."""

    where: str  # "embedding", "layer 0", "encoder layer 1", "final norm", "head norm", "unembedding"
    entry: str  # the registry entry it is checked with
    inputs: dict[str, np.ndarray]  # the spec's values at its input
    params: dict[str, np.ndarray]  # its parameters, named as the entry names them
    hyper: dict[str, int]
    context: Optional[np.ndarray] = None  # a decoder layer's Z (also in ``inputs``)


# -- the spec's intermediate values ---------------------------------------------------------------

def _strip(params: Mapping[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    return {k[len(prefix):]: v for k, v in params.items() if k.startswith(prefix)}


def _norm_params(params: Mapping[str, np.ndarray], gamma: str, beta: str) -> dict[str, np.ndarray]:
    out = {}
    if gamma in params:
        out["gamma"] = params[gamma]
    if beta in params:
        out["beta"] = params[beta]
    return out


def _embedding_step(where: str, x: np.ndarray, params: Mapping[str, np.ndarray], suffix: str,
                    hyper: Mapping[str, int], d_e: int) -> Step:
    p = {k: params[k] for k in ("W_e", "W_p") if k in params}
    p.update({f"{k}_emb": params[f"{k}_emb{suffix}"] for k in ("gamma", "beta") if f"{k}_emb{suffix}" in params})
    h = {"N_V": hyper["N_V"], "d_e": d_e, "ell": len(x), "ell_max": hyper["ell_max"]}
    return Step(where, "embedding", {"x": np.asarray(x)}, p, h)


def _norm_step(where: str, X: list, params: Mapping[str, np.ndarray], gamma: str, beta: str,
               variant: VariantSet) -> Step:
    name = "rms_norm" if variant.norm == "rms_norm" else "layer_norm"
    return Step(where, name, {"X": _a(X)}, _norm_params(params, gamma, beta),
                {"d_e": len(X), "ell": len(X[0]) if X else 0})


def _layer_step(where: str, name: str, X: list, params: Mapping[str, np.ndarray], prefix: str,
                hyper: Mapping[str, int], Z: Optional[list] = None, table: str = "") -> Step:
    """``table``: the model's name of the T5 bias table this layer's self-attention reads (its stack's, held by
    the stack's first layer: ``architectures._shared_table``), given to the layer entry as its own."""
    p = _strip(params, prefix)
    if table in params:
        p["self_attn.rel_bias" if name == "decoder_layer" else "attn.rel_bias"] = params[table]
    h = {k: hyper[k] for k in _LAYER_HYPER}
    if name == "decoder_layer":
        assert Z is not None, "a decoder layer needs its context Z"
        h.update(ell_x=len(X[0]), ell_z=len(Z[0]))
        return Step(where, name, {"X": _a(X), "Z": _a(Z)}, p, h, context=_a(Z))
    h["ell"] = len(X[0])
    return Step(where, name, {_LAYER_INPUT[name]: _a(X)}, p, h)


def _stack_table(variant: VariantSet, name: str) -> str:
    """The encoder-decoder's table every layer of a stack reads under rel_bias="t5_buckets" (T5Stack); none
    otherwise."""
    return name if variant.rel_bias == "t5_buckets" else ""


def _lists(p: Mapping[str, np.ndarray]) -> dict[str, Any]:
    return {k: _l(v) for k, v in p.items()}


def model_inputs(algorithm: str, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The forward model's token inputs behind ``algorithm`` (ETraining: x with the masked
    positions replaced by the mask token, Algorithm 12 line 4)."""
    model, _ = MODEL_OF[algorithm]
    if model == "e" and "masked" in inputs:
        x_tilde, _ = masked_sequence(_l(inputs["x"]), _l(inputs["masked"]), int(np.asarray(inputs["mask_token"])))
        return {"x": np.asarray(x_tilde, dtype=np.int64)}
    return {k: np.asarray(inputs[k]) for k in (("z", "x") if model == "ed" else ("x",))}


def _model_values(model: str, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray],
                  hyper: Mapping[str, int], variant: VariantSet) -> dict[str, Any]:
    """The spec's named intermediates of one forward pass of ``model`` (``spec/intermediates.py``),
    recorded by the model entry itself, then its output P: the values every step reads."""
    name = f"{model}_transformer"
    given = {k: hyper[k] for k in REGISTRY[name].hyper if k in hyper and k not in ("ell", "ell_x", "ell_z")}
    return intermediates(name, _lists(inputs), _lists(params), hyper=given, variant=variant)


def model_walk(model: str, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray],
               hyper: Mapping[str, int], variant: VariantSet) -> tuple[list[Step], np.ndarray]:
    """The steps of one forward pass of ``model`` ("ed", "e" or "d") in the order the spec runs
    them, each with the spec's value at its input, and the spec's output P (N_V × ℓ). The values
    are the model entry's own, recorded as it runs (``_model_values``): no step is recomputed here."""
    v = _model_values(model, inputs, params, hyper, variant)
    steps: list[Step] = []
    d_e = hyper["d_e"]
    if model == "ed":
        steps.append(_embedding_step("encoder embedding", inputs["z"], params, "_enc", hyper, d_e))
        Z = v["enc_embedding"]
        for l in range(hyper["L_enc"]):
            steps.append(_layer_step(f"encoder layer {l}", "encoder_layer", Z, params, f"enc_layers.{l}.", hyper,
                                     table=_stack_table(variant, "enc_layers.0.attn.rel_bias")))
            Z = v[f"enc_layers.{l}"]
        if variant.resolved_final_norm("ed_encoder"):
            steps.append(_norm_step("encoder final norm", Z, params, "gamma_enc", "beta_enc", variant))
            Z = v["enc_final_norm"]
        steps.append(_embedding_step("decoder embedding", inputs["x"], params, "_dec", hyper, d_e))
        X = v["dec_embedding"]
        for l in range(hyper["L_dec"]):
            steps.append(_layer_step(f"decoder layer {l}", "decoder_layer", X, params, f"dec_layers.{l}.", hyper, Z,
                                     table=_stack_table(variant, "dec_layers.0.self_attn.rel_bias")))
            X = v[f"dec_layers.{l}"]
        if variant.resolved_final_norm("ed_decoder"):
            steps.append(_norm_step("decoder final norm", X, params, "gamma_dec", "beta_dec", variant))
            X = v["dec_final_norm"]
    else:
        arch, layer = ("bert", "bert_layer") if model == "e" else ("gpt2", "gpt2_layer")
        steps.append(_embedding_step("embedding", inputs["x"], params, "", hyper, d_e))
        X = v["embedding"]
        for l in range(hyper["L"]):
            steps.append(_layer_step(f"layer {l}", layer, X, params, f"layers.{l}.", hyper))
            X = v[f"layers.{l}"]
        if model == "e":
            if variant.resolved_final_norm(arch):
                steps.append(_norm_step("final norm", X, params, "gamma_final", "beta_final", variant))
                X = v["final_norm"]
            X = v["head.act"]  # Alg. 9 line 10
            steps.append(_norm_step("head norm", X, params, "gamma", "beta", variant))  # line 11
            X = v["head"]
        elif variant.resolved_final_norm(arch):
            steps.append(_norm_step("final norm", X, params, "gamma", "beta", variant))  # Alg. 10 line 10
            X = v["final_norm"]
    p = {k: params[k] for k in ("W_u", "b_u") if k in params}
    if variant.unembedding == "tied":
        p["W_e"] = params["W_e"]
    steps.append(Step("unembedding", "unembedding", {"X": _a(X)}, p,
                      {"N_V": hyper["N_V"], "d_e": len(X), "ell": len(X[0])}))
    return steps, _a(v["P"])


# -- inside one layer -----------------------------------------------------------------------------

@dataclass
class Block:
    """One residual block of a layer: X ← norm(X + f(X)) (post-LN), X ← X + f(norm(X)) (pre-LN),
    X ← X + norm(f(X)) (res-post-norm) or X ← X + norm'(f(norm(X))) (sandwich)."""

    name: str  # self-attention | cross-attention | MLP
    gamma: str
    beta: str
    attn: str = ""  # the attention's parameter prefix ("attn.", "self_attn.", "cross_attn.")
    mlp: tuple[str, str] = ("", "")  # the MLP's first and second indices ("1", "2")
    #: the spec's values in the unablated layer: the block's input, what its norm reads, what its
    #: attention reads (X, Z, Mask) or its MLP's pre-activation
    x_in: Any = None
    norm_in: Any = None
    attn_in: Optional[tuple[Any, Any, Any]] = None
    pre: Any = None
    #: under ``norm_placement="sandwich"``: the output norm's γ/β names and what it reads (the
    #: sublayer's output); empty and None under every other placement
    gamma_out: str = ""
    beta_out: str = ""
    norm_out_in: Any = None


def _blocks(name: str) -> list[Block]:
    if name == "decoder_layer":
        return [Block("self-attention", "gamma3", "beta3", attn="self_attn."),
                Block("cross-attention", "gamma4", "beta4", attn="cross_attn."),
                Block("MLP", "gamma5", "beta5", mlp=("3", "4"))]
    return [Block("self-attention", "gamma1", "beta1", attn="attn."),
            Block("MLP", "gamma2", "beta2", mlp=("1", "2"))]


#: each block's recorded names (``spec/layers.py``): its sublayer, its norm, its residual sum
_BLOCK_NAMES = {"decoder_layer": (("self_attn", "norm1", "res1"), ("cross_attn", "norm2", "res2"),
                                  ("mlp", "norm3", "res3"))}
_BLOCK_NAMES_ONE = (("attn", "norm1", "res1"), ("mlp", "norm2", "res2"))


def layer_walk(name: str, X: list, params: Mapping[str, np.ndarray], variant: VariantSet,
               Z: Optional[list] = None) -> tuple[list[Block], list]:
    """The layer ``name`` block by block: each block's values as the layer entry itself records them
    (``spec/intermediates.py``: its sublayer's output, its norm's, its residual sum, the MLP's
    pre-activation), read per placement (post-LN, pre-LN, res-post-norm, sandwich); returns (blocks, the
    layer's output). Nothing is recomputed here."""
    arch = _LAYERS[name]
    ell_x = len(X[0])
    placement = variant.resolved_norm_placement(arch)
    inputs = {_LAYER_INPUT[name]: X}
    if name == "decoder_layer":
        assert Z is not None, "a decoder layer needs its context Z"
        inputs["Z"] = Z
        masks = [unidirectional_mask(ell_x, ell_x), bidirectional_mask(len(Z[0]), ell_x)]
    else:
        masks = [unidirectional_mask(ell_x, ell_x) if arch == "gpt2" else bidirectional_mask(ell_x, ell_x)]
    values = intermediates(name, inputs, _lists(params), variant=variant)
    blocks = _blocks(name)
    for k, (b, (f, norm, res)) in enumerate(zip(blocks, _BLOCK_NAMES.get(name, _BLOCK_NAMES_ONE))):
        b.x_in = X
        if placement == "post":  # X ← norm(X + f(X))
            Y, b.norm_in, X = X, values[res], values[norm]
        elif placement == "res_post":  # X ← X + norm(f(X)): the norm reads the sublayer's output only
            Y, b.norm_in, X = X, values[f], values[res]
        elif placement == "sandwich":  # X ← X + norm'(f(norm(X))): the block's norm is its input norm,
            # the output norm (γ{k}_out) reads the sublayer's output
            Y, b.norm_in, X = values[norm], X, values[res]
            b.gamma_out, b.beta_out, b.norm_out_in = b.gamma + "_out", b.beta + "_out", values[f]
        else:  # X ← X + f(norm(X))
            Y, b.norm_in, X = values[norm], X, values[res]
        if b.attn:
            b.attn_in = (Y, Z if b.name == "cross-attention" else Y, masks[k])
        else:
            b.pre = values[f"{f}.pre"]
    return blocks, X


def spec_intermediates(model: str, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray],
                       hyper: Mapping[str, int], variant: VariantSet) -> dict[str, np.ndarray]:
    """The spec's values under the names of the intermediates contract (docs/plugins.md), in the order
    computed, as the model entry records them (``spec/intermediates.py``): the value after each step,
    ``embedding``, ``layers.{l}`` (``enc_``/``dec_`` prefixed for the encoder-decoder),
    ``final_norm``, ``head`` (ETransformer, after line 11), ``logits`` (W_u X + b_u 1ᵀ, before the
    final softmax), and the fine ones inside them (``layers.{l}.attn.heads.{h}.Q``,
    ``layers.{l}.norm1.mu``, ``layers.{l}.mlp.hidden``, ``layers.{l}.res1``, ...)."""
    values = _model_values(model, inputs, params, hyper, variant)
    return {k: _a(v) for k, v in values.items() if k != "P"}
