"""First divergence inside a model: where an implementation first departs from the spec.

A whole-model failure (``ed/e/d_transformer``, their losses, gradients and
SGD steps) or a layer failure says *that* the output is wrong, not *where*.
On the shrunk case this module walks the model's computation in order and
checks each piece on its own, with what the implementation already offers:

1. the spec's intermediate values, computed here by calling the spec's own
   functions in the order the architectures call them (``spec/architectures.py``,
   ``spec/layers.py``; tests/conformance/test_divergence.py checks that the
   sequence reproduces the spec's whole-model output exactly);
2. each piece checked through the implementation's own entry for it, fed
   the spec's value at its input: ``embedding``, each layer (``gpt2_layer``,
   ``bert_layer``, ``encoder_layer``, ``decoder_layer``), the final and head
   norms (``layer_norm`` / ``rms_norm``), ``unembedding``; judged exactly as
   the search judges (``tolerances.reference`` at the cell's dtype, then
   ``judge.judge``);
3. inside the first layer that departs, ablations of that layer entry's
   parameters locate the sublayer: every sublayer silenced (its output
   weights zero: what is left is the residual path and, post-LN, the norms),
   then the sublayers switched on one at a time in the order the layer runs
   them; the MLP in three steps (a constant MLP, W₁ = 0 with b₁ set to a
   column of the spec's pre-activations: only the activation is exercised,
   then the whole MLP). The first configuration that departs names the
   sublayer; the ``layer_norm`` and ``mh_attention`` entries, fed the spec's
   values inside the layer, then separate a norm from its attention;
4. when every entry agrees, the model itself with its layers silenced (is the
   departure outside the layers: the ETransformer head, the wiring?) and
   with its first layers only (which layer does the model run differently
   from its layer entry, e.g. with another layer's parameters).

An implementation may also offer named intermediates of its own
(``Implementation.intermediates``, docs/plugins.md "Named intermediates"):
then each named value is compared with the spec's, in the order of the
computation, and the first one that departs is reported as well.

Everything is bounded (``SECONDS``) and plain data (``Divergence.to_dict``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

import numpy as np

from ftspec.spec import SpecError
from ftspec.spec.attention import bidirectional_mask, mh_attention, unidirectional_mask
from ftspec.spec.embedding import embed
from ftspec.spec.functions import apply
from ftspec.spec.layers import bert_layer, decoder_layer, encoder_layer, gpt2_layer, mlp
from ftspec.spec.linalg import add, add_bias, matmul
from ftspec.spec.normalization import norm_columns
from ftspec.spec.params import DecoderLayerParams, LayerParams, MHAttentionParams, from_flat
from ftspec.spec.registry import REGISTRY
from ftspec.spec.training import masked_sequence
from ftspec.spec.unembedding import unembed, unembedding_matrix
from ftspec.spec.variants import VariantSet

__all__ = ["MODEL_OF", "SECONDS", "Block", "Divergence", "Step", "expected_matches", "layer_walk", "locate",
           "locate_failure", "model_inputs", "model_walk", "spec_intermediates"]

#: wall seconds per failure (checked before each implementation call)
SECONDS = 20.0

#: the forward model behind each entry the walk handles: (model letter, model entry)
MODEL_OF = {f"{m}{suffix}": (m, f"{m}_transformer") for m in ("ed", "e", "d")
            for suffix in ("_transformer", "_loss", "_gradient", "_sgd_step")}
_LAYERS = {"encoder_layer": "ed_encoder", "bert_layer": "bert", "gpt2_layer": "gpt2", "decoder_layer": "ed_decoder"}
_LAYER_FN = {"encoder_layer": encoder_layer, "bert_layer": bert_layer, "gpt2_layer": gpt2_layer}
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


@dataclass
class Divergence:
    """Where the implementation first departs from the spec; every field is plain data."""

    algorithm: str
    dtype: str
    where: str = ""  # "" when nothing departs (or nothing could be checked)
    sublayer: str = ""  # norm | self-attention | cross-attention | residual | MLP | MLP activation | ...
    detail: str = ""  # how it was found, in words
    #: every check made, in order: {"where", "entry", "config", "ok" (True/False/None = not checked),
    #: "ratio", "note"}
    checks: list[dict[str, Any]] = field(default_factory=list)
    #: the implementation's own named intermediates, if it offers them: the first that departs
    intermediate: str = ""
    also: list[str] = field(default_factory=list)  # further pieces that depart on their own
    gave_up: bool = False
    seconds: float = 0.0

    @property
    def found(self) -> bool:
        return bool(self.where)

    def label(self) -> str:
        """``layer 0 / norm``, ``unembedding``, or "" (nothing found)."""
        return f"{self.where} / {self.sublayer}" if self.sublayer else self.where

    def to_dict(self) -> dict[str, Any]:
        return {"algorithm": self.algorithm, "dtype": self.dtype, "where": self.where, "sublayer": self.sublayer,
                "detail": self.detail, "intermediate": self.intermediate, "also": list(self.also),
                "checks": self.checks, "gave_up": self.gave_up, "seconds": round(self.seconds, 3)}

    def lines(self) -> list[str]:
        """The report's lines (without indentation)."""
        if not self.found:
            why = "gave up (time budget)" if self.gave_up else "every piece agrees with the spec on its own"
            return [f"first divergence: not located ({why}; {len(self.checks)} checks)"]
        out = [f"first divergence: {self.label()} ({self.detail})"]
        if self.intermediate:
            out.append(f"its own intermediates first depart at {self.intermediate!r}")
        if self.also:
            out.append("also departs on its own: " + "; ".join(self.also[:4]))
        return out


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
                    hyper: Mapping[str, int], d_e: int, variant: VariantSet) -> tuple[Step, list]:
    p = {k: params[k] for k in ("W_e", "W_p") if k in params}
    p.update({f"{k}_emb": params[f"{k}_emb{suffix}"] for k in ("gamma", "beta") if f"{k}_emb{suffix}" in params})
    X = embed(_l(x), _l(p["W_e"]), _l(p["W_p"]) if "W_p" in p else None, ell_max=hyper["ell_max"], variant=variant,
              gamma=_l(p["gamma_emb"]) if "gamma_emb" in p else None,
              beta=_l(p["beta_emb"]) if "beta_emb" in p else None)  # lines 1-3
    h = {"N_V": hyper["N_V"], "d_e": d_e, "ell": len(x), "ell_max": hyper["ell_max"]}
    return Step(where, "embedding", {"x": np.asarray(x)}, p, h), X


