"""Mutants with several independent bugs at once, every one of which a run must report.

A search that stops at its first failure shows one bug of such an
implementation, the one its smallest case reaches; ``conformance/forensics/distinct_failures.py``
keeps searching for failures with other signatures. These members are the
test of that: each bug alone is a catalogue mutant, and every one of them
must be reported.
"""

from __future__ import annotations

from .catalogue_models import MUTANTS as _MODELS
from .groups import NORM_USERS, add_epsilon, crash_when_short
from .injection import Mutant, combine, replace_function, swap_variant

_BY_ID = {m.id: m for m in _MODELS}


def _bug(mutant_id: str) -> tuple:
    """(wrapper, breaks) of a catalogue mutant, to combine with others."""
    m = _BY_ID[mutant_id]
    return m.wrap, m.breaks

#: the DTransformer entries whose token input is ``x`` (the crash reads its length)
_D_WITH_X = ("d_transformer", "d_loss", "d_gradient", "d_sgd_step")

MUTANTS = [
    Mutant("two-bugs-short-crash-epsilon",
           "two independent bugs: a crash whenever ℓ < ℓ_max, and layer norm's ε = 1e-5 inside the root",
           tuple(dict.fromkeys(_D_WITH_X + NORM_USERS)),
           combine((replace_function(crash_when_short), _D_WITH_X), (swap_variant(add_epsilon(1e-5)), NORM_USERS)),
           source="a public implementation reported to the project: a crash for ℓ < ℓ_max hidden behind another "
                  "bug",
           bench=("d_transformer",), tags=("combined",)),
    Mutant("three-bugs-residual-softmax-crash",
           "a reported public implementation: a pre-LN residual taken from the normalised X, the final softmax "
           "over positions, and a crash whenever ℓ < ℓ_max",
           tuple(dict.fromkeys(_D_WITH_X + _BY_ID["pre-ln-residual-normalised"].breaks
                               + _BY_ID["unembedding-softmax-over-tokens"].breaks)),
           combine(_bug("pre-ln-residual-normalised"), _bug("unembedding-softmax-over-tokens"),
                   (replace_function(crash_when_short), _D_WITH_X)),
           source="a public implementation reported to the project: its whole-model failure shrank to "
                  "ℓ = ℓ_max = 1 and showed one bug",
           bench=("d_transformer",), tags=("combined",)),
]


