"""First divergence inside a model: where an implementation first departs from the spec.

A whole-model failure (``ed/e/d_transformer``, their losses, gradients and
SGD steps) or a layer failure says *that* the output is wrong, not *where*.
On the shrunk case this module walks the model's computation in order and
checks each piece on its own, with what the implementation already offers:

1. the spec's intermediate values, recorded by the spec's own model (or layer)
   entry as it runs (``spec/intermediates.py``: ``embedding``, ``layers.{l}``,
   each block's norm, sublayer and residual sum, ...), so no step is computed
   twice; tests/conformance/test_divergence.py checks that each step's entry,
   fed the recorded value at its input, gives the next step's input exactly;
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
   values inside the layer, then separate a norm from its attention. A
   component is not blamed for what another one does in its place, so the
   walk asks where the evidence points before naming the block it was
   looking at: a silenced sublayer must be silent (the layer agrees once
   all its weights are 0; a silenced cross-attention does not move the
   output with the encoder's Z), else it is that sublayer; a post-LN block
   whose attention, made constant (W_o = 0), still departs and moves with
   b_o is its residual sum; a post-LN norm whose γ, β do not move the
   silenced layer's output, while another block's norm's do, reads that
   norm's parameters; a pre-LN block whose output does not move with its norm's
   γ, β, though it moves with its own output weights, does not read its
   norm (the norm). Every attention entry the plugin offers checks an attention block
   (``mh_attention``; for a self-attention also ``causal_self_attention`` or ``self_attention``,
   which build their own mask, and their padded forms), and ``token_embedding`` /
   ``positional_embedding`` stand in for a missing ``embedding``. A probe that departs is a
   norm's when that norm's entry departs on what it reads in that probe (the spec's values under
   the probe's parameters); an MLP probe (W₁ = 0) is checked against a control that adds the same
   column through b₂ alone: departing too, or agreeing with bounds that accept the probe's own
   outputs (a margin), it is not the MLP's. A cut norm clears its attention only if the attention
   is still heard (an RMSNorm has no β: at γ = 0 its attention reads zeros). Zero weights cannot
   silence a NaN (0 · NaN = NaN): with every weight of every sublayer 0 a NaN that stays is a
   division's (a norm, or a softmax over a query with no key), never the residual sums; norms and
   self-attentions whose entries agree are cleared, and what is left is named or left open. Where
   the probes cannot separate two places (a norm over d_e ≤ 2 features keeps little more than a
   sign) both are listed;
4. when every entry agrees, the model itself with its layers silenced (is the
   departure outside the layers: the ETransformer head, the wiring?) and
   with its first layers only (which layer does the model run differently
   from its layer entry, e.g. with another layer's parameters).

An implementation may also offer named intermediates of its own
(``Implementation.intermediates``, docs/plugins.md "Named intermediates"):
then each named value is compared with the spec's, in the order of the
computation, and the first one that departs is reported as well: the coarse
names (``layers.1``) and the fine ones inside them (``layers.1.attn.heads.0.A``,
``layers.1.norm2.sigma``), whichever it offers.

Everything is bounded (``SECONDS``) and plain data (``Divergence.to_dict``).
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

import numpy as np

from ftspec.spec import SpecError
from ftspec.spec.attention import bidirectional_mask, unidirectional_mask
from ftspec.spec.evaluation import intermediates
from ftspec.spec.registry import REGISTRY
from ftspec.spec.training import masked_sequence
from ftspec.spec.variants import VariantSet

__all__ = ["MODEL_OF", "SECONDS", "Block", "Divergence", "Step", "component_departures", "expected_matches",
           "layer_walk", "locate",
           "locate_failure", "model_inputs", "model_walk", "spec_intermediates"]

#: wall seconds per failure (checked before each implementation call)
SECONDS = 20.0

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
    #: places that remain possible when the case cannot tell them apart ("layer 0/norm", ...); then
    #: ``sublayer`` (or ``where``) is left empty rather than guessed
    candidates: list[str] = field(default_factory=list)
    #: pieces the walk could not check, and why ("final norm: the plugin does not implement layer_norm")
    unchecked: list[str] = field(default_factory=list)
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
                "candidates": list(self.candidates), "unchecked": list(self.unchecked),
                "checks": self.checks, "gave_up": self.gave_up, "seconds": round(self.seconds, 3)}

    def made(self) -> int:
        """How many checks gave a verdict (those not made, for want of an entry, time or a case the
        spec accepts, say nothing)."""
        return sum(1 for c in self.checks if c.get("ok") is not None)

    def not_located(self) -> str:
        """Why nothing is named, never claiming more than was checked: agreement only when a check
        was made, and then how many."""
        made = self.made()
        if made == 0:
            why = "the time budget ran out" if self.gave_up else self.detail or "no entry the walk uses answered"
            return f"nothing could be checked ({why})"
        n = f"{made} check{'s' if made != 1 else ''} made"
        if self.gave_up:
            return f"gave up (time budget) after {n}"
        return f"{self.detail}; {n}" if self.detail else f"every piece checked agrees with the spec on its own ({n})"

    def lines(self) -> list[str]:
        """The report's lines (without indentation)."""
        if not self.found and not self.candidates:
            out = [f"first divergence: not located: {self.not_located()}"]
        elif not self.found:
            out = [f"first divergence: one of {', '.join(self.candidates)} ({self.detail})"]
        else:
            out = [f"first divergence: {self.label()} ({self.detail})"]
            if self.candidates:
                out.append("the case cannot tell apart: " + ", ".join(self.candidates))
        if self.intermediate:
            out.append(f"its own intermediates first depart at {self.intermediate!r}")
        if self.also:
            out.append("also departs on its own: " + "; ".join(self.also[:4]))
        if self.unchecked:
            more = f" (and {len(self.unchecked) - 4} more)" if len(self.unchecked) > 4 else ""
            out.append("could not check: " + "; ".join(self.unchecked[:4]) + more)
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
                hyper: Mapping[str, int], Z: Optional[list] = None) -> Step:
    p = _strip(params, prefix)
    h = {k: hyper[k] for k in _LAYER_HYPER}
    if name == "decoder_layer":
        assert Z is not None, "a decoder layer needs its context Z"
        h.update(ell_x=len(X[0]), ell_z=len(Z[0]))
        return Step(where, name, {"X": _a(X), "Z": _a(Z)}, p, h, context=_a(Z))
    h["ell"] = len(X[0])
    return Step(where, name, {_LAYER_INPUT[name]: _a(X)}, p, h)


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
            steps.append(_layer_step(f"encoder layer {l}", "encoder_layer", Z, params, f"enc_layers.{l}.", hyper))
            Z = v[f"enc_layers.{l}"]
        if variant.resolved_final_norm("ed_encoder"):
            steps.append(_norm_step("encoder final norm", Z, params, "gamma_enc", "beta_enc", variant))
            Z = v["enc_final_norm"]
        steps.append(_embedding_step("decoder embedding", inputs["x"], params, "_dec", hyper, d_e))
        X = v["dec_embedding"]
        for l in range(hyper["L_dec"]):
            steps.append(_layer_step(f"decoder layer {l}", "decoder_layer", X, params, f"dec_layers.{l}.", hyper, Z))
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
    """One residual block of a layer: X ← norm(X + f(X)) (post-LN), X ← X + f(norm(X)) (pre-LN) or
    X ← X + norm(f(X)) (res-post-norm)."""

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


#: each block's recorded names (``spec/layers.py``): its sublayer, its norm, its residual sum
_BLOCK_NAMES = {"decoder_layer": (("self_attn", "norm1", "res1"), ("cross_attn", "norm2", "res2"),
                                  ("mlp", "norm3", "res3"))}
_BLOCK_NAMES_ONE = (("attn", "norm1", "res1"), ("mlp", "norm2", "res2"))