def _norm_step(where: str, X: list, params: Mapping[str, np.ndarray], gamma: str, beta: str,
               variant: VariantSet) -> tuple[Step, list]:
    p = _norm_params(params, gamma, beta)
    out = norm_columns(X, _l(p["gamma"]) if "gamma" in p else None, _l(p["beta"]) if "beta" in p else None, variant)
    name = "rms_norm" if variant.norm == "rms_norm" else "layer_norm"
    return Step(where, name, {"X": _a(X)}, p, {"d_e": len(X), "ell": len(X[0]) if X else 0}), out


def _layer_step(where: str, name: str, X: list, params: Mapping[str, np.ndarray], prefix: str,
                hyper: Mapping[str, int], variant: VariantSet, Z: Optional[list] = None) -> tuple[Step, list]:
    p = _strip(params, prefix)
    h = {k: hyper[k] for k in _LAYER_HYPER}
    if name == "decoder_layer":
        assert Z is not None, "a decoder layer needs its context Z"
        out = decoder_layer(X, Z, from_flat(DecoderLayerParams, _lists(p)), variant=variant)
        h.update(ell_x=len(X[0]), ell_z=len(Z[0]))
        return Step(where, name, {"X": _a(X), "Z": _a(Z)}, p, h, context=_a(Z)), out
    out = _LAYER_FN[name](X, from_flat(LayerParams, _lists(p)), variant=variant)
    h["ell"] = len(X[0])
    return Step(where, name, {_LAYER_INPUT[name]: _a(X)}, p, h), out


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


def model_walk(model: str, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray],
               hyper: Mapping[str, int], variant: VariantSet) -> tuple[list[Step], np.ndarray]:
    """The steps of one forward pass of ``model`` ("ed", "e" or "d") in the order the spec runs
    them, each with the spec's value at its input, and the spec's output P (N_V × ℓ)."""
    steps: list[Step] = []
    d_e = hyper["d_e"]
    if model == "ed":
        step, Z = _embedding_step("encoder embedding", inputs["z"], params, "_enc", hyper, d_e, variant)
        steps.append(step)
        for l in range(hyper["L_enc"]):
            step, Z = _layer_step(f"encoder layer {l}", "encoder_layer", Z, params, f"enc_layers.{l}.", hyper,
                                  variant)
            steps.append(step)
        if variant.resolved_final_norm("ed_encoder"):
            step, Z = _norm_step("encoder final norm", Z, params, "gamma_enc", "beta_enc", variant)
            steps.append(step)
        step, X = _embedding_step("decoder embedding", inputs["x"], params, "_dec", hyper, d_e, variant)
        steps.append(step)
        for l in range(hyper["L_dec"]):
            step, X = _layer_step(f"decoder layer {l}", "decoder_layer", X, params, f"dec_layers.{l}.", hyper,
                                  variant, Z)
            steps.append(step)
        if variant.resolved_final_norm("ed_decoder"):
            step, X = _norm_step("decoder final norm", X, params, "gamma_dec", "beta_dec", variant)
            steps.append(step)
    else:
        arch, layer = ("bert", "bert_layer") if model == "e" else ("gpt2", "gpt2_layer")
        step, X = _embedding_step("embedding", inputs["x"], params, "", hyper, d_e, variant)
        steps.append(step)
        for l in range(hyper["L"]):
            step, X = _layer_step(f"layer {l}", layer, X, params, f"layers.{l}.", hyper, variant)
            steps.append(step)
        if model == "e":
            if variant.resolved_final_norm(arch):
                step, X = _norm_step("final norm", X, params, "gamma_final", "beta_final", variant)
                steps.append(step)
            X = apply(variant.resolved_activation(arch), add_bias(matmul(_l(params["W_f"]), X),
                                                                  _l(params["b_f"])))  # Alg. 9 line 10
            step, X = _norm_step("head norm", X, params, "gamma", "beta", variant)  # line 11
            steps.append(step)
        elif variant.resolved_final_norm(arch):
            step, X = _norm_step("final norm", X, params, "gamma", "beta", variant)  # Alg. 10 line 10
            steps.append(step)
    p = {k: params[k] for k in ("W_u", "b_u") if k in params}
    if variant.unembedding == "tied":
        p["W_e"] = params["W_e"]
    W_u = unembedding_matrix(_l(p["W_u"]) if "W_u" in p else None, _l(p["W_e"]) if "W_e" in p else None, variant)
    P = unembed(X, W_u, _l(p["b_u"]) if "b_u" in p else None)  # the last line
    steps.append(Step("unembedding", "unembedding", {"X": _a(X)}, p,
                      {"N_V": hyper["N_V"], "d_e": len(X), "ell": len(X[0])}))
    return steps, _a(P)


