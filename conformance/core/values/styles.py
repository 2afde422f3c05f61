"""The value styles, and the real inputs built in them."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ftspec.spec.params import resolve_shape
from ftspec.spec.registry import Entry
from ftspec.spec.variants import VariantSet

from ..dtypes import FORMATS
from ..value_flow import norms
from .magnitudes import (MAGNITUDES, generator, near_constant_columns, quiet_columns, separate_columns,
                         signed_log_uniform)


#: what the values look like (``conformance/core/strategies/_styles.py`` says what each does
#: and which an entry can show)
STYLES = ("well-scaled", "large-logits", "near-constant", "wide-range", "sparse", "near-epsilon", "subnormal")


#: well-scaled models of sampling entries: the largest |logit|, log-uniform in this range
SAMPLING_LOGITS = (2.0, 8.0)


def check_style(style: str) -> str:
    if style not in STYLES:
        raise ValueError(f"style: expected one of {list(STYLES)}, given {style!r}")
    return style


def _check_dtype(dtype: str) -> str:
    if dtype not in FORMATS:
        raise ValueError(f"dtype: expected one of {sorted(FORMATS)}, given {dtype!r}")
    return dtype


def real_input(entry: Entry, spec: Any, hyper: Mapping[str, int], variant: VariantSet, *, seed: int,
               dtype: str = "float64", style: str = "well-scaled") -> np.ndarray:
    """One real input (kind ``real``): "wide-range" draws ±10^U(lo, hi);
    "near-constant" gives near-constant columns to an input whose rows are a
    normalised width, "near-epsilon" columns whose mean square is near ε
    (``quiet_columns``); the other styles draw N(0, 1). An input whose rows
    reach a layer norm never holds a column that rounds to a constant in
    ``dtype``."""
    m = MAGNITUDES[dtype]
    kinds = {n.width: n.kind for n in norms(entry, variant, hyper)}
    shape = resolve_shape(spec.shape, hyper)
    rng = generator(seed, spec.name)
    feeds = spec.shape[0] in kinds if spec.shape else None
    if style == "wide-range":
        x = signed_log_uniform(rng, shape, *m.wide)
    elif style == "near-epsilon" and feeds:
        x = quiet_columns(rng, shape, m)
    elif style == "near-constant" and feeds:
        x = near_constant_columns(rng, shape, m)
    else:
        x = rng.standard_normal(shape)
    if feeds and kinds[spec.shape[0]] == "layer_norm":
        x = separate_columns(x, dtype)
    return x