def layer_walk(name: str, X: list, params: Mapping[str, np.ndarray], variant: VariantSet,
               Z: Optional[list] = None) -> tuple[list[Block], list]:
    """The layer ``name`` block by block: each block's values as the layer entry itself records them
    (``spec/intermediates.py``: its sublayer's output, its norm's, its residual sum, the MLP's
    pre-activation), read per placement (post-LN, pre-LN, res-post-norm); returns (blocks, the
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
        else:  # X ← X + f(norm(X))
            Y, b.norm_in, X = values[norm], X, values[res]
        if b.attn:
            b.attn_in = (Y, Z if b.name == "cross-attention" else Y, masks[k])
        else:
            b.pre = values[f"{f}.pre"]
    return blocks, X


def _output_weights(params: Mapping[str, np.ndarray], b: Block) -> tuple[str, str]:
    """The block's output weight and bias: W_o, b_o; the MLP's second W, b; under ``mlp="one_layer"``
    (no second W) its last layer's, the last ``mlp_hidden.{k}`` or else W1, b1: zero, they give
    act(0) = 0 (ReLU, GELU, SiLU), so the MLP is silent as well."""
    if b.attn:
        return b.attn + "W_o", b.attn + "b_o"
    if f"W_mlp{b.mlp[1]}" in params or f"W_mlp{b.mlp[0]}" not in params:
        return f"W_mlp{b.mlp[1]}", f"b_mlp{b.mlp[1]}"
    hidden = [int(k.split(".")[1]) for k in params if k.startswith("mlp_hidden.") and k.endswith(".W")]
    if hidden:
        return f"mlp_hidden.{max(hidden)}.W", f"mlp_hidden.{max(hidden)}.b"
    return f"W_mlp{b.mlp[0]}", f"b_mlp{b.mlp[0]}"


def _silenced(params: dict[str, np.ndarray], b: Block) -> dict[str, np.ndarray]:
    """The block's f made zero: its output weights (W_o, b_o or the MLP's second W, b; ``_output_weights``)
    set to 0."""
    keys = _output_weights(params, b)
    return {**params, **{k: np.zeros_like(params[k]) for k in keys if k in params}}


def _zeroed(params: dict[str, np.ndarray], b: Block) -> dict[str, np.ndarray]:
    """Every weight and bias of the block's f set to 0 (its norm kept): f is 0 whatever it reads
    (scores all 0 and values 0; an MLP's second W 0, or under ``mlp="one_layer"`` act(0) = 0)."""
    mlp = {f"{w}_mlp{i}{lin}" for w in ("W", "b") for i in b.mlp for lin in ("", "_lin")}
    mine = [k for k in params if (k.startswith(b.attn) if b.attn else
                                  k in mlp or k.startswith("mlp_hidden."))]
    return {**params, **{k: np.zeros_like(params[k]) for k in mine}}


def _other(v: np.ndarray) -> np.ndarray:
    """Another value for a parameter: reversed, negated, doubled and shifted (no entry stays)."""
    v = np.asarray(v, dtype=np.float64)
    return -2.0 * v[::-1] + 0.75


def _differ(a: Optional[Mapping[str, np.ndarray]], b: Optional[Mapping[str, np.ndarray]], dtype: str) -> bool:
    """Whether two sets of outputs differ by more than rounding through a model (``_INTERMEDIATE_RTOL``
    of the largest magnitude); False when either is missing."""
    if a is None or b is None:
        return False
    rtol = _INTERMEDIATE_RTOL.get(dtype, 1e-3)
    for k in a:
        u, v = np.asarray(a[k], dtype=np.float64), np.asarray(b.get(k, a[k]), dtype=np.float64)
        if u.shape != v.shape:
            return True
        if bool(np.any(np.isnan(u) != np.isnan(v))):
            return True
        finite = ~np.isnan(u) & ~np.isnan(v)
        if not finite.any():
            continue
        scale = max(float(np.max(np.abs(u[finite]))), 1e-300)
        if float(np.max(np.abs(u[finite] - v[finite]))) > rtol * scale:
            return True
    return False


@dataclass
class _Moves:
    """Two runs of one probe: whether each agreed, and whether the implementation's output and the
    spec's moved from the first to the second."""

    first: Optional[bool]
    second: Optional[bool]
    impl: bool
    spec: bool

    def only_spec(self) -> bool:
        """The spec's output moves, the implementation's does not."""
        return self.spec and not self.impl

    def only_impl(self) -> bool:
        """The implementation's output moves, the spec's does not."""
        return self.impl and not self.spec


#: one call made: (its verdict, the implementation's outputs, the spec's)
_Ran = tuple[Optional[bool], Optional[dict[str, np.ndarray]], Optional[dict[str, np.ndarray]]]


def _ran(check: "_Checker", verdict: Optional[bool]) -> _Ran:
    """The call ``check`` just made, kept to be compared with later ones."""
    return verdict, check.last_out, check.last_ref


def _moves(check: "_Checker", first: Callable[[], Optional[bool]] | _Ran,
           second: Callable[[], Optional[bool]]) -> Optional[_Moves]:
    """Run ``first`` (or take a call already made) then ``second`` (two calls of one entry) and compare
    their outputs, the implementation's and the spec's; None when either could not be made or
    returned nothing."""
    r1, out, ref = first if isinstance(first, tuple) else _ran(check, first())
    if r1 is None or out is None or ref is None:
        return None
    r2 = second()
    if r2 is None or check.last_out is None or check.last_ref is None:
        return None
    return _Moves(r1, r2, _differ(out, check.last_out, check.dtype), _differ(ref, check.last_ref, check.dtype))


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
        #: the outputs of the last call that returned (a probe compares two calls of the implementation)
        self.last_out: Optional[dict[str, np.ndarray]] = None
        #: the spec's outputs for that call (a probe asks whether the spec moves too)
        self.last_ref: Optional[dict[str, np.ndarray]] = None
        #: that call's entry and reference (its bounds), to judge another call's outputs against it
        self.last_reference: Optional[tuple[Any, Any]] = None

    def under(self, variant: VariantSet) -> "_Checker":
        """The same checker (record, budget) judging under another variant set."""
        return _Checker(self.member, variant, self.dtype, self.timeout, self.budget, self.record, self.structural)

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
                            dtype=self.dtype, precision=impl.precision_for(self.dtype))
        except (SpecError, ToleranceModelError) as exc:
            rec["note"] = f"the spec refuses the case: {exc}"
            return None
        if not ref.in_range:
            rec["note"] = "the spec's values leave the dtype's range"
            return None
        case = Case(name, dict(hyper), variant, prepared.inputs, prepared.params)
        self.last_out, self.last_ref = None, dict(ref.outputs)
        self.last_reference = (entry, ref)
        try:
            out, _ = call_member(self.member, entry, prepared.inputs, prepared.params, case, self.dtype,
                                 self.timeout, False)
        except Exception as exc:  # noqa: BLE001 - the implementation's exception departs from the spec
            rec.update(ok=False, ratio="inf", note=f"raised {type(exc).__name__}: {str(exc)[:120]}")
            return False
        self.last_out = out
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


def _locate_in_layer(check: _Checker, step: Step, variant: VariantSet,
                     probe: Optional["_LayerProbe"] = None) -> tuple[str, str]:
    """(sublayer, how it was found) for a layer whose entry departs on the spec's input: the layer
    with every sublayer silenced, then with the sublayers switched on one at a time. ``probe``: how
    the layer is run (default: its own entry; a model entry with the layer inside it otherwise).
    Places the case cannot tell apart are left in ``probe.candidates`` (the sublayer is then "")."""
    probe = probe or _LayerProbe(check, step, variant)
    blocks = probe.blocks
    silent = dict(step.params)
    for b in blocks:
        silent = _silenced(silent, b)
    if probe.run(silent, "every sublayer silenced (output weights 0)") is False:
        return _departs_silenced(probe, str(check.record[-1].get("note", "")), silent)
    for k, b in enumerate(blocks):
        later = dict(step.params)  # the blocks up to b on, those after it silenced
        for c in blocks[k + 1:]:
            later = _silenced(later, c)
        found = _attention_on(probe, b, later) if b.attn else _mlp_on(probe, b, later)
        if found is not None:
            return found
    return "", "no ablation departs though the layer does (not reproducible piece by piece)"


def _why_unchecked(record: list[dict[str, Any]], entry: str) -> str:
    """Why the last check of ``entry`` was not made, in words ("" when it was made)."""
    for r in reversed(record):
        if r["entry"] == entry:
            if r["ok"] is not None:
                return ""
            note = str(r.get("note", ""))
            return f"the plugin does not implement {entry}" if note.startswith("not offered") else f"{entry}: {note}"
    return f"{entry} was not called"


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
        #: sublayers the case cannot tell apart, when the walk cannot name one
        self.candidates: list[str] = []
        #: the attention entry that last gave a verdict (the one the detail names)
        self.attention_entry = "mh_attention"

    def under(self, variant: VariantSet) -> "_LayerProbe":
        """The same probe judged under another variant set (the layer's values recomputed)."""
        other = copy.copy(self)
        other.check, other.variant = self.check.under(variant), variant
        X = _l(self.step.inputs[_LAYER_INPUT[self.name]])
        Z = _l(self.step.context) if self.step.context is not None else None
        other.blocks, _ = layer_walk(self.name, X, self.step.params, variant, Z)
        other.candidates = []
        return other

    def run(self, params: dict[str, np.ndarray], config: str) -> Optional[bool]:
        """The layer entry on the spec's input with ``params``."""
        step = self.step
        return self.check(step.where, self.name, step.inputs, params, step.hyper, config)

    def run_alike(self, params: dict[str, np.ndarray], config: str) -> Optional[bool]:
        """The layer entry with ``params`` on its input with every column replaced by the first."""
        step = self.step
        key = _LAYER_INPUT[self.name]
        X = np.asarray(step.inputs[key])
        alike = {**step.inputs, key: np.repeat(X[:, :1], X.shape[1], axis=1)}
        return self.check(step.where, self.name, alike, params, step.hyper, config)

    def run_moved(self, params: dict[str, np.ndarray], config: str) -> Optional[bool]:
        """The layer entry with ``params`` on another input X (its columns reversed, negated, doubled
        and shifted): what reaches each block changes."""
        step = self.step
        key = _LAYER_INPUT[self.name]
        return self.check(step.where, self.name, {**step.inputs, key: _other(np.asarray(step.inputs[key]).T).T},
                          params, step.hyper, config)

    def run_context(self, params: dict[str, np.ndarray], sign: float, config: str) -> Optional[bool]:
        """A decoder layer with ``params`` and its context Z multiplied by ``sign`` × 8 (large, so
        that even a norm over two features sees a cross-attention that reads it); None otherwise."""
        step = self.step
        if step.context is None:
            return None
        return self.check(step.where, self.name, {**step.inputs, "Z": sign * 8.0 * np.asarray(step.inputs["Z"])},
                          params, step.hyper, config)

    def encoder_places(self) -> list[str]:
        """For a decoder layer inside a model: the encoder's places (the cross-attention is the first to
        read them). Empty for a layer entry."""
        return []

    def encoder_cut(self, params: dict[str, np.ndarray]) -> Optional[bool]:
        """The layer with ``params`` and the encoder's output fixed (inside a model only)."""
        return None

    def norm_ok(self, b: Block) -> Optional[bool]:
        step = self.step
        return self.check(step.where, self.norm_entry, {"X": _a(b.norm_in)},
                          _norm_params(step.params, b.gamma, b.beta), {"d_e": self.d_e, "ell": self.ell},
                          f"the norm of the {b.name} block ({b.gamma}, {b.beta})", values=True)

    def norms_on(self, params: dict[str, np.ndarray], config: str) -> tuple[Optional[Block], list[Optional[bool]]]:
        """Each block's norm through its entry, fed what it reads when the layer runs with ``params``
        (the spec's values under that configuration, ``layer_walk``): a probe that departs is the
        norm's when a norm departs on exactly what it reads there. Returns the first block whose
        norm departs (or None) and every verdict."""
        X = _l(self.step.inputs[_LAYER_INPUT[self.name]])
        Z = _l(self.step.context) if self.step.context is not None else None
        try:
            blocks, _ = layer_walk(self.name, X, params, self.variant, Z)
        except SpecError:
            return None, [None]
        verdicts: list[Optional[bool]] = []
        for b in blocks:
            if b.gamma not in params:
                continue
            ok = self.check(self.step.where, self.norm_entry, {"X": _a(b.norm_in)},
                            _norm_params(params, b.gamma, b.beta), {"d_e": self.d_e, "ell": self.ell},
                            f"the norm of the {b.name} block, on what it reads with {config}", values=True)
            verdicts.append(ok)
            if ok is False:
                return b, verdicts
        return None, verdicts

    def attn_ok(self, b: Block) -> Optional[bool]:
        """The block's attention through every attention entry the plugin offers, fed the spec's values
        inside the layer: ``mh_attention`` with the spec's mask, and for a self-attention also the
        entries that build their own mask (``causal_self_attention`` for a causal block,
        ``self_attention`` for a bidirectional one, and their padded forms with no position padded),
        so a plugin that offers only those is checked too. False when one departs, True when one
        was checked and none departs, None when none could be checked."""
        if b.attn_in is None:
            return None
        found: Optional[bool] = None
        for name, inputs, hyper in self.attention_calls(b):
            ok = self.check(self.step.where, name, inputs, _strip(self.step.params, b.attn), hyper,
                            f"the {b.name} through {name}, on the spec's input", values=True)
            if ok is False or (ok is True and not found):  # the detail names the first that answered
                self.attention_entry = name
            if ok is False:
                return False
            found = found or ok
        return found

    def attention_calls(self, b: Block) -> list[tuple[str, dict[str, np.ndarray], dict[str, int]]]:
        """(entry, inputs, hyper) of each attention entry that can check block ``b``: those the
        plugin offers, ``mh_attention`` alone when it offers none (the check then says why not)."""
        assert b.attn_in is not None
        q, kv, mask = b.attn_in
        H = self.step.hyper["H"]
        d_attn, d_mid = self.step.hyper["d_attn"], self.step.hyper["d_mid"]
        calls = [("mh_attention", {"X": _a(q), "Z": _a(kv), "Mask": np.asarray(mask, dtype=bool)},
                  {"H": H, "d_x": self.d_e, "d_z": len(kv), "d_attn": d_attn, "d_mid": d_mid, "d_out": self.d_e,
                   "ell_x": self.ell, "ell_z": len(kv[0])})]
        if b.name == "self-attention":
            own = ("causal_self_attention", "padded_causal_self_attention") if self.causal(b) else \
                ("self_attention", "padded_self_attention")
            h = {"H": H, "d_e": self.d_e, "d_attn": d_attn, "d_mid": d_mid, "ell": self.ell}
            calls.append((own[0], {"X": _a(q)}, h))
            calls.append((own[1], {"X": _a(q), "pad": np.ones(self.ell, dtype=bool)}, h))
        offered = [c for c in calls if c[0] in self.check.member.impl.algorithms]
        return offered or calls[:1]

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


