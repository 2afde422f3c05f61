"""Registry entries of training and inference: Algorithms 11-15 and the
pieces they are made of (each model's loss for one sequence, its gradient
with respect to every parameter, one SGD step), plus one sampling step."""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

from . import numbers
from .architectures import d_transformer, ed_transformer
from .entry import (
    ARCHITECTURE,
    CAUSAL,
    LAYER_TYPES,
    PARALLEL,
    D_HYPER,
    E_HYPER,
    ED_HYPER,
    Entry,
    Hyper,
    Kind,
    TensorSpec,
    all_of,
    d_schema,
    e_schema,
    ed_schema,
    norm_dims,
    sequences_fit,
    tied_needs,
)
from .errors import SpecError
from .inference import cdf, d_inference, ed_inference, sample
from .linalg import column
from .params import DTransformerParams, EDTransformerParams, ETransformerParams, from_flat
from .refusals import Refusal, too_long, zero_variance
from .training import (
    d_loss,
    d_training,
    e_loss,
    e_training,
    ed_loss,
    ed_training,
    loss_and_gradient,
    sgd_step,
)
from .variants import VariantSet

__all__ = ["ENTRIES"]

_X = TensorSpec
_SCHEMA = {"ed": ed_schema, "e": e_schema, "d": d_schema}
#: the switches each model reads: its layers' and its own, the causal mask's window where it has a
#: causal stack (Algorithms 8 and 10), the parallel residual and the local/global layers (Gemma) where
#: its layers are GPT-2's
_SWITCHES = {"ed": ARCHITECTURE | CAUSAL, "e": ARCHITECTURE, "d": ARCHITECTURE | CAUSAL | PARALLEL | LAYER_TYPES}
_CLASS = {"ed": EDTransformerParams, "e": ETransformerParams, "d": DTransformerParams}
_HYPER = {"ed": ED_HYPER + ("ell_z", "ell_x"), "e": E_HYPER + ("ell",), "d": D_HYPER + ("ell",)}
_STRUCTURAL = {"ed": ("L_enc", "L_dec", "H"), "e": ("L", "H"), "d": ("L", "H")}
#: the small models of the fixed cases and fixtures: one layer per stack, d_e = 4, N_V = 6
_MODEL = {
    "ed": dict(N_V=6, ell_max=5, L_enc=1, L_dec=1, H=2, d_e=4, d_attn=2, d_mid=2, d_mlp=4),
    "e": dict(N_V=6, ell_max=5, L=1, H=2, d_e=4, d_attn=2, d_mid=2, d_mlp=4, d_f=4),
    "d": dict(N_V=6, ell_max=5, L=1, H=2, d_e=4, d_attn=2, d_mid=2, d_mlp=4),
}
#: ... and one training example's lengths
_SIZES = {m: {**_MODEL[m], **lengths} for m, lengths in
          (("ed", dict(ell_z=4, ell_x=4)), ("e", dict(ell=4)), ("d", dict(ell=4)))}
_PAPER = {"ed": ("EDTraining", 11), "e": ("ETraining", 12), "d": ("DTraining", 13)}
_CHECK = {
    "ed": all_of(sequences_fit("ell_z", "ell_x"), norm_dims("d_e")),
    "e": all_of(sequences_fit("ell"), tied_needs("d_f"), norm_dims("d_e", "d_f")),
    "d": all_of(sequences_fit("ell"), norm_dims("d_e")),
}
#: one training example: the inputs of the loss
_EXAMPLE = {
    "ed": (_X("z", ("ell_z",), Kind.TOKEN, "source sequence"), _X("x", ("ell_x",), Kind.TOKEN, "target sequence")),
    "e": (_X("x", ("ell",), Kind.TOKEN, "token sequence"),
          _X("masked", ("ell",), Kind.FLAG, "positions replaced by mask_token (line 4's draws)"),
          _X("mask_token", (), Kind.TOKEN, "the mask token's ID")),
    "d": (_X("x", ("ell",), Kind.TOKEN, "token sequence"),),
}
_ETA = _X("eta", (), Kind.RATE, "learning rate η")
#: what each model's spec refuses beyond its inputs' ranges (spec/refusals.py): a zero-variance
#: column into the first layer's norm (positions that add a fixed sinusoid leave no column a
#: transform can make constant exactly), a sequence longer than ℓ_max
_DATA_POSITIONS = (("positions", ("learned", "none")),)
_REFUSALS: dict[str, tuple[Refusal, ...]] = {
    "ed": (zero_variance(tokens="z", attention="enc_layers.0.attn.", when=_DATA_POSITIONS),
           too_long("ell_z", "ell_x")),
    "e": (zero_variance(tokens="x", attention="layers.0.attn.", when=_DATA_POSITIONS), too_long("ell")),
    "d": (zero_variance(tokens="x", attention="layers.0.attn.", when=_DATA_POSITIONS), too_long("ell")),
}


