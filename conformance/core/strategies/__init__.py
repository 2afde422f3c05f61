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
  generators, shaped by a style (``STYLES``) and kept inside the dtype; the
  real values and parameters are the one value builder's
  (``conformance/core/values/``: ``real_input``, ``parameter_values(...,
  seed=)``) for a drawn seed;
- ``masks(ell_z, ell_x, allow_empty=)``, ``token_sequences(N_V, ell)``,
  ``tokens(N_V)``, ``positions(ell_max)``;
- training and inference (Algorithms 11-15, sized by ``MODEL_BUDGETS``):
  ``lengths(N, width)`` and ``datasets(N_V, lengths, width)`` (padded with
  token 0), ``flags(shape)``, ``probabilities(dtype)``, ``rates(dtype)``,
  ``variates(shape, dtype, at=)``, ``distributions(N_V, dtype)``,
  ``temperatures(dtype)``, and ``aimed(entry, hyper, variant, inputs,
  params, dtype)``: variates moved to CDF boundaries and scalar tokens set to
  tokens the model produces, found by running the spec.

No algorithm is named here: everything is read from the entry's fields
(hyperparameter names, input kinds, shapes and bounds, parameter schema,
switches, family, ``batchable``, ``trace``).
"""

from __future__ import annotations

from ._cases import cases
from ._datasets import FLAG_FAMILIES, LENGTH_FAMILIES, RATE_FAMILIES, datasets, flags, lengths, probabilities, rates
from ._hyper import hyperparameters
from ._inputs import inputs
from ._masks import MASK_FAMILIES, PADDING_FAMILIES, causal_mask, mask_family, masks, paddings
from ._budgets import BUDGETS, MODEL_BUDGETS, Budget
from ._params import parameter_values, parameters
from ._sampling import (
    DISTRIBUTION_FAMILIES,
    TEMPERATURE_FAMILIES,
    VARIATE_FAMILIES,
    aimed,
    distributions,
    temperatures,
    variates,
)
from ._styles import SAMPLING_LOGITS, STYLES, available_styles
from ._tokens import TOKEN_FAMILIES, positions, token_family, token_sequences, tokens
from ._draws import MAGNITUDES, Magnitudes
from ._variants import EPSILONS, preset_projections, variant_sets

__all__ = [
    "BUDGETS",
    "Budget",
    "DISTRIBUTION_FAMILIES",
    "EPSILONS",
    "FLAG_FAMILIES",
    "LENGTH_FAMILIES",
    "MAGNITUDES",
    "MASK_FAMILIES",
    "PADDING_FAMILIES",
    "MODEL_BUDGETS",
    "Magnitudes",
    "RATE_FAMILIES",
    "SAMPLING_LOGITS",
    "STYLES",
    "TEMPERATURE_FAMILIES",
    "TOKEN_FAMILIES",
    "VARIATE_FAMILIES",
    "aimed",
    "available_styles",
    "cases",
    "causal_mask",
    "datasets",
    "distributions",
    "flags",
    "hyperparameters",
    "inputs",
    "lengths",
    "mask_family",
    "masks",
    "paddings",
    "parameter_values",
    "parameters",
    "positions",
    "preset_projections",
    "probabilities",
    "rates",
    "temperatures",
    "token_family",
    "token_sequences",
    "tokens",
    "variant_sets",
    "variates",
]
