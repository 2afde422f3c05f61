"""Where a failing example departs, every place: the layer's sublayers by silencing them, the model's steps."""

from __future__ import annotations

import math
import time
from typing import Any, Mapping

import numpy as np

from ...core.examining import rounded


#: wall seconds for the places of one failing example (its walk, each departing layer located again)
PLACES_SECONDS = 4.0
#: the same for a reported failure (once per failure: what later examples are compared with)
KNOWN_PLACES_SECONDS = 20.0
#: each silenceable sublayer's output weights, per layer entry (the registry's parameter names):
#: zero, they make the sublayer add nothing whatever its code does
_OUTPUT_WEIGHTS: dict[str, dict[str, tuple[str, ...]]] = {
    **{name: {"self-attention": ("attn.W_o", "attn.b_o"), "MLP": ("W_mlp2", "b_mlp2")}
       for name in ("gpt2_layer", "bert_layer", "encoder_layer")},
    "decoder_layer": {"self-attention": ("self_attn.W_o", "self_attn.b_o"),
                      "cross-attention": ("cross_attn.W_o", "cross_attn.b_o"), "MLP": ("W_mlp4", "b_mlp4")},
}


def _sublayer_kind(sublayer: str) -> str:
    if not sublayer:
        return "layer"
    if sublayer.startswith("MLP"):  # "MLP", "MLP activation": one MLP's code
        return "MLP"
    return "attention" if "attention" in sublayer else sublayer  # norm, residual


def _step_kind(where: str) -> str:
    """A model step's kind ("encoder embedding", "final norm", "head norm", "unembedding", ...)."""
    for kind in ("unembedding", "embedding", "norm"):
        if where.endswith(kind):
            return kind
    return "model"


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


def _layer_kinds(member: Any, name: str, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray],
                 hyper: Mapping[str, int], variant: Any, dtype: str, timeout: float,
                 deadline: float) -> tuple[str, list[str]]:
    """(first divergence, every kind of sublayer, in the order found) at which the layer entry
    ``name`` departs on the spec's input: locate the first, silence it, locate again, until the layer
    agrees or what departs cannot be silenced. A norm cannot be silenced; a pre-LN layer's residual
    path is then checked on its own (``_pre_ln_residual_departs``)."""
    from ..divergence import locate

    first = ""
    kinds: list[str] = []
    p = dict(params)
    silenced: set[str] = set()
    for _ in range(len(_OUTPUT_WEIGHTS[name]) + 1):
        if _left(deadline) <= 0:
            break
        d = locate(member, name, inputs, p, hyper, variant, dtype, timeout=timeout, seconds=_left(deadline))
        if not d.checks or d.checks[0].get("ok") is not False:  # the whole layer, checked first, agrees
            break
        first = first or (f"layer / {d.sublayer}" if d.sublayer else "layer")
        kinds.append(_sublayer_kind(d.sublayer))
        block = "MLP" if d.sublayer.startswith("MLP") else d.sublayer
        weights = _OUTPUT_WEIGHTS[name].get(block)
        if not weights or block in silenced:  # a residual path, a norm, a NaN zeros cannot silence
            break
        silenced.add(block)
        p = _silence(p, weights)
    if kinds and kinds[-1] == "norm" and "residual" not in kinds and _left(deadline) > 0 \
            and _pre_ln_residual_departs(member, name, inputs, p, hyper, variant, dtype, timeout, deadline):
        kinds.append("residual")
    if kinds and kinds[-1] in ("residual", "norm") and _left(deadline) > 0:
        # what cannot be silenced hides every sublayer after it from the layer's probes: the
        # sublayers' own entries, fed the spec's values inside the layer, still show their own bugs
        from ..divergence import component_departures

        found = component_departures(member, name, inputs, params, hyper, variant, dtype, timeout=timeout,
                                     seconds=_left(deadline))
        kinds.extend(_sublayer_kind(s) for s in found)
    return first, kinds


def _silence(params: Mapping[str, np.ndarray], weights: tuple[str, ...]) -> dict[str, np.ndarray]:
    """``params`` with ``weights`` zeroed; an MLP without its second map (``mlp="one_layer"``) has its
    last layer zeroed instead (the last ``mlp_hidden.{k}``, else the first): act(0) = 0 then."""
    if weights and weights[0].startswith("W_mlp") and weights[0] not in params:
        hidden = sorted(int(k.split(".")[1]) for k in params if k.startswith("mlp_hidden.") and k.endswith(".W"))
        first = "W_mlp3" if "W_mlp3" in params else "W_mlp1"
        weights = ((f"mlp_hidden.{hidden[-1]}.W", f"mlp_hidden.{hidden[-1]}.b") if hidden
                   else (first, "b" + first[1:]))
    return {**params, **{k: np.zeros_like(params[k]) for k in weights if k in params}}