def _data(model: str, i: Mapping[str, Any]) -> tuple:
    return tuple(i[spec.name] for spec in _EXAMPLE[model])


def _grads(model: str) -> Callable[[Hyper, VariantSet], tuple[TensorSpec, ...]]:
    def outputs(hyper: Hyper, variant: VariantSet) -> tuple[TensorSpec, ...]:
        return tuple(_X(f"grad.{k}", s) for k, s in _SCHEMA[model](hyper, variant).items())
    return outputs


def _thetas(model: str) -> Callable[[Hyper, VariantSet], tuple[TensorSpec, ...]]:
    def outputs(hyper: Hyper, variant: VariantSet) -> tuple[TensorSpec, ...]:
        return tuple(_X(f"theta.{k}", s) for k, s in _SCHEMA[model](hyper, variant).items())
    return outputs


def _loss_entry(model: str, fn: Callable[..., Any]) -> Entry:
    name, number = _PAPER[model]
    return Entry(
        name=f"{model}_loss", paper_name=f"{name} loss",
        number=number, lines="loss(θ) of one sequence", family="training",
        summary="The log loss of one training example (the sum over next-token or masked positions).",
        hyper=_HYPER[model],
        sizes=_SIZES[model],
        inputs=_EXAMPLE[model],
        outputs=(_X("loss", ()),),
        param_schema=_SCHEMA[model],
        switches=_SWITCHES[model],
        reference=lambda i, p, h, v: {"loss": fn(*_data(model, i), from_flat(_CLASS[model], p), ell_max=h["ell_max"],
                                       variant=v)},
        structural=_STRUCTURAL[model], check=_CHECK[model], refusals=_REFUSALS[model],
    )


def _gradient_entry(model: str) -> Entry:
    name, number = _PAPER[model]
    return Entry(
        name=f"{model}_gradient", paper_name=f"{name} gradient",
        number=number, lines="∇loss(θ) of one sequence", family="training",
        summary="The exact gradient of the loss of one example with respect to every parameter.",
        hyper=_HYPER[model],
        sizes=_SIZES[model],
        inputs=_EXAMPLE[model],
        outputs=(_X("grad.*", ("as params",)),),
        param_schema=_SCHEMA[model],
        switches=_SWITCHES[model],
        reference=lambda i, p, h, v: {f"grad.{k}": g for k, g in loss_and_gradient(
            model, _data(model, i), dict(p), ell_max=h["ell_max"], variant=v)[1].items()},
        structural=_STRUCTURAL[model], check=_CHECK[model], output_schema=_grads(model),
        refusals=_REFUSALS[model],
    )