# -- inside one layer -----------------------------------------------------------------------------

@dataclass
class Block:
    """One residual block of a layer: X ← norm(X + f(X)) (post-LN) or X ← X + f(norm(X)) (pre-LN)."""

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


def _blocks(name: str) -> list[Block]:
    if name == "decoder_layer":
        return [Block("self-attention", "gamma3", "beta3", attn="self_attn."),
                Block("cross-attention", "gamma4", "beta4", attn="cross_attn."),
                Block("MLP", "gamma5", "beta5", mlp=("3", "4"))]
    return [Block("self-attention", "gamma1", "beta1", attn="attn."),
            Block("MLP", "gamma2", "beta2", mlp=("1", "2"))]


def layer_walk(name: str, X: list, params: Mapping[str, np.ndarray], variant: VariantSet,
               Z: Optional[list] = None) -> tuple[list[Block], list]:
    """The layer ``name`` computed block by block with the spec's functions, as ``spec/layers.py``
    does, recording each block's intermediate values; returns (blocks, the layer's output)."""
    arch = _LAYERS[name]
    W = _lists(params)
    ell_x = len(X[0])
    post = variant.resolved_norm_placement(arch) == "post"
    act = variant.resolved_activation(arch)
    if name == "decoder_layer":
        assert Z is not None, "a decoder layer needs its context Z"
        masks = [unidirectional_mask(ell_x, ell_x), bidirectional_mask(len(Z[0]), ell_x)]
    else:
        masks = [unidirectional_mask(ell_x, ell_x) if arch == "gpt2" else bidirectional_mask(ell_x, ell_x)]
    blocks = _blocks(name)
    for k, b in enumerate(blocks):
        gamma, beta = W.get(b.gamma), W.get(b.beta)
        b.x_in = X
        f = _sublayer(b, W, Z, masks[k] if b.attn else None, act, variant)
        if post:
            Y = X
            y = f(Y)
            b.norm_in = add(X, y)
            X = norm_columns(b.norm_in, gamma, beta, variant)
        else:
            b.norm_in = X
            Y = norm_columns(X, gamma, beta, variant)
            y = f(Y)
            X = add(X, y)
        if b.attn:
            b.attn_in = (Y, Z if b.name == "cross-attention" else Y, masks[k])
        else:
            i = b.mlp[0]
            b.pre = add_bias(matmul(W[f"W_mlp{i}"], Y), W.get(f"b_mlp{i}"))
    return blocks, X


def _sublayer(b: Block, W: Mapping[str, Any], Z: Optional[list], mask: Any, act: str,
              variant: VariantSet) -> Any:
    """The block's f as a function of its (normalised or not) input Y."""
    if b.attn:
        attn_w = from_flat(MHAttentionParams, _strip_lists(W, b.attn))
        context = Z if b.name == "cross-attention" else None
        return lambda Y: mh_attention(Y, Y if context is None else context, attn_w, mask, variant=variant)
    i, j = b.mlp
    return lambda Y: mlp(Y, W[f"W_mlp{i}"], W.get(f"b_mlp{i}"), W[f"W_mlp{j}"], W.get(f"b_mlp{j}"), act)


