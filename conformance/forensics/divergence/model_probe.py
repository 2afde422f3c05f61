"""The model probe: the model entry itself under other parameters (possibly fewer layers).

Used when every entry agrees on its own, or could not be checked (``whole_model``):
``_ModelProbe`` runs the model entry on the case's tokens, ``_ModelLayerProbe`` probes one layer
through it (the layer probe's questions, asked of the model), ``_cuts`` lists the norms on the
path that stays on with every sublayer silenced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

import numpy as np

from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import VariantSet

from .walk import _blocks
from .checking import _Checker
from .layer_probe import _LayerProbe
from .walk import _LAYERS, Step


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

    def layers(self) -> list[tuple[str, str, str]]:
        """(parameter prefix, layer entry, place) of every layer, in the order the walk switches them
        on: the decoder's first for the encoder-decoder (its encoder silenced: only the cross-attention
        reads it), then the encoder's."""
        out = [(f"{prefix}.{l}.", layer, f"{place} {l}")
               for prefix, count, layer, place in _STACKS[self.model] for l in range(self.hyper[count])]
        return [o for o in out if o[0].startswith("dec_")] + [o for o in out if not o[0].startswith("dec_")]


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
    """The norms that stay on with every sublayer silenced and can be cut (they have a γ), in the
    order the model runs them (only the decoder's for the encoder-decoder: its encoder is then read
    by nothing)."""
    return [c for c in _path_norms(mp, variant) if c.gamma in params]


def _uncuttable(mp: _ModelProbe, variant: VariantSet, params: Mapping[str, np.ndarray]) -> list[str]:
    """The places of the norms on that path that have no γ to cut (``affine=none``): a departure
    after one of them cannot be told from one before it by cutting."""
    places = [f"{c.where}/{c.sublayer}" if c.sublayer else c.where for c in _path_norms(mp, variant)
              if c.gamma not in params]
    return list(dict.fromkeys(places))  # a layer's two norms are one place


def _path_norms(mp: _ModelProbe, variant: VariantSet) -> list[_Cut]:
    """Every norm on the path that stays on with every sublayer silenced, in the model's order."""
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
    return out


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
