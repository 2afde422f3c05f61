"""The layer probe: the checks made inside one departing layer.

``_LayerProbe`` runs the layer entry under other parameters or inputs, and the component entries
(``layer_norm``/``rms_norm``, every attention entry offered, ``unidirectional_mask``) fed the
spec's values inside the layer (``layer_walk``). ``model_probe._ModelLayerProbe`` runs the same
probes through the model entry instead.
"""

from __future__ import annotations

import copy
from typing import Optional

import numpy as np

from ftspec.spec import SpecError
from ftspec.spec.variants import VariantSet

from .ablations import _other
from .checking import _Checker
from .walk import _LAYER_INPUT, _LAYERS, Block, Step, _a, _l, _norm_params, _strip, layer_walk


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
