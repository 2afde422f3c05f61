"""Replaying a saved case file against an implementation.

A case file is untrusted input (it may come from anyone): it is validated
by ``casefile.read_case`` before anything is allocated, and the
implementation it names is only shown, never imported; the user names the
one to run. Any dtype or device in the file is checked against the
implementation's own lists before use.

What the case was recorded under must be something the implementation
declares, or the replay is refused with one line that says what to change:

- the variant set: the case's own, or a declared one that differs from it
  only in switches that change rounding, not the mathematics (the rule the
  fixture replay follows, ``fixture_replay.replay_variant``); the case then
  runs under the declared one. A plugin is never judged, or called, under a
  set it does not declare (torch-nn on a case without γ raised KeyError);
- the dtype (``--dtype``), the device (``--device``), the algorithm, and the
  plugin's shape limits.

A case the spec refuses as it is (a drawn query with no key under
``empty_query="error"``: the search's ``refusal`` failure records that case)
has no reference: its replay is a refusal check, the spec's refusal being
the expected answer (``refusals.expect_refusal``, as the search judged it).
An implementation that answers it with numbers fails the replay with the
refusal's message; one that raises passes. Any other refusal of the spec is
still the one-line error it was (the case is not one the spec judges).

Devices match by name, where a bare platform name and that platform's
device 0 are one device: a case recorded on ``cpu`` (PyTorch's name)
replays on ``cpu:0`` (JAX's) and the other way round; ``cuda`` and
``cuda:0`` likewise. Any other difference is refused.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence


from ftspec.impls.api import Implementation
from ftspec.impls.discovery import load_target
from ftspec.spec.variants import ROUNDING_ONLY, SAME_MATHEMATICS, VariantSet

from ..core.calling import Prepared
from ftspec.spec import SpecError

from ..core.refusals import check_refusals_into, expect_refusal, refused_empty_query
from ..core.case import Case
from ..core.casefile import read_case
from ..core.examining import examine_case, judged_for, rounded
from ..core.execute import Member
from .fixture_replay import replay_variant
from ..core.tolerances import ToleranceModelError, keeping_references

__all__ = ["ReplayError", "ReplayOutcome", "replay", "same_device"]


@dataclass
class ReplayOutcome:
    """A replayed case file's outcome: whether it conforms, the text shown, the worst error/bound."""

    ok: bool
    text: str
    ratio: float


class ReplayError(ValueError):
    """The replay cannot be made as asked (one-line message)."""


def same_device(a: str, b: str) -> bool:
    """Whether device names ``a`` and ``b`` name one device: equal, or a bare platform name and that
    platform's device 0 (``cpu`` and ``cpu:0``, ``cuda`` and ``cuda:0``)."""
    def canonical(name: str) -> str:
        return name if ":" in name else f"{name}:0"
    return a == b or canonical(a) == canonical(b)


@keeping_references()  # the case is checked alone, then examined with its batch
def replay(path: Path | str, *, impl: str, dtype: Optional[str] = None,
           device: Optional[str] = None, timeout: float = 60.0) -> ReplayOutcome:
    """Judge ``impl`` (a registered name or ``module:object`` the user gives; never the name the
    file records) on the case in ``path``."""
    case, doc = read_case(path)
    if not impl:
        raise ReplayError(f"{path}: name the implementation to run with --impl (the file records "
                          f"{doc.get('impl')!r}; it is not loaded from the file)")
    implementation = load_target(impl)
    label = impl

    def again(*options: str) -> str:
        """The replay command with ``options``: what to run instead."""
        return " ".join(["ftspec replay", shlex.quote(str(path)), "--impl", shlex.quote(impl), *options])

    if case.algorithm not in implementation.algorithms:
        raise ReplayError(f"{path}: {label} does not implement {case.algorithm}")
    variant = _variant(path, label, implementation, case)
    chose = ("--dtype", dtype) if dtype else ()
    dtype = dtype or doc.get("dtype") or "float64"
    if dtype not in tuple(implementation.dtypes):
        whose = "" if chose else " (the dtype the case was recorded at)"
        raise ReplayError(f"{path}: {label} does not declare dtype {dtype!r}{whose} (it declares "
                          f"{', '.join(implementation.dtypes)}); choose one: "
                          f"{again('--dtype', implementation.dtypes[0])}")
    try:
        devices = [str(d) for d in implementation.devices()]
    except Exception as exc:  # noqa: BLE001 - the plugin's failure, one line
        raise ReplayError(f"{path}: {label}'s devices() raised {type(exc).__name__}: {exc}") from None
    given = bool(device)
    asked = device or doc.get("device") or "cpu"
    chosen = next((d for d in devices if d == asked), None) or next((d for d in devices if same_device(d, asked)), None)
    if chosen is None:
        whose = "" if given else " (the device the case was recorded on)"
        fix = f"; choose one: {again(*chose, '--device', devices[0])}" if devices else ""
        raise ReplayError(f"{path}: {label} has no device {asked!r}{whose} (it lists {', '.join(devices) or 'none'})"
                          f"{fix}")
    device = chosen
    if not implementation.admits(case.algorithm, case.hyper):
        hyper = ", ".join(f"{k}={v}" for k, v in case.hyper.items())
        raise ReplayError(f"{path}: the case ({hyper}) lies outside {label}'s limits for {case.algorithm} "
                          f"({implementation.limits_for(case.algorithm).describe()}); it cannot be replayed there")
    recorded_variant = case.variant
    if variant != case.variant:
        case = Case(case.algorithm, case.hyper, variant, case.inputs, case.params, case.batch, case.style)
    entry = case.entry
    recorded = doc.get("impl")
    where = f" ({'asked for' if given else 'recorded on'} {asked!r}: the same device)" if device != asked else ""
    head = f"{case.algorithm}: {label} at {dtype} on {device}{where}\n  case: {case.describe()}\n"
    if variant != recorded_variant:
        head += (f"  recorded under {recorded_variant.describe()}; run under {label}'s declared set, which differs "
                 f"from it only in switches that change rounding, not the mathematics\n")
    head += f"  recorded for: {recorded!r} (shown only; the file's implementation is never loaded)"
    member = Member(label, implementation, device)
    try:  # the case alone first: a case the spec refuses by definition replays as a refusal check
        judged_for(implementation, case, dtype, batch=False)
        outcome = examine_case(member, case, dtype, timeout=timeout)  # its reference kept: evaluated once
    except SpecError as exc:
        if not refused_empty_query(entry, case, exc):
            raise
        return _refusal_verdict(member, case, rounded(case, dtype), exc, dtype, timeout, head)
    except ToleranceModelError as exc:  # no bound to judge by: a run counts the case unmodelled, never failed
        raise ReplayError(f"{path}: the rounding model cannot bound this case at {dtype}, so no implementation "
                          f"is judged on it (a run counts it unmodelled, never a failure): {exc}") from None
    check_refusals_into(outcome, member, case, dtype, timeout=timeout)  # a refusal failure replays as one
    if outcome.judgement.ok:
        return ReplayOutcome(True, f"{head}\n  conforms (worst error/bound {outcome.judgement.ratio:.3g})",
                       outcome.judgement.ratio)
    lines = [f"  {f.check}: {f.message}" for f in outcome.judgement.findings]
    return ReplayOutcome(False, head + "\n" + "\n".join(lines), outcome.judgement.ratio)