def _strip_lists(W: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    return {k[len(prefix):]: v for k, v in W.items() if k.startswith(prefix)}


def _silenced(params: dict[str, np.ndarray], b: Block) -> dict[str, np.ndarray]:
    """The block's f made zero: its output weights (W_o, b_o or the MLP's second W, b) set to 0."""
    keys = [b.attn + "W_o", b.attn + "b_o"] if b.attn else [f"W_mlp{b.mlp[1]}", f"b_mlp{b.mlp[1]}"]
    return {**params, **{k: np.zeros_like(params[k]) for k in keys if k in params}}


# -- checking one piece through the implementation ---------------------------------------------

class _Budget:
    def __init__(self, seconds: float) -> None:
        self.end = time.perf_counter() + seconds
        self.spent = False

    def left(self) -> bool:
        if time.perf_counter() > self.end:
            self.spent = True
        return not self.spent


class _Checker:
    """Calls one of the member's entries on the spec's values and judges it as the search does."""

    def __init__(self, member: Any, variant: VariantSet, dtype: str, timeout: float, budget: _Budget,
                 record: list[dict[str, Any]], structural: bool = False) -> None:
        self.member, self.variant, self.dtype, self.timeout = member, variant, dtype, timeout
        self.budget, self.record = budget, record
        #: locating an exception or a wrong shape: only those depart (other values are noted, not blamed)
        self.structural = structural

    def __call__(self, where: str, name: str, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray],
                 hyper: Mapping[str, int], config: str = "as given",
                 variant: Optional[VariantSet] = None, values: bool = False) -> Optional[bool]:
        """True: agrees; False: departs; None: not checked (not offered, refused, no time).
        ``variant``: another variant set than the case's (an ablation that drops parameters);
        ``values``: judge values even when locating an exception (a component asked why a layer raises)."""
        variant = variant or self.variant
        from ..core.calling import Prepared
        from ..core.case import Case
        from ..core.execute import call_member
        from ..core.judge import judge
        from ..core.tolerances import ToleranceModelError, reference

        rec: dict[str, Any] = {"where": where, "entry": name, "config": config, "ok": None, "ratio": None, "note": ""}
        self.record.append(rec)
        impl = self.member.impl
        entry = REGISTRY[name]
        if name not in impl.algorithms:
            rec["note"] = "not offered by the implementation"
            return None
        if not impl.admits(name, hyper):
            rec["note"] = "outside the implementation's limits"
            return None
        try:
            wanted = entry.param_shapes(dict(hyper), variant)
        except Exception as exc:  # noqa: BLE001 - a refused configuration is no evidence
            rec["note"] = f"the spec refuses the configuration: {exc}"
            return None
        missing = sorted(set(wanted) - set(params))
        if missing:
            rec["note"] = f"parameters missing for the entry: {missing[:3]}"
            return None
        params = {k: params[k] for k in wanted}
        if not self.budget.left():
            rec["note"] = "no time left"
            return None
        prepared = Prepared(entry, inputs, params, self.dtype)
        try:
            ref = reference(entry, prepared.inputs, prepared.params, hyper=dict(hyper), variant=variant,
                            dtype=self.dtype, precision=impl.precision)
        except (SpecError, ToleranceModelError) as exc:
            rec["note"] = f"the spec refuses the case: {exc}"
            return None
        if not ref.in_range:
            rec["note"] = "the spec's values leave the dtype's range"
            return None
        case = Case(name, dict(hyper), variant, prepared.inputs, prepared.params)
        try:
            out, _ = call_member(self.member, entry, prepared.inputs, prepared.params, case, self.dtype,
                                 self.timeout, False)
        except Exception as exc:  # noqa: BLE001 - the implementation's exception departs from the spec
            rec.update(ok=False, ratio="inf", note=f"raised {type(exc).__name__}: {str(exc)[:120]}")
            return False
        try:
            j = judge(entry, out, ref)
        except Exception as exc:  # noqa: BLE001 - outputs the judge cannot read depart
            rec.update(ok=False, ratio="inf", note=f"unreadable outputs: {str(exc)[:120]}")
            return False
        rec["ok"] = bool(j.ok)
        rec["ratio"] = float(j.ratio) if math.isfinite(j.ratio) else "inf"
        if not j.ok and j.findings:
            rec["note"] = j.findings[0].message.splitlines()[0][:160]
        if (self.structural and not values and not j.ok
                and not any(f.check in ("shape", "missing", "dtype") for f in j.findings)):
            rec["ok"] = True
            rec["note"] = "departs in value only (this failure is an exception or a shape): " + rec["note"]
        return bool(rec["ok"])


def _locate_in_layer(check: _Checker, step: Step, variant: VariantSet) -> tuple[str, str]:
    """(sublayer, how it was found) for a layer whose entry departs on the spec's input: the layer
    with every sublayer silenced, then with the sublayers switched on one at a time."""
    probe = _LayerProbe(check, step, variant)
    blocks = probe.blocks
    silent = dict(step.params)
    for b in blocks:
        silent = _silenced(silent, b)
    if probe.run(silent, "every sublayer silenced (output weights 0)") is False:
        return _departs_silenced(probe, str(check.record[-1].get("note", "")))
    for k, b in enumerate(blocks):
        later = dict(step.params)  # the blocks up to b on, those after it silenced
        for c in blocks[k + 1:]:
            later = _silenced(later, c)
        found = _attention_on(probe, b, later) if b.attn else _mlp_on(probe, b, later)
        if found is not None:
            return found
    return "", "no ablation departs though the layer does (not reproducible piece by piece)"


