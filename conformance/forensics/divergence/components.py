"""The component probe: a layer's or an embedding's own component entries on the spec's values.

``component_departures`` lists the sublayers of a layer whose component entries (``mh_attention``
and the other attention entries, ``layer_norm``/``rms_norm``) depart on the spec's values inside
the layer (forensics/distinct_failures/ asks it); ``_embedding_parts`` checks ``token_embedding`` and
``positional_embedding`` where a plugin lacks ``embedding``.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import numpy as np

from ftspec.spec import SpecError
from ftspec.spec.variants import VariantSet

from .checking import _Budget, _Checker
from .layer_probe import _LayerProbe
from .record import SECONDS, Divergence
from .walk import _LAYER_INPUT, Step, _l, _layer_step

__all__ = ["component_departures"]


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