def _step_entry(model: str) -> Entry:
    name, number = _PAPER[model]

    def reference(i: Mapping[str, Any], p: Mapping[str, Any], h: Hyper, v: VariantSet) -> dict[str, Any]:
        _, grads = loss_and_gradient(model, _data(model, i), dict(p), ell_max=h["ell_max"], variant=v)
        return {f"theta.{k}": x for k, x in sgd_step(dict(p), grads, i["eta"]).items()}

    return Entry(
        name=f"{model}_sgd_step", paper_name=f"{name} step",
        number=number, lines="θ ← θ − η·∇loss(θ)", family="training",
        summary="One SGD step on one example.",
        hyper=_HYPER[model],
        sizes=_SIZES[model],
        inputs=_EXAMPLE[model] + (_ETA,),
        outputs=(_X("theta.*", ("as params",)),),
        param_schema=_SCHEMA[model],
        switches=_SWITCHES[model], reference=reference, structural=_STRUCTURAL[model], check=_CHECK[model],
        output_schema=_thetas(model), batchable=False, refusals=_REFUSALS[model],
    )


def _dataset_inputs(model: str) -> tuple[TensorSpec, ...]:
    if model == "ed":
        return (_X("z", ("N", "ell_z"), Kind.TOKEN, "source sequences, padded"),
                _X("z_len", ("N",), Kind.LENGTH, "their lengths (≤ ell_z)", bound="ell_z"),
                _X("x", ("N", "ell_x"), Kind.TOKEN, "target sequences, padded"),
                _X("x_len", ("N",), Kind.LENGTH, "their lengths (≤ ell_x)", bound="ell_x"), _ETA)
    base = (_X("x", ("N", "ell"), Kind.TOKEN, "sequences, padded"),
            _X("x_len", ("N",), Kind.LENGTH, "their lengths (≤ ell)", bound="ell"))
    if model == "d":
        return base + (_ETA,)
    return base + (_X("u", ("N_epochs", "N", "ell"), Kind.VARIATE, "line 4's variates: masked iff u < p_mask"),
                   _X("p_mask", (), Kind.PROBABILITY, "masking probability"),
                   _X("mask_token", (), Kind.TOKEN, "the mask token's ID"), _ETA)


def _training_entry(model: str) -> Entry:
    name, number = _PAPER[model]
    lines = {"ed": "lines 1-7", "e": "lines 1-9", "d": "lines 1-7"}[model]

    def reference(i: Mapping[str, Any], p: Mapping[str, Any], h: Hyper, v: VariantSet) -> dict[str, Any]:
        common: dict[str, Any] = dict(n_epochs=h["N_epochs"], ell_max=h["ell_max"], variant=v)
        if model == "ed":
            theta = ed_training(i["z"], i["z_len"], i["x"], i["x_len"], dict(p), i["eta"], **common)
        elif model == "d":
            theta = d_training(i["x"], i["x_len"], dict(p), i["eta"], **common)
        else:
            theta = e_training(i["x"], i["x_len"], i["u"], i["p_mask"], i["mask_token"], dict(p), i["eta"],
                               **common)
        return {f"theta.{k}": x for k, x in theta.items()}

    return Entry(
        name=f"{model}_training", paper_name=name, number=number, lines=lines, family="training",
        summary="N_epochs passes of SGD over N sequences of different lengths, one sequence per step.",
        hyper=_HYPER[model] + ("N", "N_epochs"),
        sizes=dict(_SIZES[model], N=3, N_epochs=2),
        inputs=_dataset_inputs(model),
        outputs=(_X("theta.*", ("as params",)),),
        param_schema=_SCHEMA[model],
        switches=_SWITCHES[model],
        reference=reference,
        structural=_STRUCTURAL[model], check=_CHECK[model],
        output_schema=_thetas(model), batchable=False, refusals=_REFUSALS[model],
    )


# --------------------------------------------------------------------------
# inference, and the trace the harness judges sampled tokens with
# --------------------------------------------------------------------------

def _step(p: list, u: Any, tau: Any, token: int) -> dict[str, Any]:
    """The spec's distribution for one draw, for judging a produced token."""
    t = numbers.current().to_float(tau)
    if t == 0:
        return {"kind": "argmax", "values": list(p), "u": u, "token": token}
    if math.isinf(t):
        return {"kind": "uniform", "values": [len(p)], "u": u, "token": token}
    return {"kind": "cdf", "values": cdf(p, tau), "u": u, "token": token}