class _LayerProbe:
    """The checks made inside one departing layer: the layer entry under other parameters, and the
    ``layer_norm``/``rms_norm``, ``mh_attention`` and ``unidirectional_mask`` entries fed the spec's
    values inside it (``blocks``: the layer computed block by block by ``layer_walk``)."""

    def __init__(self, check: _Checker, step: Step, variant: VariantSet) -> None:
        self.check, self.step, self.variant = check, step, variant
        self.name = step.entry
        X = _l(step.inputs[_LAYER_INPUT[self.name]])
        Z = _l(step.context) if step.context is not None else None
        self.blocks, _ = layer_walk(self.name, X, step.params, variant, Z)
        self.post = variant.resolved_norm_placement(_LAYERS[self.name]) == "post"
        self.d_e, self.ell = len(X), len(X[0])
        self.norm_entry = "rms_norm" if variant.norm == "rms_norm" else "layer_norm"

    def run(self, params: dict[str, np.ndarray], config: str) -> Optional[bool]:
        """The layer entry on the spec's input with ``params``."""
        step = self.step
        return self.check(step.where, self.name, step.inputs, params, step.hyper, config)

    def norm_ok(self, b: Block) -> Optional[bool]:
        step = self.step
        return self.check(step.where, self.norm_entry, {"X": _a(b.norm_in)},
                          _norm_params(step.params, b.gamma, b.beta), {"d_e": self.d_e, "ell": self.ell},
                          f"the norm of the {b.name} block ({b.gamma}, {b.beta})", values=True)

    def attn_ok(self, b: Block) -> Optional[bool]:
        if b.attn_in is None:
            return None
        step = self.step
        q, kv, mask = b.attn_in
        p = _strip(step.params, b.attn)
        H = step.hyper["H"]
        h = {"H": H, "d_x": self.d_e, "d_z": len(kv), "d_attn": step.hyper["d_attn"], "d_mid": step.hyper["d_mid"],
             "d_out": self.d_e, "ell_x": self.ell, "ell_z": len(kv[0])}
        return self.check(step.where, "mh_attention",
                          {"X": _a(q), "Z": _a(kv), "Mask": np.asarray(mask, dtype=bool)},
                          p, h, f"the {b.name} with the spec's input and mask", values=True)

    def causal(self, b: Block) -> bool:
        return b.name == "self-attention" and self.name in ("gpt2_layer", "decoder_layer")

    def mask_ok(self, b: Block) -> Optional[bool]:
        """The implementation's causal mask, when the block's mask is causal (its own entry)."""
        if not self.causal(b) or not b.attn_in:
            return None
        mask = np.asarray(b.attn_in[2], dtype=bool)
        return self.check(self.step.where, "unidirectional_mask", {}, {},
                          {"ell_z": mask.shape[0], "ell_x": mask.shape[1]}, f"the {b.name}'s causal mask",
                          values=True)


def _departs_silenced(probe: _LayerProbe, silenced_note: str) -> tuple[str, str]:
    """The layer departs with every sublayer silenced (``silenced_note``: what that check said). A
    NaN or an exception is not silenced by zero weights: ask the pieces first, then the layer
    without its MLP's biases, then its causal mask; else the residual path."""
    blocks = probe.blocks
    for b in blocks:
        if (not probe.post or b is blocks[0]) and probe.norm_ok(b) is False:
            return "norm", f"the layer departs with every sublayer silenced; the {b.name} block's norm departs"
        if b.attn and probe.attn_ok(b) is False:
            return b.name, ("the layer departs with every sublayer silenced; mh_attention departs on the "
                            f"{b.name}'s input")
    nan = "NaN" in silenced_note and any(probe.causal(b) for b in blocks)  # an empty query needs a mask
    structural = silenced_note.startswith("raised") or " has shape " in silenced_note
    if structural and probe.variant.mlp_bias and _agrees_without_mlp_biases(probe):  # raised, or another shape
        return "MLP", (f"the layer departs whatever its weights ({silenced_note[:60]}) but agrees "
                       "without the MLP's biases: how b1, b2 are added")
    for b in blocks:
        if b.attn and (probe.mask_ok(b) is False or nan):
            return b.name, ("the layer departs with every sublayer silenced, "
                            + ("and its unidirectional_mask entry departs" if not nan else
                               "with a NaN that zero weights do not silence: a query left with no key "
                               "(the layer's own mask)"))
    return "residual", ("the layer departs with every sublayer silenced while its norm and attention entries "
                        "agree: the residual path (or where the norms sit) differs")


def _agrees_without_mlp_biases(probe: _LayerProbe) -> bool:
    """Zero weights cannot silence a crash: whether the layer agrees without its MLP's biases
    (``mlp_bias=False``)."""
    step = probe.step
    lean = {k: v for k, v in step.params.items() if not k.startswith("b_mlp")}
    return probe.check(step.where, probe.name, step.inputs, lean, step.hyper, "the layer with mlp_bias=False",
                       probe.variant.replace(mlp_bias=False)) is True


def _attention_on(probe: _LayerProbe, b: Block, later: dict[str, np.ndarray]) -> Optional[tuple[str, str]]:
    """The layer with the sublayers up to the attention block ``b`` on: None when it agrees, else
    which of its norm, its mask and the attention departs."""
    if probe.run(later, f"sublayers up to the {b.name} on") is not False:
        return None
    if probe.norm_ok(b) is False:
        return "norm", f"the layer departs once the {b.name} is on, and its norm entry departs on its input"
    a = probe.attn_ok(b)
    if probe.mask_ok(b) is False:
        return b.name, f"the layer departs once the {b.name} is on; its unidirectional_mask entry departs"
    if a is False:
        return b.name, f"the layer departs once the {b.name} is on; mh_attention departs on its input"
    return b.name, (f"the layer departs once the {b.name} is on, though mh_attention "
                    f"{'agrees' if a else 'was not checked'} on the spec's input and mask: the layer's "
                    "own mask or call of it differs")


