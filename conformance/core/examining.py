"""Examining a case: the one sequence every caller that judges an implementation on a case runs.

A case is judged in four steps, always the same: its values rounded to the dtype (``rounded``), the
spec's reference under the variant set at the precision the implementation declares for the dtype
(``precision_of``: a plugin that accumulates in float32 at bfloat16 is held to that arithmetic's
bound), the same for each input set of the case's batch (``judged_case``), and the examination
(``execute.examine``: the call, the judgement, the determinism, mutation and batch checks;
``examine_case``). Written out by hand at each use, a step was sometimes left out (a precision not
passed, a batch judged against the single case's reference); here each step has one home, so a
change of the rounding or of the tolerance policy is one change. A caller that needs only a step
(the values a forensic tool calls a plugin with, the precision a diagnosis judges under) takes that
step from here, never builds ``Prepared`` or reads ``precision_for`` itself.

The search itself examines blocks of value sets against references it evaluates together and
screens (``running/drawn_case.py``): it takes ``rounded`` and ``execute.examine`` directly, and a
failure it reports is judged again as ``judged_case`` judges it (``Runner.alone``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Union

import numpy as np

from ftspec.spec.registry import Entry
from ftspec.spec.variants import VariantSet

from .calling import Prepared
from .case import Case
from .execute import Member, Outcome, examine
from .tolerances import Reference, reference

__all__ = ["Judged", "examine_case", "judged_case", "judged_for", "precision_of", "rounded"]


@dataclass
class Judged:
    """A case as it is judged at one dtype and precision: its values rounded to the dtype, the
    spec's reference, and each batch input set with its own reference."""

    prepared: Prepared
    reference: Reference
    batch: list[tuple[Mapping[str, np.ndarray], Reference]] = field(default_factory=list)


def rounded(of: Union[Case, Entry], dtype: str, *, inputs: Optional[Mapping[str, np.ndarray]] = None,
            params: Optional[Mapping[str, np.ndarray]] = None) -> Prepared:
    """The values an implementation is called with and the spec evaluated on at ``dtype``: a case's
    inputs and parameters (``inputs``: another input set of it, a batch's, sharing its parameters),
    or, for an entry, the ``inputs`` and ``params`` given (a piece of a model, a refused case),
    rounded to ``dtype`` (reals; tokens, positions and masks copied). Only the computation is
    judged, never the rounding of the values it was given (``calling``'s module docstring)."""
    if isinstance(of, Case):
        return Prepared(of.entry, of.inputs if inputs is None else inputs, of.params if params is None else params,
                        dtype)
    if inputs is None or params is None:
        raise TypeError(f"rounded({of.name!r}, ...): an entry's inputs and params are both needed")
    return Prepared(of, inputs, params, dtype)


def precision_of(implementation: Any, dtype: str) -> str:
    """The precision ``implementation`` (an ``Implementation``, or a ``Member`` of one) is judged
    under at ``dtype`` (``Implementation.precision_for``: its tier and the formats it declares wider
    than ``dtype``); "highest", what the stored fixture bounds assume, for an object that declares
    none (a test's stand-in for a plugin)."""
    impl = implementation.impl if isinstance(implementation, Member) else implementation
    declared = getattr(impl, "precision_for", None)
    return str(declared(dtype)) if declared is not None else "highest"


def judged_case(case: Case, dtype: str, precision: str, *, variant: Optional[VariantSet] = None,
                batch: bool = True) -> Judged:
    """``case`` at ``dtype`` with the spec's references under ``variant`` (the case's own by default)
    at ``precision`` (no default: a precision left out once let a plugin be judged at the wrong
    one; ``judged_for`` takes an implementation's); ``batch``: its batch input sets too
    (``case.batch``, sharing its parameters). Raises the spec's refusal (``SpecError``) or
    ``ToleranceModelError`` as ``reference`` does."""
    entry = case.entry
    variant = variant if variant is not None else case.variant
    prepared = rounded(case, dtype)
    ref = reference(entry, prepared.inputs, prepared.params, hyper=case.hyper, variant=variant, dtype=dtype,
                    precision=precision)
    extras: list[tuple[Mapping[str, np.ndarray], Reference]] = []
    for inputs in (case.batch if batch else []):
        p = rounded(case, dtype, inputs=inputs)
        extras.append((p.inputs, reference(entry, p.inputs, p.params, hyper=case.hyper, variant=variant,
                                           dtype=dtype, precision=precision)))
    return Judged(prepared, ref, extras)


def judged_for(implementation: Any, case: Case, dtype: str, *, variant: Optional[VariantSet] = None,
               batch: bool = True) -> Judged:
    """``judged_case`` at the precision ``implementation`` (or a ``Member`` of one) declares for
    ``dtype`` (``precision_of``): how every judge of a plugin takes the spec's reference."""
    return judged_case(case, dtype, precision_of(implementation, dtype), variant=variant, batch=batch)


def examine_case(member: Member, case: Case, dtype: str, *, timeout: float, variant: Optional[VariantSet] = None,
                 batch: bool = True) -> Outcome:
    """Every per-example check of ``member`` on ``case`` at ``dtype``, judged against the spec under
    ``variant`` (the case's own by default) at the precision the member's implementation declares
    for ``dtype``. Raises the spec's refusal as ``judged_case`` does (the member is not called)."""
    judged = judged_for(member, case, dtype, variant=variant, batch=batch)
    return examine(member, case, judged.prepared.inputs, judged.prepared.params, judged.reference, dtype=dtype,
                   timeout=timeout, batch=judged.batch)