def _departs_silenced(probe: _LayerProbe, silenced_note: str, silent: dict[str, np.ndarray]) -> tuple[str, str]:
    """The layer departs with every sublayer silenced (``silenced_note``: what that check said). A
    NaN or an exception is not silenced by zero weights: ask the pieces first, then the layer
    without its MLP's biases, then its causal mask, then the layer again with a query that has no key
    answered by zeros (``empty_query='zeros'``, where zero weights silence it); else the residual path
    when the norms were seen to agree (otherwise norm and residual both remain possible)."""
    blocks = probe.blocks
    norms: list[Optional[bool]] = []
    for b in blocks:
        if not probe.post or b is blocks[0]:
            norms.append(probe.norm_ok(b))
            if norms[-1] is False:
                return "norm", f"the layer departs with every sublayer silenced; the {b.name} block's norm departs"
        if b.attn and probe.attn_ok(b) is False:
            return b.name, (f"the layer departs with every sublayer silenced; {probe.attention_entry} departs on "
                            f"the {b.name}'s input")
    nan = "NaN" in silenced_note or "nan" in silenced_note
    if probe.post and not nan:  # silenced, a post-LN layer is a chain of norms: each on what it reads there
        first, verdicts = probe.norms_on(silent, "every sublayer silenced")
        if first is not None:
            return "norm", (f"the layer departs with every sublayer silenced, and the {first.name} block's norm "
                            "departs on what it reads there")
        norms += verdicts
    found = _not_silent(probe, blocks, silent, "every sublayer silenced (output weights 0)")
    if found is not None:
        return found
    structural = silenced_note.startswith("raised") or " has shape " in silenced_note
    # raised, or another shape; at d_e ≤ 2 agreeing through a norm is no proof (it keeps only a sign)
    if structural and probe.variant.mlp_bias and probe.d_e >= 3 and _agrees_without_mlp_biases(probe):
        return "MLP", (f"the layer departs whatever its weights ({silenced_note[:60]}) but agrees "
                       "without the MLP's biases: how b1, b2 are added")
    for b in blocks:
        if b.attn and probe.mask_ok(b) is False:
            return b.name, "the layer departs with every sublayer silenced, and its unidirectional_mask entry departs"
    if (nan or structural) and probe.variant.empty_query != "zeros":
        zeros = probe.under(probe.variant.replace(empty_query="zeros"))
        if zeros.run(silent, "every sublayer silenced, empty_query='zeros'") is True:
            found = _locate_in_layer(zeros.check, zeros.step, zeros.variant, zeros)
            probe.candidates = zeros.candidates
            if found[0] or zeros.candidates:
                return found[0], ("a NaN or an exception that zero weights do not silence; with a query that "
                                  f"has no key answered by zeros (empty_query='zeros'): {found[1]}")
    if nan and not structural:
        found = _nan_source(probe, silent)
        if found is not None:
            return found
    if probe.post and _still_normalised(probe, silent):
        return "norm", ("the layer departs with every sublayer silenced, yet with γ = 1, β = 0 each column it returns "
                        "has mean 0 and one spread, not the spec's: its norms run, with another convention than the "
                        "spec's (variance, ε: the norm as the layer calls it)")
    if probe.post and not (nan or structural):
        found = _post_ln_norm_params(probe, silent)
        if found is not None:
            return found
    # a NaN is made by a division, never by the residual sums: agreeing norms do not make it the residual's
    if norms and all(n is True for n in norms) and not (probe.post and probe.d_e < 3) and not nan:
        return "residual", ("the layer departs with every sublayer silenced while its norm and attention entries "
                            "agree: the residual path (or where the norms sit) differs")
    why = _why_unchecked(probe.check.record, probe.norm_entry)
    probe.candidates = ["norm", "residual"]
    if nan or structural:  # an exception or a NaN zero weights leave: any attention's mask may give it
        probe.candidates += [b.name for b in blocks if b.attn]
    return "", ("the layer departs with every sublayer silenced: its norm or its residual path (the norm could not "
                f"be checked on its own: {why or 'no norm is exercised on its own here'})")


def _nan_source(probe: _LayerProbe, silent: dict[str, np.ndarray]) -> Optional[tuple[str, str]]:
    """The layer returns NaN with every sublayer silenced, where the spec's values are finite. Zero
    output weights cannot silence a NaN (0 · NaN = NaN), so the layer is run with every weight of
    every sublayer 0: each sublayer then computes on zeros, and the residual sums and the MLP
    (W₂ act(0) + b₂ with everything 0) make no NaN out of finite numbers. What can is a division: a
    norm's, by its spread, or an attention's softmax over a query its mask leaves without a key.
    A norm is cleared by its entry agreeing on what it reads; a self-attention by an entry that builds
    its own mask (``causal_self_attention``, ``self_attention``) agreeing on its input; the
    residual path is never the source. One place left is named; several are left open. None when the
    NaN goes once every weight is 0 (then it is not weight-free: the other probes decide)."""
    zero = dict(silent)
    for b in probe.blocks:
        zero = _zeroed(zero, b)
    if probe.run(zero, "every weight of every sublayer 0") is not False or \
            not _unsilenceable(str(probe.check.record[-1].get("note", ""))):
        return None
    suspects: list[str] = []
    cleared: list[str] = []
    for b in probe.blocks:
        if not b.attn:
            continue
        own = [c for c in probe.attention_calls(b) if c[0] != "mh_attention"]
        oks = [probe.check(probe.step.where, name, inputs, _strip(probe.step.params, b.attn), hyper,
                           f"the {b.name}, with the mask {name} builds itself", values=True)
               for name, inputs, hyper in own]
        if oks and all(ok is True for ok in oks):
            cleared.append(f"the {b.name} through {', '.join(c[0] for c in own)}")
        else:
            suspects.append(b.name)
    norms = [probe.norm_ok(b) for b in probe.blocks if b.gamma in probe.step.params]
    if norms and all(n is True for n in norms):
        cleared.append(f"the norms through {probe.norm_entry}")
    elif norms:
        suspects.append("norm")
    how = ("the layer returns NaN whatever its weights (every weight of every sublayer 0), where the spec's values "
           "are finite: a division by zero, in a norm or in an attention's softmax over a query with no key (the "
           "residual sums make no NaN)" + (f"; cleared on their own: {'; '.join(cleared)}" if cleared else ""))
    if not suspects:
        return None
    if len(suspects) == 1:
        where = "its mask leaves a query without a key" if suspects[0] != "norm" else "its norm as the layer calls it"
        return suspects[0], f"{how}: the {suspects[0]} ({where})"
    probe.candidates = suspects
    return "", how


def _context_moves(probe: _LayerProbe, params: dict[str, np.ndarray], config: str) -> bool:
    """With ``params`` (the cross-attention silenced: W_o = 0, b_o = 0) the spec's decoder layer does
    not read the encoder's output Z at all: whether the implementation's output moves with Z (then
    the cross-attention is not silenced by its own output weights: it computes with others)."""
    if not any(b.name == "cross-attention" for b in probe.blocks):
        return False
    m = _moves(probe.check, lambda: probe.run_context(params, 1.0, f"{config}, Z × 8"),
               lambda: probe.run_context(params, -1.0, f"{config}, Z × −8"))
    return m is not None and m.only_impl()


def _not_silent(probe: _LayerProbe, blocks: list[Block], params: dict[str, np.ndarray],
                config: str) -> Optional[tuple[str, str]]:
    """The layer departs with ``params``, in which ``blocks`` are silenced (output weights 0). Zero
    output weights silence a sublayer only if it computes with its own: whether one of them is
    heard all the same. The cross-attention: the output moves with the encoder's Z, which nothing
    else reads; any of them: the layer agrees once every weight of that sublayer is 0."""
    how = f"the layer departs with {config}"
    for b in blocks:
        if b.name == "cross-attention" and _context_moves(probe, params, config):
            return b.name, (f"{how}, and its output moves with the encoder's output Z, which only the silenced "
                            "cross-attention reads: the cross-attention computes with other weights than its own")
    for b in blocks:
        if probe.run(_zeroed(params, b), f"{config}, every weight of the {b.name} 0") is True:
            return b.name, (f"{how} but agrees once every weight of the {b.name} is 0: zero output weights do not "
                            f"silence it, so the {b.name} computes with other weights than its own")
    return None


def _post_ln_norm_params(probe: _LayerProbe, silent: dict[str, np.ndarray]) -> Optional[tuple[str, str]]:
    """Post-LN with every sublayer silenced the layer is a chain of norms, and the spec's output moves
    with each norm's γ (and β). A norm whose own γ, β the implementation's output does not move with,
    while it moves with another block's norm: that norm computes with the other norm's parameters.
    (An output that moves with no norm's parameters is a residual path that bypasses the norms: not
    this.) None when no norm shows it."""
    ran = _ran(probe.check, probe.run(silent, "every sublayer silenced (again)"))
    if ran[0] is None:
        return None

    def changed(b: Block) -> dict[str, np.ndarray]:
        return {**silent, **{k: _other(silent[k]) for k in (b.gamma, b.beta) if k in silent}}

    for b in probe.blocks:
        if b.gamma not in silent:
            continue
        own = _moves(probe.check, ran, lambda: probe.run(changed(b), f"every sublayer silenced, the {b.name} "
                                                                     "block's norm γ, β changed"))
        if own is None or not own.only_spec():
            continue
        for c in probe.blocks:
            if c is b or c.gamma not in silent:
                continue
            other = _moves(probe.check, ran, lambda: probe.run(changed(c), f"every sublayer silenced, the {c.name} "
                                                                           "block's norm γ, β changed"))
            if other is not None and other.impl:
                return "norm", (f"the layer departs with every sublayer silenced, and its output does not move with "
                                f"the {b.name} block's norm γ, β as the spec's does, yet moves with the {c.name} "
                                "block's: that norm computes with other parameters than its own")
    return None