def _sample_trace(i: Mapping[str, Any], p: Mapping[str, Any], h: Hyper, v: VariantSet,
                  produced: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [_step(list(i["p"]), i["u"], i["tau"], int(produced["y"]))]


def _d_inference_trace(i: Mapping[str, Any], p: Mapping[str, Any], h: Hyper, v: VariantSet,
                       produced: Mapping[str, Any]) -> list[dict[str, Any]]:
    theta = from_flat(DTransformerParams, p)
    x, y = list(i["x"]), [int(t) for t in produced["y"]]
    steps = []
    for k in range(h["ell_gen"]):  # the spec's p at step k, given the produced prefix
        P = d_transformer(x + y[:k], theta, ell_max=h["ell_max"], variant=v)
        steps.append(_step(column(P, len(x) + k - 1), i["u"][k], i["tau"], y[k]))
    return steps


def _ed_inference_trace(i: Mapping[str, Any], p: Mapping[str, Any], h: Hyper, v: VariantSet,
                        produced: Mapping[str, Any]) -> list[dict[str, Any]]:
    theta = from_flat(EDTransformerParams, p)
    length, tokens, eos = int(produced["length"]), [int(t) for t in produced["x_hat"]], bool(produced["eos"])
    problems = _ed_structure(tokens, length, eos, i["bos_token"], i["eos_token"], h["ell_max"])
    if problems:
        return [{"kind": "structure", "message": problems}]
    steps = []
    for k in range(length - 1):
        P = ed_transformer(i["z"], tokens[: k + 1], theta, ell_max=h["ell_max"], variant=v)
        steps.append(_step(column(P, k), i["u"][k], i["tau"], tokens[k + 1]))
    return steps


def _ed_structure(tokens: list[int], length: int, eos: bool, bos: int, eos_token: int, ell_max: int) -> str:
    """What EDInference's output must satisfy whatever was sampled ('' if it does)."""
    if not 1 <= length <= ell_max:
        return f"length {length} outside [1, ell_max = {ell_max}]"
    if tokens[0] != bos:
        return f"x_hat[0] = {tokens[0]}, expected bos_token {bos}"
    if any(t != -1 for t in tokens[length:]):
        return f"x_hat beyond length {length} must be -1 (padding), got {tokens[length:]}"
    body = tokens[1:length]
    if eos_token in body[:-1]:
        return f"eos_token {eos_token} appears before the last token: generation did not stop"
    if eos != (bool(body) and body[-1] == eos_token):
        return f"eos flag {eos} but the last token is {body[-1] if body else 'bos'}"
    if not eos and length != ell_max:
        return f"stopped after {length} tokens without eos and before ell_max = {ell_max}"
    return ""


def _ed_inference_reference(i: Mapping[str, Any], p: Mapping[str, Any], h: Hyper, v: VariantSet) -> dict[str, Any]:
    x_hat, eos = ed_inference(i["z"], from_flat(EDTransformerParams, p), i["u"], i["tau"], i["bos_token"],
                              i["eos_token"], ell_max=h["ell_max"], variant=v)
    return {"x_hat": x_hat + [-1] * (h["ell_max"] - len(x_hat)), "length": len(x_hat), "eos": eos}


def _d_inference_fits(hyper: Hyper, variant: VariantSet) -> None:
    if hyper["ell"] + hyper["ell_gen"] - 1 > hyper["ell_max"]:
        raise SpecError("ell_gen", f"ell + ell_gen − 1 ≤ ell_max = {hyper['ell_max']} (the last step reads "
                        f"ell + ell_gen − 1 tokens)", f"ell = {hyper['ell']}, ell_gen = {hyper['ell_gen']}")


def _tau() -> TensorSpec:
    return _X("tau", (), Kind.TEMPERATURE, "τ ≥ 0; 0 is argmax (ties to the lowest ID), inf is uniform")


ENTRIES: list[Entry] = [
    *(_loss_entry(m, fn) for m, fn in (("ed", ed_loss), ("e", e_loss), ("d", d_loss))),
    *(_gradient_entry(m) for m in ("ed", "e", "d")),
    *(_step_entry(m) for m in ("ed", "e", "d")),
    *(_training_entry(m) for m in ("ed", "e", "d")),
    Entry(
        name="sample", paper_name="Temperature sampling",
        number=14, lines="line 5: y ~ q ∝ p^{1/τ}", family="inference",
        summary="One draw by inverse CDF over token IDs in increasing order, with an explicit variate.",
        hyper=("N_V",),
        sizes=dict(N_V=6),
        inputs=(_X("p", ("N_V",), Kind.DISTRIBUTION, "p (non-negative, positive sum)"), _X("u", (), Kind.VARIATE),
                _tau()),
        outputs=(_X("y", (), Kind.TOKEN),),
        param_schema=lambda h, v: {}, switches=frozenset(),
        reference=lambda i, p, h, v: {"y": sample(i["p"], i["u"], i["tau"])},
        batchable=False, trace=_sample_trace,
    ),
    Entry(
        name="d_inference", paper_name="DInference",
        number=14, lines="lines 1-7", family="inference",
        summary="ℓ_gen tokens sampled from DTransformer one at a time, variate u[i] for step i.",
        hyper=D_HYPER + ("ell", "ell_gen"),
        sizes=dict(_MODEL["d"], ell=2, ell_gen=3),
        inputs=(_X("x", ("ell",), Kind.TOKEN, "prompt"), _X("u", ("ell_gen",), Kind.VARIATE, "one variate per step"),
                _tau()),
        outputs=(_X("y", ("ell_gen",), Kind.TOKEN),),
        param_schema=d_schema, switches=_SWITCHES["d"],
        reference=lambda i, p, h, v: {"y": d_inference(i["x"], from_flat(DTransformerParams, p), i["u"], i["tau"],
                                             ell_gen=h["ell_gen"], ell_max=h["ell_max"], variant=v)},
        structural=("L", "H"), check=all_of(_d_inference_fits, norm_dims("d_e")),
        batchable=False, trace=_d_inference_trace,
        refusals=(zero_variance(tokens="x", attention="layers.0.attn.", when=_DATA_POSITIONS),
                  too_long(needs=lambda h: h["ell"] + h["ell_gen"] - 1, argument="ell_gen")),
    ),
    Entry(
        name="ed_inference", paper_name="EDInference",
        number=15, lines="lines 1-8", family="inference",
        summary="Decoding from bos until eos or ℓ_max tokens, variate u[i] for step i; says which stopped it.",
        hyper=ED_HYPER + ("ell_z",),
        sizes=dict(_MODEL["ed"], ell_z=3),
        inputs=(_X("z", ("ell_z",), Kind.TOKEN, "source sequence"),
         _X("u", ("ell_max-1",), Kind.VARIATE, "one variate per step"), _tau(),
         _X("bos_token", (), Kind.TOKEN), _X("eos_token", (), Kind.TOKEN)),
        outputs=(_X("x_hat", ("ell_max",), Kind.TOKEN, "bos, the sampled tokens, then -1 padding"),
         _X("length", (), Kind.INT, "tokens in x_hat, bos included"),
         _X("eos", (), Kind.BOOL, "stopped because eos was sampled (else ℓ_max was reached)")),
        param_schema=ed_schema, switches=_SWITCHES["ed"], reference=_ed_inference_reference,
        structural=("L_enc", "L_dec", "H"), check=all_of(sequences_fit("ell_z"), norm_dims("d_e")),
        minimum={"ell_max": 2}, batchable=False, trace=_ed_inference_trace,
        refusals=(zero_variance(tokens="z", attention="enc_layers.0.attn.", when=_DATA_POSITIONS),
                  too_long("ell_z", minimum=2)),
    ),
]
