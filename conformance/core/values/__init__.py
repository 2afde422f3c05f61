"""One way to build the values of a concrete case.

``build(entry, hyper, variant, seed=, style=, dtype=)`` is a deterministic
function: the same arguments give the same inputs and parameters, bit for
bit. Everything that makes a concrete case reads it:

- the strategies (``conformance/strategies``): Hypothesis draws the seed
  (it shrinks to 0) and the structure around it, and the real inputs and
  parameters come from here (``real_input``, ``parameter_values``);
- the fixtures (``fixtures/values.py``): the builder's values for a seed
  taken from the case id, with the fixtures' own choices on top (token,
  mask and data styles, float32 rounding, settled variates); the catalogue
  (``fixtures/cases.py``) takes its sizes (``DEFAULT_HYPER``) and variant
  sets (``variant_enumeration``) from here;
- the fixed cases of the plugin tests (``tests/impls/cases.py``), the
  spec's self-tests (``tests/spec/helpers.py``) and the zoo's witnesses
  (``tools/zoo/witness.py``).

This module also holds the one table of default hyperparameters
(``DEFAULT_HYPER``: each entry's ``sizes``, declared in its ``Entry``) and
the one enumeration of the variant sets worth a fixed case
(``variant_enumeration``: the paper's, the presets, each switch moved,
combinations that bite together; the strategies' random draws read the
same switch values, ``SWITCHES`` and ``EPSILONS``).

Arrays come from ``numpy.random.Generator`` seeded by (seed, a stable hash
of the array's name), so the same seed gives a parameter the same values
under every variant set: two variants then differ only where their
switches differ.

One idea a module: ``sizes`` (the default hyperparameters), ``enumeration`` (the variant
sets worth a fixed case, and ε's values), ``magnitudes`` (seeded generators and the value
shapes of the real inputs), ``styles`` (the styles and the real inputs built in them),
``parameters`` (each parameter's values, the subnormal and large-logit styles) and ``building``
(inputs of every kind, and ``build``).
"""

from __future__ import annotations

from .building import build
from .enumeration import EPSILONS, PLACED_EPSILON, stated_by_twin, variant_enumeration
from .enumeration import EPSILON_CANDIDATES as EPSILON_CANDIDATES  # the forensics' ε values
from .magnitudes import (MAGNITUDES, Magnitudes, generator, near_constant_columns, quiet_columns, separate_columns,
                         signed_log_uniform, standardised)
from .parameters import parameter_role, parameter_values, subnormal_range
from .sizes import DEFAULT_HYPER, default_hyper, fit_widths
from .styles import SAMPLING_LOGITS, STYLES, check_style, real_input

__all__ = ["DEFAULT_HYPER", "stated_by_twin", "fit_widths", "EPSILONS", "MAGNITUDES", "Magnitudes", "PLACED_EPSILON",
           "SAMPLING_LOGITS", "STYLES", "build", "check_style", "default_hyper", "generator", "near_constant_columns",
           "parameter_role", "quiet_columns", "subnormal_range", "parameter_values", "real_input", "separate_columns",
           "signed_log_uniform", "standardised", "variant_enumeration"]