def _post_ln_sum(probe: _LayerProbe, b: Block, later: dict[str, np.ndarray], part: str,
                 said: str) -> Optional[tuple[str, str]]:
    """Post-LN: the layer departs once the attention block ``b`` is on, with equal scores too, while
    mh_attention agrees on its own: its call, or the sum X + f its norm reads. With W_o = 0 the block
    adds b_o 1ᵀ, none of its own computation: if the layer still departs and moves with that b_o
    (as the spec's does), the sum differs: the residual path. If it agrees, the call. Otherwise
    (or at d_e ≤ 2, where a norm keeps little more than a sign) both remain possible."""
    both = ("", f"the layer departs once the {b.name} is on, {part}: its call of the attention or the sum X + f "
                f"its norm reads (the residual path); {said}")
    w_o, b_o = b.attn + "W_o", b.attn + "b_o"
    if probe.d_e < 3 or w_o not in later or b_o not in later:
        probe.candidates = [b.name, "residual"]
        return both
    const = {**later, w_o: np.zeros_like(later[w_o])}
    label = f"the {b.name} made constant (W_o = 0: it adds b_o 1ᵀ)"
    m = _moves(probe.check, lambda: probe.run(const, label),
               lambda: probe.run({**const, b_o: _other(const[b_o])}, label + ", another b_o"))
    if m is not None and m.first is True and m.second is True:
        return None
    if m is not None and m.impl and m.spec:
        return "residual", (f"the layer departs once the {b.name} is on, {part}, and still with the {b.name} made "
                            "constant (W_o = 0: it adds b_o 1ᵀ, none of its own computation), moving with that b_o "
                            "as the spec's does: the sum X + f its norm reads differs (the residual path)")
    probe.candidates = [b.name, "residual"]
    return both


def _reads_norm(probe: _LayerProbe, b: Block, later: dict[str, np.ndarray]) -> Optional[tuple[str, str]]:
    """Pre-LN: the layer departs once block ``b`` is on. Its f reads the norm's output, so the spec's
    output moves with that norm's γ and β; if the implementation's does not, while it does move with
    f's own output weights (f is heard: not a layer left out), f reads something else (the norm's
    result is left unused)."""
    out = _output_weights(later, b)[0]
    if probe.post or b.gamma not in later or out not in later:
        return None
    moved = {**later, b.gamma: _other(later[b.gamma])}
    if b.beta in later:
        moved[b.beta] = _other(later[b.beta])
    ran = _ran(probe.check, probe.run(later, f"sublayers up to the {b.name} on"))
    m = _moves(probe.check, ran, lambda: probe.run(moved, f"the same, the {b.name} block's norm γ and β changed"))
    if m is None or not m.only_spec():
        return None
    heard = _moves(probe.check, ran,
                   lambda: probe.run({**later, out: _other(later[out])}, f"the same, the {b.name}'s {out} changed"))
    if heard is None or not (heard.impl and heard.spec):
        return None
    return "norm", (f"the layer departs once the {b.name} is on, and its output does not move with that block's "
                    f"norm (γ, β) as the spec's does: the {b.name} does not read its norm's output")


def _still_normalised(probe: _LayerProbe, silent: dict[str, np.ndarray]) -> bool:
    """Post-LN with every sublayer silenced the spec returns norm(X): with γ = 1, β = 0 (layer norm) each
    column has mean 0 and the same spread. Whether the implementation's columns still do (then its norm
    runs, differently) rather than the residual path being changed."""
    if probe.variant.norm != "layer_norm" or probe.d_e < 3:
        return False
    plain = dict(silent)
    for b in probe.blocks:
        for name, value in ((b.gamma, 1.0), (b.beta, 0.0)):
            if name in plain:
                plain[name] = np.full_like(plain[name], value)
    if probe.run(plain, "every sublayer silenced, γ = 1, β = 0") is not False or probe.check.last_out is None:
        return False
    Y = np.asarray(next(iter(probe.check.last_out.values())), dtype=np.float64)
    if Y.ndim != 2 or not np.all(np.isfinite(Y)):
        return False
    spread = np.sqrt(np.mean(Y * Y, axis=0))
    ref = next(iter((probe.check.last_ref or {}).values()), None)
    if ref is not None and np.shape(ref) == Y.shape and np.all(np.isfinite(ref)):
        want = np.sqrt(np.mean(np.asarray(ref, dtype=np.float64) ** 2, axis=0))
        if np.allclose(spread, want, rtol=1e-3):  # normalised as the spec normalises: what it reads differs
            return False
    return bool(np.allclose(Y.mean(axis=0), 0.0, atol=1e-6 * max(float(spread.max()), 1e-300))
                and np.allclose(spread, spread[0], rtol=1e-6) and spread[0] > 0)


def _agrees_without_mlp_biases(probe: _LayerProbe) -> bool:
    """Zero weights cannot silence a crash: whether the layer agrees without its MLP's biases
    (``mlp_bias=False``)."""
    step = probe.step
    lean = {k: v for k, v in step.params.items()
            if not (k.startswith("b_mlp") or (k.startswith("mlp_hidden.") and k.endswith(".b")))}
    return probe.check(step.where, probe.name, step.inputs, lean, step.hyper, "the layer with mlp_bias=False",
                       probe.variant.replace(mlp_bias=False)) is True


def _equal_scores(params: dict[str, np.ndarray], b: Block) -> dict[str, np.ndarray]:
    """The attention block ``b`` with W_q = 0 (and b_q = 0): every score is 0, every allowed key gets
    the same weight, so the scale, W_q, W_k and the softmax of varying scores play no part."""
    head = b.attn + "heads."
    return {k: (np.zeros_like(v) if k.startswith(head) and k.rsplit(".", 1)[-1] in ("W_q", "b_q") else v)
            for k, v in params.items()}


def _attention_on(probe: _LayerProbe, b: Block, later: dict[str, np.ndarray]) -> Optional[tuple[str, str]]:
    """The layer with the sublayers up to the attention block ``b`` on: None when it agrees, else
    which of its norm, its mask and the attention departs. Where mh_attention cannot be checked on
    its own, the layer is run again with equal scores (``_equal_scores``) and the detail says what
    that separates, never that the layer's own call differs."""
    if probe.run(later, f"sublayers up to the {b.name} on") is not False:
        return None
    n = probe.norm_ok(b)
    if n is False:
        return "norm", f"the layer departs once the {b.name} is on, and its norm entry departs on its input"
    a = probe.attn_ok(b)
    if probe.mask_ok(b) is False:
        return b.name, f"the layer departs once the {b.name} is on; its unidirectional_mask entry departs"
    if a is False:
        return b.name, f"the layer departs once the {b.name} is on; {probe.attention_entry} departs on its input"
    after = probe.blocks[[c.name for c in probe.blocks].index(b.name) + 1:]
    found = _not_silent(probe, after, later, f"the sublayers up to the {b.name} on, those after it silenced")
    if found is not None:
        return found
    encoder = probe.encoder_places() if b.name == "cross-attention" else []
    why = _why_unchecked(probe.check.record, "mh_attention") if a is None else ""
    said = (f"mh_attention could not be checked on its own ({why})" if why else
            f"{probe.attention_entry} agrees on the spec's input, so the layer's own call of it differs")
    equal = probe.run(_equal_scores(later, b), f"the {b.name} with W_q = 0 (equal scores)")
    if equal is True:
        part = "in its scores (the scale, W_q, W_k or the softmax over varying scores): it agrees with equal scores"
    elif equal is False:
        part = "with equal scores too (its mask, values, heads or output, or what it reads)"
    else:
        part = "(which part could not be checked)"
    if encoder and equal is not True:
        if probe.encoder_cut(later) is False:
            return b.name, (f"the layer departs once the {b.name} is on, {part}, and still with the encoder's "
                            f"output fixed (its last norm's γ = 0); {said}")
        probe.candidates = [b.name] + encoder
        return "", (f"the layer departs once the {b.name} is on, {part}, but not with the encoder's output fixed: "
                    f"the {b.name} (it is the first to read the encoder) or the encoder; {said}")
    if equal is False and not probe.post and b.gamma in later:  # pre-LN: the norm as the layer calls it
        found = _pre_ln_norm(probe, b, later, n, part, said)
        if found is not None:
            return found
    if equal is False and probe.post:
        found = _post_ln_sum(probe, b, later, part, said)
        if found is not None:
            return found
    return b.name, f"the layer departs once the {b.name} is on, {part}; {said}"


def _pre_ln_norm(probe: _LayerProbe, b: Block, later: dict[str, np.ndarray], n: Optional[bool], part: str,
                 said: str) -> Optional[tuple[str, str]]:
    """Pre-LN, the layer departs once attention block ``b`` is on, with equal scores too: the norm as
    the layer calls it, or the attention. With the norm cut (γ = 0) every column the attention reads
    is alike: agreeing there puts the departure in the norm (or, causal, the mask that alike columns
    hide); departing, the layer's output is asked whether it moves with the norm's γ, β at all."""
    cut = {**later, b.gamma: np.zeros_like(later[b.gamma])}
    ran = _ran(probe.check, probe.run(cut, f"the {b.name}'s norm cut (γ = 0): every column it reads alike"))
    if ran[0] is not True:
        return _reads_norm(probe, b, later)
    # agreeing with the norm cut clears the attention only if the attention is still heard there: a
    # norm without β (RMSNorm, affine="scale") gives 0 at γ = 0, so an attention without biases then
    # reads zeros and adds nothing, whatever its code does
    w_o = b.attn + "W_o"
    heard = _moves(probe.check, ran, lambda: probe.run({**cut, w_o: _other(cut[w_o])},
                                                       f"the same, the {b.name}'s W_o changed")) \
        if w_o in cut else None
    if heard is None or not heard.spec:
        found = _reads_norm(probe, b, later)
        if found is not None:
            return found
        probe.candidates = ["norm", b.name]
        return "", (f"the layer departs once the {b.name} is on, {part}; with its norm cut (γ = 0) the {b.name} "
                    "reads only zeros and adds nothing, so that agreement clears neither: its norm as the layer "
                    f"calls it or the {b.name}; {said}")
    detail = (f"the layer departs once the {b.name} is on, {part}, but not when its norm's output is "
              f"fixed: the norm as the layer calls it ({'it agrees' if n else 'it could not be checked'} "
              "on its own)")
    if not probe.causal(b):
        return "norm", detail
    # a causal mask does nothing on columns that are all alike
    alike = probe.run_alike(later, "the layer's input columns all alike (the mask then does nothing)")
    if alike is False:
        return "norm", detail + "; it departs on an input whose columns are all alike, where the mask does nothing"
    if alike is True:  # a norm works column by column: alike columns would show it
        return b.name, (f"the layer departs once the {b.name} is on, {part}, but neither with its norm's output "
                        f"fixed nor on an input whose columns are all alike: its mask (what only distinct columns "
                        f"show); {said}")
    probe.candidates = ["norm", b.name]
    return "", detail + f", or the {b.name}'s mask (alike columns hide it); {said}"


