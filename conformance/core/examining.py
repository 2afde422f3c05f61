"""Examining a case: the one sequence every caller that judges an implementation on a case runs.

A case is judged in four steps, always the same: its values rounded to the dtype (``Prepared``),
the spec's reference under the variant set at the precision the implementation declares for the
dtype (``Implementation.precision_for``: a plugin that accumulates in float32 at bfloat16 is held
to that arithmetic's bound), the same for each input set of the case's batch, and the examination
(``execute.examine``: the call, the judgement, the determinism, mutation and batch checks). Written
out by hand at each use, a step was sometimes left out (a precision not passed, a batch judged
against the single case's reference); here it is one call, so a change of the tolerance policy is
one change.

The search itself examines blocks of value sets against references it evaluates together and
screens (``running/drawn_case.py``): it takes ``prepared`` and ``execute.examine`` directly, and a
failure it reports is judged again as ``judged_case`` judges it (``Runner.alone``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional

import numpy as np

from ftspec.spec.variants import VariantSet

from .calling import Prepared
from .case import Case
from .execute import Member, Outcome, examine
from .tolerances import Reference, reference

__all__ = ["Judged", "examine_case", "judged_case"]


@dataclass
class Judged:
    """A case as it is judged at one dtype and precision: its values rounded to the dtype, the
    spec's reference, and each batch input set with its own reference."""

    prepared: Prepared
    reference: Reference
    batch: list[tuple[Mapping[str, np.ndarray], Reference]] = field(default_factory=list)


def judged_case(case: Case, dtype: str, precision: str = "highest", *, variant: Optional[VariantSet] = None,
                batch: bool = True) -> Judged:
    """``case`` at ``dtype`` with the spec's references under ``variant`` (the case's own by default)
    at ``precision``; ``batch``: its batch input sets too (``case.batch``, sharing its parameters).
    Raises the spec's refusal (``SpecError``) or ``ToleranceModelError`` as ``reference`` does."""
    entry = case.entry
    variant = variant if variant is not None else case.variant
    prepared = Prepared(entry, case.inputs, case.params, dtype)
    ref = reference(entry, prepared.inputs, prepared.params, hyper=case.hyper, variant=variant, dtype=dtype,
                    precision=precision)
    extras: list[tuple[Mapping[str, np.ndarray], Reference]] = []
    for inputs in (case.batch if batch else []):
        p = Prepared(entry, inputs, case.params, dtype)
        extras.append((p.inputs, reference(entry, p.inputs, p.params, hyper=case.hyper, variant=variant,
                                           dtype=dtype, precision=precision)))
    return Judged(prepared, ref, extras)


def examine_case(member: Member, case: Case, dtype: str, *, timeout: float, variant: Optional[VariantSet] = None,
                 batch: bool = True) -> Outcome:
    """Every per-example check of ``member`` on ``case`` at ``dtype``, judged against the spec under
    ``variant`` (the case's own by default) at the precision the member's implementation declares
    for ``dtype``. Raises the spec's refusal as ``judged_case`` does (the member is not called)."""
    judged = judged_case(case, dtype, member.impl.precision_for(dtype), variant=variant, batch=batch)
    return examine(member, case, judged.prepared.inputs, judged.prepared.params, judged.reference, dtype=dtype,
                   timeout=timeout, batch=judged.batch)