def _pre_ln_residual_departs(member: Any, name: str, inputs: Mapping[str, np.ndarray],
                             params: Mapping[str, np.ndarray], hyper: Mapping[str, int], variant: Any, dtype: str,
                             timeout: float, deadline: float) -> bool:
    """Whether a pre-LN layer with every sublayer silenced departs with finite values. The spec's
    layer is then X + 0 = X (Algorithm 10 lines 5-6 with zero output weights): its norms are not
    read, so a norm bug cannot make it depart, while a residual path that adds the normalised X
    does; a NaN is left out (zero weights do not silence it)."""
    from ..divergence import locate

    arch = {"gpt2_layer": "gpt2", "bert_layer": "bert", "encoder_layer": "ed_encoder",
            "decoder_layer": "ed_decoder"}[name]
    if variant.resolved_norm_placement(arch) != "pre":
        return False
    p = dict(params)
    for weights in _OUTPUT_WEIGHTS[name].values():
        p = _silence(p, weights)
    d = locate(member, name, inputs, p, hyper, variant, dtype, timeout=timeout, seconds=_left(deadline))
    whole = d.checks[0] if d.checks else {}
    return whole.get("ok") is False and isinstance(whole.get("ratio"), float) and math.isfinite(whole["ratio"])


def _model_kinds(member: Any, algorithm: str, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray],
                 hyper: Mapping[str, int], variant: Any, dtype: str, timeout: float,
                 deadline: float) -> tuple[str, list[str]]:
    """(first divergence, kinds in the walk's order) of a model, its loss, gradient or step: the walk
    checks every step on the spec's input; each departing layer is then searched for every sublayer
    (``_layer_kinds``)."""
    from ..divergence import MODEL_OF, locate, model_inputs, model_walk

    d = locate(member, algorithm, inputs, params, hyper, variant, dtype, timeout=timeout, seconds=_left(deadline))
    first = f"{d.where} / {d.sublayer}" if d.sublayer else d.where
    model, _ = MODEL_OF[algorithm]
    steps, _ = model_walk(model, model_inputs(algorithm, inputs), params, hyper, variant)
    verdict: dict[tuple[str, str], Any] = {}
    for rec in d.checks:  # a step's own check comes first among the checks at its place
        verdict.setdefault((str(rec.get("where")), str(rec.get("entry"))), rec.get("ok"))
    kinds: list[str] = []
    departed = False
    for step in steps:
        if verdict.get((step.where, step.entry)) is not False:
            continue
        departed = True
        if step.entry in _OUTPUT_WEIGHTS:
            kinds += _layer_kinds(member, step.entry, step.inputs, step.params, step.hyper, variant, dtype,
                                  timeout, deadline)[1]
        else:
            kinds.append(_step_kind(step.where))
    if not departed:  # every step agrees on its own: the model's own code, or what is built on it
        if d.where.startswith("loss"):
            kinds.append("loss")
        elif any(rec.get("ok") is False for rec in d.checks):  # named or not (ambiguous candidates)
            kinds.append("model")
    return first, list(dict.fromkeys(kinds))


def places_of(member: Any, case: Any, dtype: str, *, timeout: float,
              seconds: float = PLACES_SECONDS) -> tuple[str, tuple[str, ...]]:
    """(first divergence, places) of ``member`` on a failing ``case`` of a model or layer entry: the
    kinds of code that depart on their own (module docstring). ("", ()) for other entries, when
    nothing is found, or when anything goes wrong (then the diagnoses decide)."""
    from ..divergence import MODEL_OF

    if case is None or (case.algorithm not in MODEL_OF and case.algorithm not in _OUTPUT_WEIGHTS):
        return "", ()
    deadline = time.monotonic() + seconds
    try:
        prepared = rounded(case, dtype)
        if case.algorithm in _OUTPUT_WEIGHTS:
            first, kinds = _layer_kinds(member, case.algorithm, prepared.inputs, prepared.params, case.hyper,
                                        case.variant, dtype, timeout, deadline)
        else:
            first, kinds = _model_kinds(member, case.algorithm, prepared.inputs, prepared.params, case.hyper,
                                        case.variant, dtype, timeout, deadline)
        return first, tuple(dict.fromkeys(kinds))
    except Exception:  # noqa: BLE001 - a help; never the reason a failure goes unreported
        return "", ()


def _placed(algorithm: str) -> bool:
    """Whether ``places_of`` can place a failure of ``algorithm`` (a model, its loss, gradient or
    step, or a layer entry)."""
    from ..divergence import MODEL_OF

    return algorithm in MODEL_OF or algorithm in _OUTPUT_WEIGHTS