def _mlp_on(probe: _LayerProbe, b: Block, later: dict[str, np.ndarray]) -> Optional[tuple[str, str]]:
    """The layer with the sublayers up to the MLP block ``b`` on, in steps: the MLP made constant,
    its activation alone, b1 varying along its rows, the whole MLP. None when every step agrees."""
    i, _j = b.mlp
    const = {**later, f"W_mlp{i}": np.zeros_like(later[f"W_mlp{i}"])}
    if f"b_mlp{i}" in const:
        const[f"b_mlp{i}"] = np.zeros_like(const[f"b_mlp{i}"])
    ran = _ran(probe.check, probe.run(const, "MLP made constant (W1 = 0, b1 = 0)"))
    if ran[0] is False:
        found = _mlp_control(probe, b, ran, const, 0.0, "with a constant MLP")
        if found is not None:
            return found
        return "MLP", "the layer departs with a constant MLP (its biases or its residual)"
    if f"b_mlp{i}" in later:
        found = _mlp_bias_probes(probe, b, const)
        if found is not None:
            return found
    if probe.run(later, "the whole MLP on") is False:
        if not probe.post and probe.norm_ok(b) is False:
            return "norm", "the layer departs once the MLP is on, and its norm entry departs on its input"
        found = _reads_norm(probe, b, later)
        if found is not None:
            return found
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
        ran = _ran(probe.check, probe.run(probe_params, f"MLP activation probe (W1 = 0, b1 = {c:.3g} everywhere)"))
        if ran[0] is False:
            found = _mlp_control(probe, b, ran, const, np.full_like(h, c), f"when only the MLP's activation is "
                                 f"exercised (at {c:.3g})")
            if found is not None:
                return found
            return "MLP activation", f"the layer departs when only the MLP's activation is exercised (at {c:.3g})"
    probe_params = {**const, f"b_mlp{i}": h}
    ran = _ran(probe.check, probe.run(probe_params, f"MLP bias probe (W1 = 0, b1 = the spec's pre-activations of "
                                                    f"column {col})"))
    if ran[0] is False:
        found = _mlp_control(probe, b, ran, const, h, "when b1 varies along the MLP's rows")
        if found is not None:
            return found
        return "MLP", "the layer departs when b1 varies along the MLP's rows: how b1 is added (its axis)"
    return None


def _within(check: _Checker, outputs: Mapping[str, np.ndarray]) -> bool:
    """Whether ``outputs`` (another call's) agree with the last call's reference, judged as the search
    judges (its derived bounds): two configurations meant to compute the same values, one agreeing,
    the other departing with outputs the first's bounds accept, differ in their bound only."""
    from ..core.judge import judge

    if check.last_reference is None:
        return False
    entry, ref = check.last_reference
    try:
        return bool(judge(entry, dict(outputs), ref).ok)
    except Exception:  # noqa: BLE001 - outputs the judge cannot read are not within anything
        return False


def _mlp_control(probe: _LayerProbe, b: Block, ran: _Ran, const: dict[str, np.ndarray], b1: Any,
                 what: str) -> Optional[tuple[str, str]]:
    """A probe of the MLP block ``b`` departed (``ran``), with W1 = 0 and b1 = ``b1``: the MLP then
    adds the constant column W2 act(b1) + b2. The control adds that same column through b2 alone
    (W2 = 0, b2 ← W2 act(b1) + b2, act the spec's), so none of the MLP's own code runs. If the
    control departs too, or agrees with bounds that accept the probe's own outputs (the two differ
    in their bound, not their values: a marginal departure), the departure is not the MLP's: a norm
    that departs on what it reads there, else the pieces the two share. None when the control agrees
    and the probe's outputs lie outside its bounds (the MLP's own computation departs), or when no
    control can be built (no W2, or a column the control cannot add: gated, or no b2)."""
    w2, b2 = f"W_mlp{b.mlp[1]}", f"b_mlp{b.mlp[1]}"
    if w2 not in const or any(k.startswith("mlp_hidden.") for k in const):
        return None
    from ftspec.spec.functions import apply

    act = probe.variant.resolved_activation(_LAYERS[probe.name])
    W2 = np.asarray(const[w2], dtype=np.float64)
    a = np.asarray(apply(act, [[float(v)] for v in np.broadcast_to(np.asarray(b1, dtype=np.float64),
                                                                       (W2.shape[1],))]), dtype=np.float64)[:, 0]
    # gated, the column is act(b1) ⊙ (W_lin X + b_lin): constant only where act(b1) = 0; without b2
    # the control can add only a zero column
    if (probe.variant.mlp == "gated" or b2 not in const) and np.any(a != 0.0):
        return None
    control = {**const, w2: np.zeros_like(W2)}
    if b2 in const:
        control[b2] = np.asarray(const[b2], dtype=np.float64) + W2 @ a
    second = probe.run(control, "control: the same column added through b2 alone (W2 = 0), none of the MLP's "
                                "code run")
    if second is None or ran[1] is None:
        return None
    if second is True and not _within(probe.check, ran[1]):
        return None  # the control agrees and the probe's outputs are outside its bounds: the MLP's code
    how = ("departs as well" if second is False else
           "agrees, and the probe's own outputs are within the control's bounds (the two differ in their bound, "
           "not in their values: a margin)")
    first, _ = probe.norms_on(control, "the MLP's column added through b2")
    if first is not None:
        return "norm", (f"the layer departs {what}, but the same column added through b2 alone {how}: not the MLP; "
                        f"the {first.name} block's norm departs on what it reads there")
    if second is False and not np.any(a != 0.0):
        # the MLP made constant adds b2 alone, as the control does: departing both ways with every norm
        # agreeing on what it reads, it is how the MLP adds b2 (its biases), as the probe says
        return None
    k = [c.name for c in probe.blocks].index(b.name)
    probe.candidates = ["norm"] + [c.name for c in probe.blocks[:k] if c.attn] + ["residual"]
    if second is False:  # the control still adds b2: how the MLP adds it remains possible
        probe.candidates.append("MLP")
    return "", (f"the layer departs {what}, but the same column added through b2 alone {how}: not the MLP's "
                "W1 or activation; what it shares with the control (a norm, an earlier sublayer, the residual "
                "path" + (", how b2 is added)" if second is False else ")"))


# -- the walk ---------------------------------------------------------------------------------------

def _model_check(check: _Checker, model_entry: str, inputs: Mapping[str, np.ndarray],
                 params: Mapping[str, np.ndarray], hyper: Mapping[str, int], where: str, config: str) -> Optional[bool]:
    h = {k: hyper[k] for k in REGISTRY[model_entry].hyper}
    return check(where, model_entry, inputs, dict(params), h, config)


def component_departures(member: Any, name: str, inputs: Mapping[str, np.ndarray],
                         params: Mapping[str, np.ndarray], hyper: Mapping[str, int], variant: VariantSet,
                         dtype: str, *, timeout: float = 30.0, seconds: float = SECONDS) -> list[str]:
    """The sublayers of the layer entry ``name`` whose own component entries (``mh_attention``,
    ``layer_norm``/``rms_norm``) depart on the spec's values inside the layer, in the layer's order:
    evidence of a bug in that sublayer's code even where the layer's departure is first seen
    elsewhere (a residual path that departs hides every sublayer from the layer's own probes).
    Entries the implementation lacks, or that cannot be called, are left out."""
    d = Divergence(name, dtype)
    check = _Checker(member, variant, dtype, timeout, _Budget(seconds), d.checks, False)
    out: list[str] = []
    try:
        step = _layer_step("layer", name, _l(inputs[_LAYER_INPUT[name]]), params, "", hyper,
                           _l(inputs["Z"]) if name == "decoder_layer" else None)
        probe = _LayerProbe(check, step, variant)
        for b in probe.blocks:
            if b.attn and probe.attn_ok(b) is False:
                out.append(b.name)
            if probe.norm_ok(b) is False and "norm" not in out:
                out.append("norm")
    except SpecError:
        pass
    return out


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
            step = _layer_step("layer", algorithm, _l(inputs[_LAYER_INPUT[algorithm]]), params, "", hyper,
                               _l(inputs["Z"]) if algorithm == "decoder_layer" else None)
            step.inputs = {k: np.asarray(v) for k, v in inputs.items()}
            if check(step.where, algorithm, step.inputs, step.params, step.hyper, "the whole layer") is False:
                probe = _LayerProbe(check, step, variant)
                d.sublayer, d.detail = _locate_in_layer(check, step, variant, probe)
                d.candidates = [f"layer/{c}" for c in probe.candidates]
                d.where = "layer" if d.sublayer or d.candidates else ""
            else:
                d.detail = "the layer agrees with the spec on this case (the failure did not recur here)"
        elif algorithm in MODEL_OF:
            _walk_model(d, check, member, algorithm, inputs, params, hyper, variant, every)
        d.intermediate = _intermediates(member, algorithm, inputs, params, hyper, variant, dtype, budget)
    except SpecError as exc:  # the spec refuses a piece of the walk: say so, never raise
        d.detail = f"the walk stopped: {exc}"
    d.unchecked = _unchecked(d.checks)
    d.gave_up = budget.spent
    d.seconds = time.perf_counter() - started
    return d


def _unchecked(checks: list[dict[str, Any]]) -> list[str]:
    """Each piece the walk asked about but could not check, once, with why (in the walk's order)."""
    out: list[str] = []
    for r in checks:
        if r["ok"] is not None:
            continue
        note = str(r.get("note", ""))
        why = f"the plugin does not implement {r['entry']}" if note.startswith("not offered") else \
            f"{r['entry']}: {note}"
        line = f"{r['where']} ({why})"
        if line not in out:
            out.append(line)
    return out


