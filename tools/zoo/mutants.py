"""The catalogue of mutants: one realistic bug each, the algorithms it breaks,
where such a bug was seen (../shared/CONVENTIONS.md lists public threads),
and the dtypes at which it is honestly undetectable.

Most bugs are one-line source edits of the bundled NumPy plugin's own helpers
(``source_edit``: reports show the edit), so composite algorithms inherit
them as real code would; some wrap the plugin (a changed variant, changed
inputs or outputs, misbehaviour), and a few are on the PyTorch plugin.

``breaks`` lists every registry entry whose code path reaches the bug under
some variant; ``targets`` the entries ``ftspec bench power`` searches (a
cheap subset, chosen so that every entry of the registry is searched by some
mutant); ``dtypes`` the dtypes it is run at. The lists live in
``catalogue_*.py``; shared vocabulary in ``groups.py``.
"""

from __future__ import annotations

from . import (
    catalogue_combined, catalogue_components, catalogue_families, catalogue_llama, catalogue_models, catalogue_torch,
    catalogue_training,
)
from .injection import Mutant

__all__ = ["MUTANTS", "mutant"]

MUTANTS: dict[str, Mutant] = {}
for _m in (catalogue_components.MUTANTS + catalogue_models.MUTANTS + catalogue_training.MUTANTS
           + catalogue_llama.MUTANTS + catalogue_families.MUTANTS + catalogue_torch.MUTANTS
           + catalogue_combined.MUTANTS):
    if _m.id in MUTANTS:
        raise ValueError(f"duplicate mutant id {_m.id!r}")
    MUTANTS[_m.id] = _m
del _m


def mutant(mutant_id: str) -> Mutant:
    try:
        return MUTANTS[mutant_id]
    except KeyError:
        raise ValueError(f"unknown mutant {mutant_id!r}; known: {', '.join(MUTANTS)}") from None