def _refusal_verdict(member: Member, case: Case, prepared: Prepared, refusal: SpecError, dtype: str,
                     timeout: float, head: str) -> ReplayOutcome:
    """The replay of a case the spec refuses as it is: the member must raise (``expect_refusal``)."""
    check = expect_refusal(member, case, prepared, refusal, dtype, timeout=timeout)
    if check.finding is None:
        return ReplayOutcome(True, f"{head}\n  refuses it, as the spec does ({refusal.given} of Mask under "
                             f"empty_query='error'): {check.detail.split(' | ')[0]}", 0.0)  # not its traceback
    return ReplayOutcome(False, f"{head}\n  {check.finding.check}: {check.finding.message}", math.inf)


def _variant(path: Path | str, label: str, implementation: Implementation, case: Case) -> VariantSet:
    """The variant set ``implementation`` runs the case under (``fixture_replay.replay_variant``), or
    a ``ReplayError`` naming the switches that keep it from declaring the case's set."""
    chosen = replay_variant(implementation, case.entry, case.variant)
    if chosen is not None:
        return chosen
    sets = implementation.variants_for(case.algorithm)
    declared: Sequence[VariantSet] = () if isinstance(sets, str) else sets
    if not declared:
        raise ReplayError(f"{path}: {label} declares no variant set for {case.algorithm}; it cannot be judged on "
                          "this case")

    def apart(v: VariantSet) -> list[str]:  # the switches the algorithm reads whose mathematics differ
        unread = case.entry.unread(v) & case.entry.unread(case.variant)  # read only with a value neither has
        return sorted(k for k in v.differences(case.variant) if k in case.entry.switches and k not in ROUNDING_ONLY
                      and k not in unread
                      and SAME_MATHEMATICS.get((k, getattr(v, k)), getattr(v, k))
                      != SAME_MATHEMATICS.get((k, getattr(case.variant, k)), getattr(case.variant, k)))

    nearest = min(declared, key=lambda v: len(apart(v)))
    which = "the declared" if len(declared) == 1 else f"the nearest of its {len(declared)} declared sets,"
    switches = ", ".join(f"{k}: {getattr(case.variant, k)} vs {getattr(nearest, k)}" for k in apart(nearest))
    elsewhere = _declaring(case)
    fix = (f"replay the case on an implementation that declares it: ftspec replay {shlex.quote(str(path))} --impl "
           f"{elsewhere}" if elsewhere else "replay the case on an implementation that declares it (ftspec list "
           "shows the variant sets each declares)")
    raise ReplayError(f"{path}: {label} does not declare the case's variant set {case.variant.describe()} (for "
                      f"{case.algorithm} it differs from {which} {nearest.describe()}, in {switches}); {fix}")


def _declaring(case: Case) -> str:
    """``numpy`` if the bundled NumPy plugin can run the case (it declares every variant set), else ""."""
    try:
        numpy_impl = load_target("numpy")
        ok = case.algorithm in numpy_impl.algorithms and numpy_impl.supports(case.variant, case.algorithm)
    except Exception:  # noqa: BLE001 - only a suggestion
        return ""
    return "numpy" if ok else ""