def _mlp_on(probe: _LayerProbe, b: Block, later: dict[str, np.ndarray]) -> Optional[tuple[str, str]]:
    """The layer with the sublayers up to the MLP block ``b`` on, in steps: the MLP made constant,
    its activation alone, b1 varying along its rows, the whole MLP. None when every step agrees."""
    i, _j = b.mlp
    const = {**later, f"W_mlp{i}": np.zeros_like(later[f"W_mlp{i}"])}
    if f"b_mlp{i}" in const:
        const[f"b_mlp{i}"] = np.zeros_like(const[f"b_mlp{i}"])
    if probe.run(const, "MLP made constant (W1 = 0, b1 = 0)") is False:
        return "MLP", "the layer departs with a constant MLP (its biases or its residual)"
    if f"b_mlp{i}" in later:
        found = _mlp_bias_probes(probe, b, const)
        if found is not None:
            return found
    if probe.run(later, "the whole MLP on") is False:
        if not probe.post and probe.norm_ok(b) is False:
            return "norm", "the layer departs once the MLP is on, and its norm entry departs on its input"
        return "MLP", "the layer departs once the whole MLP is on (its activation agrees on its own)"
    return None


def _mlp_bias_probes(probe: _LayerProbe, b: Block, const: dict[str, np.ndarray]) -> Optional[tuple[str, str]]:
    """With W1 = 0, b1 set to the spec's pre-activations: first a few single values c (b1 = c 1:
    every MLP row, every column sees the same c, so only the activation is exercised, never how b1
    is broadcast), then one column of them (b1 varying along the rows: how b1 is added)."""
    i = b.mlp[0]
    pre = _a(b.pre)  # (d_mlp, ℓ)
    col = int(np.argmax(np.abs(pre).max(axis=0))) if pre.size else 0
    h = pre[:, col].copy()
    values = sorted(set(np.round(h, 12).tolist()), key=abs, reverse=True)[:4]
    for c in values:
        probe_params = {**const, f"b_mlp{i}": np.full_like(h, c)}
        if probe.run(probe_params, f"MLP activation probe (W1 = 0, b1 = {c:.3g} everywhere)") is False:
            return "MLP activation", f"the layer departs when only the MLP's activation is exercised (at {c:.3g})"
    probe_params = {**const, f"b_mlp{i}": h}
    if probe.run(probe_params, f"MLP bias probe (W1 = 0, b1 = the spec's pre-activations of column {col})") is False:
        return "MLP", "the layer departs when b1 varies along the MLP's rows: how b1 is added (its axis)"
    return None


# -- the walk ---------------------------------------------------------------------------------------

def _model_check(check: _Checker, model_entry: str, inputs: Mapping[str, np.ndarray],
                 params: Mapping[str, np.ndarray], hyper: Mapping[str, int], where: str, config: str) -> Optional[bool]:
    h = {k: hyper[k] for k in REGISTRY[model_entry].hyper}
    return check(where, model_entry, inputs, dict(params), h, config)


def locate(member: Any, algorithm: str, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray],
           hyper: Mapping[str, int], variant: VariantSet, dtype: str, *, timeout: float = 30.0,
           seconds: float = SECONDS, every: bool = True, structural: bool = False) -> Divergence:
    """Where ``member`` first departs from the spec on this case of ``algorithm`` (a model, its loss,
    gradient or step, or a layer entry). ``inputs``/``params``: already rounded to ``dtype``.
    ``every``: also check the steps after the first departing one (``also``). ``structural``: the
    failure is an exception or a wrong shape: where *that* happens (value departures are noted only)."""
    started = time.perf_counter()
    d = Divergence(algorithm, dtype)
    budget = _Budget(seconds)
    check = _Checker(member, variant, dtype, timeout, budget, d.checks, structural)
    try:
        if algorithm in _LAYERS:
            step = _layer_step("layer", algorithm, _l(inputs[_LAYER_INPUT[algorithm]]), params, "", hyper, variant,
                               _l(inputs["Z"]) if algorithm == "decoder_layer" else None)[0]
            step.inputs = {k: np.asarray(v) for k, v in inputs.items()}
            if check(step.where, algorithm, step.inputs, step.params, step.hyper, "the whole layer") is False:
                d.sublayer, d.detail = _locate_in_layer(check, step, variant)
                d.where = "layer" if d.sublayer else ""
            else:
                d.detail = "the layer agrees with the spec on this case (the failure did not recur here)"
        elif algorithm in MODEL_OF:
            _walk_model(d, check, member, algorithm, inputs, params, hyper, variant, every)
        d.intermediate = _intermediates(member, algorithm, inputs, params, hyper, variant, dtype, budget)
    except SpecError as exc:  # the spec refuses a piece of the walk: say so, never raise
        d.detail = f"the walk stopped: {exc}"
    d.gave_up = budget.spent
    d.seconds = time.perf_counter() - started
    return d