def _embedding_parts(check: _Checker, step: Step) -> Optional[bool]:
    """A plugin without the ``embedding`` entry may offer its parts: ``token_embedding`` (each distinct
    token of the case) and ``positional_embedding`` (each position, learned positions only). False
    when one departs (the embedding's own code), else None: the parts agreeing leave the embedding's
    scale and norm unchecked, so they clear nothing."""
    impl = check.member.impl
    d_e = int(step.hyper["d_e"])
    if "token_embedding" in impl.algorithms and "W_e" in step.params:
        h = {"N_V": int(step.hyper["N_V"]), "d_e": d_e}
        for v in sorted(set(np.asarray(step.inputs["x"]).reshape(-1).tolist())):
            if check(step.where, "token_embedding", {"v": np.asarray(v, dtype=np.int64)},
                     {"W_e": step.params["W_e"]}, h, f"token {v} through token_embedding") is False:
                return False
    if "positional_embedding" in impl.algorithms and "W_p" in step.params:
        h = {"ell_max": int(step.hyper["ell_max"]), "d_e": d_e}
        for t in range(int(step.hyper["ell"])):
            if check(step.where, "positional_embedding", {"t": np.asarray(t, dtype=np.int64)},
                     {"W_p": step.params["W_p"]}, h, f"position {t} through positional_embedding") is False:
                return False
    return None


def _place(where: str) -> tuple[str, str]:
    """A step's place as (where, sublayer): the head's norm is the head's ("head", "norm")."""
    return ("head", "norm") if where == "head norm" else (where, "")


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
        if ok is None and step.entry == "embedding":
            ok = _embedding_parts(check, step)
        if ok is not False:
            continue
        if d.where:
            d.also.append(step.where)
            continue
        if step.entry in _LAYERS:
            probe = _LayerProbe(check, step, variant)
            d.sublayer, detail = _locate_in_layer(check, step, variant, probe)
            d.candidates = [f"{step.where}/{c}" for c in probe.candidates]
            d.where = step.where
            d.detail = f"{step.entry} departs on the spec's input; {detail}"
        else:
            d.where, d.sublayer = _place(step.where)
            entry = next((r["entry"] for r in reversed(d.checks) if r["ok"] is False), step.entry)
            d.detail = f"its {entry} entry departs on the spec's input"
        if not every:
            return
    if d.where:
        return
    _walk_whole(d, check, model, model_entry, x, params, hyper, variant)


# -- the whole model under ablations -----------------------------------------------------------------

#: the layer stacks of each model: (parameter prefix, count, layer entry, place)
_STACKS = {"d": (("layers", "L", "gpt2_layer", "layer"),), "e": (("layers", "L", "bert_layer", "layer"),),
           "ed": (("enc_layers", "L_enc", "encoder_layer", "encoder layer"),
                  ("dec_layers", "L_dec", "decoder_layer", "decoder layer"))}


@dataclass
class _Cut:
    """A norm on the path that stays on when every sublayer is silenced: with γ = 0 and β fixed its
    output is β 1ᵀ whatever reaches it, so what comes after it can be checked on its own."""

    where: str
    sublayer: str
    gamma: str
    beta: str


class _ModelProbe:
    """The model entry on the case's tokens with other parameters (possibly fewer layers)."""

    def __init__(self, check: _Checker, model: str, entry: str, x: Mapping[str, np.ndarray],
                 params: Mapping[str, np.ndarray], hyper: Mapping[str, int], variant: VariantSet) -> None:
        self.check, self.model, self.entry, self.x = check, model, entry, x
        self.params, self.hyper, self.variant = dict(params), dict(hyper), variant

    def run(self, params: Mapping[str, np.ndarray], config: str) -> Optional[bool]:
        h = {k: self.hyper[k] for k in REGISTRY[self.entry].hyper}
        return self.check("model", self.entry, self.x, dict(params), h, config)

    def differs(self, a: Optional[dict[str, np.ndarray]], b: Optional[dict[str, np.ndarray]]) -> bool:
        """Whether two outputs of the implementation differ by more than rounding through the model."""
        return _differ(a, b, self.check.dtype)

    def layers(self) -> list[tuple[str, str, str]]:
        """(parameter prefix, layer entry, place) of every layer, in the order the walk switches them
        on: the decoder's first for the encoder-decoder (its encoder silenced: only the cross-attention
        reads it), then the encoder's."""
        out = [(f"{prefix}.{l}.", layer, f"{place} {l}")
               for prefix, count, layer, place in _STACKS[self.model] for l in range(self.hyper[count])]
        return [o for o in out if o[0].startswith("dec_")] + [o for o in out if not o[0].startswith("dec_")]


def _silence_layer(params: dict[str, np.ndarray], prefix: str, layer: str) -> dict[str, np.ndarray]:
    p = _strip(params, prefix)
    for b in _blocks(layer):
        p = _silenced(p, b)
    return {**params, **{prefix + k: v for k, v in p.items()}}


def _unsilenceable(note: str) -> bool:
    """Whether a check's note says the implementation raised or returned NaN."""
    return note.startswith("raised ") or "NaN" in note or " nan" in note


def _fewest_layers(mp: _ModelProbe) -> Optional[tuple[str, str, str]]:
    """Cut each stack to its first layers while the model still departs; the model probe keeps the
    fewest. Returns the layer (prefix, entry, place) that makes it depart when it is the last one
    kept and not the first (it runs differently from the layers before it), else None."""
    found: Optional[tuple[str, str, str]] = None
    for prefix, count, layer, place in _STACKS[mp.model]:
        here: Optional[tuple[str, str, str]] = None
        for keep in range(1, mp.hyper[count]):
            h = {**mp.hyper, count: keep}
            p = {k: v for k, v in mp.params.items()
                 if not k.startswith(prefix + ".") or int(k.split(".")[1]) < keep}
            if _ModelProbe(mp.check, mp.model, mp.entry, mp.x, p, h, mp.variant).run(
                    p, f"the model cut to {count} = {keep}") is False:
                mp.params, mp.hyper = p, h
                here = None if keep == 1 else (f"{prefix}.{keep - 1}.", layer, f"{place} {keep - 1}")
                break
        else:
            if mp.hyper[count] > 1:
                l = mp.hyper[count] - 1
                here = (f"{prefix}.{l}.", layer, f"{place} {l}")
        found = found or here
    return found


def _walk_whole(d: Divergence, check: _Checker, model: str, model_entry: str, x: Mapping[str, np.ndarray],
                params: Mapping[str, np.ndarray], hyper: Mapping[str, int], variant: VariantSet) -> None:
    """Every entry agreed on its own, or could not be checked: find the departure with the model entry
    itself. Cut to its fewest departing layers; every sublayer silenced (what stays on: embedding,
    post-LN norms, final norm, head, unembedding, residual path: ``_chain``); then each layer's
    sublayers switched on in order, as inside a layer (``_locate_in_layer``, run through the model)."""
    mp = _ModelProbe(check, model, model_entry, x, params, hyper, variant)
    if mp.run(params, "the whole model") is not False:
        d.detail = "the whole model agrees with the spec on this case (the failure did not recur here)"
        return
    note = str(d.checks[-1].get("note", ""))
    prefix = ""
    if _unsilenceable(note):  # zero weights silence neither an exception nor a NaN
        zv = variant.replace(empty_query="zeros")
        ok: Optional[bool] = None
        if variant.empty_query != "zeros":
            h = {k: hyper[k] for k in REGISTRY[model_entry].hyper}
            ok = check.under(zv)("model", model_entry, x, dict(params), h, "the whole model, empty_query='zeros'")
        if ok is not False or _unsilenceable(str(d.checks[-1].get("note", ""))):
            if _blind(variant, hyper):
                d.candidates = _places(mp)
                d.detail = (f"the model entry {note[:80]}; with empty_query='zeros' it agrees, and at d_e = "
                            f"{hyper['d_e']} a norm hides too much to tell where")
                return
            if "NaN" in note:
                _fewest_layers(mp)  # the fewer layers kept, the fewer places left open
                if _model_nan(d, mp):
                    return
            d.where = "model entry"
            d.detail = f"every entry agrees on its own or could not be checked; the model entry itself {note[:80]}"
            return
        mp = _ModelProbe(check.under(zv), model, model_entry, x, params, hyper, zv)
        variant = zv
        prefix = "with a query that has no key answered by zeros (empty_query='zeros'), "
    _whole_walk(d, mp, variant, prefix)
    if _blind(variant, mp.hyper) and d.where != "unembedding":
        named = f"{d.where}/{d.sublayer}" if d.sublayer else d.where
        # the layer as a whole stays listed: its other sublayers remain as possible as any other place
        others = [p for p in _places(mp) if p != named]
        d.candidates = ([named] if named else []) + [c for c in d.candidates if c != named] + others
        d.where, d.sublayer = "", ""
        d.detail += (f"; but at d_e = {mp.hyper['d_e']} a {variant.norm} keeps little more than a sign, so what "
                     "agrees through a norm is no proof: every place remains possible, the probes pointed first "
                     "at the first one listed")


def _model_nan(d: Divergence, mp: _ModelProbe) -> bool:
    """The model returns NaN where the spec's values are finite, and zero output weights cannot silence
    a NaN: with every weight of every sublayer 0, a NaN that stays is made by a division (a norm's, or
    an attention's softmax over a query its mask leaves without a key), never by the residual sums or
    the model's wiring: every attention and norm of the model remains (the walk has no entry to tell
    them apart). False when the NaN goes with the weights."""
    zero = dict(mp.params)
    for at, layer, _where in mp.layers():
        p = _strip(zero, at)
        for b in _blocks(layer):
            p = _zeroed(p, b)
        zero.update({at + k: v for k, v in p.items()})
    if mp.run(zero, "every weight of every sublayer 0") is not False or \
            not _unsilenceable(str(mp.check.record[-1].get("note", ""))):
        return False
    order = sorted(mp.layers(), key=lambda o: (o[0].startswith("dec_"), int(o[0].split(".")[1])))
    d.candidates = [f"{where}/{name}" for _at, layer, where in order
                    for name in [b.name for b in _blocks(layer) if b.attn] + ["norm"]]
    d.detail = ("the model entry returns NaN where the spec's values are finite, and still with every weight of every "
                "sublayer 0 (cut to its fewest departing layers): a division by zero (an attention's softmax over a "
                "query with no key, or a norm), which no entry offered can place")
    return True


def _blind(variant: VariantSet, hyper: Mapping[str, int]) -> bool:
    """Whether the case is too small for a norm to pass on what it reads: a layer norm over two values keeps
    only the sign of their difference (one value: nothing), an RMS norm over one value only its sign."""
    return hyper["d_e"] <= (2 if variant.norm == "layer_norm" else 1)


