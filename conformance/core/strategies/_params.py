"""Parameters θ: every flat name of the entry's schema under a variant.

Hypothesis draws the seed; the values are ``parameter_values`` of the one
value builder (``conformance/core/values/``: roles read from flat names and
symbolic shapes, styles, logits aimed for sampling entries).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import numpy as np
from hypothesis import strategies as st

from ftspec.spec.variants import PAPER, VariantSet

from ..value_flow import symbolic_schema
from ..values import check_style, parameter_role, parameter_values
from ._budgets import resolve_dtype, resolve_entry
from ._draws import seeds

__all__ = ["parameter_role", "parameter_values", "parameters"]


@st.composite
def parameters(draw: st.DrawFn, entry: Any, hyper: Mapping[str, int], variant: VariantSet = PAPER, *,
               dtype: str = "float64", style: str = "well-scaled",
               inputs: Optional[Mapping[str, np.ndarray]] = None) -> dict[str, np.ndarray]:
    """{flat name: float64 array} for ``entry`` under ``variant`` with sizes ``hyper``.

    Hypothesis draws the seed; a parameter's values depend only on the seed,
    its name, its shape and the style (not on the variant), except where
    large-logits aims them. ``inputs``: the case's inputs, at which
    large-logits aims its scores and logits (without them, stand-ins).
    """
    e = resolve_entry(entry)
    dtype = resolve_dtype(dtype)
    check_style(style)
    if not symbolic_schema(e, variant, hyper):
        return {}
    return parameter_values(e, hyper, variant, seed=draw(seeds), dtype=dtype, style=style, inputs=inputs)