def _walk_model(d: Divergence, check: _Checker, member: Any, algorithm: str, inputs: Mapping[str, np.ndarray],
                params: Mapping[str, np.ndarray], hyper: Mapping[str, int], variant: VariantSet, every: bool) -> None:
    model, model_entry = MODEL_OF[algorithm]
    x = model_inputs(algorithm, inputs)
    steps, _ = model_walk(model, x, params, hyper, variant)
    if algorithm != model_entry:  # a loss, gradient or step: is the forward pass itself at fault?
        if _model_check(check, model_entry, x, params, hyper, "forward pass", "the forward model alone") is True:
            d.where = "loss or its gradient"
            d.detail = f"the forward pass ({model_entry}) agrees with the spec; what is built on it departs"
            return
    for step in steps:
        ok = check(step.where, step.entry, step.inputs, step.params, step.hyper)
        if ok is not False:
            continue
        if d.where:
            d.also.append(step.where)
            continue
        d.where = step.where
        if step.entry in _LAYERS:
            d.sublayer, d.detail = _locate_in_layer(check, step, variant)
            d.detail = f"{step.entry} departs on the spec's input; {d.detail}"
        else:
            d.sublayer = ""
            d.detail = f"its {step.entry} entry departs on the spec's input"
        if not every:
            return
    if d.where:
        return
    _walk_whole(d, check, model, model_entry, x, params, hyper, variant)


def _walk_whole(d: Divergence, check: _Checker, model: str, model_entry: str, x: Mapping[str, np.ndarray],
                params: Mapping[str, np.ndarray], hyper: Mapping[str, int], variant: VariantSet) -> None:
    """Every entry agreed on its own: find the departure with the model entry itself, cut to its
    first layers, then (when even one layer departs) with every layer silenced."""
    if _model_check(check, model_entry, x, params, hyper, "model", "the whole model") is not False:
        d.detail = "the whole model agrees with the spec on this case (the failure did not recur here)"
        return
    note = str(d.checks[-1].get("note", ""))
    if note.startswith("raised "):  # ablations of a model that raises whatever its values say nothing
        d.where = "model entry"
        d.detail = f"every entry agrees on its own, the model entry itself {note}"
        return
    if model != "ed":
        first_bad = hyper["L"]  # the whole model departs
        for keep in range(1, hyper["L"]):
            h = {**hyper, "L": keep}
            p = {k: v for k, v in params.items() if not k.startswith("layers.") or int(k.split(".")[1]) < keep}
            if _model_check(check, model_entry, x, p, h, f"first {keep} layer(s)",
                            f"the model cut to L = {keep}") is False:
                first_bad = keep
                break
        if first_bad > 1:
            d.where = f"layer {first_bad - 1}"
            d.detail = (f"the model cut to its first {first_bad} layers departs, to {first_bad - 1} agrees, and "
                        "the layer entry agrees on the spec's input: the model runs that layer differently "
                        "(its parameters, its input)")
            return
    silent = dict(params)
    stacks = (("enc_layers", "L_enc", "encoder_layer"), ("dec_layers", "L_dec", "decoder_layer")) if model == "ed" \
        else (("layers", "L", "bert_layer" if model == "e" else "gpt2_layer"),)
    for prefix, count, layer in stacks:
        for l in range(hyper[count]):
            at = f"{prefix}.{l}."
            layer_params = _strip(silent, at)
            for b in _blocks(layer):
                layer_params = _silenced(layer_params, b)
            silent.update({at + k: v for k, v in layer_params.items()})
    if _model_check(check, model_entry, x, silent, hyper, "model", "every layer's sublayers silenced") is False:
        final = {"d": ("gamma", "beta"), "e": ("gamma_final", "beta_final")}.get(model, ("gamma_dec", "beta_dec"))
        present = [k for k in final if k in params]
        if present:  # a final norm with γ = β = 0 makes X = 0: does the model apply it at all?
            zeroed = {**silent, **{k: np.zeros_like(params[k]) for k in present}}
            if _model_check(check, model_entry, x, zeroed, hyper, "model",
                            "layers silenced, final norm's γ and β zero") is False:
                d.where = "final norm"
                d.detail = ("the model departs with its layers silenced and its final norm's γ, β zero (the spec's "
                            "X is then 0), while its norm entry agrees: the model does not apply its final norm "
                            "as the spec does")
                return
        d.where = "head" if model == "e" else "outside the layers"
        d.detail = ("the model departs with every layer's sublayers silenced while its embedding, norm and "
                    "unembedding entries agree: " + ("the head's W_f or activation (Algorithm 9 line 10)"
                                                     if model == "e" else "how the model joins them"))
        return
    first = "encoder layer 0" if model == "ed" else "layer 0"
    d.where = first
    d.detail = ("the model departs from its first layer on, but not with its sublayers silenced, while the layer "
                "entry agrees on the spec's input: the model runs that layer differently")


# -- the implementation's own named intermediates ----------------------------------------------------

def _intermediate_name(where: str) -> str:
    """A step's name in the intermediates contract: "layer 1" -> "layers.1", "encoder layer 0" ->
    "enc_layers.0", "final norm" -> "final_norm", "head norm" -> "head", ..."""
    stack = {"encoder": "enc_", "decoder": "dec_"}.get(where.split()[0], "")
    rest = where.split(" ", 1)[1] if stack else where
    if rest.startswith("layer "):
        return f"{stack}layers.{rest.split()[-1]}"
    return stack + {"head norm": "head"}.get(rest, rest.replace(" ", "_"))