def _places(mp: _ModelProbe) -> list[str]:
    """Every place of the model, coarse (a layer as a whole), in the order it runs them."""
    out = ["encoder embedding"] if mp.model == "ed" else []
    out += [f"encoder layer {l}" for l in range(mp.hyper.get("L_enc", 0))]
    out += ["encoder final norm"] if mp.model == "ed" else []
    out += ["decoder embedding" if mp.model == "ed" else "embedding"]
    out += [f"decoder layer {l}" for l in range(mp.hyper.get("L_dec", 0))]
    out += [f"layer {l}" for l in range(mp.hyper.get("L", 0))]
    out += ["decoder final norm" if mp.model == "ed" else "final norm"] + (["head"] if mp.model == "e" else [])
    return out + ["unembedding"]


def _whole_walk(d: Divergence, mp: _ModelProbe, variant: VariantSet, prefix: str) -> None:
    new = _fewest_layers(mp)
    base = dict(mp.params)
    for at, layer, _where in mp.layers():
        base = _silence_layer(base, at, layer)
    if new is not None:
        at, layer, where = new
        config = {**mp.params, **{k: v for k, v in base.items() if k.startswith(at)}}
        if mp.run(config, f"{where}'s sublayers silenced, the layers before it on") is False:
            d.where = where
            d.detail = (prefix + f"the model departs once it has {where} and agrees without it, even with that "
                        "layer's sublayers silenced: the model runs the layer differently (its parameters, its "
                        "residual path)")
            return
        if _in_layer(d, mp, variant, new, mp.params, prefix):
            return
    if mp.run(base, "every layer's sublayers silenced") is False:
        if not _model_not_silent(d, mp, base, prefix):
            _chain(d, mp, variant, base, prefix)
        return
    order = mp.layers()
    for k, (at, layer, where) in enumerate(order):
        config = dict(mp.params)  # the layers before this one on, those after it silenced
        for at2, layer2, _ in order[k + 1:]:
            config = _silence_layer(config, at2, layer2)
        if _in_layer(d, mp, variant, (at, layer, where), config, prefix):
            return
    d.detail = prefix + "the model departs, but no layer's sublayers switched on one at a time show where"


def _model_not_silent(d: Divergence, mp: _ModelProbe, base: dict[str, np.ndarray], prefix: str) -> bool:
    """The model departs with every sublayer silenced (output weights 0). Zero output weights silence a
    sublayer only if it computes with its own: whether the model agrees once every weight of one
    sublayer is 0 (then that sublayer is heard though silenced: it computes with other weights)."""
    for at, layer, where in mp.layers():
        for b in _blocks(layer):
            zeroed = _zeroed(_strip(base, at), b)
            if mp.run({**base, **{at + k: v for k, v in zeroed.items()}},
                      f"every sublayer silenced, every weight of {where}'s {b.name} 0") is True:
                d.where, d.sublayer = where, b.name
                d.detail = prefix + (f"the model departs with every sublayer silenced (output weights 0) but agrees "
                                     f"once every weight of {where}'s {b.name} is 0: zero output weights do not "
                                     f"silence it, so it computes with other weights than its own")
                return True
    return False


def _in_layer(d: Divergence, mp: _ModelProbe, variant: VariantSet, layer: tuple[str, str, str],
              config: dict[str, np.ndarray], prefix: str) -> bool:
    """The layer switched on inside the model (``config``: the other layers as they stand): whether
    it departs, and then where (``_locate_in_layer`` with the model entry running the layer)."""
    at, name, where = layer
    if mp.run(config, f"{where} on, the layers after it silenced") is not False:
        return False
    steps, _ = model_walk(mp.model, mp.x, config, mp.hyper, variant)
    step = next(s for s in steps if s.where == where)
    probe = _ModelLayerProbe(mp, step, variant, at, config)
    sub, detail = _locate_in_layer(probe.check, step, variant, probe)
    d.where, d.sublayer = where, sub
    d.candidates = [c if c.startswith("encoder ") else f"{where}/{c}" for c in probe.candidates]
    d.detail = prefix + f"the model departs once {where} is on; {detail}"
    return True


