"""One set of inputs for an entry: every ``TensorSpec`` of ``entry.inputs``.

Kinds: real → a float64 array shaped by the style; token → a token ID or a
token sequence; position → a position; mask → a mask (all-False columns only
when the variant's ``empty_query`` is not "error").

Styles act on real inputs: "wide-range" draws ±10^U(lo, hi); "near-constant"
gives near-constant columns to every input whose rows are a normalised width
(it reaches a norm: directly in the norms, first in pre-LN layers); the other
styles draw N(0, 1). Inputs that reach a layer norm never hold a column that
rounds to a constant in the case's dtype.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from hypothesis import strategies as st

from ftspec.spec.params import resolve_shape
from ftspec.spec.variants import PAPER, VariantSet

from ._anatomy import INDEX_LIMITS, norms
from ._masks import masks
from ._options import resolve_dtype, resolve_entry
from ._styles import check_style
from ._tokens import positions, token_sequences, tokens
from ._values import MAGNITUDES, generator, near_constant_columns, seeds, separate_columns, signed_log_uniform

__all__ = ["inputs"]


@st.composite
def inputs(draw: st.DrawFn, entry: Any, hyper: Mapping[str, int], variant: VariantSet = PAPER, *,
           dtype: str = "float64", style: str = "well-scaled") -> dict[str, np.ndarray]:
    """{input name: array} for ``entry`` with the shapes ``hyper`` gives."""
    e = resolve_entry(entry)
    dtype = resolve_dtype(dtype)
    check_style(style)
    m = MAGNITUDES[dtype]
    kinds = {n.width: n.kind for n in norms(e, variant, hyper)}
    seed = draw(seeds) if any(s.kind == "real" for s in e.inputs) else 0
    out: dict[str, np.ndarray] = {}
    for spec in e.inputs:
        shape = resolve_shape(spec.shape, hyper)
        if spec.kind == "real":
            rng = generator(seed, spec.name)
            feeds = spec.shape[0] in kinds if spec.shape else None
            if style == "wide-range":
                x = signed_log_uniform(rng, shape, *m.wide)
            elif style == "near-constant" and feeds:
                x = near_constant_columns(rng, shape, m)
            else:
                x = rng.standard_normal(shape)
            if feeds and kinds[spec.shape[0]] == "layer_norm":
                x = separate_columns(x, dtype)
            out[spec.name] = x
        elif spec.kind == "token":
            limit = hyper[INDEX_LIMITS["token"]]
            out[spec.name] = draw(token_sequences(limit, shape[0]) if shape else tokens(limit))
        elif spec.kind == "position":
            out[spec.name] = draw(positions(hyper[INDEX_LIMITS["position"]]))
        elif spec.kind == "mask":
            out[spec.name] = draw(masks(*shape, allow_empty=variant.empty_query != "error"))
        else:
            raise ValueError(f"{e.name}: no strategy for input {spec.name!r} of kind {spec.kind!r}")
    return out