def spec_intermediates(model: str, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray],
                       hyper: Mapping[str, int], variant: VariantSet) -> dict[str, np.ndarray]:
    """The spec's values under the names of the intermediates contract (docs/plugins.md): the value
    after each step, ``embedding``, ``layers.{l}`` (``enc_``/``dec_`` prefixed for the
    encoder-decoder), ``final_norm``, ``head`` (ETransformer, after line 11), and ``logits``
    (W_u X + b_u 1ᵀ, before the final softmax)."""
    from ftspec.spec.unembedding import logits

    steps, _ = model_walk(model, inputs, params, hyper, variant)
    out: dict[str, np.ndarray] = {}
    for k, s in enumerate(steps[:-1]):
        nxt = steps[k + 1]
        if nxt.entry == "embedding":  # the encoder ends: its output is the decoder layers' context
            after = next((t.context for t in steps[k + 1:] if t.context is not None), None)
            if after is None:
                continue
        else:
            after = nxt.inputs["X"] if "X" in nxt.inputs else nxt.inputs["Z"]
        out[_intermediate_name(s.where)] = after
    last = steps[-1]
    W_u = unembedding_matrix(_l(last.params["W_u"]) if "W_u" in last.params else None,
                             _l(last.params["W_e"]) if "W_e" in last.params else None, variant)
    out["logits"] = _a(logits(_l(last.inputs["X"]), W_u, _l(last.params["b_u"]) if "b_u" in last.params else None))
    return out


#: error/scale above which a named intermediate departs, per dtype: far above what rounding through a
#: small model does (a few hundred units of roundoff), far below what a changed convention does
_INTERMEDIATE_RTOL = {"float64": 1e-9, "float32": 1e-3, "bfloat16": 1e-1, "float16": 5e-2}


def _intermediates(member: Any, algorithm: str, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray],
                   hyper: Mapping[str, int], variant: VariantSet, dtype: str, budget: _Budget) -> str:
    """The first of the implementation's own named intermediates that departs from the spec's value
    ("" when it offers none, or none departs). Compared in the order of the computation, relative to
    the spec value's largest magnitude."""
    fns = getattr(member.impl, "intermediates", None) or {}
    if algorithm not in MODEL_OF:
        return ""
    model, model_entry = MODEL_OF[algorithm]
    fn = fns.get(model_entry)
    if fn is None or not budget.left():
        return ""
    from ftspec.impls.api import Context

    from ..core.calling import Prepared

    x = model_inputs(algorithm, inputs)
    entry = REGISTRY[model_entry]
    prepared = Prepared(entry, x, params, dtype)
    try:
        spec = spec_intermediates(model, prepared.inputs, prepared.params, hyper, variant)
        ctx = Context(model_entry, dtype, member.device, {k: hyper[k] for k in entry.hyper}, variant)
        native_in = {k: member.impl.from_numpy(np.asarray(v, dtype=np.int64), "int64", member.device)
                     for k, v in prepared.inputs.items()}
        native_p = {k: member.impl.from_numpy(np.asarray(v, dtype=np.float64), dtype, member.device)
                    for k, v in prepared.params.items()}
        got = fn(native_in, native_p, ctx)
        rtol = _INTERMEDIATE_RTOL.get(dtype, 1e-3)
        for name, want in spec.items():
            if name not in got:
                continue
            value = np.asarray(member.impl.to_numpy(got[name]), dtype=np.float64)
            if value.shape != want.shape:
                return f"{name} (shape {value.shape}, spec {want.shape})"
            scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-300)
            if not np.all(np.isfinite(value)) or float(np.max(np.abs(value - want))) > rtol * scale:
                return name
    except Exception:  # noqa: BLE001 - an optional help must never cost the failure its report
        return ""
    return ""


def locate_failure(member: Any, case: Any, dtype: str, *, timeout: float,
                   seconds: float = SECONDS, structural: bool = False) -> Optional[Divergence]:
    """The runner's hook (through ``diagnosis.diagnose_failure``): None when the case's algorithm is no
    model, layer, loss, gradient or step, or when anything goes wrong."""
    if case is None or (case.algorithm not in MODEL_OF and case.algorithm not in _LAYERS):
        return None
    from ..core.calling import Prepared

    try:
        prepared = Prepared(case.entry, case.inputs, case.params, dtype)
        return locate(member, case.algorithm, prepared.inputs, prepared.params, case.hyper, case.variant, dtype,
                      timeout=timeout, seconds=seconds, structural=structural)
    except Exception:  # noqa: BLE001 - a help; never the reason a failure goes unreported
        return None


def expected_matches(expected: str, d: Mapping[str, Any]) -> bool:
    """Whether a divergence record names ``expected`` ("layer 0/norm", "unembedding", "head", ...):
    the where part is a suffix of the record's ``where`` (so "layer 0" matches "encoder layer 0"),
    the sublayer part, when given, equals the record's ``sublayer``; "a|b": either."""
    if "|" in expected:
        return any(expected_matches(e, d) for e in expected.split("|"))
    where, _, sub = expected.partition("/")
    got = str(d.get("where", ""))
    return bool(got) and got.endswith(where.strip()) and (not sub or d.get("sublayer") == sub.strip())