class _ModelLayerProbe(_LayerProbe):
    """A layer probed through the model entry: the layer's parameters set inside ``config``."""

    def __init__(self, mp: _ModelProbe, step: Step, variant: VariantSet, at: str,
                 config: dict[str, np.ndarray]) -> None:
        super().__init__(mp.check, step, variant)
        self.mp, self.at, self.config = mp, at, config

    def under(self, variant: VariantSet) -> "_LayerProbe":
        other = super().under(variant)
        assert isinstance(other, _ModelLayerProbe)
        other.mp = _ModelProbe(other.check, self.mp.model, self.mp.entry, self.mp.x, self.mp.params, self.mp.hyper,
                               variant)
        return other

    def run(self, params: dict[str, np.ndarray], config: str) -> Optional[bool]:
        return self.mp.run(self._merged(params), f"{self.step.where}: {config}")

    def run_alike(self, params: dict[str, np.ndarray], config: str) -> Optional[bool]:
        return None  # the layer's input inside a model is not the walk's to set

    def _merged(self, params: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        merged = {k: v for k, v in self.config.items() if not k.startswith(self.at)}
        merged.update({self.at + k: v for k, v in params.items()})
        return merged

    def run_moved(self, params: dict[str, np.ndarray], config: str) -> Optional[bool]:
        """Other embeddings (``_upstream_changed``): what reaches the layer changes."""
        moved = _upstream_changed(self._merged(params), self.variant)
        return None if moved is None else self.mp.run(moved, f"{self.step.where}: {config}")

    def run_context(self, params: dict[str, np.ndarray], sign: float, config: str) -> Optional[bool]:
        """The encoder's output moved far by ``sign``: its last norm's γ = 0 and β = ``sign`` × 8 × a fixed
        column (γ = that column without β), or without a last norm the last encoder layer's MLP bias
        (or output weights) set so: what the cross-attention reads changes, nothing else does."""
        if self.mp.model != "ed" or self.step.context is None:
            return None
        merged = self._merged(params)
        gamma, beta = self._encoder_last_norm()

        def far(name: str) -> np.ndarray:
            v = np.asarray(merged[name], dtype=np.float64)
            return sign * 8.0 * np.linspace(-1.0, 1.5, v.size).reshape(v.shape)

        if gamma in merged:
            if beta in merged:
                merged[gamma], merged[beta] = np.zeros_like(merged[gamma]), far(beta)
            else:
                merged[gamma] = far(gamma)
        else:
            last = f"enc_layers.{self.mp.hyper['L_enc'] - 1}."
            if last + "b_mlp2" in merged:
                merged[last + "b_mlp2"] = far(last + "b_mlp2")
            elif last + "W_mlp2" in merged:
                merged[last + "W_mlp2"] = sign * 8.0 * np.asarray(merged[last + "W_mlp2"], dtype=np.float64)
            else:
                return None
        return self.mp.run(merged, f"{self.step.where}: {config}")

    def _encoder_last_norm(self) -> tuple[str, str]:
        """The encoder's last norm (its final norm, else its last layer's last post-LN norm); ("", "")
        when its output leaves through no norm."""
        if self.variant.resolved_final_norm("ed_encoder"):
            return "gamma_enc", "beta_enc"
        last = self.mp.hyper["L_enc"] - 1
        if self.variant.resolved_norm_placement("ed_encoder") != "post":
            return "", ""
        return f"enc_layers.{last}.gamma2", f"enc_layers.{last}.beta2"

    def encoder_places(self) -> list[str]:
        if self.mp.model != "ed":
            return []
        pieces = ["encoder embedding"] + [f"encoder layer {l}" for l in range(self.mp.hyper["L_enc"])]
        return pieces + (["encoder final norm"] if self.variant.resolved_final_norm("ed_encoder") else [])

    def encoder_cut(self, params: dict[str, np.ndarray]) -> Optional[bool]:
        """The encoder's last norm with γ = 0: Z = β 1ᵀ whatever the encoder computes before it."""
        if self.mp.model != "ed":
            return None
        last = self.mp.hyper["L_enc"] - 1
        gamma = "gamma_enc" if self.variant.resolved_final_norm("ed_encoder") else f"enc_layers.{last}.gamma2"
        if gamma not in self.config or (gamma.startswith("enc_layers.") and
                                        self.variant.resolved_norm_placement("ed_encoder") != "post"):
            return None
        merged = {k: v for k, v in self.config.items() if not k.startswith(self.at)}
        merged.update({self.at + k: v for k, v in params.items()})
        merged[gamma] = np.zeros_like(merged[gamma])
        return self.mp.run(merged, f"{self.step.where}: the same with the encoder's output fixed ({gamma} = 0)")


def _cuts(mp: _ModelProbe, variant: VariantSet, params: Mapping[str, np.ndarray]) -> list[_Cut]:
    """The norms that stay on with every sublayer silenced, in the order the model runs them (only
    the decoder's for the encoder-decoder: its encoder is then read by nothing)."""
    out = []
    stacks = [s for s in _STACKS[mp.model] if s[0] != "enc_layers"]
    for prefix, count, layer, place in stacks:
        if variant.resolved_norm_placement(_LAYERS[layer]) == "post":
            for l in range(mp.hyper[count]):
                out += [_Cut(f"{place} {l}", "norm", f"{prefix}.{l}.{b.gamma}", f"{prefix}.{l}.{b.beta}")
                        for b in _blocks(layer)]
    final = {"d": ("final norm", "gpt2", "gamma", "beta"), "e": ("final norm", "bert", "gamma_final", "beta_final"),
             "ed": ("decoder final norm", "ed_decoder", "gamma_dec", "beta_dec")}[mp.model]
    if variant.resolved_final_norm(final[1]):
        out.append(_Cut(final[0], "", final[2], final[3]))
    if mp.model == "e":
        out.append(_Cut("head", "norm", "gamma", "beta"))
    return [c for c in out if c.gamma in params]


def _cut(params: Mapping[str, np.ndarray], c: _Cut) -> dict[str, np.ndarray]:
    g = np.asarray(params[c.gamma])
    p = {**params, c.gamma: np.zeros_like(g)}
    if c.beta in p:  # a fixed β with distinct entries: what comes after sees a column it can tell apart
        p[c.beta] = (np.arange(g.size, dtype=np.float64).reshape(g.shape) + 1.0) * (0.5 if g.size < 2 else
                                                                                    1.0 / (g.size - 1))
    return p


def _upstream_changed(params: Mapping[str, np.ndarray], variant: VariantSet) -> Optional[dict[str, np.ndarray]]:
    """Other token embeddings (or, when W_e is also the unembedding, other positions): what reaches a
    cut changes, what comes after it does not."""
    name = "W_p" if variant.unembedding == "tied" else "W_e"
    if name not in params:
        return None
    W = np.asarray(params[name], dtype=np.float64)
    return {**params, name: -1.5 * W[::-1] + 0.25}


def _chain(d: Divergence, mp: _ModelProbe, variant: VariantSet, base: dict[str, np.ndarray], prefix: str) -> None:
    """The model departs with every sublayer silenced: the departure is on the path that stays on.
    Each norm on it is cut in turn from the last (γ = 0, β fixed); the latest cut that still departs
    bounds the departure to what follows it, unless the model's output still depends on what precedes
    the cut (then the cut norm itself is not applied as the spec applies it). With no cut departing,
    the departure precedes the first norm: the residual path (pre-LN), or the embedding (tokens only,
    positions only, every column the same token)."""
    cuts = _cuts(mp, variant, base)
    after = [(c.where, c.sublayer) for c in cuts[1:]] + [("unembedding", "")]
    for k in range(len(cuts) - 1, -1, -1):
        c = cuts[k]
        cut = _cut(base, c)
        label = f"{c.where} {c.sublayer}".strip()
        r = mp.run(cut, f"sublayers silenced, {label} cut (γ = 0)")
        if r is None:
            d.detail = prefix + f"the model departs with every sublayer silenced; could not check it with {label} cut"
            return
        if r is False and _unsilenceable(str(mp.check.record[-1].get("note", ""))):
            continue  # a NaN passes through γ = 0: it comes from before the cut
        if r is False:
            first = mp.check.last_out
            moved = _upstream_changed(cut, variant)
            if moved is not None and mp.run(moved, "the same, other embeddings before the cut") is not None \
                    and mp.differs(first, mp.check.last_out):
                d.where, d.sublayer = c.where, c.sublayer
                d.detail = prefix + (f"with its γ = 0, {label} still passes on what reaches it: the model does "
                                     "not apply it as the spec does")
                return
            where, sub = after[k]
            _after_cut(d, mp, where, sub, label, prefix)
            return
    first_where = cuts[0].where if cuts else "unembedding"
    first_sub = cuts[0].sublayer if cuts else ""
    if _pre_ln_residual(d, mp, variant, base, prefix):
        return
    _embedding_or(d, mp, variant, base, (first_where, first_sub), prefix)


def _after_cut(d: Divergence, mp: _ModelProbe, where: str, sub: str, label: str, prefix: str) -> None:
    how = f"the model departs with every sublayer silenced and {label} cut (its output fixed), and only there"
    if where == "head":
        d.where, d.sublayer = "head", ""
        d.detail = prefix + how + ": the head (W_f, its activation or its norm, Algorithm 9 lines 10-11)"
    elif sub == "norm" and where != "head":  # two post-LN norms with a silenced sublayer between them
        d.where, d.sublayer = where, ""
        d.candidates = [f"{where}/norm", f"{where}/residual"]
        d.detail = prefix + how + f": {where}'s norm or its residual path (a silenced sublayer between them)"
    else:
        d.where, d.sublayer = where, sub
        d.detail = prefix + how + f": {where}"


def _pre_ln_residual(d: Divergence, mp: _ModelProbe, variant: VariantSet, base: dict[str, np.ndarray],
                     prefix: str) -> bool:
    """Pre-LN, with its sublayer silenced a layer is the identity whatever its norms' γ and β: if the
    model's output moves with them, that layer's residual path differs."""
    order = [o for o in mp.layers() if variant.resolved_norm_placement(_LAYERS[o[1]]) == "pre"
             and (mp.model != "ed" or o[0].startswith("dec_"))]
    order.sort(key=lambda o: (o[0].startswith("dec_"), int(o[0].split(".")[1])))
    if not order or mp.run(base, "every sublayer silenced (again)") is None:
        return False
    ref = mp.check.last_out
    for at, layer, where in order:
        moved = dict(base)
        for b in _blocks(layer):
            for name in (at + b.gamma, at + b.beta):
                if name in moved:
                    moved[name] = -2.0 * np.asarray(moved[name], dtype=np.float64) + 0.75
        if mp.run(moved, f"{where}'s norms changed, its sublayers silenced") is None:
            continue
        if mp.differs(ref, mp.check.last_out):
            d.where, d.sublayer = where, "residual"
            d.detail = prefix + (f"with its sublayers silenced {where} is the identity in the spec (pre-LN), yet the "
                                 "model's output moves with its norms' γ and β: the residual path adds what the "
                                 "norm returns")
            return True
    return False


def _moves_with_tokens(mp: _ModelProbe, params: dict[str, np.ndarray]) -> bool:
    """Whether the implementation's output, with ``params``, moves with the (decoder's) tokens as the
    spec's does: what the tokens pick reaches the output (a model whose path after the embedding
    ignores what reaches it does not)."""
    x = dict(mp.x)
    n_v = int(mp.hyper["N_V"])
    if n_v < 2 or "x" not in x:
        return False
    other = _ModelProbe(mp.check, mp.model, mp.entry, {**x, "x": (np.asarray(x["x"]) + 1) % n_v}, params,
                        mp.hyper, mp.variant)
    m = _moves(mp.check, lambda: mp.run(params, "the same, the case's tokens"),
               lambda: other.run(params, "the same, every token shifted by one"))
    return m is not None and m.impl and m.spec


def _embedding_or(d: Divergence, mp: _ModelProbe, variant: VariantSet, base: dict[str, np.ndarray],
                  first: tuple[str, str], prefix: str) -> None:
    """Before the first norm on the path: the embedding, or that first norm (or, with none, the
    unembedding). Tokens only (W_p = 0) against positions only (W_e = 0): a departure in one of them
    only is the embedding's. An output that does not move with W_e as the spec's does, yet moves with
    the tokens, is the embedding's (it embeds its tokens from another matrix). Then every token
    embedded as the same column (the embedding barely exercised): a departure there is the first
    norm's."""
    emb = "decoder embedding" if mp.model == "ed" else "embedding"
    how = prefix + "the model departs with every sublayer silenced and with each norm on the path cut, so before it"
    if "W_p" in base:
        tok = mp.run({**base, "W_p": np.zeros_like(base["W_p"])}, "sublayers silenced, tokens only (W_p = 0)")
        pos = mp.run({**base, "W_e": np.zeros_like(base["W_e"])}, "sublayers silenced, positions only (W_e = 0)")
        if {tok, pos} == {True, False}:
            d.where = emb
            d.detail = how + f": it departs with {'tokens' if tok is False else 'positions'} only, not with " \
                             f"{'positions' if tok is False else 'tokens'} only: the embedding's " \
                             f"{'tokens' if tok is False else 'positions'}"
            return
    # the embedding must read W_e: with every sublayer silenced and the cuts agreeing, a model whose
    # output does not move with the token embeddings while the spec's does embeds its tokens from
    # something else (another matrix, e.g. a W_u tied to the embedding the other way round)
    if "W_e" in base:
        ran = _ran(mp.check, mp.run(base, "every sublayer silenced (again)"))
        m = _moves(mp.check, ran, lambda: mp.run({**base, "W_e": _other(base["W_e"])},
                                                 "sublayers silenced, other token embeddings W_e"))
        if m is not None and m.only_spec() and _moves_with_tokens(mp, base):
            d.where = emb
            d.detail = how + (": its output does not move with the token embeddings W_e as the spec's does, yet "
                              "moves with the tokens: the embedding does not read W_e (it embeds its tokens from "
                              "something else)")
            return
    same = None
    if not variant.positions.startswith("sinusoid"):
        W = np.asarray(base["W_e"], dtype=np.float64)
        col = np.linspace(-1.0, 1.5, W.shape[0]) if W.shape[0] > 1 else np.ones(1)
        p = {**base, "W_e": np.repeat(col[:, None], W.shape[1], axis=1)}
        if "W_p" in p:
            p["W_p"] = np.zeros_like(p["W_p"])
        same = mp.run(p, "sublayers silenced, every token the same column, no positions")
    first_place = f"{first[0]}/{first[1]}" if first[1] else first[0]
    if same is False and first[1] == "norm" and first[0] != "head":  # post-LN: X + 0 reaches that norm
        d.where, d.candidates = first[0], [first_place, f"{first[0]}/residual"]
        d.detail = how + f": it departs when every token is embedded alike: {first[0]}'s norm or its residual path"
    elif same is False:
        d.where, d.sublayer = first
        d.detail = how + f": it departs when every token is embedded alike (the embedding barely exercised): " \
                         f"{first_place}"
    elif same is True and not variant.embedding_norm:
        d.where = emb
        d.detail = how + ": it agrees when every token is embedded alike: the embedding"
    else:
        d.candidates = [emb, first_place]
        d.detail = how + ": the case cannot tell the embedding from what first follows it"


# -- the implementation's own named intermediates ----------------------------------------------------

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


#: error/scale above which a named intermediate departs, per dtype: far above what rounding through a
#: small model does (a few hundred units of roundoff), far below what a changed convention does
_INTERMEDIATE_RTOL = {"float64": 1e-9, "float32": 1e-3, "bfloat16": 1e-1, "float16": 5e-2}


def _intermediates(member: Any, algorithm: str, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray],
                   hyper: Mapping[str, int], variant: VariantSet, dtype: str, budget: _Budget) -> str:
    """The first of the implementation's own named intermediates that departs from the spec's value
    ("" when it offers none, or none departs): the coarse names of the contract and the fine ones
    inside them (``spec_intermediates``), whichever it offers, compared in the order of the
    computation, relative to the spec value's largest magnitude (``_departs``)."""
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
            if _departs(value, want, rtol):
                return name
    except Exception:  # noqa: BLE001 - an optional help must never cost the failure its report
        return ""
    return ""


#: how far below every finite score a masked one must lie where the spec's is −∞ (e^−30 ≈ 1e-13: no
#: weight), for implementations that mask with a large negative number rather than −∞
_MASKED_BELOW = 30.0


def _departs(value: np.ndarray, want: np.ndarray, rtol: float) -> bool:
    """Whether an implementation's named intermediate departs from the spec's: by more than ``rtol``
    of the spec value's largest finite magnitude where that is finite; where the spec's is −∞ (a
    masked score S), ``value`` must be −∞ or lie ``_MASKED_BELOW`` below every finite score."""
    finite = np.isfinite(want)
    if not np.all(np.isfinite(value[finite])):
        return True
    scale = max(float(np.max(np.abs(want[finite]))) if finite.any() else 0.0, 1e-300)
    if finite.any() and float(np.max(np.abs(value[finite] - want[finite]))) > rtol * scale:
        return True
    masked = np.isneginf(want)
    if masked.any():
        low = float(np.min(want[finite])) if finite.any() else 0.0
        if not np.all((value[masked] == -np.inf) | (value[masked] <= low - _MASKED_BELOW)):
            return True
    return bool(np.any(np.isnan(want) != np.isnan(value)))


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

