"""Hypothesis strategies of the conformance harness, driven by the registry.

``cases(entry_name, dtype=, variants=, max_batch=, budget=)`` draws whole
``Case`` objects; the pieces are usable on their own, each named after what
it draws:

- ``variant_sets(entry)``: paper's set, preset projections, one or several
  switches of ``entry.switches`` changed (``EPSILONS`` for ε);
- ``hyperparameters(entry, variant=, budget=)``: sizes within ``BUDGETS``,
  satisfying the entry's checks by construction;
- ``inputs(entry, hyper, variant, dtype=, style=)``; ``parameters(entry,
  hyper, variant, dtype=, style=, inputs=)``: float64 arrays from seeded NumPy
  generators, shaped by a style (``STYLES``) and kept inside the dtype;
- ``masks(ell_z, ell_x, allow_empty=)``, ``token_sequences(N_V, ell)``,
  ``tokens(N_V)``, ``positions(ell_max)``.

No algorithm is named here: everything is read from the entry's fields
(hyperparameter names, input kinds and shapes, parameter schema, switches).
"""

from __future__ import annotations

from ._cases import cases
from ._hyper import hyperparameters
from ._inputs import inputs
from ._masks import MASK_FAMILIES, causal_mask, mask_family, masks
from ._options import BUDGETS, Budget
from ._params import parameters
from ._styles import STYLES, available_styles
from ._tokens import TOKEN_FAMILIES, positions, token_family, token_sequences, tokens
from ._values import MAGNITUDES, Magnitudes
from ._variants import EPSILONS, preset_projections, variant_sets

__all__ = [
    "BUDGETS",
    "Budget",
    "EPSILONS",
    "MAGNITUDES",
    "MASK_FAMILIES",
    "Magnitudes",
    "STYLES",
    "TOKEN_FAMILIES",
    "available_styles",
    "cases",
    "causal_mask",
    "hyperparameters",
    "inputs",
    "mask_family",
    "masks",
    "parameters",
    "positions",
    "preset_projections",
    "token_family",
    "token_sequences",
    "tokens",
    "variant_sets",
]
